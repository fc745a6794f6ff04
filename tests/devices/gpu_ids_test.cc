#include "devices/gpu_ids.h"

#include <gtest/gtest.h>

namespace gpuman::devices {
namespace {

std::vector<model::DeviceSnapshot> Gpus() {
  std::vector<model::DeviceSnapshot> gpus(3);
  gpus[0].index = 0;
  gpus[0].uuid = "GPU-3f2a9c1d-0000-1111-2222-333344445555";
  gpus[1].index = 1;
  gpus[1].uuid = "GPU-3f2b0000-0000-1111-2222-333344445555";
  gpus[2].index = 2;  // lost: no UUID known
  return gpus;
}

TEST(ResolveGpuIdsTest, AcceptsIndicesUuidsAndPrefixes) {
  struct Case {
    const char* list;
    std::vector<size_t> want;
  } cases[] = {
      {"0", {0}},
      {"2,0", {2, 0}},
      {"0,0,1", {0, 1}},
      {" 1 , 0 ", {1, 0}},
      {"GPU-3f2a9c1d-0000-1111-2222-333344445555", {0}},
      {"gpu-3F2A9C1D-0000-1111-2222-333344445555", {0}},
      {"GPU-3f2a", {0}},
      {"3f2b", {1}},
      {"0-2", {0, 1, 2}},           // a range, as nvidia-smi users type and gpuman prints
      {"2,0-1", {2, 0, 1}},
      {"0-1,1", {0, 1}},
      {"3f2a9c1d-0000", {0}},       // a UUID prefix with a dash is not a range
  };
  for (const auto& c : cases) {
    auto got = ResolveGpuIds(c.list, Gpus());
    ASSERT_TRUE(got.has_value()) << c.list << ": " << got.error().message;
    EXPECT_EQ(*got, c.want) << c.list;
  }
}

TEST(ResolveGpuIdsTest, RejectsWhatIsNotThere) {
  struct Case {
    const char* list;
    const char* message_part;
  } cases[] = {
      {"", "empty GPU list"},
      {"0,,1", "empty item"},
      {"7", "unknown GPU index 7 (known indices: 0-2)"},
      {"-1", "unknown GPU index -1"},
      {"GPU-3f2", "neither an index nor a UUID"},
      {"GPU-3f2a9c1d-ffff", "unknown GPU UUID"},
      {"3f2a9c1e", "unknown GPU UUID"},
      {"2-0", "GPU range '2-0' runs backwards"},
      {"0-7", "unknown GPU index 3 (known indices: 0-2)"},
  };
  for (const auto& c : cases) {
    auto got = ResolveGpuIds(c.list, Gpus());
    ASSERT_FALSE(got.has_value()) << c.list;
    EXPECT_EQ(got.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(got.error().message.find(c.message_part), std::string::npos)
        << c.list << " -> " << got.error().message;
  }
}

TEST(ResolveGpuIdsTest, AmbiguousPrefixIsAnError) {
  auto got = ResolveGpuIds("GPU-3f2", Gpus());
  ASSERT_FALSE(got.has_value());
  auto got2 = ResolveGpuIds("GPU-3f2a9", Gpus());
  ASSERT_TRUE(got2.has_value());
  std::vector<model::DeviceSnapshot> twins = Gpus();
  twins[1].uuid = "GPU-3f2a9c1d-9999-1111-2222-333344445555";
  auto amb = ResolveGpuIds("GPU-3f2a9c1d", twins);
  ASSERT_FALSE(amb.has_value());
  EXPECT_NE(amb.error().message.find("ambiguous"), std::string::npos);
}

}  // namespace
}  // namespace gpuman::devices
