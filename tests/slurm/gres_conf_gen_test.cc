// gres.conf generation and the slurmd -G check (src/slurm/gres_conf_gen.cc).
#include "slurm/gres_conf_gen.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

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
  EXPECT_THAT(CheckGres(ParseSlurmdGres("Gres Name=gpu Type=x Count=4 Index=0 File=/dev/nvidia[0-3]\n"), snap, NameMinor),
              IsEmpty());
  const auto bad = CheckGres(
      ParseSlurmdGres("Gres Name=gpu Count=3 Index=0 File=/dev/nvidia[0-1],/dev/nvidia5\n"), snap, NameMinor);
  EXPECT_THAT(bad, ElementsAre(HasSubstr("slurmd has 3 GPU(s), NVML 4"),
                               HasSubstr("GPU 2 (GPU-2, /dev/nvidia3) is not in slurmd's GRES"),
                               HasSubstr("GPU 3 (GPU-3, /dev/nvidia2) is not in slurmd's GRES"),
                               HasSubstr("/dev/nvidia5 (minor 5) is no GPU NVML shows")));
  EXPECT_THAT(CheckGres(ParseSlurmdGres("Gres Name=gpu Count=2 File=/dev/nvidia0,/x/nvidia0\n"), snap, NameMinor),
              ::testing::Contains(HasSubstr("are the same device (minor 0)")));
}

}  // namespace
}  // namespace gpuman::slurm
