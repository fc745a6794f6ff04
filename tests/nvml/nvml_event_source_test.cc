// Xid events and per-process utilization through the real loader and the stand-in.
#include "nvml/nvml_event_source.h"

#include <gtest/gtest.h>

#include "nvml/nvml_device_source.h"
#include "nvml/nvml_test_util.h"
#include "support/fake_clock.h"

namespace gpuman::nvml {
namespace {

using gpuman::testing::FakeClock;
using gpuman::testing::TempDir;
using gpuman::testing::TestScenario;
using gpuman::testing::UseScenario;

// Waits (up to ~5 s) until `want` Xids arrived.
std::vector<model::XidEvent> Collect(devices::XidEventSource& src, size_t want) {
  std::vector<model::XidEvent> got;
  for (int i = 0; i < 50 && got.size() < want; ++i) {
    auto events = src.Wait(100);
    EXPECT_TRUE(events) << events.error().message;
    if (!events) break;
    got.insert(got.end(), events->begin(), events->end());
  }
  return got;
}

TEST(NvmlXidEventSourceTest, DeliversOnlyXidsAppendedAfterRegistration) {
  TempDir dir;
  auto scenario = TestScenario(2);
  scenario["gpus"][1]["xid_events"] = {13};  // before registration: never delivered
  std::string path = UseScenario(dir, scenario);
  auto lib = NvmlLibrary::Load(GPUMAN_TEST_FAKE_NVML);
  ASSERT_TRUE(lib) << lib.error().message;
  FakeClock clock{1764400000000};
  auto src = NvmlXidEventSource::Create(**lib, clock);
  ASSERT_TRUE(src) << src.error().message;
  EXPECT_TRUE((*src)->notes().empty());

  auto none = (*src)->Wait(20);
  ASSERT_TRUE(none) << none.error().message;
  EXPECT_TRUE(none->empty());

  scenario["gpus"][1]["xid_events"] = {13, 79, 48};
  UseScenario(dir, scenario);
  std::vector<model::XidEvent> got = Collect(**src, 2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].xid, 79);
  EXPECT_EQ(got[1].xid, 48);
  EXPECT_EQ(got[0].gpu_index, 1);
  EXPECT_EQ(got[0].gpu_uuid, scenario["gpus"][1]["uuid"].get<std::string>());
  EXPECT_EQ(got[0].source, "nvml_event");
  EXPECT_EQ(got[0].at_unix_ms, 1764400000000);
}

TEST(NvmlXidEventSourceTest, UnsupportedGpuIsANoteNotAFailure) {
  TempDir dir;
  auto scenario = TestScenario(2);
  scenario["gpus"][0]["events_supported"] = false;
  UseScenario(dir, scenario);
  auto lib = NvmlLibrary::Load(GPUMAN_TEST_FAKE_NVML);
  ASSERT_TRUE(lib);
  FakeClock clock{1764400000000};
  auto src = NvmlXidEventSource::Create(**lib, clock);
  ASSERT_TRUE(src) << src.error().message;
  ASSERT_EQ((*src)->notes().size(), 1u);
  EXPECT_NE((*src)->notes()[0].find("not supported"), std::string::npos) << (*src)->notes()[0];
}

TEST(NvmlXidEventSourceTest, NoGpuSupportsEventsIsUnavailable) {
  TempDir dir;
  auto scenario = TestScenario(1);
  scenario["gpus"][0]["events_supported"] = false;
  UseScenario(dir, scenario);
  auto lib = NvmlLibrary::Load(GPUMAN_TEST_FAKE_NVML);
  ASSERT_TRUE(lib);
  FakeClock clock{1764400000000};
  auto src = NvmlXidEventSource::Create(**lib, clock);
  ASSERT_FALSE(src);
  EXPECT_EQ(src.error().code, ErrorCode::kUnavailable);
}

TEST(NvmlXidEventSourceTest, LegacyLibraryUsesTheOldWaitName) {
  TempDir dir;
  auto scenario = TestScenario(1);
  std::string path = UseScenario(dir, scenario);
  auto lib = NvmlLibrary::Load(GPUMAN_TEST_FAKE_NVML_LEGACY);
  ASSERT_TRUE(lib);
  EXPECT_STREQ((*lib)->SymbolName(Sym::kEventSetWait), "nvmlEventSetWait");
  FakeClock clock{1764400000000};
  auto src = NvmlXidEventSource::Create(**lib, clock);
  ASSERT_TRUE(src) << src.error().message;
  scenario["gpus"][0]["xid_events"] = {94};
  UseScenario(dir, scenario);
  std::vector<model::XidEvent> got = Collect(**src, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].xid, 94);
}

TEST(NvmlDeviceSourceProcessUtilTest, SmPercentPerProcessAndZeroForQuietOnes) {
  TempDir dir;
  auto scenario = TestScenario(1);
  scenario["gpus"][0]["processes"] = {
      {{"pid", 100}, {"used_memory", 1048576}, {"sm_util", 87}},
      {{"pid", 101}, {"used_memory", 1048576}},
  };
  UseScenario(dir, scenario);
  auto lib = NvmlLibrary::Load(GPUMAN_TEST_FAKE_NVML);
  ASSERT_TRUE(lib);
  FakeClock clock{1764400000000};
  NvmlDeviceSource source(**lib, clock, "/nonexistent-sysfs");
  auto snap = source.Snapshot();
  ASSERT_TRUE(snap) << snap.error().message;
  ASSERT_EQ(snap->gpus[0].processes.size(), 2u);
  EXPECT_EQ(snap->gpus[0].processes[0].sm_util_percent, 87);
  EXPECT_EQ(snap->gpus[0].processes[1].sm_util_percent, 0);
  EXPECT_EQ(snap->gpus[0].ecc_aggregate_uncorrected, 0);
}

TEST(NvmlDeviceSourceProcessUtilTest, UnsupportedLeavesItUnknown) {
  TempDir dir;
  auto scenario = TestScenario(1);
  scenario["gpus"][0]["processes"] = {{{"pid", 100}, {"used_memory", 1048576}, {"sm_util", 50}}};
  scenario["gpus"][0]["errors"] = {{"nvmlDeviceGetProcessUtilization", "NOT_SUPPORTED"}};
  UseScenario(dir, scenario);
  auto lib = NvmlLibrary::Load(GPUMAN_TEST_FAKE_NVML);
  ASSERT_TRUE(lib);
  FakeClock clock{1764400000000};
  NvmlDeviceSource source(**lib, clock, "/nonexistent-sysfs");
  auto snap = source.Snapshot();
  ASSERT_TRUE(snap);
  EXPECT_FALSE(snap->gpus[0].processes[0].sm_util_percent.has_value());
}

}  // namespace
}  // namespace gpuman::nvml
