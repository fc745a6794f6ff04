// NVIDIA_VISIBLE_DEVICES (reference section 4), Slurm GPU lists (section 5) and
// AllowedGpus, which the launcher uses to stay inside an enclosing allocation.
#include "visibility/allocation.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "visibility/fixtures.h"

namespace gpuman::visibility {
namespace {

using namespace testing_fixtures;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Optional;

std::vector<int> Values(const std::vector<PhysicalIndex>& list) {
  std::vector<int> out;
  for (PhysicalIndex i : list) out.push_back(i.value);
  return out;
}

TEST(NvidiaVisibleDevicesTest, Modes) {
  struct Case {
    std::optional<std::string_view> value;
    ContainerMode mode;
    std::vector<int> devices;
  };
  for (const Case& c : {Case{std::nullopt, ContainerMode::kUnrestricted, {}},
                        Case{"", ContainerMode::kUnrestricted, {}},
                        Case{"void", ContainerMode::kUnrestricted, {}},
                        Case{"all", ContainerMode::kAll, {}},
                        Case{"none", ContainerMode::kNone, {}},
                        Case{"2,0", ContainerMode::kList, {2, 0}},
                        Case{"GPU-c0ffee00,1", ContainerMode::kList, {3, 1}},
                        Case{kUuid2, ContainerMode::kList, {2}}}) {
    const ContainerDevices d = ParseNvidiaVisibleDevices(c.value, FourA100());
    EXPECT_EQ(d.mode, c.mode) << c.value.value_or("(unset)");
    EXPECT_EQ(Values(d.devices), c.devices) << c.value.value_or("(unset)");
    EXPECT_THAT(d.problems, IsEmpty());
  }
}

TEST(NvidiaVisibleDevicesTest, UnknownEntriesAreProblems) {
  const ContainerDevices d = ParseNvidiaVisibleDevices("0,7,GPU-8932f9", FourA100());
  EXPECT_THAT(Values(d.devices), ElementsAre(0));
  ASSERT_EQ(d.problems.size(), 2u);
  EXPECT_THAT(d.problems[0], ::testing::HasSubstr("entry 2 \"7\""));
  EXPECT_THAT(d.problems[1], ::testing::HasSubstr("ambiguous"));
}

TEST(SlurmGpusTest, StepPreferredOverJob) {
  const Environment env{{"SLURM_JOB_GPUS", "0,1,2,3"}, {"SLURM_STEP_GPUS", "1,2"}};
  const auto slurm = ParseSlurmGpus(env, FourA100());
  ASSERT_TRUE(slurm);
  EXPECT_EQ(slurm->variable, "SLURM_STEP_GPUS");
  EXPECT_THAT(Values(slurm->devices), ElementsAre(1, 2));
}

TEST(SlurmGpusTest, JobGpusAndRanges) {
  const auto slurm = ParseSlurmGpus({{"SLURM_JOB_GPUS", "0-1,3"}}, FourA100());
  ASSERT_TRUE(slurm);
  EXPECT_EQ(slurm->variable, "SLURM_JOB_GPUS");
  EXPECT_THAT(Values(slurm->devices), ElementsAre(0, 1, 3));
}

TEST(SlurmGpusTest, AbsentOrEmptyIsNoAllocation) {
  EXPECT_FALSE(ParseSlurmGpus({}, FourA100()));
  EXPECT_FALSE(ParseSlurmGpus({{"SLURM_STEP_GPUS", ""}}, FourA100()));
}

TEST(SlurmGpusTest, UnknownIndexIsAProblem) {
  const auto slurm = ParseSlurmGpus({{"SLURM_STEP_GPUS", "1,9,x"}}, FourA100());
  ASSERT_TRUE(slurm);
  EXPECT_THAT(Values(slurm->devices), ElementsAre(1));
  EXPECT_EQ(slurm->problems.size(), 2u);
}

TEST(AllowedGpusTest, Table) {
  struct Case {
    const char* name;
    Environment env;
    std::optional<std::vector<std::string>> expected;
  };
  const std::vector<Case> cases = {
      {"nothing", {}, std::nullopt},
      {"container_all", {{"NVIDIA_VISIBLE_DEVICES", "all"}}, std::nullopt},
      {"container_void", {{"NVIDIA_VISIBLE_DEVICES", "void"}}, std::nullopt},
      {"container_none", {{"NVIDIA_VISIBLE_DEVICES", "none"}}, std::vector<std::string>{}},
      {"container_list", {{"NVIDIA_VISIBLE_DEVICES", "3,1"}}, std::vector<std::string>{kUuid1, kUuid3}},
      {"slurm", {{"SLURM_STEP_GPUS", "1,2"}}, std::vector<std::string>{kUuid1, kUuid2}},
      {"outer_cvd", {{"CUDA_VISIBLE_DEVICES", "2,0"}}, std::vector<std::string>{kUuid0, kUuid2}},
      {"outer_cvd_empty", {{"CUDA_VISIBLE_DEVICES", ""}}, std::vector<std::string>{}},
      {"outer_cvd_truncated", {{"CUDA_VISIBLE_DEVICES", "2,-1,3"}}, std::vector<std::string>{kUuid2}},
      {"intersection",
       {{"SLURM_STEP_GPUS", "1,2"}, {"NVIDIA_VISIBLE_DEVICES", "2,3"}, {"CUDA_VISIBLE_DEVICES", "GPU-3eb"}},
       std::vector<std::string>{kUuid2}},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(AllowedGpus(c.env, FourA100()), c.expected) << c.name;
  }
}

TEST(AllowedGpusTest, OuterIndicesFollowDeviceOrder) {
  EXPECT_THAT(AllowedGpus({{"CUDA_VISIBLE_DEVICES", "0"}}, Mixed()),
              Optional(ElementsAre(kUuid4090)));
  EXPECT_THAT(AllowedGpus({{"CUDA_VISIBLE_DEVICES", "0"}, {"CUDA_DEVICE_ORDER", "PCI_BUS_ID"}},
                          Mixed()),
              Optional(ElementsAre(kUuid3090a)));
}

TEST(AllocationLimitsTest, OneLimitPerVariableWithItsProblems) {
  const std::vector<AllocationLimit> limits = AllocationLimits(
      {{"NVIDIA_VISIBLE_DEVICES", "2,3"}, {"SLURM_STEP_GPUS", "1,2"}, {"CUDA_VISIBLE_DEVICES", "3,GPU-dead"}},
      FourA100());
  ASSERT_EQ(limits.size(), 3u);
  EXPECT_EQ(limits[0].variable, "NVIDIA_VISIBLE_DEVICES");
  EXPECT_EQ(Values(limits[0].allows), (std::vector<int>{2, 3}));
  EXPECT_EQ(limits[1].variable, "SLURM_STEP_GPUS");
  EXPECT_EQ(limits[1].value, "1,2");
  EXPECT_EQ(Values(limits[1].allows), (std::vector<int>{1, 2}));
  EXPECT_EQ(limits[2].variable, "CUDA_VISIBLE_DEVICES");
  EXPECT_EQ(Values(limits[2].allows), (std::vector<int>{3}));
  ASSERT_EQ(limits[2].problems.size(), 1u);
  EXPECT_THAT(limits[2].problems[0], ::testing::StartsWith("entry 2 \"GPU-dead\": invalid ("));
  EXPECT_THAT(AllocationLimits({}, FourA100()), IsEmpty());
}

TEST(DescribeAllocationLimitsTest, AStaleCudaVisibleDevicesIsNamedWithHowToClearIt) {
  EXPECT_EQ(DescribeAllocationLimits({{"CUDA_VISIBLE_DEVICES", "3"}}, FourA100()),
            "CUDA_VISIBLE_DEVICES=\"3\" in this shell (not set by a gpuman lease or Slurm) confines gpuman to GPU 3: "
            "if it is left over from an earlier job or shell, clear it with `unset CUDA_VISIBLE_DEVICES`");
  // An entry that names no GPU here is named, with CUDA's reading of it.
  EXPECT_EQ(DescribeAllocationLimits({{"CUDA_VISIBLE_DEVICES", "7"}}, FourA100()),
            "CUDA_VISIBLE_DEVICES=\"7\" in this shell (not set by a gpuman lease or Slurm) lets no GPU through; its "
            "entry 1 \"7\": invalid (out of range: CUDA numbers 4 GPU(s) here (0..3)): if it is left over from an earlier job or "
            "shell, clear it with `unset CUDA_VISIBLE_DEVICES`");
  // As `gpuman select --format env` writes them: both, and one unset for the two.
  EXPECT_EQ(DescribeAllocationLimits({{"CUDA_VISIBLE_DEVICES", kUuid2}, {"NVIDIA_VISIBLE_DEVICES", kUuid2}}, FourA100()),
            std::string("CUDA_VISIBLE_DEVICES and NVIDIA_VISIBLE_DEVICES=\"") + kUuid2 +
                "\" in this shell (as `gpuman select --format env` writes them; not set by a gpuman lease or Slurm) "
                "confine gpuman to GPU 2: if they are left over from an earlier job or shell, clear them with "
                "`unset CUDA_VISIBLE_DEVICES NVIDIA_VISIBLE_DEVICES`");
}

TEST(DescribeAllocationLimitsTest, InsideALeaseOrAJobNoUnset) {
  // A gpuman lease's child: the lease's GPUs, where nested commands stay.
  EXPECT_EQ(DescribeAllocationLimits({{"CUDA_VISIBLE_DEVICES", kUuid1}, {"GPUMAN_LEASE_ID", "12"}}, FourA100()),
            std::string("CUDA_VISIBLE_DEVICES=\"") + kUuid1 +
                "\" of gpuman lease 12 (GPUMAN_LEASE_ID) confines gpuman to GPU 1: a nested run or select stays "
                "inside the lease");
  EXPECT_EQ(DescribeAllocationLimits({{"SLURM_STEP_GPUS", "1,2"}}, FourA100()),
            "SLURM_STEP_GPUS=\"1,2\" (the Slurm job's GPUs) confines gpuman to GPU 1,2");
  EXPECT_EQ(DescribeAllocationLimits({{"NVIDIA_VISIBLE_DEVICES", "0,3"}}, FourA100()),
            "NVIDIA_VISIBLE_DEVICES=\"0,3\" (a container's device list) confines gpuman to GPU 0,3");
  // Nothing left out, nothing said.
  EXPECT_EQ(DescribeAllocationLimits({{"CUDA_VISIBLE_DEVICES", "0,1,2,3"}}, FourA100()), "");
  EXPECT_EQ(DescribeAllocationLimits({}, FourA100()), "");
}

}  // namespace
}  // namespace gpuman::visibility
