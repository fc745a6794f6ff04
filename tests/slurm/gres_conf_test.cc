// gres.conf / slurm.conf parsing (src/slurm/gres_conf.cc).
#include "slurm/gres_conf.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpuman::slurm {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Optional;

std::vector<std::string> Files(const std::vector<visibility::GresGpu>& gpus) {
  std::vector<std::string> out;
  for (const auto& g : gpus) out.push_back(g.file);
  return out;
}

TEST(HostlistTest, Expands) {
  EXPECT_THAT(ExpandHostlist("node[01-03,7]"), Optional(ElementsAre("node01", "node02", "node03", "node7")));
  EXPECT_THAT(ExpandHostlist("/dev/nvidia[0-1],/dev/nvidia4"),
              Optional(ElementsAre("/dev/nvidia0", "/dev/nvidia1", "/dev/nvidia4")));
  EXPECT_THAT(ExpandHostlist("a[1-2]b[0,1]"), Optional(ElementsAre("a1b0", "a1b1", "a2b0", "a2b1")));
  EXPECT_THAT(ExpandHostlist("vm"), Optional(ElementsAre("vm")));
  EXPECT_EQ(ExpandHostlist("node[3-1]"), std::nullopt);
  EXPECT_EQ(ExpandHostlist("node[1-"), std::nullopt);
  EXPECT_EQ(ExpandHostlist("node]"), std::nullopt);
}

TEST(GresConfTest, GpuLinesOfThisNodeInOrder) {
  const std::string text =
      "# site gres.conf\n"
      "AutoDetect=off\n"
      "NodeName=gpu[01-02] Name=gpu Type=a100 File=/dev/nvidia[2-3]  # the second pair first\n"
      "NodeName=gpu[01-02] name=GPU type=a100 file=/dev/nvidia0,/dev/nvidia1\n"
      "NodeName=gpu02 Name=gpu File=/dev/nvidia9\n"
      "NodeName=gpu01 Name=shard Count=8\n"
      "NodeName=gpu01 Name=gpu Count=2\n"  // file-less: slurmd drops it
      "NodeName=gpu01 Name=mps Count=100 File=/dev/nvidia0\n";
  const auto gpus = ParseGresConf(text, "gpu01");
  EXPECT_THAT(Files(gpus), ElementsAre("/dev/nvidia2", "/dev/nvidia3", "/dev/nvidia0", "/dev/nvidia1"));
  EXPECT_EQ(gpus[0].type, "a100");
  EXPECT_FALSE(gpus[0].minor);
  EXPECT_THAT(Files(ParseGresConf(text, "gpu03")), IsEmpty());
}

TEST(GresConfTest, LinesWithoutNodeNameApplyToEveryNode) {
  EXPECT_THAT(Files(ParseGresConf("Name=gpu File=/dev/nvidia[0-1]\n", "anything")),
              ElementsAre("/dev/nvidia0", "/dev/nvidia1"));
}

TEST(GresConfTest, ConfKeys) {
  const auto keys = ParseConfKeys(
      "TaskPlugin=task/affinity,task/cgroup # both\n"
      "NodeName=vm CPUs=8 Gres=gpu:8\n"
      "ProctrackType=proctrack/cgroup\nTaskPlugin=task/cgroup\n");
  EXPECT_EQ(keys.at("taskplugin"), "task/cgroup");
  EXPECT_EQ(keys.at("proctracktype"), "proctrack/cgroup");
  EXPECT_EQ(keys.count("cpus"), 0u);  // a node's keys are not the cluster's
}

TEST(GresConfTest, MinorFromName) {
  EXPECT_EQ(MinorFromName("/dev/nvidia7"), 7);
  EXPECT_EQ(MinorFromName("/run/slurm-fake-gpu/nvidia12"), 12);
  EXPECT_EQ(MinorFromName("/dev/nvidiactl"), std::nullopt);
  EXPECT_EQ(MinorFromName("/dev/nvidia"), std::nullopt);
  EXPECT_EQ(MinorFromName("/dev/dri/card0"), std::nullopt);
}

TEST(GresConfTest, ConfNodeNames) {
  EXPECT_THAT(ConfNodeNames("NodeName=DEFAULT Gres=gpu:4\nnodename=a[1-2] NodeHostname=h[1-2] # two\n"
                            "PartitionName=p Nodes=x\nFoo=NodeName=z\n"),
              ElementsAre("a1", "a2", "h1", "h2"));
}

}  // namespace
}  // namespace gpuman::slurm
