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
