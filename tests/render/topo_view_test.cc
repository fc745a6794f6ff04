// `gpuman topo` with MIG (docs/share.md "MIG"): a GPU in MIG mode is marked with its MIG
// devices' profiles, in the text's MIG column and in the JSON.
#include "render/topo_view.h"

#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model/topology.h"
#include "render/status_fixtures.h"
#include "support/golden.h"

namespace gpuman::render {
namespace {

using namespace testing_fixtures;
using test_support::MatchesGolden;

// MigMachine with its GPUs 0 and 1 on NVLink and GPU 2 across the CPU interconnect.
model::MachineSnapshot WithTopology(model::MachineSnapshot snap) {
  using L = model::PcieLevel;
  model::Topology t;
  t.nvlinks = {{0, 18, 0}, {18, 0, 0}, {0, 0, 0}};
  t.pcie = {{L::kSelf, L::kSingleSwitch, L::kSystem},
            {L::kSingleSwitch, L::kSelf, L::kSystem},
            {L::kSystem, L::kSystem, L::kSelf}};
  snap.topology = t;
  return snap;
}

TEST(TopoTextGoldenTest, MigColumnListsEachGpusMigProfiles) {
  EXPECT_TRUE(MatchesGolden("render/golden/topo_mig.txt",
                            RenderTopoText(WithTopology(MigMachine()), {}, TerminalInfo{100, false})));
}

TEST(TopoTextTest, NoMigColumnWithoutAGpuInMigMode) {
  const std::string text = RenderTopoText(FourGpuMachine(), {}, TerminalInfo{100, false});
  EXPECT_NE(text.find("CPU Affinity     NUMA\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("MIG"), std::string::npos) << text;
}

TEST(TopoTextTest, MigProfilesAreCountedInNvmlOrder) {
  const std::string text = RenderTopoText(MigMachine(), {}, TerminalInfo{100, false});
  EXPECT_NE(text.find("NUMA  MIG\n"), std::string::npos) << text;
  EXPECT_NE(text.find("0     3g.40gb, 2g.20gb x2\n"), std::string::npos) << text;  // GPU 0, NUMA 0
  EXPECT_NE(text.find("0     none\n"), std::string::npos) << text;                 // GPU 2: MIG mode, none
  EXPECT_NE(text.find("0     -\n"), std::string::npos) << text;                    // GPU 1: whole
  EXPECT_NE(text.find("  MIG  = the GPU is in MIG mode"), std::string::npos) << text;
}

TEST(TopoJsonTest, EveryGpuSaysItsMigModeAndDevices) {
  const nlohmann::ordered_json j = TopoToJson(MigMachine(), {});
  const auto& gpus = j["gpus"];
  ASSERT_EQ(gpus.size(), 3u);
  EXPECT_EQ(gpus[0]["mig_mode"], true);
  ASSERT_EQ(gpus[0]["mig_devices"].size(), 3u);
  EXPECT_EQ(gpus[0]["mig_devices"][1]["index"], 1);
  EXPECT_EQ(gpus[0]["mig_devices"][1]["profile"], "2g.20gb");
  EXPECT_EQ(gpus[0]["mig_devices"][1]["uuid"], "MIG-22222222-aaaa-4bbb-8ccc-000000000000");
  EXPECT_EQ(gpus[0]["mig_devices"][1]["gpu_instance_id"], 3);
  EXPECT_EQ(gpus[0]["mig_devices"][1]["compute_instance_id"], 0);
  EXPECT_EQ(gpus[1]["mig_mode"], false);
  EXPECT_TRUE(gpus[1]["mig_devices"].empty());
  EXPECT_EQ(gpus[2]["mig_mode"], true);
  EXPECT_TRUE(gpus[2]["mig_devices"].empty());
  // Unknown mode (a driver without nvmlDeviceGetMigMode) is null.
  model::MachineSnapshot snap = MigMachine();
  snap.gpus[1].mig_mode_current.reset();
  EXPECT_TRUE(TopoToJson(snap, {})["gpus"][1]["mig_mode"].is_null());
}

}  // namespace
}  // namespace gpuman::render

namespace gpuman::render {
namespace {

// `topo --long`: each GPU's computed peaks, "-" where NVML gave no input, and a MEASURED
// column only when `gpuman bench` stored a figure for one of them.
TEST(TopoPeakTableTest, ComputedPeaksAndMeasuredFiguresWhereStored) {
  model::MachineSnapshot snap;
  model::DeviceSnapshot h100;
  h100.index = 0;
  h100.uuid = "GPU-h100";
  h100.name = "NVIDIA H100 80GB HBM3";
  h100.compute_capability = "9.0";
  h100.cuda_cores = 16896;
  h100.clocks.sm_max_mhz = 1830;
  h100.memory_bus_width_bits = 5120;
  h100.clocks.memory_max_mhz = 2619;
  model::DeviceSnapshot unknown;
  unknown.index = 1;
  unknown.uuid = "GPU-old";
  unknown.name = "Tesla K80";
  snap.gpus = {h100, unknown};
  const std::string plain = RenderPeakTable(snap, {});
  EXPECT_NE(plain.find("GPU  NAME                   SMS   FP32 TFLOPS  TENSOR TFLOPS  MEMORY GB/s\n"), std::string::npos) << plain;
  EXPECT_NE(plain.find("0    NVIDIA H100 80GB HBM3  132   61.8         989."), std::string::npos) << plain;
  EXPECT_NE(plain.find("1    Tesla K80              -     -            -              -\n"), std::string::npos) << plain;
  EXPECT_EQ(plain.find("MEASURED"), std::string::npos);
  const std::string measured = RenderPeakTable(snap, {{"GPU-old", 4.25}});
  EXPECT_NE(measured.find("MEMORY GB/s  MEASURED FP32\n"), std::string::npos) << measured;
  EXPECT_NE(measured.find("3352.3       -\n"), std::string::npos) << measured;
  EXPECT_NE(measured.find("-            4.2 (gpuman bench)\n"), std::string::npos) << measured;
}

}  // namespace
}  // namespace gpuman::render
