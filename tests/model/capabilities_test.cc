#include "model/capabilities.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gpuman::model {
namespace {

// Issue 24: what each architecture computes in, from its compute capability alone.
TEST(CapabilitiesTest, EachArchitectureFromItsComputeCapability) {
  struct Row {
    const char* cc;
    const char* example;
    std::string list;
  };
  const std::vector<Row> rows = {
      {"7.0", "V100", ""},
      {"7.5", "T4", ""},
      {"8.0", "A100", "tf32, bf16"},
      {"8.6", "RTX 3090, A40", "tf32, bf16"},
      {"8.9", "L4, RTX 4090", "tf32, bf16, fp8"},
      {"9.0", "H100", "tf32, bf16, fp8"},
      {"10.0", "B200", "tf32, bf16, fp8, fp4"},
      {"12.0", "RTX 5090", "tf32, bf16, fp8, fp4"},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(std::string(r.cc) + " " + r.example);
    auto caps = CapabilitiesOf(r.cc);
    ASSERT_TRUE(caps);
    EXPECT_EQ(CapabilityList(*caps), r.list);
  }
  auto hopper = CapabilitiesOf("9.0");
  EXPECT_TRUE(hopper->tf32 && hopper->bf16 && hopper->fp8 && !hopper->fp4);
  for (const char* bad : {"", "9", "9.", ".0", "x.y", "9.0.1", "-1.0"}) {
    EXPECT_FALSE(CapabilitiesOf(bad)) << bad;
  }
}

TEST(CapabilitiesTest, EachNameIsAComputeCapabilityBound) {
  EXPECT_EQ(MinComputeCapabilityFor("tf32"), "8.0");
  EXPECT_EQ(MinComputeCapabilityFor("bf16"), "8.0");
  EXPECT_EQ(MinComputeCapabilityFor("fp8"), "8.9");
  EXPECT_EQ(MinComputeCapabilityFor("fp4"), "10.0");
  EXPECT_FALSE(MinComputeCapabilityFor("fp16"));
  // The bound and the derivation agree for every name: at the bound yes, below it no.
  for (std::string_view name : kCapabilityNames) {
    const std::string bound = *MinComputeCapabilityFor(name);
    const std::string list = CapabilityList(*CapabilitiesOf(bound));
    EXPECT_NE(list.find(std::string(name)), std::string::npos) << name << " at " << bound;
  }
  EXPECT_EQ(CapabilityList(*CapabilitiesOf("8.7")).find("fp8"), std::string::npos);
  EXPECT_EQ(CapabilityList(*CapabilitiesOf("9.9")).find("fp4"), std::string::npos);
}

}  // namespace
}  // namespace gpuman::model
