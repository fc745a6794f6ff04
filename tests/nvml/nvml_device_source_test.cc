// NvmlDeviceSource through the real loader and the stand-in library: every field, the
// v1/v2/v3 fallbacks, per-device failures, process-list protocol, and hot reload.
#include "nvml/nvml_device_source.h"

#include <gtest/gtest.h>

#include <fstream>
#include <thread>

#include "nvml/nvml_test_util.h"
#include "support/fake_clock.h"

namespace gpuman::nvml {
namespace {

using gpuman::testing::FakeClock;
using gpuman::testing::FakeCallCount;
using gpuman::testing::TempDir;
using gpuman::testing::TestScenario;
using gpuman::testing::UseScenario;

struct Loaded {
  std::unique_ptr<NvmlLibrary> lib;
  FakeClock clock{1764400000123};
  std::unique_ptr<NvmlDeviceSource> source;
};

std::unique_ptr<Loaded> Load(const char* library, const std::string& sysfs = "/nonexistent-sysfs") {
  auto loaded = std::make_unique<Loaded>();
  auto lib = NvmlLibrary::Load(library);
  EXPECT_TRUE(lib.has_value()) << lib.error().message;
  if (!lib) return nullptr;
  loaded->lib = std::move(*lib);
  loaded->source = std::make_unique<NvmlDeviceSource>(*loaded->lib, loaded->clock, sysfs);
  return loaded;
}

model::MachineSnapshot Snap(Loaded& l) {
  auto snap = l.source->Snapshot();
  EXPECT_TRUE(snap.has_value()) << snap.error().message;
  return snap ? *snap : model::MachineSnapshot{};
}

TEST(NvmlDeviceSourceTest, ReadsEveryField) {
  TempDir dir;
  auto scenario = TestScenario(2);
  scenario["gpus"][1]["processes"] = {
      {{"pid", 4242}, {"used_memory", 2147483648LL}, {"type", "compute"}},
      {{"pid", 4243}, {"used_memory", 1048576}, {"type", "graphics"}},
      {{"pid", 4244}, {"used_memory", 1048576}, {"type", "both"}},
  };
  scenario["gpus"][1]["fan"] = 55;
  scenario["gpus"][1]["pstate"] = 2;
  scenario["gpus"][1]["clock_event_reasons"] = 0x44;
  scenario["gpus"][1]["minor_number"] = 5;  // device nodes need not follow PCI order
  UseScenario(dir, scenario);
  auto l = Load(GPUMAN_TEST_FAKE_NVML);
  ASSERT_TRUE(l);
  auto snap = Snap(*l);
  EXPECT_EQ(snap.taken_at_unix_ms, 1764400000123);
  EXPECT_EQ(snap.system.driver_version, "550.54.15");
  EXPECT_EQ(snap.system.nvml_version, "12.550.54.15");
  EXPECT_EQ(snap.system.cuda_driver_version, "12.4");
  ASSERT_EQ(snap.gpus.size(), 2u);
  const auto& g = snap.gpus[1];
  EXPECT_EQ(g.index, 1);
  EXPECT_EQ(g.uuid, scenario["gpus"][1]["uuid"].get<std::string>());
  EXPECT_EQ(g.name, "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(g.serial, "132402001");
  EXPECT_EQ(g.minor_number, 5);
  EXPECT_EQ(snap.gpus[0].minor_number, std::nullopt);  // not in the scenario: NOT_SUPPORTED
  EXPECT_EQ(g.pci_bus_id, "00000000:0F:00.0");
  EXPECT_EQ(g.memory_total_bytes, 85899345920LL);
  EXPECT_EQ(g.memory_reserved_bytes, 611319808LL);
  EXPECT_EQ(g.memory_used_bytes, 1073741824LL);  // v2: allocated only
  EXPECT_EQ(g.memory_free_bytes, 85899345920LL - 611319808LL - 1073741824LL);
  EXPECT_EQ(g.gpu_utilization_percent, 10);
  EXPECT_EQ(g.memory_utilization_percent, 5);
  EXPECT_EQ(g.temperature_c, 41);
  EXPECT_DOUBLE_EQ(*g.power_usage_w, 61.0);
  EXPECT_DOUBLE_EQ(*g.power_limit_w, 400.0);
  EXPECT_EQ(g.fan_percent, 55);
  EXPECT_EQ(g.clocks.sm_mhz, 210);
  EXPECT_EQ(g.clocks.sm_max_mhz, 1410);
  EXPECT_EQ(g.clocks.memory_mhz, 1593);
  EXPECT_EQ(g.clocks.memory_max_mhz, 1593);
  EXPECT_EQ(g.performance_state, 2);
  EXPECT_EQ(g.compute_capability, "8.0");
  EXPECT_EQ(g.compute_mode, "default");
  EXPECT_EQ(g.persistence_mode, true);
  EXPECT_EQ(g.mig_mode_current, false);
  EXPECT_EQ(g.ecc_volatile_uncorrected, 0);
  EXPECT_EQ(g.retired_pages_pending, false);
  EXPECT_EQ(g.remapped_rows_pending, false);
  EXPECT_EQ(g.clock_event_reasons, 0x44u);
  EXPECT_EQ(model::FormatCpuList(g.cpu_affinity), "0-3");
  EXPECT_EQ(g.numa_node, 0);
  EXPECT_TRUE(g.is_healthy);
  EXPECT_EQ(g.warnings.size(), 1u);  // hardware thermal slowdown
  ASSERT_EQ(g.processes.size(), 3u);
  EXPECT_EQ(g.processes[0].pid, 4242u);
  EXPECT_EQ(g.processes[0].used_memory_bytes, 2147483648LL);
  EXPECT_EQ(g.processes[0].type, model::ProcessType::kCompute);
  EXPECT_FALSE(g.processes[0].gpu_instance_id.has_value());
  EXPECT_EQ(g.processes[1].type, model::ProcessType::kGraphics);
  EXPECT_EQ(g.processes[2].type, model::ProcessType::kComputeAndGraphics);
  EXPECT_EQ(g.processes[2].used_memory_bytes, 1048576);  // not counted twice
  EXPECT_TRUE(snap.gpus[0].processes.empty());
  EXPECT_FALSE(snap.gpus[0].fan_percent.has_value());  // null in the scenario: not supported
}

TEST(NvmlDeviceSourceTest, LegacyLibraryStillReportsWithV1Semantics) {
  TempDir dir;
  auto scenario = TestScenario(1);
  scenario["gpus"][0]["processes"] = {{{"pid", 77}, {"used_memory", 4096}, {"type", "compute"}}};
  UseScenario(dir, scenario);
  auto l = Load(GPUMAN_TEST_FAKE_NVML_LEGACY);
  ASSERT_TRUE(l);
  auto snap = Snap(*l);
  ASSERT_EQ(snap.gpus.size(), 1u);
  const auto& g = snap.gpus[0];
  EXPECT_FALSE(g.memory_reserved_bytes.has_value());                   // v1 cannot tell
  EXPECT_EQ(g.memory_used_bytes, 611319808LL + 1073741824LL);          // v1: reserved + allocated
  EXPECT_EQ(g.pci_bus_id, "00000000:07:00.0");
  ASSERT_EQ(g.processes.size(), 1u);                                   // 16-byte entries parsed
  EXPECT_EQ(g.processes[0].pid, 77u);
  EXPECT_EQ(g.processes[0].used_memory_bytes, 4096);
  EXPECT_EQ(g.clock_event_reasons, 1u);                                // deprecated name works
  EXPECT_EQ(g.numa_node, 0);                                           // memory affinity path
}

TEST(NvmlDeviceSourceTest, NotSupportedIsUnknownNotZero) {
  TempDir dir;
  auto scenario = TestScenario(1);
  scenario["gpus"][0]["errors"] = {{"nvmlDeviceGetPowerUsage", "NOT_SUPPORTED"},
                                   {"nvmlDeviceGetTemperature", "NOT_SUPPORTED"},
                                   {"nvmlDeviceGetUtilizationRates", "NOT_SUPPORTED"}};
  scenario["gpus"][0]["processes"] = {{{"pid", 5}, {"used_memory", nullptr}, {"type", "compute"}}};
  UseScenario(dir, scenario);
  auto l = Load(GPUMAN_TEST_FAKE_NVML);
  ASSERT_TRUE(l);
  auto g = Snap(*l).gpus.at(0);
  EXPECT_FALSE(g.power_usage_w.has_value());
  EXPECT_FALSE(g.temperature_c.has_value());
  EXPECT_FALSE(g.gpu_utilization_percent.has_value());
  EXPECT_TRUE(g.power_limit_w.has_value());
  EXPECT_TRUE(g.is_healthy);
  EXPECT_TRUE(g.warnings.empty());
  ASSERT_EQ(g.processes.size(), 1u);
  EXPECT_FALSE(g.processes[0].used_memory_bytes.has_value());  // NVML_VALUE_NOT_AVAILABLE
}

TEST(NvmlDeviceSourceTest, MemoryV2VersionMismatchFallsBackToV1) {
  TempDir dir;
  auto scenario = TestScenario(1);
  scenario["gpus"][0]["errors"] = {{"nvmlDeviceGetMemoryInfo_v2", "ARGUMENT_VERSION_MISMATCH"}};
  UseScenario(dir, scenario);
  auto l = Load(GPUMAN_TEST_FAKE_NVML);
  ASSERT_TRUE(l);
  auto g = Snap(*l).gpus.at(0);
  EXPECT_FALSE(g.memory_reserved_bytes.has_value());
  EXPECT_EQ(g.memory_used_bytes, 611319808LL + 1073741824LL);
  EXPECT_TRUE(g.warnings.empty());
}

TEST(NvmlDeviceSourceTest, LostGpuStaysListedOthersStillReport) {
  setenv("GPUMAN_FAKE_NVML_SCENARIO", GPUMAN_TEST_SCENARIO_DIR "/lost-gpu.json", 1);
  auto l = Load(GPUMAN_TEST_FAKE_NVML);
  ASSERT_TRUE(l);
  auto snap = Snap(*l);
  ASSERT_EQ(snap.gpus.size(), 4u);
  EXPECT_FALSE(snap.gpus[2].is_healthy);
  ASSERT_FALSE(snap.gpus[2].health_problems.empty());
  EXPECT_NE(snap.gpus[2].health_problems[0].find("GPU is lost"), std::string::npos)
      << snap.gpus[2].health_problems[0];
  EXPECT_FALSE(snap.gpus[2].memory_total_bytes.has_value());
  for (int i : {0, 1, 3}) {
    EXPECT_TRUE(snap.gpus[i].is_healthy) << i;
    EXPECT_TRUE(snap.gpus[i].uuid.has_value()) << i;
    EXPECT_TRUE(snap.gpus[i].memory_total_bytes.has_value()) << i;
  }
  // After the first GPU_IS_LOST we stop asking that device: one failing call, not dozens.
  EXPECT_LE(snap.gpus[2].health_problems.size(), 1u);
}

TEST(NvmlDeviceSourceTest, HandleNoPermissionMarksOnlyThatDevice) {
  TempDir dir;
  auto scenario = TestScenario(2);
  scenario["gpus"][0]["errors"] = {{"nvmlDeviceGetHandleByIndex_v2", "NO_PERMISSION"}};
  UseScenario(dir, scenario);
  auto l = Load(GPUMAN_TEST_FAKE_NVML);
  ASSERT_TRUE(l);
  auto snap = Snap(*l);
  ASSERT_EQ(snap.gpus.size(), 2u);
  EXPECT_FALSE(snap.gpus[0].is_healthy);
  EXPECT_NE(snap.gpus[0].health_problems.at(0).find("insufficient permissions"), std::string::npos)
      << snap.gpus[0].health_problems.at(0);
  EXPECT_TRUE(snap.gpus[1].is_healthy);
}

TEST(NvmlDeviceSourceTest, ProcessListThatGrowsIsRetried) {
  TempDir dir;
  auto scenario = TestScenario(1);
  scenario["gpus"][0]["processes"] = {{{"pid", 1}, {"used_memory", 1}, {"type", "compute"}},
                                      {{"pid", 2}, {"used_memory", 2}, {"type", "compute"}}};
  // The first two calls claim the buffer is too small (as when processes start meanwhile).
  scenario["gpus"][0]["errors"] = {
      {"nvmlDeviceGetComputeRunningProcesses_v3", {{"error", "INSUFFICIENT_SIZE"}, {"times", 2}}}};
  UseScenario(dir, scenario);
  auto l = Load(GPUMAN_TEST_FAKE_NVML);
  ASSERT_TRUE(l);
  auto g = Snap(*l).gpus.at(0);
  EXPECT_EQ(g.processes.size(), 2u);
  EXPECT_TRUE(g.warnings.empty());
  EXPECT_GE(FakeCallCount(GPUMAN_TEST_FAKE_NVML, "nvmlDeviceGetComputeRunningProcesses_v3"), 3u);
}

TEST(NvmlDeviceSourceTest, SeesScenarioChangesWhileLoaded) {
  TempDir dir;
  auto scenario = TestScenario(2);
  UseScenario(dir, scenario);
  auto l = Load(GPUMAN_TEST_FAKE_NVML);
  ASSERT_TRUE(l);
  auto before = Snap(*l);
  EXPECT_TRUE(before.gpus[0].processes.empty());
  EXPECT_TRUE(before.gpus[1].is_healthy);

  scenario["gpus"][0]["processes"] = {{{"pid", 999}, {"used_memory", 123456789}, {"type", "compute"}}};
  scenario["gpus"][0]["utilization"]["gpu"] = 100;
  scenario["gpus"][1]["lost"] = true;
  UseScenario(dir, scenario);
  auto after = Snap(*l);
  ASSERT_EQ(after.gpus[0].processes.size(), 1u);
  EXPECT_EQ(after.gpus[0].processes[0].pid, 999u);
  EXPECT_EQ(after.gpus[0].gpu_utilization_percent, 100);
  EXPECT_FALSE(after.gpus[1].is_healthy);
}

TEST(NvmlDeviceSourceTest, OneSnapshotCountsDevicesOnce) {
  TempDir dir;
  UseScenario(dir, TestScenario(4));
  // The stand-in may stay mapped between tests (C++ unique symbols pin it), so count deltas.
  unsigned long init_before = FakeCallCount(GPUMAN_TEST_FAKE_NVML, "nvmlInit_v2");
  auto l = Load(GPUMAN_TEST_FAKE_NVML);
  ASSERT_TRUE(l);
  unsigned long count_before = FakeCallCount(GPUMAN_TEST_FAKE_NVML, "nvmlDeviceGetCount_v2");
  unsigned long uuid_before = FakeCallCount(GPUMAN_TEST_FAKE_NVML, "nvmlDeviceGetUUID");
  Snap(*l);
  EXPECT_EQ(FakeCallCount(GPUMAN_TEST_FAKE_NVML, "nvmlDeviceGetCount_v2") - count_before, 1u);
  EXPECT_EQ(FakeCallCount(GPUMAN_TEST_FAKE_NVML, "nvmlDeviceGetUUID") - uuid_before, 4u);
  EXPECT_EQ(FakeCallCount(GPUMAN_TEST_FAKE_NVML, "nvmlInit_v2") - init_before, 1u);
}

TEST(NvmlDeviceSourceTest, ProcessesOnlyAsksForLittle) {
  TempDir dir;
  auto scenario = TestScenario(2);
  scenario["gpus"][1]["processes"] = {{{"pid", 31}, {"used_memory", 5}, {"type", "compute"}}};
  UseScenario(dir, scenario);
  auto l = Load(GPUMAN_TEST_FAKE_NVML);
  ASSERT_TRUE(l);
  unsigned long power_before = FakeCallCount(GPUMAN_TEST_FAKE_NVML, "nvmlDeviceGetPowerUsage");
  devices::SnapshotOptions options;
  options.processes_only = true;
  auto snap = l->source->Snapshot(options);
  ASSERT_TRUE(snap.has_value());
  ASSERT_EQ(snap->gpus.size(), 2u);
  EXPECT_TRUE(snap->gpus[1].uuid.has_value());
  ASSERT_EQ(snap->gpus[1].processes.size(), 1u);
  EXPECT_EQ(snap->gpus[1].processes[0].pid, 31u);
  EXPECT_FALSE(snap->gpus[1].name.has_value());
  EXPECT_EQ(FakeCallCount(GPUMAN_TEST_FAKE_NVML, "nvmlDeviceGetPowerUsage"), power_before);
}

TEST(NvmlDeviceSourceTest, TopologyFromNvLinksAndCommonAncestors) {
  setenv("GPUMAN_FAKE_NVML_SCENARIO", GPUMAN_TEST_SCENARIO_DIR "/a100-4.json", 1);
  auto l = Load(GPUMAN_TEST_FAKE_NVML);
  ASSERT_TRUE(l);
  devices::SnapshotOptions options;
  options.topology = true;
  auto snap = l->source->Snapshot(options);
  ASSERT_TRUE(snap.has_value());
  ASSERT_TRUE(snap->topology.has_value());
  const auto& t = *snap->topology;
  EXPECT_EQ(t.nvlinks[0][1], 12);
  EXPECT_EQ(t.nvlinks[1][0], 12);
  EXPECT_EQ(t.nvlinks[0][2], 0);
  EXPECT_EQ(t.pcie[0][0], model::PcieLevel::kSelf);
  EXPECT_EQ(t.pcie[0][2], model::PcieLevel::kSystem);
  EXPECT_EQ(t.CellName(2, 3), "NV12");
  EXPECT_EQ(t.CellName(1, 3), "SYS");
  EXPECT_FALSE(Snap(*l).topology.has_value()) << "only when asked for";
}

model::Topology TopologyOf(Loaded& l) {
  devices::SnapshotOptions options;
  options.topology = true;
  auto snap = l.source->Snapshot(options);
  EXPECT_TRUE(snap.has_value()) << snap.error().message;
  if (!snap || !snap->topology) {
    ADD_FAILURE() << "no topology";
    return {};
  }
  return *snap->topology;
}

// MIG devices are listed under their GPU with UUID, instance ids, nvidia-smi's profile
// name, memory and the parent's processes on that instance; whole GPUs list none.
TEST(NvmlDeviceSourceTest, MigDevicesAreListedUnderTheirGpu) {
  setenv("GPUMAN_FAKE_NVML_SCENARIO", GPUMAN_TEST_SCENARIO_DIR "/h100-mig.json", 1);
  auto l = Load(GPUMAN_TEST_FAKE_NVML);
  ASSERT_TRUE(l);
  auto snap = Snap(*l);
  ASSERT_EQ(snap.gpus.size(), 4u);
  const auto& migs = snap.gpus[0].mig_devices;
  ASSERT_EQ(migs.size(), 3u);
  EXPECT_EQ(migs[0].uuid, "MIG-2f6d1b0a-93c4-5e7f-a8b1-0c2d3e4f5a61");
  EXPECT_EQ(migs[0].parent_uuid, snap.gpus[0].uuid.value());
  EXPECT_EQ(migs[0].profile, "3g.40gb");
  EXPECT_EQ(migs[1].profile, "2g.20gb");
  EXPECT_EQ(migs[2].profile, "2g.20gb");
  EXPECT_EQ(migs[1].gpu_instance_id, 3u);
  EXPECT_EQ(migs[1].compute_instance_id, 0u);
  EXPECT_EQ(migs[0].multiprocessors, 60);
  EXPECT_EQ(migs[1].memory_total_bytes, 20096LL << 20);
  ASSERT_EQ(migs[0].processes.size(), 1u);
  EXPECT_EQ(migs[0].processes[0].pid, 62011u);
  EXPECT_TRUE(migs[1].processes.empty());
  for (size_t i = 1; i < 4; ++i) EXPECT_TRUE(snap.gpus[i].mig_devices.empty()) << i;
}

// The oldest driver names have no nvmlDeviceGetAttributes_v2: MIG devices are still listed,
// without a profile.
TEST(NvmlDeviceSourceTest, MigDevicesWithoutAttributesHaveNoProfile) {
  setenv("GPUMAN_FAKE_NVML_SCENARIO", GPUMAN_TEST_SCENARIO_DIR "/a100-mig.json", 1);
  auto l = Load(GPUMAN_TEST_FAKE_NVML_LEGACY);
  ASSERT_TRUE(l);
  auto snap = Snap(*l);
  ASSERT_EQ(snap.gpus.size(), 2u);
  ASSERT_EQ(snap.gpus[1].mig_devices.size(), 7u);
  EXPECT_FALSE(snap.gpus[1].mig_devices[0].profile.has_value());
  EXPECT_TRUE(snap.gpus[1].mig_devices[6].uuid.has_value());
}

// HGX H100: each GPU's 18 links go to the NVSwitches, none to a GPU; nvidia-smi topo -m
// shows NV18 for every pair, and so do we.
TEST(NvmlDeviceSourceTest, NvSwitchLinksJoinEveryPairOfTheFabric) {
  setenv("GPUMAN_FAKE_NVML_SCENARIO", GPUMAN_TEST_SCENARIO_DIR "/h100-8.json", 1);
  auto l = Load(GPUMAN_TEST_FAKE_NVML);
  ASSERT_TRUE(l);
  const model::Topology t = TopologyOf(*l);
  ASSERT_EQ(t.size(), 8u);
  for (size_t i = 0; i < 8; ++i) {
    for (size_t j = 0; j < 8; ++j) {
      EXPECT_EQ(t.nvlinks[i][j], i == j ? 0 : 18) << i << "," << j;
      EXPECT_EQ(t.CellName(i, j), i == j ? "X" : "NV18") << i << "," << j;
    }
  }
  EXPECT_EQ(t.pcie[0][4], model::PcieLevel::kSystem);  // the PCIe path is still there
}

// Two fabrics (switches 0 and 1), and a GPU with fewer switch links: pairs count the
// smaller side, GPUs on different switches are not linked, and a direct link adds up.
TEST(NvmlDeviceSourceTest, SwitchFabricsAreSeparateAndCountTheFewerLinks) {
  TempDir dir;
  auto scenario = TestScenario(4);
  auto links = [](std::initializer_list<std::pair<const char*, unsigned>> ends) {
    nlohmann::json out = nlohmann::json::array();
    unsigned link = 0;
    for (const auto& [key, target] : ends) out.push_back({{"link", link++}, {key, target}});
    return out;
  };
  scenario["gpus"][0]["nvlinks"] = links({{"switch", 0}, {"switch", 0}, {"switch", 0}, {"switch", 0}});
  scenario["gpus"][1]["nvlinks"] = links({{"switch", 0}, {"switch", 0}});
  scenario["gpus"][2]["nvlinks"] = links({{"switch", 1}, {"switch", 1}, {"switch", 1}, {"peer", 3}});
  scenario["gpus"][3]["nvlinks"] = links({{"switch", 1}, {"switch", 1}, {"switch", 1}, {"peer", 2}});
  UseScenario(dir, scenario);
  auto l = Load(GPUMAN_TEST_FAKE_NVML);
  ASSERT_TRUE(l);
  const model::Topology t = TopologyOf(*l);
  ASSERT_EQ(t.size(), 4u);
  EXPECT_EQ(t.nvlinks[0][1], 2);
  EXPECT_EQ(t.nvlinks[1][0], 2);
  EXPECT_EQ(t.nvlinks[2][3], 4);  // 3 through switch 1, 1 direct
  EXPECT_EQ(t.nvlinks[3][2], 4);
  EXPECT_EQ(t.nvlinks[0][2], 0);
  EXPECT_EQ(t.nvlinks[1][3], 0);
  EXPECT_EQ(t.CellName(0, 2), "SYS");
}

// A driver without nvmlDeviceGetNvLinkRemoteDeviceType (the legacy stand-in lacks it)
// cannot tell a switch from another device: switch links are not counted, nothing fails.
TEST(NvmlDeviceSourceTest, WithoutRemoteDeviceTypeSwitchLinksAreNotCounted) {
  setenv("GPUMAN_FAKE_NVML_SCENARIO", GPUMAN_TEST_SCENARIO_DIR "/h100-8.json", 1);
  auto l = Load(GPUMAN_TEST_FAKE_NVML_LEGACY);
  ASSERT_TRUE(l);
  EXPECT_EQ(l->lib->Get<nvmlDeviceGetNvLinkRemoteDeviceType_fn>(Sym::kDeviceGetNvLinkRemoteDeviceType), nullptr);
  const model::Topology t = TopologyOf(*l);
  ASSERT_EQ(t.size(), 8u);
  EXPECT_EQ(t.nvlinks[0][1], 0);
  EXPECT_EQ(t.CellName(0, 1), "PIX");
  EXPECT_EQ(t.CellName(0, 4), "SYS");
}

// Topology does not depend on health: a GPU with uncorrected ECC errors is unhealthy
// but answers, and keeps its links and PCIe paths; only the lost GPU is "?".
TEST(NvmlDeviceSourceTest, EccErrorsDoNotHideTopology) {
  TempDir dir;
  nlohmann::json scenario = nlohmann::json::parse(std::ifstream(GPUMAN_TEST_SCENARIO_DIR "/lost-gpu.json"));
  scenario["gpus"][0]["ecc"]["volatile_uncorrected"] = 3;
  UseScenario(dir, scenario);
  auto l = Load(GPUMAN_TEST_FAKE_NVML);
  ASSERT_TRUE(l);
  devices::SnapshotOptions options;
  options.topology = true;
  auto snap = l->source->Snapshot(options);
  ASSERT_TRUE(snap.has_value());
  EXPECT_FALSE(snap->gpus[0].is_healthy) << "the ECC errors count";
  ASSERT_TRUE(snap->topology.has_value());
  const model::Topology& t = *snap->topology;
  EXPECT_EQ(t.CellName(0, 1), "NV12");
  EXPECT_EQ(t.CellName(1, 0), "NV12");
  EXPECT_NE(t.CellName(0, 3), "?");
  EXPECT_EQ(t.CellName(0, 3), t.CellName(1, 3));  // GPUs 0 and 1 share a switch
  EXPECT_EQ(t.CellName(0, 2), "?");  // GPU 2 is lost
  EXPECT_EQ(t.CellName(2, 3), "?");
}

TEST(NvmlDeviceSourceTest, SysfsNumaNodeWhenNvmlCannotSay) {
  TempDir dir;
  auto scenario = TestScenario(1);
  scenario["gpus"][0]["numa_node"] = nullptr;
  UseScenario(dir, scenario);
  TempDir sysfs;
  sysfs.Write("bus/pci/devices/0000:07:00.0/numa_node", "1\n");
  auto l = Load(GPUMAN_TEST_FAKE_NVML, sysfs.path());
  ASSERT_TRUE(l);
  EXPECT_EQ(Snap(*l).gpus.at(0).numa_node, 1);
}

TEST(NvmlDeviceSourceTest, EveryShippedScenarioSnapshots) {
  for (const char* name : {"a100-4", "h100-8", "workstation-mixed", "lost-gpu"}) {
    std::string path = std::string(GPUMAN_TEST_SCENARIO_DIR) + "/" + name + ".json";
    setenv("GPUMAN_FAKE_NVML_SCENARIO", path.c_str(), 1);
    auto l = Load(GPUMAN_TEST_FAKE_NVML);
    ASSERT_TRUE(l) << name;
    auto snap = Snap(*l);
    EXPECT_FALSE(snap.gpus.empty()) << name;
    for (const auto& g : snap.gpus) {
      if (g.is_healthy) {
        EXPECT_TRUE(g.uuid.has_value()) << name << " gpu " << g.index;
      }
    }
  }
}

}  // namespace
}  // namespace gpuman::nvml
