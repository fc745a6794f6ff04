// What NvmlDeviceSource keeps between snapshots, seen through the stand-in's call counters:
// static facts once per GPU (again after a reset or a changed device set), slow groups by
// age, NOT_SUPPORTED asked once, and only the groups a caller asks for.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "nvml/nvml_device_source.h"
#include "nvml/nvml_test_util.h"
#include "support/fake_clock.h"

namespace gpuman::nvml {
namespace {

using ::gpuman::testing::FakeClock;

using devices::FieldOptions;
using devices::MonitorOptions;
using gpuman::testing::FakeCallCount;
using gpuman::testing::FakeTotalCalls;
using gpuman::testing::TempDir;
using gpuman::testing::TestScenario;
using gpuman::testing::UseScenario;

// Calls made to each of `names` since construction (or the last Reset).
class Counts {
 public:
  explicit Counts(std::vector<std::string> names) : names_(std::move(names)) { Reset(); }
  void Reset() {
    for (const auto& n : names_) base_[n] = FakeCallCount(GPUMAN_TEST_FAKE_NVML, n.c_str());
  }
  unsigned long operator[](const std::string& name) const {
    return FakeCallCount(GPUMAN_TEST_FAKE_NVML, name.c_str()) - base_.at(name);
  }

 private:
  std::vector<std::string> names_;
  std::map<std::string, unsigned long> base_;
};

const std::vector<std::string> kStatic = {
    "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetName",     "nvmlDeviceGetSerial",
    "nvmlDeviceGetMinorNumber",      "nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetCudaComputeCapability",
    "nvmlDeviceGetMaxClockInfo",     "nvmlDeviceGetCpuAffinity", "nvmlDeviceGetNumaNodeId",
    "nvmlSystemGetDriverVersion",    "nvmlSystemGetNVMLVersion", "nvmlSystemGetCudaDriverVersion_v2"};
const std::vector<std::string> kOthers = {
    "nvmlDeviceGetUUID",          "nvmlDeviceGetPowerUsage",         "nvmlDeviceGetTotalEccErrors",
    "nvmlDeviceGetRemappedRows",  "nvmlDeviceGetPersistenceMode",    "nvmlDeviceGetFanSpeed",
    "nvmlDeviceGetClockInfo",     "nvmlDeviceGetEnforcedPowerLimit", "nvmlDeviceGetCount_v2",
    "nvmlDeviceGetTopologyCommonAncestor"};

std::vector<std::string> All() {
  std::vector<std::string> all = kStatic;
  all.insert(all.end(), kOthers.begin(), kOthers.end());
  return all;
}

struct Fixture {
  TempDir dir;
  FakeClock clock{1764400000000};
  std::unique_ptr<NvmlLibrary> lib;
  std::unique_ptr<NvmlDeviceSource> source;

  explicit Fixture(const nlohmann::json& scenario) {
    UseScenario(dir, scenario);
    auto loaded = NvmlLibrary::Load(GPUMAN_TEST_FAKE_NVML);
    EXPECT_TRUE(loaded.has_value()) << loaded.error().message;
    if (loaded) lib = std::move(*loaded);
    source = std::make_unique<NvmlDeviceSource>(*lib, clock, "/nonexistent-sysfs");
  }
  model::MachineSnapshot Snap(const devices::SnapshotOptions& options) {
    auto snap = source->Snapshot(options);
    EXPECT_TRUE(snap.has_value()) << snap.error().message;
    return snap ? *snap : model::MachineSnapshot{};
  }
  void Rewrite(const nlohmann::json& scenario) { UseScenario(dir, scenario); }
};

TEST(NvmlFieldCacheTest, SecondSampleDoesNotReReadStaticFields) {
  Fixture f(TestScenario(2));
  ASSERT_TRUE(f.lib);
  auto first = f.Snap(MonitorOptions(devices::kAllFields));
  Counts c(All());
  f.clock.now += 1000;
  auto second = f.Snap(MonitorOptions(devices::kAllFields));
  for (const auto& name : kStatic) EXPECT_EQ(c[name], 0u) << name;
  EXPECT_EQ(c["nvmlDeviceGetUUID"], 0u);            // index -> UUID trusted for a minute
  EXPECT_EQ(c["nvmlDeviceGetTotalEccErrors"], 0u);  // health: a minute old is fine for a monitor
  EXPECT_EQ(c["nvmlDeviceGetRemappedRows"], 0u);
  EXPECT_EQ(c["nvmlDeviceGetPersistenceMode"], 0u);
  EXPECT_EQ(c["nvmlDeviceGetPowerUsage"], 2u);      // what changes: read every time
  EXPECT_EQ(c["nvmlDeviceGetClockInfo"], 4u);
  EXPECT_EQ(c["nvmlDeviceGetCount_v2"], 1u);
  // And the kept values are all there, the same as the first time.
  ASSERT_EQ(second.gpus.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const auto &a = first.gpus[i], &b = second.gpus[i];
    EXPECT_EQ(b.uuid, a.uuid);
    EXPECT_EQ(b.name, a.name);
    EXPECT_EQ(b.serial, a.serial);
    EXPECT_EQ(b.minor_number, a.minor_number);
    EXPECT_EQ(b.pci_bus_id, a.pci_bus_id);
    EXPECT_EQ(b.compute_capability, a.compute_capability);
    EXPECT_EQ(b.clocks.sm_max_mhz, a.clocks.sm_max_mhz);
    EXPECT_EQ(b.cpu_affinity, a.cpu_affinity);
    EXPECT_EQ(b.numa_node, a.numa_node);
    EXPECT_EQ(b.power_limit_w, a.power_limit_w);
    EXPECT_EQ(b.persistence_mode, a.persistence_mode);
    EXPECT_EQ(b.ecc_aggregate_corrected, a.ecc_aggregate_corrected);
    EXPECT_EQ(b.remapped_rows_pending, a.remapped_rows_pending);
  }
  EXPECT_EQ(second.system.driver_version, "550.54.15");
}

TEST(NvmlFieldCacheTest, SlowGroupsAreReadAgainWhenOldAndStaticOnesNever) {
  Fixture f(TestScenario(2));
  ASSERT_TRUE(f.lib);
  f.Snap(MonitorOptions(devices::kAllFields));
  Counts c(All());
  f.clock.now += 61000;
  f.Snap(MonitorOptions(devices::kAllFields));
  EXPECT_EQ(c["nvmlDeviceGetTotalEccErrors"], 8u);  // 2 GPUs x (volatile, aggregate) x (corrected, uncorrected)
  EXPECT_EQ(c["nvmlDeviceGetPersistenceMode"], 2u);
  EXPECT_EQ(c["nvmlDeviceGetEnforcedPowerLimit"], 2u);
  EXPECT_EQ(c["nvmlDeviceGetUUID"], 2u);  // is index N still that GPU?
  for (const auto& name : kStatic) EXPECT_EQ(c[name], 0u) << name;
}

TEST(NvmlFieldCacheTest, OneShotOptionsReadHealthEveryTimeButStaticFactsOnce) {
  Fixture f(TestScenario(2));
  ASSERT_TRUE(f.lib);
  f.Snap(devices::SnapshotOptions{});
  Counts c(All());
  f.Snap(devices::SnapshotOptions{});
  EXPECT_EQ(c["nvmlDeviceGetTotalEccErrors"], 8u);
  EXPECT_EQ(c["nvmlDeviceGetUUID"], 2u);
  for (const auto& name : kStatic) EXPECT_EQ(c[name], 0u) << name;
}

TEST(NvmlFieldCacheTest, ChangedDeviceCountReadsEverythingAgain) {
  auto scenario = TestScenario(2);
  Fixture f(scenario);
  ASSERT_TRUE(f.lib);
  f.Snap(MonitorOptions(devices::kAllFields));
  scenario = TestScenario(3);
  scenario["driver"]["driver_version"] = "560.1.2";
  f.Rewrite(scenario);
  Counts c(All());
  f.clock.now += 1000;
  auto snap = f.Snap(MonitorOptions(devices::kAllFields));
  ASSERT_EQ(snap.gpus.size(), 3u);
  EXPECT_EQ(c["nvmlDeviceGetHandleByIndex_v2"], 3u);
  EXPECT_EQ(c["nvmlDeviceGetName"], 3u);
  EXPECT_EQ(c["nvmlDeviceGetUUID"], 3u);
  EXPECT_EQ(c["nvmlDeviceGetTotalEccErrors"], 12u);
  EXPECT_EQ(c["nvmlSystemGetDriverVersion"], 1u);
  EXPECT_EQ(snap.system.driver_version, "560.1.2");
  EXPECT_TRUE(snap.gpus[2].serial.has_value());
}

TEST(NvmlFieldCacheTest, AnotherGpuAtTheSameIndexIsSeenByItsUuid) {
  auto scenario = TestScenario(2);
  Fixture f(scenario);
  ASSERT_TRUE(f.lib);
  f.Snap(devices::SnapshotOptions{});
  scenario["gpus"][1]["uuid"] = "GPU-99999999-1111-2222-3333-444455556669";
  scenario["gpus"][1]["name"] = "NVIDIA H100 80GB HBM3";
  f.Rewrite(scenario);
  Counts c(All());
  auto snap = f.Snap(devices::SnapshotOptions{});  // one-shot options check the UUID each time
  EXPECT_EQ(snap.gpus.at(1).uuid, "GPU-99999999-1111-2222-3333-444455556669");
  EXPECT_EQ(snap.gpus.at(1).name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(c["nvmlDeviceGetName"], 1u);  // only the new one
}

TEST(NvmlFieldCacheTest, GpuLostThenBackReadsItsStaticFactsAgain) {
  auto scenario = TestScenario(2);
  Fixture f(scenario);
  ASSERT_TRUE(f.lib);
  auto before = f.Snap(MonitorOptions(devices::kAllFields));
  ASSERT_TRUE(before.gpus.at(1).serial.has_value());

  scenario["gpus"][1]["lost"] = true;
  f.Rewrite(scenario);
  f.clock.now += 1000;
  auto lost = f.Snap(MonitorOptions(devices::kAllFields));
  EXPECT_FALSE(lost.gpus.at(1).is_healthy);
  EXPECT_FALSE(lost.gpus.at(1).name.has_value());  // as before the cache: only what it said
  EXPECT_FALSE(lost.gpus.at(1).memory_total_bytes.has_value());
  EXPECT_TRUE(lost.gpus.at(0).is_healthy);

  // Reset and back, with a changed static fact (the stand-in's way of showing it re-read).
  scenario["gpus"][1]["lost"] = false;
  scenario["gpus"][1]["serial"] = "777";
  f.Rewrite(scenario);
  Counts c(All());
  f.clock.now += 1000;
  auto back = f.Snap(MonitorOptions(devices::kAllFields));
  ASSERT_TRUE(back.gpus.at(1).is_healthy) << back.gpus.at(1).health_problems.at(0);
  EXPECT_EQ(back.gpus.at(1).serial, "777");
  EXPECT_EQ(back.gpus.at(1).uuid, before.gpus.at(1).uuid);
  EXPECT_EQ(c["nvmlDeviceGetSerial"], 1u);  // that GPU only
  EXPECT_EQ(c["nvmlDeviceGetUUID"], 1u);
  EXPECT_EQ(c["nvmlDeviceGetTotalEccErrors"], 4u);
}

TEST(NvmlFieldCacheTest, NotSupportedIsNotAskedTwice) {
  auto scenario = TestScenario(2);  // "fan": null is NOT_SUPPORTED
  scenario["gpus"][0]["errors"] = {{"nvmlDeviceGetPowerUsage", "NOT_SUPPORTED"}};
  Fixture f(scenario);
  ASSERT_TRUE(f.lib);
  Counts c(All());
  for (int i = 0; i < 3; ++i) {
    auto snap = f.Snap(devices::SnapshotOptions{});  // even with one-shot options
    EXPECT_FALSE(snap.gpus.at(0).power_usage_w.has_value());
    EXPECT_TRUE(snap.gpus.at(1).power_usage_w.has_value());
    EXPECT_FALSE(snap.gpus.at(0).fan_percent.has_value());
  }
  EXPECT_EQ(c["nvmlDeviceGetFanSpeed"], 2u);      // once per GPU
  EXPECT_EQ(c["nvmlDeviceGetPowerUsage"], 1u + 3u);  // GPU 0 once, GPU 1 every time
}

TEST(NvmlFieldCacheTest, EachViewAsksOnlyForItsFields) {
  Fixture f(TestScenario(2));
  ASSERT_TRUE(f.lib);
  Counts c(All());
  auto text = f.Snap(FieldOptions(devices::kStatusTextFields));
  EXPECT_EQ(c["nvmlDeviceGetSerial"], 0u);
  EXPECT_EQ(c["nvmlDeviceGetClockInfo"], 0u);
  EXPECT_EQ(c["nvmlDeviceGetCpuAffinity"], 0u);
  EXPECT_EQ(c["nvmlDeviceGetPersistenceMode"], 0u);
  EXPECT_EQ(c["nvmlDeviceGetTotalEccErrors"], 4u);  // volatile only: the health marks
  EXPECT_EQ(c["nvmlDeviceGetRemappedRows"], 2u);
  EXPECT_TRUE(text.gpus.at(0).name.has_value());
  EXPECT_TRUE(text.gpus.at(0).power_limit_w.has_value());
  EXPECT_FALSE(text.gpus.at(0).serial.has_value());
  c.Reset();
  auto json = f.Snap(FieldOptions(devices::kStatusJsonFields));
  EXPECT_EQ(c["nvmlDeviceGetSerial"], 2u);  // not read before: read now
  EXPECT_EQ(c["nvmlDeviceGetName"], 0u);    // read before: kept
  EXPECT_TRUE(json.gpus.at(0).serial.has_value());
  EXPECT_TRUE(json.gpus.at(0).clocks.sm_mhz.has_value());
}

TEST(NvmlFieldCacheTest, KeptWarningsStayInCallOrder) {
  auto scenario = TestScenario(1);
  scenario["gpus"][0]["errors"] = {{"nvmlDeviceGetSerial", "NO_PERMISSION"},
                                   {"nvmlDeviceGetPowerUsage", "NO_PERMISSION"},
                                   {"nvmlDeviceGetRemappedRows", "NO_PERMISSION"}};
  Fixture f(scenario);
  ASSERT_TRUE(f.lib);
  auto first = f.Snap(MonitorOptions(devices::kAllFields));
  ASSERT_EQ(first.gpus.at(0).warnings.size(), 3u);
  Counts c(All());
  f.clock.now += 1000;
  auto second = f.Snap(MonitorOptions(devices::kAllFields));
  EXPECT_EQ(c["nvmlDeviceGetSerial"], 0u);
  EXPECT_EQ(second.gpus.at(0).warnings, first.gpus.at(0).warnings);
}

TEST(NvmlFieldCacheTest, TopologyIsReadOnce) {
  Fixture f(TestScenario(4));
  ASSERT_TRUE(f.lib);
  devices::SnapshotOptions options;
  options.topology = true;
  auto first = f.Snap(options);
  Counts c(All());
  auto second = f.Snap(options);
  EXPECT_EQ(c["nvmlDeviceGetTopologyCommonAncestor"], 0u);
  ASSERT_TRUE(first.topology && second.topology);
  EXPECT_EQ(second.topology->pcie, first.topology->pcie);
  EXPECT_EQ(second.topology->nvlinks, first.topology->nvlinks);
}

TEST(NvmlFieldCacheTest, MonitorOnEightGpusStaysUnderOneHundredCallsASecond) {
  setenv("GPUMAN_FAKE_NVML_SCENARIO", GPUMAN_TEST_SCENARIO_DIR "/h100-8.json", 1);
  auto lib = NvmlLibrary::Load(GPUMAN_TEST_FAKE_NVML);
  ASSERT_TRUE(lib.has_value());
  FakeClock clock{1764400000000};
  for (devices::FieldSet fields : {devices::kTopFields, devices::kCollectorFields}) {
    NvmlDeviceSource source(**lib, clock, "/nonexistent-sysfs");
    ASSERT_TRUE(source.Snapshot(MonitorOptions(fields)).has_value());
    const unsigned long before = FakeTotalCalls(GPUMAN_TEST_FAKE_NVML);
    constexpr int kSeconds = 120;  // two slow refreshes
    for (int i = 0; i < kSeconds; ++i) {
      clock.now += 1000;
      ASSERT_TRUE(source.Snapshot(MonitorOptions(fields)).has_value());
    }
    EXPECT_LE(FakeTotalCalls(GPUMAN_TEST_FAKE_NVML) - before, 100u * kSeconds) << fields;
  }
}

}  // namespace
}  // namespace gpuman::nvml
