// Slurm GPU indices mapped through gres.conf and minor numbers (slurm_gpus.cc), and what
// that does to AllowedGpus and explain: constrained vs not, gres.conf out of PCI order,
// gres.conf missing, NVML showing only the job's GPUs, foreign processes.
#include "visibility/slurm_gpus.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "visibility/allocation.h"
#include "visibility/fixtures.h"
#include "visibility/resolver.h"

namespace gpuman::visibility {
namespace {

using namespace testing_fixtures;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Optional;

std::vector<int> Values(const std::vector<PhysicalIndex>& list) {
  std::vector<int> out;
  for (PhysicalIndex i : list) out.push_back(i.value);
  return out;
}

std::vector<int> Visible(const VisibilityReport& r) {
  std::vector<int> out;
  for (const VisibleDevice& v : r.visible) out.push_back(v.index ? v.index->value : -1);
  return out;
}

std::vector<std::string> Codes(const VisibilityReport& r) {
  std::vector<std::string> out;
  for (const Warning& w : r.warnings) out.push_back(WarningCodeName(w.code));
  return out;
}

// Four A100s whose minor numbers are `minors` (NVML index i has minor minors[i]).
std::vector<model::DeviceSnapshot> WithMinors(std::vector<int> minors) {
  auto gpus = FourA100();
  for (size_t i = 0; i < gpus.size(); ++i) gpus[i].minor_number = minors[i];
  return gpus;
}

// gres.conf File=/dev/nvidia[0-3]: Slurm index k is minor k.
SlurmNode Node(bool constrained, int count = 4) {
  SlurmNode node;
  node.gres_path = "/etc/slurm/gres.conf";
  for (int k = 0; k < count; ++k) node.gres.push_back(GresGpu{"/dev/nvidia" + std::to_string(k), k, std::nullopt});
  node.devices_constrained = constrained;
  node.constrained_evidence = constrained ? "TaskPlugin=task/cgroup, ConstrainDevices=yes" : "TaskPlugin=task/none";
  return node;
}

ResolveOptions WithNode(SlurmNode node) {
  ResolveOptions options;
  options.slurm_node = std::move(node);
  return options;
}

TEST(SlurmGpusTest, UnconstrainedInOrderMapsThroughMinors) {
  const auto gpus = WithMinors({0, 1, 2, 3});
  const SlurmNode node = Node(false);
  const Environment env{{"SLURM_STEP_GPUS", "1,2"}, {"CUDA_VISIBLE_DEVICES", "1,2"}};
  const auto slurm = ParseSlurmGpus(env, gpus, &node);
  ASSERT_TRUE(slurm);
  EXPECT_FALSE(slurm->is_constrained);
  EXPECT_TRUE(slurm->cvd_is_slurms);
  EXPECT_THAT(Values(slurm->devices), ElementsAre(1, 2));
  ASSERT_EQ(slurm->mapping.size(), 2u);
  EXPECT_EQ(slurm->mapping[0].file, "/dev/nvidia1");
  EXPECT_EQ(slurm->mapping[0].uuid, kUuid1);
  EXPECT_THAT(AllowedGpus(env, gpus, &node), Optional(ElementsAre(kUuid1, kUuid2)));
  const VisibilityReport r = Resolve(env, gpus, WithNode(node));
  EXPECT_THAT(Visible(r), ElementsAre(1, 2));
  EXPECT_THAT(Codes(r), IsEmpty());
}

TEST(SlurmGpusTest, ConstrainedJobReadsCudaVisibleDevicesAsJobLocal) {
  // The case: SLURM_STEP_GPUS=2,3 with CUDA_VISIBLE_DEVICES=0,1 used to intersect
  // to nothing ("0 of 4 can ever be eligible").
  const auto gpus = WithMinors({0, 1, 2, 3});
  const SlurmNode node = Node(true);
  const Environment env{{"SLURM_STEP_GPUS", "2,3"}, {"CUDA_VISIBLE_DEVICES", "0,1"}};
  EXPECT_THAT(AllowedGpus(env, gpus, &node), Optional(ElementsAre(kUuid2, kUuid3)));
  const VisibilityReport r = Resolve(env, gpus, WithNode(node));
  EXPECT_THAT(Visible(r), ElementsAre(2, 3));
  EXPECT_THAT(Codes(r), IsEmpty());
  ASSERT_TRUE(r.slurm);
  EXPECT_TRUE(r.slurm->is_constrained);
  EXPECT_THAT(r.layers[0].effect, HasSubstr("job-local"));
  EXPECT_THAT(r.layers[0].effect, HasSubstr("Slurm GPU 2 -> /dev/nvidia2 (minor 2) -> GPU 2"));
}

TEST(SlurmGpusTest, ConstrainedJobNarrowedByTheUser) {
  // cuda:1 of a job holding node GPUs 2,3 is GPU 3.
  const auto gpus = WithMinors({0, 1, 2, 3});
  const SlurmNode node = Node(true);
  const Environment env{{"SLURM_STEP_GPUS", "2,3"}, {"CUDA_VISIBLE_DEVICES", "1"}};
  EXPECT_THAT(AllowedGpus(env, gpus, &node), Optional(ElementsAre(kUuid3)));
  const VisibilityReport r = Resolve(env, gpus, WithNode(node));
  EXPECT_THAT(Visible(r), ElementsAre(3));
  EXPECT_THAT(Codes(r), IsEmpty());
}

TEST(SlurmGpusTest, ConstrainedInferredFromTheListsWithoutNodeFacts) {
  const auto slurm = ParseSlurmGpus({{"SLURM_STEP_GPUS", "3,4"}, {"CUDA_VISIBLE_DEVICES", "0,1"}},
                                    WithMinors({0, 1, 2, 3}));
  ASSERT_TRUE(slurm);
  EXPECT_TRUE(slurm->is_constrained);
  EXPECT_THAT(slurm->constrained_reason, HasSubstr("renumbered"));
  // Not inferred when Slurm's own indices are in CUDA_VISIBLE_DEVICES.
  const auto plain = ParseSlurmGpus({{"SLURM_STEP_GPUS", "2,3"}, {"CUDA_VISIBLE_DEVICES", "2,3"}}, FourA100());
  ASSERT_TRUE(plain);
  EXPECT_FALSE(plain->is_constrained);
  EXPECT_TRUE(plain->cvd_is_slurms);
}

TEST(SlurmGpusTest, GresOrderPermutedAgainstPciOrder) {
  // NVML (PCI) order has minors 2,0,3,1; gres.conf lists /dev/nvidia0..3 (minor order), so
  // Slurm GPUs 0 and 1 are NVML GPUs 1 and 3.
  const auto gpus = WithMinors({2, 0, 3, 1});
  const Environment env{{"SLURM_STEP_GPUS", "0,1"}, {"CUDA_VISIBLE_DEVICES", "0,1"}};
  for (bool constrained : {false, true}) {
    SCOPED_TRACE(constrained ? "constrained" : "unconstrained");
    const SlurmNode node = Node(constrained);
    EXPECT_FALSE(GresInPciOrder(node, gpus));
    EXPECT_THAT(AllowedGpus(env, gpus, &node), Optional(ElementsAre(kUuid1, kUuid3)));
    const VisibilityReport r = Resolve(env, gpus, WithNode(node));
    if (constrained) {
      EXPECT_THAT(Visible(r), ElementsAre(1, 3));
      EXPECT_THAT(Codes(r), ElementsAre("gres_order_not_pci"));
    } else {
      // Slurm put its indices in CUDA_VISIBLE_DEVICES; CUDA reads them as its ordinals.
      EXPECT_THAT(Visible(r), ElementsAre(0, 1));
      EXPECT_THAT(Codes(r), ElementsAre("gres_order_not_pci", "outside_allocation"));
      EXPECT_THAT(r.warnings[1].message, HasSubstr("gpuman run"));
    }
    EXPECT_THAT(r.warnings[0].message, HasSubstr("NVML GPUs 1,3,0,2"));
  }
  EXPECT_TRUE(GresInPciOrder(Node(false), WithMinors({0, 1, 2, 3})));
}

TEST(SlurmGpusTest, MissingGresConfFallsBackToMinorEqualsIndex) {
  SlurmNode node;
  node.gres_path = "/etc/slurm/gres.conf";
  node.gres_error = "cannot read /etc/slurm/gres.conf";
  const auto gpus = WithMinors({2, 0, 3, 1});
  const Environment env{{"SLURM_JOB_GPUS", "0"}};
  const auto slurm = ParseSlurmGpus(env, gpus, &node);
  ASSERT_TRUE(slurm);
  EXPECT_TRUE(slurm->minor_is_slurm_index);
  EXPECT_THAT(slurm->mapping_source, HasSubstr("minor number = Slurm index (cannot read /etc/slurm/gres.conf)"));
  EXPECT_THAT(Values(slurm->devices), ElementsAre(1));  // minor 0
  const VisibilityReport r = Resolve(env, gpus, WithNode(node));
  EXPECT_THAT(r.layers[0].effect, HasSubstr("cannot read /etc/slurm/gres.conf"));
  EXPECT_THAT(Codes(r), IsEmpty());  // no gres.conf: no order to warn about
}

TEST(SlurmGpusTest, NoMinorsAnywhereMeansNvmlIndex) {
  const auto slurm = ParseSlurmGpus({{"SLURM_JOB_GPUS", "0-1,3"}}, FourA100());
  ASSERT_TRUE(slurm);
  EXPECT_THAT(Values(slurm->devices), ElementsAre(0, 1, 3));
  EXPECT_THAT(slurm->mapping_source, HasSubstr("NVML index taken as minor"));
}

TEST(SlurmGpusTest, NvmlShowingOnlyTheJobsGpusIsTheAllocation) {
  // Inside a constrained job NVML may show just the job's two GPUs, renumbered 0 and 1.
  const Environment env{{"SLURM_STEP_GPUS", "3,4"}, {"CUDA_VISIBLE_DEVICES", "0,1"}};
  const auto two = TwoA100();  // no minor numbers reported
  const SlurmNode node = Node(true, 8);
  const auto slurm = ParseSlurmGpus(env, two, &node);
  ASSERT_TRUE(slurm);
  EXPECT_TRUE(slurm->nvml_shows_only_job);
  EXPECT_THAT(slurm->problems, IsEmpty());
  EXPECT_THAT(Values(slurm->devices), ElementsAre(0, 1));
  const VisibilityReport r = Resolve(env, two, WithNode(node));
  EXPECT_THAT(Visible(r), ElementsAre(0, 1));
  EXPECT_THAT(Codes(r), IsEmpty());  // no "no GPU 3"
  for (const Warning& w : r.warnings) EXPECT_THAT(w.message, ::testing::Not(HasSubstr("no GPU 3")));

  // With minor numbers reported, the chain itself finds them.
  auto with_minors = TwoA100();
  with_minors[0].minor_number = 3;
  with_minors[1].minor_number = 4;
  const auto mapped = ParseSlurmGpus(env, with_minors, &node);
  ASSERT_TRUE(mapped);
  EXPECT_FALSE(mapped->nvml_shows_only_job);
  EXPECT_THAT(Values(mapped->devices), ElementsAre(0, 1));
  EXPECT_THAT(AllowedGpus(env, with_minors, &node), Optional(ElementsAre(kUuid0, kUuid1)));
}

TEST(SlurmGpusTest, IndexBeyondGresConfIsAProblem) {
  const SlurmNode node = Node(false, 2);
  const auto slurm = ParseSlurmGpus({{"SLURM_STEP_GPUS", "1,3"}}, WithMinors({0, 1, 2, 3}), &node);
  ASSERT_TRUE(slurm);
  EXPECT_THAT(Values(slurm->devices), ElementsAre(1));
  ASSERT_EQ(slurm->problems.size(), 1u);
  EXPECT_THAT(slurm->problems[0], HasSubstr("Slurm GPU 3: gres.conf lists only 2 GPU(s)"));
  const auto missing_minor = ParseSlurmGpus({{"SLURM_STEP_GPUS", "0"}}, WithMinors({5, 6, 7, 8}), &node);
  ASSERT_TRUE(missing_minor);
  EXPECT_THAT(missing_minor->problems, ElementsAre(HasSubstr("no GPU has minor number 0 (/dev/nvidia0)")));
}

TEST(SlurmGpusTest, ForeignProcessOnTheAllocation) {
  auto gpus = WithMinors({0, 1, 2, 3});
  model::GpuProcess own, other;
  own.pid = 100;
  other.pid = 200;
  other.command = "python other.py";
  gpus[2].processes = {own, other};
  gpus[0].processes = {other};  // not in the allocation: not this warning's business
  SlurmNode node = Node(true);
  node.job_id = "42";
  node.job_pids = std::set<uint32_t>{100};
  ResolveOptions options = WithNode(node);
  options.current_uid = 0;
  const VisibilityReport r = Resolve({{"SLURM_STEP_GPUS", "2,3"}, {"CUDA_VISIBLE_DEVICES", "0,1"}}, gpus, options);
  EXPECT_THAT(Codes(r), ElementsAre("foreign_process"));
  EXPECT_THAT(r.warnings[0].message, HasSubstr("pid 200 python other.py"));
  EXPECT_THAT(r.warnings[0].message, ::testing::Not(HasSubstr("pid 100")));
  EXPECT_THAT(r.warnings[0].message, HasSubstr("job 42"));

  // Unknown membership (no cgroup proctrack): no guess.
  node.job_pids.reset();
  EXPECT_THAT(Codes(Resolve({{"SLURM_STEP_GPUS", "2,3"}}, gpus, WithNode(node))), IsEmpty());
}

}  // namespace
}  // namespace gpuman::visibility
