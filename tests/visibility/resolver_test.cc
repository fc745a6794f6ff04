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
        Case{"slurm_outside", {{"SLURM_STEP_GPUS", "2,3"}, {"CUDA_VISIBLE_DEVICES", "1"}}, false, {1}, {"outside_allocation"}},
        // CUDA_VISIBLE_DEVICES=0..n-1 beside a Slurm list that is not: Slurm renumbered it
        // (ConstrainDevices), so it names the job's GPUs (slurm_gpus.cc).
        Case{"slurm_job_local", {{"SLURM_STEP_GPUS", "2,3"}, {"CUDA_VISIBLE_DEVICES", "0,1"}}, false, {2, 3}, {}},
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
      Resolve({{"SLURM_STEP_GPUS", "2,3"}, {"CUDA_VISIBLE_DEVICES", "1,0"}}, FourA100());
  const Warning* w = Find(r, WarningCode::kOutsideAllocation);
  ASSERT_NE(w, nullptr);
  EXPECT_THAT(w->message, HasSubstr("GPU(s) 1, 0"));
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

ResolveOptions Options(std::vector<model::Lease> leases, std::optional<uint32_t> uid) {
  ResolveOptions options;
  options.leases = std::move(leases);
  options.current_uid = uid;
  return options;
}

model::GpuProcess Process(uint32_t pid, std::optional<uint32_t> uid, std::optional<std::string> user,
                          std::optional<std::string> command = std::nullopt) {
  model::GpuProcess p;
  p.pid = pid;
  p.uid = uid;
  p.user = std::move(user);
  p.command = std::move(command);
  p.is_visible = uid.has_value();
  return p;
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
  const VisibilityReport r = Resolve({{"CUDA_VISIBLE_DEVICES", "0,1,2"}}, FourA100(), Options({mine, theirs}, 1000));
  ASSERT_EQ(r.warnings.size(), 1u) << "GPU 3 is leased too, but not visible; GPU 0 is my own lease";
  EXPECT_EQ(r.warnings[0].code, WarningCode::kLeasedToOther);
  EXPECT_EQ(r.warnings[0].message,
            "GPU 1 (GPU-8932f9aa\u2026) is leased to alice (uid 1001, lease 7 for python train.py): your process "
            "would share it as cuda:1");
  EXPECT_THAT(r.visible[1].leased_to_uids, ElementsAre(1001u));
  EXPECT_THAT(r.visible[0].leased_to_uids, IsEmpty());
  // The only note: the shell's CUDA_VISIBLE_DEVICES confines gpuman run/select too.
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_THAT(r.notes[0], HasSubstr("CUDA_VISIBLE_DEVICES=\"0,1,2\" in this shell"));
}

TEST(ResolveTest, AStaleCudaVisibleDevicesIsANoteThatSaysHowToClearIt) {
  // A value left in the shell (from an earlier job, or `eval $(gpuman select --format env)`):
  // CUDA sees GPU 3 only, and `gpuman run`/`select` from here choose only GPU 3 (docs/cli.md).
  const VisibilityReport r = Resolve({{"CUDA_VISIBLE_DEVICES", "3"}}, FourA100(), Options({}, 1000));
  EXPECT_THAT(Codes(r), IsEmpty());
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_EQ(r.notes[0],
            "gpuman run and select from here choose only among the GPUs this environment allows: "
            "CUDA_VISIBLE_DEVICES=\"3\" in this shell (not set by a gpuman lease or Slurm) confines gpuman to GPU 3: "
            "if it is left over from an earlier job or shell, clear it with `unset CUDA_VISIBLE_DEVICES`");
  // Unset, or naming every GPU: nothing to say.
  EXPECT_THAT(Resolve({}, FourA100(), Options({}, 1000)).notes, IsEmpty());
  EXPECT_THAT(Resolve({{"CUDA_VISIBLE_DEVICES", "3,2,1,0"}}, FourA100(), Options({}, 1000)).notes, IsEmpty());
}

TEST(ResolveTest, OwnLeaseIsNotWarnedAbout) {
  // The shell's own `select --lease` (GPUMAN_LEASE_ID) on the GPUs it exported.
  model::Lease mine;
  mine.id = 12;
  mine.uid = 1000;
  mine.user = "me";
  mine.gpu_uuids = {kUuid0, kUuid1};
  const VisibilityReport r = Resolve({{"CUDA_VISIBLE_DEVICES", std::string(kUuid0) + "," + kUuid1},
                                      {"GPUMAN_LEASE_ID", "12"}},
                                     FourA100(), Options({mine}, 1000));
  EXPECT_THAT(Codes(r), IsEmpty());
  EXPECT_THAT(r.visible[0].leased_to_uids, IsEmpty());
}

TEST(ResolveTest, LeaseWithoutAUserNameIsNamedByUid) {
  model::Lease theirs;
  theirs.id = 3;
  theirs.uid = 1002;
  theirs.gpu_uuids = {kUuid2};
  const VisibilityReport r = Resolve({{"CUDA_VISIBLE_DEVICES", "2"}}, FourA100(), Options({theirs}, 1000));
  const Warning* w = Find(r, WarningCode::kLeasedToOther);
  ASSERT_NE(w, nullptr);
  EXPECT_THAT(w->message, HasSubstr("is leased to uid 1002 (lease 3): your process would share it as cuda:0"));
}

TEST(ResolveTest, ProcessOfAnotherUserOnAVisibleGpu) {
  auto gpus = FourA100();
  gpus[1].processes = {Process(4242, 1001, "alice", "python train.py"), Process(4243, 1001, "alice", "python eval.py"),
                       Process(4300, 1000, "me", "python mine.py")};
  gpus[3].processes = {Process(5000, 1002, "bob")};  // not visible below
  const VisibilityReport r = Resolve({{"CUDA_VISIBLE_DEVICES", "0,1,2"}}, gpus, Options({}, 1000));
  ASSERT_THAT(Codes(r), ElementsAre("used_by_other_user"));
  EXPECT_EQ(r.warnings[0].message,
            "GPU 1 (GPU-8932f9aa\u2026) runs 2 processes of alice (uid 1001) (pid 4242 python train.py, pid 4243 "
            "python eval.py): your process would share it as cuda:1");
  EXPECT_THAT(r.visible[1].used_by_uids, ElementsAre(1001u));
  EXPECT_THAT(r.visible[0].used_by_uids, IsEmpty());
}

TEST(ResolveTest, OwnAndUnattributedProcessesAreNotWarnedAbout) {
  auto gpus = FourA100();
  gpus[0].processes = {Process(4300, 1000, "me", "python mine.py"), Process(77, std::nullopt, std::nullopt)};
  const VisibilityReport r = Resolve({{"CUDA_VISIBLE_DEVICES", "0"}}, gpus, Options({}, 1000));
  EXPECT_THAT(Codes(r), IsEmpty());
  EXPECT_THAT(r.visible[0].used_by_uids, IsEmpty());
}

TEST(ResolveTest, ManyProcessesOfOneUserAreOneWarning) {
  auto gpus = FourA100();
  for (uint32_t pid = 100; pid < 105; ++pid) gpus[2].processes.push_back(Process(pid, 1001, "alice"));
  gpus[2].processes.push_back(Process(200, 1002, "bob"));
  const VisibilityReport r = Resolve({{"CUDA_VISIBLE_DEVICES", "2"}}, gpus, Options({}, 1000));
  ASSERT_THAT(Codes(r), ElementsAre("used_by_other_user", "used_by_other_user"));
  EXPECT_THAT(r.warnings[0].message, HasSubstr("runs 5 processes of alice (uid 1001) (pid 100, pid 101, pid 102 and 2 more)"));
  EXPECT_THAT(r.warnings[1].message, HasSubstr("runs 1 process of bob (uid 1002) (pid 200)"));
  EXPECT_THAT(r.visible[0].used_by_uids, ElementsAre(1001u, 1002u));
}

TEST(ResolveTest, LeaseAndProcessOfAnotherUserBothWarn) {
  auto gpus = FourA100();
  gpus[0].processes = {Process(4242, 1001, "alice", "python train.py")};
  model::Lease theirs;
  theirs.id = 9;
  theirs.uid = 1001;
  theirs.user = "alice";
  theirs.gpu_uuids = {kUuid0};
  const VisibilityReport r = Resolve({}, gpus, Options({theirs}, 1000));
  EXPECT_THAT(Codes(r), ElementsAre("leased_to_other", "used_by_other_user"));
}

// Issue 23: a process on a leased GPU that is not the lease holder's is an intruder,
// whoever it belongs to: the caller's own included.
TEST(ResolveTest, AProcessOnAnotherUsersLeaseIsAnIntruder) {
  auto gpus = FourA100();
  gpus[0].processes = {Process(4242, 1001, "alice", "python train.py"), Process(5000, 1002, "bob", "python x.py")};
  gpus[1].processes = {Process(4300, 1000, "me", "python mine.py")};
  model::Lease alices;
  alices.id = 9;
  alices.uid = 1001;
  alices.user = "alice";
  alices.gpu_uuids = {kUuid0, kUuid1};
  alices.processes = {{4242, 0}};
  const VisibilityReport r = Resolve({{"CUDA_VISIBLE_DEVICES", "0,1"}}, gpus, Options({alices}, 1000));
  EXPECT_THAT(Codes(r), ElementsAre("leased_to_other", "intruder", "used_by_other_user", "used_by_other_user",
                                    "leased_to_other", "intruder"));
  const Warning* w = Find(r, WarningCode::kIntruder);
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->message,
            "GPU 0 (GPU-" + std::string(kUuid0).substr(4, 8) +
                "\u2026): pid 5000 python x.py of bob (uid 1002) is an INTRUDER on lease 9 (alice): it is not part of "
                "that lease");
  EXPECT_THAT(r.visible[0].intruder_pids, ElementsAre(5000u));
  EXPECT_THAT(r.visible[1].intruder_pids, ElementsAre(4300u)) << "the caller's own process intrudes too";
  EXPECT_THAT(r.warnings.back().message, HasSubstr("pid 4300 python mine.py of yours is an INTRUDER on lease 9"));
}

TEST(ResolveTest, UnreadableLeasesAreOneNoteNotAFailure) {
  ResolveOptions options = Options({}, 1000);
  options.leases_error = "open /x/leases.db: permission denied";
  const VisibilityReport r = Resolve({}, FourA100(), options);
  EXPECT_THAT(Codes(r), IsEmpty());
  EXPECT_EQ(r.visible.size(), 4u);
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_EQ(r.notes[0],
            "leases not checked (open /x/leases.db: permission denied): a GPU leased to another user is not warned about");
}

TEST(ResolveTest, NoProcessWarningForAMigDevice) {
  auto gpus = FourA100();
  gpus[0].mig_mode_current = true;
  gpus[0].processes = {Process(4242, 1001, "alice")};
  const VisibilityReport r = Resolve({{"CUDA_VISIBLE_DEVICES", "0"}}, gpus, Options({}, 1000));
  ASSERT_EQ(r.visible.size(), 1u);
  ASSERT_TRUE(r.visible[0].mig.has_value());
  EXPECT_FALSE(r.HasWarning(WarningCode::kUsedByOtherUser)) << "a MIG instance does not share with the others";
}

TEST(ResolveTest, UnknownUidTreatsEveryLeaseAsOthers) {
  model::Lease lease;
  lease.uid = 1000;
  lease.gpu_uuids = {kUuid0};
  const VisibilityReport r = Resolve({}, FourA100(), Options({lease}, std::nullopt));
  EXPECT_TRUE(r.HasWarning(WarningCode::kLeasedToOther));
  auto gpus = FourA100();
  gpus[0].processes = {Process(1, 1000, "someone")};
  EXPECT_TRUE(Resolve({}, gpus, Options({}, std::nullopt)).HasWarning(WarningCode::kUsedByOtherUser));
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
    EXPECT_THAT(r.notes, IsEmpty()) << "no GPUs, so no leases to check";
  }
  EXPECT_THAT(Codes(ExplainWithoutDriver({{"CUDA_DEVICE_ORDER", "x"}}, "e")),
              ElementsAre("no_driver", "unknown_device_order"));
}

TEST(WarningCodeNameTest, StableSnakeCase) {
  EXPECT_STREQ(WarningCodeName(WarningCode::kIndexWithoutPciBusOrder), "index_without_pci_bus_order");
  EXPECT_STREQ(WarningCodeName(WarningCode::kOutsideAllocation), "outside_allocation");
  EXPECT_STREQ(WarningCodeName(WarningCode::kNoDriver), "no_driver");
  EXPECT_STREQ(WarningCodeName(WarningCode::kLeasedToOther), "leased_to_other");
  EXPECT_STREQ(WarningCodeName(WarningCode::kUsedByOtherUser), "used_by_other_user");
}

}  // namespace
}  // namespace gpuman::visibility
