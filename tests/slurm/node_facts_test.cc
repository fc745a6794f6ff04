// Reading the node side of Slurm from files (src/slurm/node_facts.cc), against a fake
// /etc/slurm and /proc in a temp dir.
#include "slurm/node_facts.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "support/temp_dir.h"

namespace gpuman::slurm {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

struct Fixture {
  testing::TempDir dir;
  SlurmPaths paths;
  Fixture() {
    paths.proc = dir.Join("proc");
    paths.cgroup = dir.Join("cgroup");
    paths.default_conf_dir = dir.Join("etc-slurm");
  }
};

TEST(ReadSlurmNodeTest, GresConfBesideSlurmConfAndConfinement) {
  Fixture f;
  // Regular files (not device nodes): the minor comes from the name "nvidiaN".
  f.dir.Write("conf/gres.conf", "NodeName=node7 Name=gpu File=" + f.dir.Join("dev/nvidia[4-5]") + "\n" +
                                    "NodeName=other Name=gpu File=/dev/nvidia0\n");
  f.dir.Write("conf/slurm.conf", "TaskPlugin=task/affinity,task/cgroup\n");
  f.dir.Write("conf/cgroup.conf", "ConstrainDevices=yes\n");
  const visibility::Environment env{{"SLURM_CONF", f.dir.Join("conf/slurm.conf")}, {"SLURMD_NODENAME", "node7"}};
  const visibility::SlurmNode node = ReadSlurmNode(env, "ignored-host", f.paths);
  EXPECT_EQ(node.gres_path, f.dir.Join("conf/gres.conf"));
  EXPECT_FALSE(node.gres_error);
  ASSERT_EQ(node.gres.size(), 2u);
  EXPECT_EQ(node.gres[0].minor, 4);
  EXPECT_EQ(node.gres[1].minor, 5);
  EXPECT_EQ(node.devices_constrained, true);
  EXPECT_THAT(node.constrained_evidence, HasSubstr("ConstrainDevices=yes"));
}

TEST(ReadSlurmNodeTest, TaskCgroupWithoutConstrainDevicesIsNotConfined) {
  Fixture f;
  f.dir.Write("etc-slurm/slurm.conf", "TaskPlugin=task/cgroup\n");
  f.dir.Write("etc-slurm/cgroup.conf", "ConstrainDevices=no\n");
  const visibility::SlurmNode node = ReadSlurmNode({}, "host.example.org", f.paths);
  EXPECT_EQ(node.devices_constrained, false);
  EXPECT_TRUE(node.gres.empty());
  EXPECT_THAT(node.gres_error.value_or(""), HasSubstr("cannot read " + f.dir.Join("etc-slurm/gres.conf")));
}

TEST(ReadSlurmNodeTest, HostNameIsShortAndUnknownConfigStaysUnknown) {
  Fixture f;
  f.dir.Write("etc-slurm/gres.conf", "NodeName=host Name=gpu File=/dev/nvidia3\n");
  const visibility::SlurmNode node = ReadSlurmNode({}, "host.example.org", f.paths);
  ASSERT_EQ(node.gres.size(), 1u);
  EXPECT_EQ(node.gres[0].minor, 3);
  EXPECT_EQ(node.devices_constrained, std::nullopt);  // no slurm.conf: no evidence

  f.dir.Write("etc-slurm/gres.conf", "NodeName=elsewhere Name=gpu File=/dev/nvidia3\n");
  EXPECT_THAT(ReadSlurmNode({}, "host", f.paths).gres_error.value_or(""), HasSubstr("no GPU File= line for node host"));
}

TEST(JobPidsTest, MembersOfTheJobsCgroup) {
  Fixture f;
  f.dir.Write("proc/self/cgroup", "5:devices:/slurm_vm/uid_0/job_2/step_0/task_0\n");
  f.dir.Write("proc/100/cgroup", "4:freezer:/slurm_vm/uid_0/job_2/step_1\n");
  f.dir.Write("proc/200/cgroup", "4:freezer:/slurm_vm/uid_0/job_23/step_0\n");  // another job
  f.dir.Write("proc/300/cgroup", "4:freezer:/\n");
  EXPECT_THAT(JobPids("2", {100, 200, 300, 400}, f.paths), ::testing::Optional(ElementsAre(100u)));
  // Not in a job cgroup ourselves (proctrack/linuxproc): cannot tell.
  f.dir.Write("proc/self/cgroup", "5:devices:/\n");
  EXPECT_EQ(JobPids("2", {100}, f.paths), std::nullopt);
}

TEST(InSlurmJobTest, Variables) {
  EXPECT_FALSE(InSlurmJob({}));
  EXPECT_FALSE(InSlurmJob({{"SLURM_JOB_ID", ""}}));
  EXPECT_TRUE(InSlurmJob({{"SLURM_JOB_ID", "5"}}));
  EXPECT_TRUE(InSlurmJob({{"SLURM_STEP_GPUS", "0"}}));
}

TEST(DetectSlurmNodeTest, ConfiguredModeWins) {
  Fixture f;
  f.dir.Write("proc/812/comm", "slurmd\n");
  EXPECT_FALSE(DetectSlurmNode(SlurmNodeMode::kNo, {}, "node1", f.paths).is_node);
  f.dir.Write("proc/812/comm", "bash\n");
  const SlurmNodeVerdict yes = DetectSlurmNode(SlurmNodeMode::kYes, {}, "node1", f.paths);
  EXPECT_TRUE(yes.is_node);
  EXPECT_EQ(yes.reason, "[slurm] node = yes");
}

TEST(DetectSlurmNodeTest, AutoRunningSlurmd) {
  Fixture f;
  f.dir.Write("proc/1/comm", "systemd\n");
  f.dir.Write("proc/self/comm", "slurmd\n");  // not a pid: skipped
  const SlurmNodeVerdict none = DetectSlurmNode(SlurmNodeMode::kAuto, {}, "node1", f.paths);
  EXPECT_FALSE(none.is_node);
  EXPECT_THAT(none.reason, HasSubstr("no slurmd runs and " + f.dir.Join("etc-slurm/slurm.conf") + " cannot be read"));
  f.dir.Write("proc/812/comm", "slurmd\n");
  const SlurmNodeVerdict runs = DetectSlurmNode(SlurmNodeMode::kAuto, {}, "node1", f.paths);
  EXPECT_TRUE(runs.is_node);
  EXPECT_EQ(runs.reason, "slurmd runs (pid 812)");
}

TEST(DetectSlurmNodeTest, AutoSlurmConfNamesThisHost) {
  Fixture f;
  f.dir.Write("proc/1/comm", "systemd\n");
  f.dir.Write("conf/slurm.conf",
              "SlurmctldHost=login1\n"
              "NodeName=DEFAULT CPUs=64\n"
              "NodeName=gpu[01-04] Gres=gpu:8\n"
              "NodeName=n7 NodeHostname=big7 NodeAddr=10.0.0.7\n"
              "PartitionName=all Nodes=ALL\n");
  const visibility::Environment env{{"SLURM_CONF", f.dir.Join("conf/slurm.conf")}};
  const SlurmNodeVerdict node = DetectSlurmNode(SlurmNodeMode::kAuto, env, "gpu03.cluster.example", f.paths);
  EXPECT_TRUE(node.is_node);
  EXPECT_THAT(node.reason, HasSubstr("declares NodeName gpu03"));
  EXPECT_TRUE(DetectSlurmNode(SlurmNodeMode::kAuto, env, "big7", f.paths).is_node);
  // The login / controller host reads the same slurm.conf but is no node.
  const SlurmNodeVerdict login = DetectSlurmNode(SlurmNodeMode::kAuto, env, "login1", f.paths);
  EXPECT_FALSE(login.is_node);
  EXPECT_THAT(login.reason, HasSubstr("declares no node login1"));
  EXPECT_FALSE(DetectSlurmNode(SlurmNodeMode::kAuto, env, "default", f.paths).is_node);
}

}  // namespace
}  // namespace gpuman::slurm
