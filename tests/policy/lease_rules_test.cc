#include "policy/lease_rules.h"

#include <gtest/gtest.h>

namespace gpuman::policy {
namespace {

model::Lease LeaseOf(int64_t id, uint32_t uid, std::string user, std::vector<std::string> gpus, std::string kind = "run") {
  model::Lease l;
  l.id = id;
  l.uid = uid;
  l.user = std::move(user);
  l.gpu_uuids = std::move(gpus);
  l.kind = std::move(kind);
  l.command = l.kind == "job" ? "job " + std::to_string(id * 10) + " (train)" : "python train.py";
  return l;
}

model::GpuRequest Ask(int count) {
  model::GpuRequest r;
  r.count = count;
  return r;
}

const Caller kAlice{1001, "alice", false};
const Caller kBob{1002, "bob", false};

TEST(LeaseRulesTest, NoRulesPassesTheRequestAndEveryLease) {
  std::vector<model::Lease> live = {LeaseOf(1, 1002, "bob", {"GPU-a"})};
  auto r = ApplyLeaseRules(Ask(2), kAlice, std::nullopt, live, {}, 8);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->request.count, 2);
  EXPECT_EQ(r->leases.size(), 1u);
  EXPECT_FALSE(r->within);
}

TEST(LeaseRulesTest, MoreThanTheMachineIsNever) {
  auto r = ApplyLeaseRules(Ask(9), kAlice, std::nullopt, {}, {}, 8);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(r.error().message, "asked for 9 GPUs; this machine has 8 GPUs");
}

// A MIG request counts MIG devices: 2 GPUs split 7 ways hold 14 units (a100-mig).
TEST(LeaseRulesTest, AMigRequestCountsMigDevicesNotGpus) {
  model::MachineSnapshot snap;
  for (int g = 0; g < 2; ++g) {
    model::DeviceSnapshot d;
    d.index = g;
    d.uuid = "GPU-" + std::to_string(g);
    d.mig_devices.resize(7);
    snap.gpus.push_back(d);
  }
  model::GpuRequest mig = Ask(3);
  mig.mig_profile = "1g.10gb";
  EXPECT_EQ(MachineUnits(snap, mig), 14);
  EXPECT_EQ(MachineUnits(snap, Ask(3)), 2);
  EXPECT_TRUE(ApplyLeaseRules(mig, kAlice, std::nullopt, {}, {}, MachineUnits(snap, mig)));
  mig.count = 15;
  auto never = ApplyLeaseRules(mig, kAlice, std::nullopt, {}, {}, MachineUnits(snap, mig));
  ASSERT_FALSE(never);
  EXPECT_EQ(never.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(never.error().message, "asked for 15 MIG devices; this machine has 14");
}

TEST(LeaseRulesTest, CapAboveIsNeverAndCapReachedIsBusy) {
  MachineRules rules;
  rules.default_max_gpus_per_user = 2;
  rules.max_gpus_per_user[1002] = 4;  // bob's own limit
  auto never = ApplyLeaseRules(Ask(3), kAlice, std::nullopt, {}, rules, 8);
  ASSERT_FALSE(never);
  EXPECT_EQ(never.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(never.error().message, "asked for 3 GPUs; alice may hold at most 2 GPUs (max_gpus_per_user)");
  EXPECT_TRUE(ApplyLeaseRules(Ask(3), kBob, std::nullopt, {}, rules, 8)) << "user_limits beat the default";

  std::vector<model::Lease> live = {LeaseOf(1, 1001, "alice", {"GPU-a"}), LeaseOf(2, 1002, "bob", {"GPU-b", "GPU-c"})};
  auto busy = ApplyLeaseRules(Ask(2), kAlice, std::nullopt, live, rules, 8);
  ASSERT_FALSE(busy);
  EXPECT_EQ(busy.error().code, ErrorCode::kBusy);
  EXPECT_EQ(busy.error().message, "alice holds 1 GPU of at most 2 GPUs (max_gpus_per_user); asked for 2 more");
  EXPECT_TRUE(ApplyLeaseRules(Ask(1), kAlice, std::nullopt, live, rules, 8)) << "other users' GPUs do not count";
}

TEST(LeaseRulesTest, DrainedGpusAreMarkedWithTheirReason) {
  MachineRules rules;
  rules.drained["GPU-d"] = "health: Xid 79";
  auto r = ApplyLeaseRules(Ask(1), kAlice, std::nullopt, {}, rules, 8);
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->request.exclude.empty()) << "a drain is lifted again: busy, not never";
  EXPECT_EQ(r->request.drained.at("GPU-d"), "health: Xid 79");
}

TEST(LeaseRulesTest, InsideOwnLeaseConfinesToItsGpusAndHidesIt) {
  MachineRules rules;
  rules.default_max_gpus_per_user = 2;
  std::vector<model::Lease> live = {LeaseOf(7, 1001, "alice", {"GPU-a", "GPU-b"}), LeaseOf(8, 1002, "bob", {"GPU-c"})};
  auto r = ApplyLeaseRules(Ask(2), kAlice, 7, live, rules, 8);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->within, 7);
  EXPECT_EQ(*r->request.allowed, (std::vector<std::string>{"GPU-a", "GPU-b"}));
  ASSERT_EQ(r->leases.size(), 1u);
  EXPECT_EQ(r->leases[0].id, 8) << "the enclosing lease is the caller's to use";

  auto too_many = ApplyLeaseRules(Ask(3), kAlice, 7, live, rules, 8);
  ASSERT_FALSE(too_many);
  EXPECT_EQ(too_many.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(too_many.error().message, "asked for 3 GPUs inside lease 7, which holds 2 GPUs");

  auto not_mine = ApplyLeaseRules(Ask(1), kAlice, 8, live, rules, 8);
  ASSERT_FALSE(not_mine);
  EXPECT_EQ(not_mine.error().code, ErrorCode::kPermissionDenied);

  auto gone = ApplyLeaseRules(Ask(1), kAlice, 99, live, rules, 8);
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.error().code, ErrorCode::kInvalidArgument);
}

TEST(LeaseRulesTest, InsideALeaseTheOuterAllocationStillNarrows) {
  std::vector<model::Lease> live = {LeaseOf(7, 1001, "alice", {"GPU-a", "GPU-b"})};
  model::GpuRequest req = Ask(1);
  req.allowed = std::vector<std::string>{"GPU-b", "GPU-z"};
  auto r = ApplyLeaseRules(req, kAlice, 7, live, {}, 8);
  ASSERT_TRUE(r);
  EXPECT_EQ(*r->request.allowed, std::vector<std::string>{"GPU-b"});
}

TEST(LeaseRulesTest, SatisfiableChecksMachineGpusListAndCap) {
  MachineRules rules;
  rules.default_max_gpus_per_user = 4;
  EXPECT_TRUE(CheckSatisfiable(4, std::nullopt, kAlice, rules, 8));
  EXPECT_EQ(CheckSatisfiable(9, std::nullopt, kAlice, {}, 8).error().code, ErrorCode::kNotFound);
  EXPECT_EQ(CheckSatisfiable(5, std::nullopt, kAlice, rules, 8).error().message,
            "asked for 5 GPUs; alice may hold at most 4 GPUs (max_gpus_per_user)");
  EXPECT_EQ(CheckSatisfiable(2, std::vector<std::string>{"GPU-a"}, kAlice, {}, 8).error().message,
            "asked for 2 GPUs but --gpus names 1 GPU");
  // A user's own limit is named as such, not as the machine-wide default.
  rules.max_gpus_per_user[kAlice.uid] = 1;
  EXPECT_EQ(CheckSatisfiable(2, std::nullopt, kAlice, rules, 8).error().message,
            "asked for 2 GPUs; alice may hold at most 1 GPU ([daemon.user_limits])");
}

TEST(LeaseRulesTest, AJobsLeaseIsReleasedByNobody) {
  model::Lease job = LeaseOf(3, 1001, "alice", {"GPU-a"}, "job");
  const Caller root{0, "root", true};
  for (const Caller& who : {kAlice, kBob, root}) {
    auto s = CheckRelease(job, who, LeaseJob{30, "train"});
    ASSERT_FALSE(s);
    EXPECT_EQ(s.error().code, ErrorCode::kConflict);
    EXPECT_EQ(s.error().message,
              "lease 3 belongs to job 30 (train), which still runs on its GPUs: cancel the job with `gpuman cancel 30`");
  }
  // Known as a job's by its kind alone (the job table not consulted).
  EXPECT_EQ(CheckRelease(job, kAlice, std::nullopt).error().code, ErrorCode::kConflict);
  EXPECT_EQ(JobIdOfLease(job), model::JobRef{30});
  // A task of an array is named as a task: its array's id would name every task.
  model::Lease task = job;
  task.command = "job 12_3 (sweep)";
  EXPECT_EQ(JobIdOfLease(task), (model::JobRef{12, 3}));
  auto refused = CheckRelease(task, kAlice, std::nullopt);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("cancel the job with `gpuman cancel 12_3`"), std::string::npos)
      << refused.error().message;
  EXPECT_NE(CheckRelease(task, kAlice, LeaseJob{model::JobRef{12, 3}, "sweep"}).error().message.find("job 12_3 (sweep)"),
            std::string::npos);
}

TEST(LeaseRulesTest, AnInteractiveLeaseIsReleasedByItsOwnerOrAnAdmin) {
  model::Lease run = LeaseOf(4, 1001, "alice", {"GPU-a"});
  EXPECT_TRUE(CheckRelease(run, kAlice, std::nullopt));
  EXPECT_TRUE(CheckRelease(run, Caller{0, "root", true}, std::nullopt));
  EXPECT_TRUE(CheckRelease(run, Caller{1003, "ops", true}, std::nullopt));
  auto other = CheckRelease(run, kBob, std::nullopt);
  ASSERT_FALSE(other);
  EXPECT_EQ(other.error().code, ErrorCode::kPermissionDenied);
  EXPECT_EQ(other.error().message, "lease 4 belongs to alice");
  EXPECT_FALSE(JobIdOfLease(run));
}

// Issue 23: `release --force` is root's and the admin group's, never a job's lease.
TEST(LeaseRulesTest, AForcedReleaseIsForAdminsAndNeverOfAJob) {
  model::Lease run = LeaseOf(4, 1001, "alice", {"GPU-a"});
  EXPECT_TRUE(CheckForceRelease(run, Caller{0, "root", true}, std::nullopt));
  EXPECT_TRUE(CheckForceRelease(run, Caller{1003, "ops", true}, std::nullopt));
  for (const Caller& who : {kAlice, kBob}) {
    auto s = CheckForceRelease(run, who, std::nullopt);
    ASSERT_FALSE(s);
    EXPECT_EQ(s.error().code, ErrorCode::kPermissionDenied);
    EXPECT_EQ(s.error().message,
              "release --force is for root and the admin group: end the command that holds lease 4 (Ctrl-C where it "
              "runs) and its lease ends with it");
  }
  model::Lease job = LeaseOf(3, 1001, "alice", {"GPU-a"}, "job");
  EXPECT_EQ(CheckForceRelease(job, Caller{0, "root", true}, LeaseJob{30, "train"}).error().code, ErrorCode::kConflict);
}

// Issue 23: `release` of a `run` whose command still runs is refused for everyone (the
// GPUs would go to the next user under it); a select --lease shell's lease is released
// while the shell lives (that is how it is given back); a stale one by its owner.
TEST(LeaseRulesTest, ARunLeaseWhoseCommandStillRunsIsNotReleased) {
  model::Lease run = LeaseOf(4, 1001, "alice", {"GPU-a"});
  run.kind = "run";
  run.command = "python train.py";
  const std::vector<model::LeaseProcess> live = {{4242, 99}};
  for (const Caller& who : {kAlice, Caller{0, "root", true}}) {
    auto refused = CheckRelease(run, who, std::nullopt, live);
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().code, ErrorCode::kConflict);
    EXPECT_EQ(refused.error().message,
              "lease 4 belongs to `gpuman run` (pid 4242: python train.py), which still runs on its GPUs: end it "
              "(Ctrl-C where it runs, or kill 4242) and its lease ends with it");
  }
  EXPECT_EQ(CheckRelease(run, kBob, std::nullopt, live).error().code, ErrorCode::kPermissionDenied)
      << "another user's: ownership is said first";
  EXPECT_TRUE(CheckRelease(run, kAlice, std::nullopt, {})) << "nothing of it runs";
  model::Lease shell = run;
  shell.kind = "select";
  EXPECT_TRUE(CheckRelease(shell, kAlice, std::nullopt, live));
}

// One rule for "is this lease yours": joining needs the holder; managing also lets root
// and the admin group in.
TEST(LeaseRulesTest, YourLeaseJoinIsTheHoldersManageAlsoAdmins) {
  model::Lease run = LeaseOf(4, 1001, "alice", {"GPU-a"});
  const Caller root{0, "root", false};  // root is an admin whatever the flag says
  const Caller ops{1003, "ops", true};
  struct Row {
    const Caller& caller;
    bool join, manage;
  } rows[] = {{kAlice, true, true}, {kBob, false, false}, {ops, false, true}, {root, false, true}};
  for (const auto& r : rows) {
    SCOPED_TRACE(r.caller.user);
    EXPECT_EQ(IsYourLease(run, r.caller, LeaseAct::kJoin), r.join);
    EXPECT_EQ(IsYourLease(run, r.caller, LeaseAct::kManage), r.manage);
    EXPECT_EQ(static_cast<bool>(CheckYourLease(run, r.caller, LeaseAct::kManage)), r.manage);
  }
  auto bob = CheckYourLease(run, kBob, LeaseAct::kManage);
  ASSERT_FALSE(bob);
  EXPECT_EQ(bob.error().code, ErrorCode::kPermissionDenied);
  EXPECT_EQ(bob.error().message, "lease 4 belongs to alice");
  run.user.clear();
  EXPECT_EQ(CheckYourLease(run, kBob, LeaseAct::kJoin).error().message, "lease 4 belongs to another user");
}

TEST(LeaseRulesTest, SlicesFollowTheMachinesShareRules) {
  ShareRules share;
  EXPECT_TRUE(CheckSlice(int64_t{1} << 30, share));
  auto small = CheckSlice(int64_t{512} << 20, share);
  ASSERT_FALSE(small);
  EXPECT_EQ(small.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(small.error().message, "--gpu-memory 512 MiB is below this machine's smallest slice, 1 GiB ([share] min_slice)");
  share.allow = false;
  auto off = CheckSlice(int64_t{8} << 30, share);
  ASSERT_FALSE(off);
  EXPECT_EQ(off.error().code, ErrorCode::kNotFound);
  // The same rule reaches every path: ApplyLeaseRules refuses the slice too.
  MachineRules rules;
  rules.share.allow = false;
  model::GpuRequest slice = Ask(1);
  slice.gpu_memory_bytes = int64_t{8} << 30;
  auto ruled = ApplyLeaseRules(slice, kAlice, std::nullopt, {}, rules, 8);
  ASSERT_FALSE(ruled);
  EXPECT_EQ(ruled.error().code, ErrorCode::kNotFound);
  // Which GPUs may be sliced: by index or UUID; all of them none when slices are off.
  model::MachineSnapshot snap;
  for (int i = 0; i < 3; ++i) {
    model::DeviceSnapshot g;
    g.index = i;
    g.uuid = "GPU-" + std::to_string(i);
    snap.gpus.push_back(g);
  }
  ShareRules some;
  some.gpus = {"0", "GPU-2"};
  auto left_out = NotSliceable(snap, some);
  ASSERT_EQ(left_out.size(), 1u);
  EXPECT_EQ(left_out.begin()->first, "GPU-1");
  EXPECT_TRUE(NotSliceable(snap, ShareRules{}).empty());
  EXPECT_EQ(NotSliceable(snap, share).size(), 3u);
}

TEST(LeaseRulesTest, TwoSlicesOfOneGpuAreOneGpuHeld) {
  std::vector<model::Lease> live = {LeaseOf(1, kAlice.uid, "alice", {"GPU-a"}), LeaseOf(2, kAlice.uid, "alice", {"GPU-a"}),
                                    LeaseOf(3, kAlice.uid, "alice", {"GPU-b", "GPU-c"}), LeaseOf(4, kBob.uid, "bob", {"GPU-a"})};
  EXPECT_EQ(GpusHeldBy(kAlice.uid, live), 3);
  EXPECT_EQ(GpusHeldBy(kAlice.uid, live, 3), 1);
  EXPECT_EQ(GpusHeldBy(kBob.uid, live), 1);
}

}  // namespace
}  // namespace gpuman::policy
