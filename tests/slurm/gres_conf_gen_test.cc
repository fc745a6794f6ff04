// gres.conf generation and the slurmd -G check (src/slurm/gres_conf_gen.cc).
#include "slurm/gres_conf_gen.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace gpuman::slurm {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Two NVLinked pairs, minors in PCI order except the last two (swapped).
model::MachineSnapshot FourGpus() {
  model::MachineSnapshot snap;
  const int minors[] = {0, 1, 3, 2};
  for (int i = 0; i < 4; ++i) {
    model::DeviceSnapshot d;
    d.index = i;
    d.uuid = "GPU-" + std::to_string(i);
    d.name = "NVIDIA A100-SXM4-80GB";
    d.minor_number = minors[i];
    d.cpu_affinity = i < 2 ? std::vector<int>{0, 1, 2, 3} : std::vector<int>{4, 5, 6, 7};
    snap.gpus.push_back(d);
  }
  model::Topology topo;
  topo.nvlinks = {{0, 12, 0, 0}, {12, 0, 0, 0}, {0, 0, 0, 12}, {0, 0, 12, 0}};
  topo.pcie.assign(4, std::vector<model::PcieLevel>(4, model::PcieLevel::kSystem));
  snap.topology = topo;
  return snap;
}

TEST(GresConfGenTest, TypeLikeSlurmsNvmlPlugin) {
  EXPECT_EQ(GresType("NVIDIA H100 80GB HBM3"), "h100_80gb_hbm3");
  EXPECT_EQ(GresType("NVIDIA A100-SXM4-80GB"), "a100-sxm4-80gb");
  EXPECT_EQ(GresType("Tesla V100-SXM2-32GB"), "tesla_v100-sxm2-32gb");
}

TEST(GresConfGenTest, OneLinePerGpuInPciOrder) {
  const GresConf conf = GenerateGresConf(FourGpus(), "node7");
  EXPECT_THAT(conf.lines,
              ElementsAre("NodeName=node7 Name=gpu Type=a100-sxm4-80gb File=/dev/nvidia0 Cores=0-3 Links=-1,12,0,0",
                          "NodeName=node7 Name=gpu Type=a100-sxm4-80gb File=/dev/nvidia1 Cores=0-3 Links=12,-1,0,0",
                          "NodeName=node7 Name=gpu Type=a100-sxm4-80gb File=/dev/nvidia3 Cores=4-7 Links=0,0,-1,12",
                          "NodeName=node7 Name=gpu Type=a100-sxm4-80gb File=/dev/nvidia2 Cores=4-7 Links=0,0,12,-1"));
  EXPECT_EQ(conf.node_gres, "gpu:a100-sxm4-80gb:4");
  EXPECT_THAT(conf.problems, IsEmpty());
}

TEST(GresConfGenTest, NoNvlinkNoLinksAndMissingMinorIsAProblem) {
  auto snap = FourGpus();
  snap.topology.reset();
  snap.gpus[1].minor_number.reset();
  snap.gpus[3].name = "NVIDIA H100 80GB HBM3";
  const GresConf conf = GenerateGresConf(snap, "n");
  ASSERT_EQ(conf.lines.size(), 3u);
  EXPECT_THAT(conf.lines[0], ::testing::Not(HasSubstr("Links=")));
  EXPECT_THAT(conf.problems, ElementsAre(HasSubstr("GPU 1 left out: NVML reports no minor number")));
  EXPECT_EQ(conf.node_gres, "gpu:a100-sxm4-80gb:2,gpu:h100_80gb_hbm3:1");
}

// A lost GPU answers nothing (no minor, no name): it is left out, named with what NVML
// said, and listed in `missing`, for gres-conf to refuse the shorter file.
TEST(GresConfGenTest, LostGpuIsMissingWithItsReason) {
  auto snap = FourGpus();
  auto& lost = snap.gpus[2];
  lost.uuid.reset();
  lost.name.reset();
  lost.minor_number.reset();
  lost.is_healthy = false;
  lost.health_problems = {"nvmlDeviceGetUUID: GPU is lost"};
  const GresConf conf = GenerateGresConf(snap, "n");
  EXPECT_EQ(conf.lines.size(), 3u);
  EXPECT_THAT(conf.missing, ElementsAre(2));
  EXPECT_THAT(conf.problems,
              ElementsAre("GPU 2 left out: NVML reports no minor number (nvmlDeviceGetUUID: GPU is lost)"));
  EXPECT_THAT(GenerateGresConf(FourGpus(), "n").missing, IsEmpty());
}

// A GPU in MIG mode (docs/slurm.md, "MIG"): never a whole-GPU File= line, which would let
// Slurm hand it out whole; comments name its MIG devices and recommend AutoDetect=nvml, and
// a warning says the later GPUs' Slurm indices shift. Not `missing`: no refusal.
TEST(GresConfGenTest, AGpuInMigModeGetsNoFileLineButItsMigDevicesAsComments) {
  auto snap = FourGpus();
  snap.gpus[0].mig_mode_current = true;
  const char* profiles[] = {"3g.40gb", "2g.20gb", "2g.20gb"};
  for (int i = 0; i < 3; ++i) {
    model::MigDevice m;
    m.index = i;
    m.uuid = "MIG-" + std::to_string(i);
    m.profile = profiles[i];
    snap.gpus[0].mig_devices.push_back(m);
  }
  const GresConf conf = GenerateGresConf(snap, "n");
  ASSERT_EQ(conf.lines.size(), 3u);
  for (const auto& line : conf.lines) EXPECT_THAT(line, ::testing::Not(HasSubstr("File=/dev/nvidia0"))) << line;
  EXPECT_THAT(conf.lines[0], HasSubstr("File=/dev/nvidia1 Cores=0-3 Links=-1,0,0"));
  EXPECT_EQ(conf.node_gres, "gpu:a100-sxm4-80gb:3");
  EXPECT_THAT(conf.mig_comments,
              ElementsAre("# GPU 0 (/dev/nvidia0) is in MIG mode: no whole-GPU line; let slurmd find its 3 MIG device(s) "
                          "with AutoDetect=nvml",
                          "#   MIG 0 Type=3g.40gb MIG-0", "#   MIG 1 Type=2g.20gb MIG-1", "#   MIG 2 Type=2g.20gb MIG-2",
                          HasSubstr("AutoDetect=nvml")));
  EXPECT_EQ(conf.mig_node_gres, "gpu:3g.40gb:1,gpu:2g.20gb:2");
  EXPECT_THAT(conf.missing, IsEmpty());
  EXPECT_THAT(conf.problems, ElementsAre("GPU 0 is in MIG mode: left out of the File= lines; the GPUs after it get Slurm "
                                         "indices lower than their NVML ones unless the node uses AutoDetect=nvml"));
  EXPECT_TRUE(GenerateGresConf(FourGpus(), "n").mig_comments.empty());
}

// An NVSwitch node: every pair NV18 (as NVML reads switch links), so every line has Links=.
TEST(GresConfGenTest, NvSwitchNodeGetsLinksToEveryGpu) {
  auto snap = FourGpus();
  for (size_t i = 0; i < 4; ++i) {
    for (size_t j = 0; j < 4; ++j) snap.topology->nvlinks[i][j] = i == j ? 0 : 18;
  }
  const GresConf conf = GenerateGresConf(snap, "n");
  ASSERT_EQ(conf.lines.size(), 4u);
  EXPECT_THAT(conf.lines[0], HasSubstr(" Links=-1,18,18,18"));
  EXPECT_THAT(conf.lines[3], HasSubstr(" Links=18,18,18,-1"));
}

TEST(SlurmdGresTest, ParsesSlurmdG) {
  const auto gres = ParseSlurmdGres(
      "slurmd: debug: something\n"
      "slurmd: Gres Name=gpu Type=(null) Count=8 Index=0 ID=7696487 File=/run/slurm-fake-gpu/nvidia[0-7] (null)\n"
      "slurmd: Gres Name=gpu Type=a100 Count=1 Index=8 ID=7696487 File=/dev/nvidia9 Cores=0-3 CoreCnt=8 Links=-1\n"
      "slurmd: Gres Name=shard Count=4 File=/dev/nvidia0\n");
  ASSERT_EQ(gres.size(), 2u);
  EXPECT_FALSE(gres[0].type);
  EXPECT_EQ(gres[0].count, 8);
  EXPECT_EQ(gres[0].files.size(), 8u);
  EXPECT_EQ(gres[0].files[7], "/run/slurm-fake-gpu/nvidia7");
  EXPECT_EQ(gres[1].type, "a100");
  EXPECT_THAT(gres[1].files, ElementsAre("/dev/nvidia9"));
}

std::optional<int> NameMinor(const std::string& f) { return std::stoi(f.substr(f.find("nvidia") + 6)); }

TEST(SlurmdGresTest, CheckAgreesAndFindsMismatches) {
  const auto snap = FourGpus();
  EXPECT_THAT(
      CheckGres(ParseSlurmdGres("Gres Name=gpu Type=x Count=4 Index=0 File=/dev/nvidia[0-3]\n"), snap, NameMinor).mismatches,
      IsEmpty());
  const auto bad = CheckGres(
      ParseSlurmdGres("Gres Name=gpu Count=3 Index=0 File=/dev/nvidia[0-1],/dev/nvidia5\n"), snap, NameMinor).mismatches;
  EXPECT_THAT(bad, ElementsAre(HasSubstr("slurmd has 3 GPU(s), NVML 4"),
                               HasSubstr("GPU 2 (GPU-2, /dev/nvidia3) is not in slurmd's GRES"),
                               HasSubstr("GPU 3 (GPU-3, /dev/nvidia2) is not in slurmd's GRES"),
                               HasSubstr("/dev/nvidia5 (minor 5) is no GPU NVML shows")));
  EXPECT_THAT(CheckGres(ParseSlurmdGres("Gres Name=gpu Count=2 File=/dev/nvidia0,/x/nvidia0\n"), snap, NameMinor).mismatches,
              ::testing::Contains(HasSubstr("are the same device (minor 0)")));
}

// `slurmd -G` as Slurm 22.05.8 printed it on the recipe's cluster (tests/slurm/slurmd-G/).
std::string Captured(const std::string& name) {
  std::ifstream in(std::string(GPUMAN_TEST_SOURCE_DIR) + "/slurm/slurmd-G/" + name);
  EXPECT_TRUE(in) << name;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// What the stand-in NVML shows for scenarios/a100-4.json: minors 0-3 in PCI order, NVLink
// pairs (0,1) and (2,3) with 12 links each, two NUMA nodes.
model::MachineSnapshot A100Four() {
  model::MachineSnapshot snap;
  std::vector<int> numa0, numa1;
  for (int c = 0; c < 128; ++c) ((c / 32) % 2 == 0 ? numa0 : numa1).push_back(c);
  for (int i = 0; i < 4; ++i) {
    model::DeviceSnapshot d;
    d.index = i;
    d.uuid = "GPU-" + std::to_string(i);
    d.name = "NVIDIA A100-SXM4-80GB";
    d.minor_number = i;
    d.cpu_affinity = i < 2 ? numa0 : numa1;
    snap.gpus.push_back(d);
  }
  model::Topology topo;
  topo.nvlinks = {{0, 12, 0, 0}, {12, 0, 0, 0}, {0, 0, 0, 12}, {0, 0, 12, 0}};
  topo.pcie.assign(4, std::vector<model::PcieLevel>(4, model::PcieLevel::kSystem));
  snap.topology = topo;
  return snap;
}

TEST(SlurmdGresTest, ParsesCoresAndLinks) {
  const auto gres = ParseSlurmdGres(Captured("a100-4-generated.txt"));
  ASSERT_EQ(gres.size(), 4u);
  EXPECT_EQ(gres[0].cores, "0-31,64-95");
  EXPECT_EQ(gres[0].links, "-1,12,0,0");
  EXPECT_EQ(gres[3].links, "0,0,12,-1");
  EXPECT_EQ(gres[2].type, "a100-sxm4-80gb");
  const auto plain = ParseSlurmdGres(Captured("recipe-4-fake.txt"));
  ASSERT_EQ(plain.size(), 1u);
  EXPECT_EQ(plain[0].count, 4);
  EXPECT_FALSE(plain[0].cores);
  EXPECT_FALSE(plain[0].links);
}

TEST(SlurmdGresTest, GeneratedConfAsSlurmdReadsItAgreesWithNvml) {
  const GresCheck check = CheckGres(ParseSlurmdGres(Captured("a100-4-generated.txt")), A100Four(), NameMinor);
  EXPECT_THAT(check.mismatches, IsEmpty());
  EXPECT_THAT(check.notes, IsEmpty());
  // And it is what gres-conf prints (with the recipe's device directory).
  const GresConf conf = GenerateGresConf(A100Four(), "vm");
  ASSERT_EQ(conf.lines.size(), 4u);
  EXPECT_EQ(conf.lines[1], "NodeName=vm Name=gpu Type=a100-sxm4-80gb File=/dev/nvidia1 Cores=0-31,64-95 Links=12,-1,0,0");
}

TEST(SlurmdGresTest, WrongLinksAndCoresAreOneLineEach) {
  const GresCheck check = CheckGres(ParseSlurmdGres(Captured("a100-4-wrong-links-cores.txt")), A100Four(), NameMinor);
  // Pairs (0,2),(1,3) declared, (0,1),(2,3) real: each GPU has two wrong entries.
  EXPECT_THAT(
      check.mismatches,
      ElementsAre(
          "Slurm GPU 0 (/run/slurm-fake-gpu/nvidia0, NVML GPU 0): Links= entry 1 (to Slurm GPU 1, NVML GPU 1) is 0, NVML sees 12 NVLink(s)",
          "Slurm GPU 0 (/run/slurm-fake-gpu/nvidia0, NVML GPU 0): Links= entry 2 (to Slurm GPU 2, NVML GPU 2) is 12, NVML sees 0 NVLink(s)",
          "Slurm GPU 1 (/run/slurm-fake-gpu/nvidia1, NVML GPU 1): Links= entry 0 (to Slurm GPU 0, NVML GPU 0) is 0, NVML sees 12 NVLink(s)",
          "Slurm GPU 1 (/run/slurm-fake-gpu/nvidia1, NVML GPU 1): Links= entry 3 (to Slurm GPU 3, NVML GPU 3) is 12, NVML sees 0 NVLink(s)",
          "Slurm GPU 2 (/run/slurm-fake-gpu/nvidia2, NVML GPU 2): Links= entry 0 (to Slurm GPU 0, NVML GPU 0) is 12, NVML sees 0 NVLink(s)",
          "Slurm GPU 2 (/run/slurm-fake-gpu/nvidia2, NVML GPU 2): Links= entry 3 (to Slurm GPU 3, NVML GPU 3) is 0, NVML sees 12 NVLink(s)",
          "Slurm GPU 3 (/run/slurm-fake-gpu/nvidia3, NVML GPU 3): Cores=0-31,64-95, NVML's CPU affinity is 32-63,96-127",
          "Slurm GPU 3 (/run/slurm-fake-gpu/nvidia3, NVML GPU 3): Links= entry 1 (to Slurm GPU 1, NVML GPU 1) is 12, NVML sees 0 NVLink(s)",
          "Slurm GPU 3 (/run/slurm-fake-gpu/nvidia3, NVML GPU 3): Links= entry 2 (to Slurm GPU 2, NVML GPU 2) is 0, NVML sees 12 NVLink(s)"));
}

TEST(SlurmdGresTest, LinksFollowSlurmsOrderNotNvmls) {
  // gres.conf in minor order while NVML GPU 2 has minor 3 (FourGpus): Slurm GPU 2 is
  // NVML GPU 3, so its Links= entries are counted in Slurm's order.
  const GresCheck ok = CheckGres(ParseSlurmdGres("Gres Name=gpu Count=1 File=/dev/nvidia0 Cores=0-3 Links=-1,12,0,0\n"
                                                 "Gres Name=gpu Count=1 File=/dev/nvidia1 Cores=0-3 Links=12,-1,0,0\n"
                                                 "Gres Name=gpu Count=1 File=/dev/nvidia2 Cores=4-7 Links=0,0,-1,12\n"
                                                 "Gres Name=gpu Count=1 File=/dev/nvidia3 Cores=4-5,6-7 Links=0,0,12,-1\n"),
                                 FourGpus(), NameMinor);
  EXPECT_THAT(ok.mismatches, IsEmpty());
  const GresCheck bad = CheckGres(ParseSlurmdGres("Gres Name=gpu Count=1 File=/dev/nvidia0 Links=-1,12,0\n"
                                                  "Gres Name=gpu Count=1 File=/dev/nvidia1 Cores=0-x Links=12,-1,0,0\n"
                                                  "Gres Name=gpu Count=1 File=/dev/nvidia2 Links=0,0,0,12\n"
                                                  "Gres Name=gpu Count=1 File=/dev/nvidia3 Links=0,0,12,two\n"),
                                  FourGpus(), NameMinor);
  EXPECT_THAT(bad.mismatches,
              ElementsAre(HasSubstr("Slurm GPU 0 (/dev/nvidia0, NVML GPU 0): Links=-1,12,0 has 3 entries for slurmd's 4 GPU(s)"),
                          HasSubstr("Slurm GPU 1 (/dev/nvidia1, NVML GPU 1): cannot read Cores=0-x"),
                          HasSubstr("Links= entry 2 (to Slurm GPU 2, NVML GPU 3) is 0, NVML expects -1 for the GPU itself"),
                          HasSubstr("Slurm GPU 3 (/dev/nvidia3, NVML GPU 2): cannot read Links=0,0,12,two")));
  EXPECT_THAT(bad.notes, ElementsAre(HasSubstr("no Cores= for 3 GPU(s)")));
}

TEST(SlurmdGresTest, WhatSlurmdLeavesOutIsANoteNotAMismatch) {
  const GresCheck check = CheckGres(ParseSlurmdGres(Captured("recipe-4-fake.txt")), A100Four(), NameMinor);
  EXPECT_THAT(check.mismatches, IsEmpty());
  EXPECT_THAT(check.notes, ElementsAre("slurmd declares no Cores= for 4 GPU(s) whose CPU affinity NVML knows: Slurm does not "
                                       "bind their jobs near them",
                                       "slurmd declares no Links= for 4 NVLinked GPU(s): Slurm's --gpus cannot prefer "
                                       "linked GPUs"));
}

TEST(GresConfGenTest, LinksListOnlyTheGpusThatGetALine) {
  auto snap = FourGpus();
  snap.gpus[1].minor_number.reset();
  const GresConf conf = GenerateGresConf(snap, "n");
  ASSERT_EQ(conf.lines.size(), 3u);
  EXPECT_THAT(conf.lines[0], ::testing::EndsWith(" Links=-1,0,0"));
  EXPECT_THAT(conf.lines[1], ::testing::EndsWith(" Links=0,-1,12"));
}

}  // namespace
}  // namespace gpuman::slurm
