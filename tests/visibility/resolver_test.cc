// Resolve() and ExplainWithoutDriver(): layers in order, the cuda:N -> GPU list and each
// warning code, as Given (environment, machine) / Then (visible list, warnings).
#include "visibility/resolver.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "visibility/fixtures.h"

namespace gpuman::visibility {
namespace {

using namespace testing_fixtures;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

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

std::vector<std::string> LayerNames(const VisibilityReport& r) {
  std::vector<std::string> out;
  for (const Layer& l : r.layers) out.push_back(l.name);
  return out;
}

const Warning* Find(const VisibilityReport& r, WarningCode code) {
  for (const Warning& w : r.warnings) {
    if (w.code == code) return &w;
  }
  return nullptr;
}

// Table: environment + machine -> visible GPUs and the exact set of warning codes.
struct Case {
  const char* name;
  Environment env;
  bool mixed;  // Mixed() instead of FourA100()
  std::vector<int> visible;
  std::vector<std::string> codes;
};

class ResolveTableTest : public ::testing::TestWithParam<Case> {};

TEST_P(ResolveTableTest, VisibleAndWarnings) {
  const Case& c = GetParam();
  const VisibilityReport r = Resolve(c.env, c.mixed ? Mixed() : FourA100());
  EXPECT_THAT(Visible(r), ::testing::ElementsAreArray(c.visible));
  EXPECT_THAT(Codes(r), ::testing::ElementsAreArray(c.codes));
}

INSTANTIATE_TEST_SUITE_P(
    Environments, ResolveTableTest,
    ::testing::Values(
        Case{"nothing_set", {}, false, {0, 1, 2, 3}, {}},
        Case{"empty", {{"CUDA_VISIBLE_DEVICES", ""}}, false, {}, {"nothing_visible"}},
        Case{"minus_one", {{"CUDA_VISIBLE_DEVICES", "-1"}}, false, {}, {"invalid_entry", "nothing_visible"}},
        Case{"truncated", {{"CUDA_VISIBLE_DEVICES", "0,2,-1,1"}}, false, {0, 2}, {"invalid_entry"}},
        Case{"duplicate", {{"CUDA_VISIBLE_DEVICES", "0,1,2,1"}}, false, {}, {"duplicate_entry", "nothing_visible"}},
        Case{"unknown_order", {{"CUDA_DEVICE_ORDER", "pci"}}, false, {0, 1, 2, 3}, {"unknown_device_order"}},
        // Homogeneous machine: indices without PCI_BUS_ID are fine.
        Case{"indices_homogeneous", {{"CUDA_VISIBLE_DEVICES", "0,1"}}, false, {0, 1}, {}},
        // Mixed machine: FASTEST_FIRST (estimated 1, 0, 2) vs PCI_BUS_ID.
        Case{"mixed_unset", {}, true, {1, 0, 2}, {}},
        Case{"mixed_pci_unset", {{"CUDA_DEVICE_ORDER", "PCI_BUS_ID"}}, true, {0, 1, 2}, {}},
        Case{"mixed_index_mixup", {{"CUDA_VISIBLE_DEVICES", "0"}}, true, {1}, {"index_without_pci_bus_order"}},
        Case{"mixed_index_pci", {{"CUDA_VISIBLE_DEVICES", "0"}, {"CUDA_DEVICE_ORDER", "PCI_BUS_ID"}}, true, {0}, {}},
        Case{"mixed_uuid_no_mixup", {{"CUDA_VISIBLE_DEVICES", "GPU-4090"}}, true, {1}, {}},
        // Container layer.
        Case{"container_all", {{"NVIDIA_VISIBLE_DEVICES", "all"}}, false, {0, 1, 2, 3}, {}},
        Case{"container_void", {{"NVIDIA_VISIBLE_DEVICES", "void"}}, false, {0, 1, 2, 3}, {}},
        Case{"container_none", {{"NVIDIA_VISIBLE_DEVICES", "none"}}, false, {}, {"nothing_visible"}},
        Case{"container_list", {{"NVIDIA_VISIBLE_DEVICES", "GPU-c0ffee00,1"}}, false, {1, 3}, {}},
        Case{"container_unknown", {{"NVIDIA_VISIBLE_DEVICES", "1,9"}}, false, {1}, {"invalid_entry"}},
        // Slurm layer, and an outer CUDA_VISIBLE_DEVICES outside it.
        Case{"slurm_only", {{"SLURM_STEP_GPUS", "2,3"}}, false, {2, 3}, {}},
        Case{"slurm_inside", {{"SLURM_STEP_GPUS", "2,3"}, {"CUDA_VISIBLE_DEVICES", "3"}}, false, {3}, {}},
        Case{"slurm_outside", {{"SLURM_STEP_GPUS", "2,3"}, {"CUDA_VISIBLE_DEVICES", "0,1"}}, false, {0, 1}, {"outside_allocation"}},
        Case{"container_outside", {{"NVIDIA_VISIBLE_DEVICES", "0"}, {"CUDA_VISIBLE_DEVICES", "GPU-c0ffee00"}}, false, {3}, {"outside_allocation"}}),
    [](const ::testing::TestParamInfo<Case>& test_info) { return std::string(test_info.param.name); });

TEST(ResolveTest, LayersComeOutermostFirst) {
  const Environment env{{"NVIDIA_VISIBLE_DEVICES", "all"},
                        {"SLURM_JOB_GPUS", "0,1"},
                        {"CUDA_DEVICE_ORDER", "PCI_BUS_ID"},
                        {"CUDA_VISIBLE_DEVICES", "1"}};
  const VisibilityReport r = Resolve(env, FourA100());
  EXPECT_THAT(LayerNames(r), ElementsAre("container", "slurm", "device_order", "visible_devices"));
  EXPECT_EQ(r.layers[1].variable, "SLURM_JOB_GPUS");
  EXPECT_EQ(r.layers[3].value, "1");
}

TEST(ResolveTest, UnsetVariablesStillShowTheirLayer) {
  const VisibilityReport r = Resolve({}, FourA100());
  EXPECT_THAT(LayerNames(r), ElementsAre("device_order", "visible_devices"));
  EXPECT_FALSE(r.layers[0].value.has_value());
  EXPECT_THAT(r.layers[1].effect, HasSubstr("every GPU"));
}

TEST(ResolveTest, VisibleListCarriesUuidAndName) {
  const VisibilityReport r = Resolve({{"CUDA_VISIBLE_DEVICES", "GPU-3eb79704,0"}}, FourA100());
  // Kind change: only the UUID survives.
  ASSERT_EQ(r.visible.size(), 1u);
  EXPECT_EQ(r.visible[0].cuda_index, VisibleOrdinal{0});
  EXPECT_EQ(r.visible[0].uuid, kUuid2);
  EXPECT_EQ(r.visible[0].name, "NVIDIA A100-SXM4-80GB");
  ASSERT_EQ(r.entries.size(), 2u);
  EXPECT_EQ(r.entries[1].outcome, EntryOutcome::kInvalid);
}

TEST(ResolveTest, FastestFirstOnMixedMachineIsMarkedEstimate) {
  EXPECT_TRUE(Resolve({}, Mixed()).order_is_estimate);
  EXPECT_FALSE(Resolve({{"CUDA_DEVICE_ORDER", "PCI_BUS_ID"}}, Mixed()).order_is_estimate);
  EXPECT_FALSE(Resolve({}, FourA100()).order_is_estimate);
  // A UUID list does not depend on the enumeration order.
  EXPECT_FALSE(Resolve({{"CUDA_VISIBLE_DEVICES", kUuid4090}}, Mixed()).order_is_estimate);
}

TEST(ResolveTest, IndexMixupSaysWhatWasMeantAndWhatCudaGives) {
  const VisibilityReport r = Resolve({{"CUDA_VISIBLE_DEVICES", "0"}}, Mixed());
  const Warning* w = Find(r, WarningCode::kIndexWithoutPciBusOrder);
  ASSERT_NE(w, nullptr);
  EXPECT_THAT(w->message, HasSubstr("nvidia-smi's GPU 0 (NVIDIA GeForce RTX 3090)"));
  EXPECT_THAT(w->message, HasSubstr("probably gives GPU 1 (NVIDIA GeForce RTX 4090)"));
  EXPECT_THAT(w->message, HasSubstr("CUDA_DEVICE_ORDER=PCI_BUS_ID"));
}

TEST(ResolveTest, IndexMixupWarnsEvenWhenTheEstimateCoincides) {
  // Index 2 is the second 3090 in both orders, but the heuristic is undocumented.
  const VisibilityReport r = Resolve({{"CUDA_VISIBLE_DEVICES", "2"}}, Mixed());
  const Warning* w = Find(r, WarningCode::kIndexWithoutPciBusOrder);
  ASSERT_NE(w, nullptr);
  EXPECT_THAT(w->message, HasSubstr("undocumented"));
}

TEST(ResolveTest, OutsideAllocationNamesGpusAndSource) {
  const VisibilityReport r =
      Resolve({{"SLURM_STEP_GPUS", "2,3"}, {"CUDA_VISIBLE_DEVICES", "0,1"}}, FourA100());
  const Warning* w = Find(r, WarningCode::kOutsideAllocation);
  ASSERT_NE(w, nullptr);
  EXPECT_THAT(w->message, HasSubstr("GPU(s) 0, 1"));
  EXPECT_THAT(w->message, HasSubstr("SLURM_STEP_GPUS=2,3"));
  EXPECT_THAT(w->message, HasSubstr("ConstrainDevices"));  // the job-local reading
  EXPECT_TRUE(r.visible[0].is_outside_allocation);
  EXPECT_THAT(r.allowed_uuids, ::testing::Optional(IsEmpty()));
}

TEST(ResolveTest, UnhealthyVisibleGpu) {
  auto gpus = FourA100();
  gpus[1].is_healthy = false;
  gpus[1].health_problems = {"GPU is lost"};
  const VisibilityReport r = Resolve({{"CUDA_VISIBLE_DEVICES", "1"}}, gpus);
  const Warning* w = Find(r, WarningCode::kUnhealthyGpu);
  ASSERT_NE(w, nullptr);
  EXPECT_THAT(w->message, HasSubstr("cuda:0 is GPU 1"));
  EXPECT_THAT(w->message, HasSubstr("GPU is lost"));
  EXPECT_FALSE(r.visible[0].is_healthy);
  // A hidden unhealthy GPU is not worth a warning.
  EXPECT_FALSE(Resolve({{"CUDA_VISIBLE_DEVICES", "0"}}, gpus).HasWarning(WarningCode::kUnhealthyGpu));
}

TEST(ResolveTest, LeasedToOther) {
  model::Lease mine;
  mine.id = 1;
  mine.uid = 1000;
  mine.gpu_uuids = {kUuid0};
  model::Lease theirs;
  theirs.id = 7;
  theirs.uid = 1001;
  theirs.user = "alice";
  theirs.command = "python train.py";
  theirs.gpu_uuids = {kUuid1, kUuid3};
  ResolveOptions options{{mine, theirs}, 1000};
  const VisibilityReport r = Resolve({{"CUDA_VISIBLE_DEVICES", "0,1,2"}}, FourA100(), options);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_EQ(r.warnings[0].code, WarningCode::kLeasedToOther);
  EXPECT_THAT(r.warnings[0].message, HasSubstr("cuda:1 is GPU 1"));
  EXPECT_THAT(r.warnings[0].message, HasSubstr("alice (uid 1001)"));
  EXPECT_THAT(r.warnings[0].message, HasSubstr("lease 7"));
  EXPECT_THAT(r.visible[1].leased_to_uids, ElementsAre(1001u));
  EXPECT_THAT(r.visible[0].leased_to_uids, IsEmpty());
}

TEST(ResolveTest, UnknownUidTreatsEveryLeaseAsOthers) {
  model::Lease lease;
  lease.uid = 1000;
  lease.gpu_uuids = {kUuid0};
  const VisibilityReport r = Resolve({}, FourA100(), ResolveOptions{{lease}, std::nullopt});
  EXPECT_TRUE(r.HasWarning(WarningCode::kLeasedToOther));
}

TEST(ResolveTest, MigListWarnsSingleDevice) {
  const VisibilityReport r =
      Resolve({{"CUDA_VISIBLE_DEVICES", "MIG-GPU-3eb79704/1/0,MIG-GPU-c0ffee00/2/0"}}, FourA100());
  EXPECT_THAT(Visible(r), ElementsAre(2));
  EXPECT_EQ(r.visible[0].mig, "MIG-GPU-3eb79704/1/0");
  EXPECT_TRUE(r.HasWarning(WarningCode::kMigSingleDevice));
}

TEST(ResolveTest, MigDeviceUuidHasUnknownParent) {
  const VisibilityReport r =
      Resolve({{"CUDA_VISIBLE_DEVICES", "MIG-4b6f8c2e-1111-5222-9333-444455556666"}}, FourA100());
  ASSERT_EQ(r.visible.size(), 1u);
  EXPECT_FALSE(r.visible[0].index.has_value());
  EXPECT_FALSE(r.visible[0].uuid.has_value());
  EXPECT_EQ(r.visible[0].mig, "MIG-4b6f8c2e-1111-5222-9333-444455556666");
  EXPECT_THAT(r.warnings, IsEmpty());
}

TEST(ResolveTest, MigEnabledPhysicalGpuHidesTheOthers) {
  auto gpus = FourA100();
  gpus[2].mig_mode_current = true;
  const VisibilityReport r = Resolve({{"CUDA_VISIBLE_DEVICES", "0,2,3"}}, gpus);
  EXPECT_THAT(Visible(r), ElementsAre(2));
  EXPECT_EQ(r.visible[0].mig, "first MIG device");
  const Warning* w = Find(r, WarningCode::kMigSingleDevice);
  ASSERT_NE(w, nullptr);
  EXPECT_THAT(w->message, HasSubstr("GPU(s) 0, 3 are not visible"));
}

TEST(ResolveTest, NoGpusAtAll) {
  const VisibilityReport r = Resolve({}, {});
  EXPECT_THAT(r.visible, IsEmpty());
  const Warning* w = Find(r, WarningCode::kNothingVisible);
  ASSERT_NE(w, nullptr);
  EXPECT_THAT(w->message, HasSubstr("no GPUs"));
}

TEST(ExplainWithoutDriverTest, ReportsLayersAndNoDriver) {
  const Environment env{{"SLURM_STEP_GPUS", "0,1"},
                        {"CUDA_DEVICE_ORDER", "PCI_BUS_ID"},
                        {"CUDA_VISIBLE_DEVICES", "0,1,-1"}};
  const VisibilityReport r = ExplainWithoutDriver(env, "libnvidia-ml.so.1: cannot open");
  EXPECT_FALSE(r.has_driver);
  EXPECT_EQ(r.driver_error, "libnvidia-ml.so.1: cannot open");
  EXPECT_THAT(LayerNames(r), ElementsAre("slurm", "device_order", "visible_devices"));
  EXPECT_THAT(r.visible, IsEmpty());
  EXPECT_THAT(Codes(r), ElementsAre("no_driver", "invalid_entry"));
  EXPECT_THAT(r.warnings[0].message, HasSubstr("cannot open"));
}

TEST(ExplainWithoutDriverTest, LexicalProblemsStillFound) {
  struct C {
    const char* value;
    std::vector<std::string> codes;
  };
  for (const C& c : {C{"", {"no_driver", "nothing_visible"}},
                     C{"0,1,0", {"no_driver", "duplicate_entry", "nothing_visible"}},
                     C{"x", {"no_driver", "invalid_entry", "nothing_visible"}},
                     C{"GPU-abc", {"no_driver"}}}) {
    const VisibilityReport r = ExplainWithoutDriver({{"CUDA_VISIBLE_DEVICES", c.value}}, "e");
    EXPECT_THAT(Codes(r), ::testing::ElementsAreArray(c.codes)) << c.value;
  }
  EXPECT_THAT(Codes(ExplainWithoutDriver({{"CUDA_DEVICE_ORDER", "x"}}, "e")),
              ElementsAre("no_driver", "unknown_device_order"));
}

TEST(WarningCodeNameTest, StableSnakeCase) {
  EXPECT_STREQ(WarningCodeName(WarningCode::kIndexWithoutPciBusOrder), "index_without_pci_bus_order");
  EXPECT_STREQ(WarningCodeName(WarningCode::kOutsideAllocation), "outside_allocation");
  EXPECT_STREQ(WarningCodeName(WarningCode::kNoDriver), "no_driver");
  EXPECT_STREQ(WarningCodeName(WarningCode::kLeasedToOther), "leased_to_other");
}

}  // namespace
}  // namespace gpuman::visibility
