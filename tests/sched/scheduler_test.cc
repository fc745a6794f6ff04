// Schedule(): one pure pass, driven with an injected `now`. Each test reads as
// Given (machine, leases, queue) / When (a pass) / Then (what started, why others wait).
#include "sched/scheduler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "policy/selection.h"
#include "support/snapshot_builder.h"

namespace gpuman::sched {
namespace {

using model::Job;
using model::JobState;
using model::Lease;
using model::MachineSnapshot;
using model::PcieLevel;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;

constexpr int64_t kNow = 1'800'000'000'000;  // an arbitrary instant, in ms
constexpr int64_t kMinute = 60'000;
constexpr int64_t kHour = 60 * kMinute;

using ::gpuman::testing::SnapshotBuilder;

std::string Uuid(int index) { return ::gpuman::testing::ShortUuid(index); }

// Idle A100s, as many as are added, on NUMA node 0 unless edited.
SnapshotBuilder A100s() { return SnapshotBuilder().Model("NVIDIA A100-SXM4-80GB", "8.0").MemoryGiB(80).Numa(0); }

// n GPUs on one NUMA node, no topology matrix.
MachineSnapshot Plain(int n) { return A100s().Add(n).Build(); }

// 4 x A100: NVLink pairs 0-1 and 2-3 (NV12), PXB within a pair, SYS across; NUMA 0/1.
MachineSnapshot FourA100() {
  return A100s()
      .Add(4)
      .ForEach([](model::DeviceSnapshot& g) { g.numa_node = g.index / 2; })
      .Topology([](int a, int b) { return a / 2 == b / 2 ? 12 : 0; },
                [](int a, int b) { return a / 2 == b / 2 ? PcieLevel::kMultipleSwitch : PcieLevel::kSystem; })
      .Build();
}

Job Queued(int64_t id, uint32_t uid, int count, int64_t submitted = kNow - kHour) {
  Job job;
  job.id = id;
  job.uid = uid;
  job.user = uid == 1000 ? "alice" : uid == 1001 ? "bob" : "carol";
  job.request.count = count;
  job.submitted_unix_ms = submitted;
  job.state = JobState::kQueued;
  return job;
}

// A job that has run since `started` on `gpus`, with a lease of the same id.
Job Running(int64_t id, uint32_t uid, std::vector<int> gpus, int64_t started,
            int64_t time_limit_ms) {
  Job job = Queued(id, uid, static_cast<int>(gpus.size()), started - kMinute);
  job.state = JobState::kRunning;
  job.started_unix_ms = started;
  job.time_limit_ms = time_limit_ms;
  job.lease_id = 100 + id;
  for (int g : gpus) job.gpu_uuids.push_back(Uuid(g));
  return job;
}

Lease LeaseFor(const Job& job) {
  Lease lease;
  lease.id = *job.lease_id;
  lease.uid = job.uid;
  lease.user = job.user;
  lease.kind = "job";
  lease.gpu_uuids = job.gpu_uuids;
  return lease;
}

Lease Interactive(int64_t id, uint32_t uid, std::vector<int> gpus) {
  Lease lease;
  lease.id = id;
  lease.uid = uid;
  lease.user = "dave";
  lease.kind = "run";
  for (int g : gpus) lease.gpu_uuids.push_back(Uuid(g));
  return lease;
}

SchedulerInput Given(MachineSnapshot snap) {
  SchedulerInput in;
  in.now_unix_ms = kNow;
  in.snapshot = std::move(snap);
  return in;
}

void AddRunning(SchedulerInput& in, const Job& job) {
  in.jobs.push_back(job);
  in.leases.push_back(LeaseFor(job));
}

std::vector<int64_t> Started(const SchedulerOutput& out) {
  std::vector<int64_t> ids;
  for (const auto& s : out.start) ids.push_back(s.job_id);
  return ids;
}

const StartDecision* StartOf(const SchedulerOutput& out, int64_t id) {
  for (const auto& s : out.start) {
    if (s.job_id == id) return &s;
  }
  return nullptr;
}

const WaitReason* WaitOf(const SchedulerOutput& out, int64_t id) {
  for (const auto& w : out.waiting) {
    if (w.job_id == id) return &w;
  }
  return nullptr;
}

std::string ReasonOf(const SchedulerOutput& out, int64_t id) {
  const WaitReason* w = WaitOf(out, id);
  return w ? w->reason : "(not waiting)";
}

// --- order -------------------------------------------------------------------------

TEST(SchedulerTest, HigherPriorityStartsFirst) {
  // Given one free GPU, an old job and a newer one with a higher priority
  SchedulerInput in = Given(Plain(1));
  in.jobs.push_back(Queued(1, 1000, 1, kNow - 2 * kHour));
  Job urgent = Queued(2, 1000, 1, kNow - kHour);
  urgent.priority = 5;
  in.jobs.push_back(urgent);
  // When
  SchedulerOutput out = Schedule(in);
  // Then the urgent job gets the GPU and the old one waits first in line
  EXPECT_THAT(Started(out), ElementsAre(2));
  EXPECT_THAT(ReasonOf(out, 1), StartsWith("waiting for 1 GPU; 0 free"));
  EXPECT_EQ(WaitOf(out, 1)->position, 1);
}

TEST(SchedulerTest, FairShareFavoursTheLighterUser) {
  // Given alice used a lot recently and submitted first, bob used nothing
  SchedulerInput in = Given(Plain(1));
  in.jobs.push_back(Queued(1, 1000, 1, kNow - 2 * kHour));
  in.jobs.push_back(Queued(2, 1001, 1, kNow - kHour));
  in.usage = {{1000, 36000.0}, {1001, 0.0}};
  // When
  SchedulerOutput out = Schedule(in);
  // Then bob goes first
  EXPECT_THAT(Started(out), ElementsAre(2));
}

TEST(SchedulerTest, FairShareCountsGpusHeldNowAndAlternatesEqualUsers) {
  // Given two users without history; alice already runs a job on GPU 0
  SchedulerInput in = Given(Plain(4));
  AddRunning(in, Running(1, 1000, {0}, kNow - kHour, 4 * kHour));
  for (int64_t id = 10; id < 13; ++id) in.jobs.push_back(Queued(id, 1000, 1, kNow - 3 * kHour + id));
  for (int64_t id = 20; id < 23; ++id) in.jobs.push_back(Queued(id, 1001, 1, kNow - kHour + id));
  // When three GPUs are free
  SchedulerOutput out = Schedule(in);
  // Then bob (holding none) goes first, then they alternate: 2 for bob, 1 more for alice
  EXPECT_THAT(Started(out), ElementsAre(20, 10, 21));
}

TEST(SchedulerTest, SubmitTimeThenIdBreakTies) {
  // Given one user, equal priority: job 3 submitted first; jobs 1 and 2 at the same time
  SchedulerInput in = Given(Plain(2));
  in.jobs.push_back(Queued(2, 1000, 1, kNow - kHour));
  in.jobs.push_back(Queued(1, 1000, 1, kNow - kHour));
  in.jobs.push_back(Queued(3, 1000, 1, kNow - 2 * kHour));
  // When
  SchedulerOutput out = Schedule(in);
  // Then
  EXPECT_THAT(Started(out), ElementsAre(3, 1));
  EXPECT_EQ(WaitOf(out, 2)->position, 1);
}

// --- hold and dependencies -----------------------------------------------------------

TEST(SchedulerTest, HeldJobsWait) {
  SchedulerInput in = Given(Plain(2));
  Job held = Queued(1, 1000, 1);
  held.state = JobState::kHeld;
  in.jobs.push_back(held);
  in.jobs.push_back(Queued(2, 1000, 1));
  SchedulerOutput out = Schedule(in);
  EXPECT_THAT(Started(out), ElementsAre(2));
  EXPECT_EQ(ReasonOf(out, 1), "held");
}

TEST(SchedulerTest, AfterDependencies) {
  // Given job 12 runs, 13 succeeded, 14 failed, 15 is long forgotten
  SchedulerInput in = Given(Plain(4));
  AddRunning(in, Running(12, 1000, {0}, kNow - kHour, 4 * kHour));
  Job done = Queued(13, 1000, 1);
  done.state = JobState::kSucceeded;
  in.jobs.push_back(done);
  Job failed = Queued(14, 1000, 1);
  failed.state = JobState::kFailed;
  in.jobs.push_back(failed);
  Job waits = Queued(1, 1000, 1);
  waits.after = {13, 12};
  Job ready = Queued(2, 1000, 1);
  ready.after = {13, 15};
  Job doomed = Queued(3, 1000, 1);
  doomed.after = {14};
  in.jobs.insert(in.jobs.end(), {waits, ready, doomed});
  // When
  SchedulerOutput out = Schedule(in);
  // Then
  EXPECT_THAT(Started(out), ElementsAre(2));
  EXPECT_EQ(ReasonOf(out, 1), "after job 12");
  EXPECT_EQ(ReasonOf(out, 3), "dependency 14 failed");
  EXPECT_THAT(JobsWithFailedDependencies(in.jobs), ElementsAre(3));
}

TEST(SchedulerTest, AnArraysLimitCountsItsRunningTasksAndTheOnesThisPassStarts) {
  // Given 8 free GPUs, an array of 5 one-GPU tasks with %2 of which one already runs
  SchedulerInput in = Given(Plain(8));
  auto task = [](int64_t id, int64_t index) {
    Job job = Queued(id, 1000, 1);
    job.array_id = 10;
    job.array_task = index;
    job.array_limit = 2;
    return job;
  };
  Job running = Running(10, 1000, {0}, kNow - kMinute, kHour);
  running.array_id = 10;
  running.array_task = 0;
  running.array_limit = 2;
  AddRunning(in, running);
  for (int64_t i = 1; i < 5; ++i) in.jobs.push_back(task(10 + i, i));
  in.jobs.push_back(Queued(20, 1000, 1));  // not in the array: not limited
  // When
  SchedulerOutput out = Schedule(in);
  // Then one more task starts, and the others wait for the limit, not for GPUs
  EXPECT_THAT(Started(out), ElementsAre(11, 20));
  EXPECT_EQ(ReasonOf(out, 12), "array 10: 2 tasks run (at most 2 at once)");
  EXPECT_EQ(ReasonOf(out, 14), "array 10: 2 tasks run (at most 2 at once)");
}

TEST(SchedulerTest, AfterAnArrayIsAfterEveryTask) {
  // Given array 10 whose first task succeeded and whose second still runs
  SchedulerInput in = Given(Plain(4));
  Job first = Queued(10, 1000, 1);
  first.state = JobState::kSucceeded;
  first.array_id = 10;
  first.array_task = 0;
  Job second = Running(11, 1000, {0}, kNow - kMinute, kHour);
  second.array_id = 10;
  second.array_task = 1;
  in.jobs.push_back(first);
  AddRunning(in, second);
  Job after = Queued(20, 1000, 1);
  after.after = {10};
  in.jobs.push_back(after);
  EXPECT_EQ(ReasonOf(Schedule(in), 20), "after job 10") << "the first task alone does not free it";
  // When the second task fails, the dependency has failed
  in.jobs[1].state = JobState::kFailed;
  in.leases.clear();
  EXPECT_EQ(ReasonOf(Schedule(in), 20), "dependency 10 failed");
  EXPECT_THAT(JobsWithFailedDependencies(in.jobs), ElementsAre(20));
  // And when it succeeded, the job starts
  in.jobs[1].state = JobState::kSucceeded;
  EXPECT_THAT(Started(Schedule(in)), ElementsAre(20));
  EXPECT_THAT(JobsWithFailedDependencies(in.jobs), IsEmpty());
}

// --- caps, drained and unhealthy GPUs -----------------------------------------------

TEST(SchedulerTest, PerUserCapCountsRunningAndNewlyStartedJobs) {
  // Given alice may hold 3 GPUs and already runs a 1-GPU job
  SchedulerInput in = Given(Plain(8));
  in.config.max_gpus_per_user[1000] = 3;
  AddRunning(in, Running(1, 1000, {0}, kNow - kHour, 4 * kHour));
  in.jobs.push_back(Queued(2, 1000, 1, kNow - 5 * kHour));
  in.jobs.push_back(Queued(3, 1000, 1, kNow - 4 * kHour));
  in.jobs.push_back(Queued(4, 1000, 1, kNow - 3 * kHour));
  in.jobs.push_back(Queued(5, 1000, 4, kNow - 2 * kHour));
  in.jobs.push_back(Queued(6, 1001, 2, kNow - kHour));
  // When
  SchedulerOutput out = Schedule(in);
  // Then alice gets two more, bob is not capped
  EXPECT_THAT(Started(out), ElementsAre(6, 2, 3));
  EXPECT_EQ(ReasonOf(out, 4), "user cap: alice holds 3 of 3 GPUs");
  EXPECT_EQ(ReasonOf(out, 5), "user cap: job needs 4 GPUs, alice may hold at most 3");
  EXPECT_FALSE(out.reserved_job);  // capped jobs reserve nothing
}

TEST(SchedulerTest, DefaultCapAndInteractiveLeasesCount) {
  SchedulerInput in = Given(Plain(4));
  in.config.default_max_gpus_per_user = 2;
  in.leases.push_back(Interactive(7, 1000, {0, 1}));
  in.jobs.push_back(Queued(1, 1000, 1));
  SchedulerOutput out = Schedule(in);
  EXPECT_THAT(Started(out), IsEmpty());
  EXPECT_EQ(ReasonOf(out, 1), "user cap: alice holds 2 of 2 GPUs");
}

TEST(SchedulerTest, DrainedGpuIsNeverUsed) {
  // Given GPU 0 drained and four 1-GPU jobs
  SchedulerInput in = Given(Plain(4));
  in.drained = {Uuid(0)};
  for (int64_t id = 1; id <= 4; ++id) in.jobs.push_back(Queued(id, 1000, 1, kNow - kHour + id));
  Job whole = Queued(5, 1001, 4);
  in.jobs.push_back(whole);
  Job pinned = Queued(6, 1001, 1);
  pinned.request.gpus = std::vector<std::string>{Uuid(0)};
  in.jobs.push_back(pinned);
  // When
  SchedulerOutput out = Schedule(in);
  // Then three start, none on GPU 0
  ASSERT_EQ(out.start.size(), 3u);
  for (const auto& s : out.start) EXPECT_THAT(s.gpu_uuids, ::testing::Not(::testing::Contains(Uuid(0))));
  EXPECT_EQ(ReasonOf(out, 5), "needs 4 GPUs; 1 of 4 is drained (GPU 0)");
  EXPECT_EQ(ReasonOf(out, 6), "waiting: 1 of its --gpus is drained (GPU 0)");
}

TEST(SchedulerTest, WaitReasonNamesTheDrainsThatKeepAJobWaiting) {
  // Given 8 GPUs, 3 drained (named by index, as users name GPUs)
  SchedulerInput in = Given(Plain(8));
  for (auto& g : in.snapshot.gpus) g.uuid = "GPU-" + std::to_string(g.index) + "abcdef01-2345-6789";
  const auto& gpus = in.snapshot.gpus;
  in.drained = {*gpus[1].uuid, *gpus[4].uuid, *gpus[6].uuid};
  Lease lease = Interactive(7, 1001, {});
  lease.gpu_uuids = {*gpus[0].uuid, *gpus[2].uuid, *gpus[3].uuid};  // 2 free: 5 and 7
  in.leases.push_back(lease);
  in.jobs.push_back(Queued(1, 1000, 8, kNow - 3 * kHour));  // can never fit while drained
  Job three = Queued(2, 1000, 3, kNow - 2 * kHour);     // waits for the lease and for drains
  in.jobs.push_back(three);
  Job pinned = Queued(3, 1000, 2, kNow - kHour);  // --gpus 1,4: both drained
  pinned.request.gpus = std::vector<std::string>{*gpus[1].uuid, *gpus[4].uuid};
  in.jobs.push_back(pinned);
  // When
  SchedulerOutput out = Schedule(in);
  // Then nothing starts, and each reason says that drains are (part of) why
  EXPECT_THAT(Started(out), IsEmpty());
  EXPECT_EQ(ReasonOf(out, 1), "needs 8 GPUs; 3 of 8 are drained (GPU 1,4,6)");
  EXPECT_EQ(ReasonOf(out, 2).rfind("waiting for 3 GPUs; 2 free, 3 drained (GPU 1,4,6)", 0),
            0u)
      << ReasonOf(out, 2);
  EXPECT_EQ(ReasonOf(out, 3), "waiting: 2 of its --gpus are drained (GPU 1,4)");
}

TEST(SchedulerTest, WaitReasonWithoutDrainsIsUnchanged) {
  SchedulerInput in = Given(Plain(2));
  in.leases.push_back(Interactive(7, 1001, {0}));
  in.jobs.push_back(Queued(1, 1000, 2));
  SchedulerOutput out = Schedule(in);
  EXPECT_EQ(ReasonOf(out, 1).find("drained"), std::string::npos) << ReasonOf(out, 1);
}

TEST(SchedulerTest, UnhealthyGpuIsNeverUsed) {
  SchedulerInput in = Given(Plain(2));
  in.snapshot.gpus[0].is_healthy = false;
  in.snapshot.gpus[0].health_problems = {"GPU is lost"};
  in.jobs.push_back(Queued(1, 1000, 1, kNow - 2 * kHour));
  in.jobs.push_back(Queued(2, 1000, 1, kNow - kHour));
  SchedulerOutput out = Schedule(in);
  ASSERT_EQ(out.start.size(), 1u);
  EXPECT_THAT(out.start[0].gpu_uuids, ElementsAre(Uuid(1)));
  EXPECT_THAT(ReasonOf(out, 2), StartsWith("waiting for 1 GPU; 0 free"));
}

TEST(SchedulerTest, ForeignProcessesMakeAGpuBusyUnlessSharingIsAllowed) {
  SchedulerInput in = Given(Plain(1));
  model::GpuProcess stranger;
  stranger.pid = 4242;
  in.snapshot.gpus[0].processes.push_back(stranger);
  in.jobs.push_back(Queued(1, 1000, 1, kNow - 2 * kHour));
  Job sharer = Queued(2, 1000, 1, kNow - kHour);
  sharer.request.allow_shared = true;
  in.jobs.push_back(sharer);
  SchedulerOutput out = Schedule(in);
  EXPECT_THAT(Started(out), ElementsAre(2));
  EXPECT_THAT(ReasonOf(out, 1), HasSubstr("no estimate"));
}

// --- reservations and backfill ------------------------------------------------------

// Three 1-GPU jobs run on GPUs 0-2 and end in 1h, 2h and 3h; GPU 3 is free; job 1
// needs all four GPUs and is first in line.
SchedulerInput BusyMachineWithBigHead() {
  SchedulerInput in = Given(Plain(4));
  AddRunning(in, Running(90, 1001, {0}, kNow - kHour, 2 * kHour));
  AddRunning(in, Running(91, 1001, {1}, kNow - kHour, 3 * kHour));
  AddRunning(in, Running(92, 1001, {2}, kNow - kHour, 4 * kHour));
  in.jobs.push_back(Queued(1, 1000, 4, kNow - 3 * kHour));
  return in;
}

TEST(SchedulerTest, HeadReservesAndLongJobsBehindItWait) {
  // Given the 4-GPU head and a 1-GPU job with the default (24h) limit behind it
  SchedulerInput in = BusyMachineWithBigHead();
  in.jobs.push_back(Queued(2, 1000, 1, kNow - kHour));
  // When
  SchedulerOutput out = Schedule(in);
  // Then nothing starts: GPU 3 is kept for job 1, which starts when job 92 ends
  EXPECT_THAT(Started(out), IsEmpty());
  ASSERT_TRUE(out.reserved_job);
  EXPECT_EQ(*out.reserved_job, 1);
  EXPECT_THAT(out.reserved_gpus, ElementsAre(Uuid(0), Uuid(1), Uuid(2), Uuid(3)));
  EXPECT_EQ(WaitOf(out, 1)->estimated_start_unix_ms, kNow + 3 * kHour);
  EXPECT_EQ(ReasonOf(out, 1), "waiting for 4 GPUs; 1 free; next to start, in ~3h");
  EXPECT_EQ(ReasonOf(out, 2), "reserved for job 1 (starts in ~3h)");
  EXPECT_FALSE(WaitOf(out, 2)->estimated_start_unix_ms);
}

TEST(SchedulerTest, ShortJobBackfillsLongOneDoesNot) {
  SchedulerInput in = BusyMachineWithBigHead();
  Job long_job = Queued(2, 1001, 1, kNow - 2 * kHour);
  long_job.time_limit_ms = 4 * kHour;
  Job short_job = Queued(3, 1001, 1, kNow - kHour);
  short_job.time_limit_ms = 3 * kHour;  // ends exactly when the head starts
  in.jobs.insert(in.jobs.end(), {long_job, short_job});
  SchedulerOutput out = Schedule(in);
  ASSERT_THAT(Started(out), ElementsAre(3));
  EXPECT_TRUE(out.start[0].backfilled);
  EXPECT_THAT(out.start[0].gpu_uuids, ElementsAre(Uuid(3)));
  EXPECT_EQ(ReasonOf(out, 2), "reserved for job 1 (starts in ~3h)");
}

TEST(SchedulerTest, JobsOutsideTheReservationStartAnyway) {
  // Given the head needs 2 GPUs; GPUs 0 and 1 end in 1h, 2 and 3 are free
  SchedulerInput in = Given(Plain(5));  // the fifth GPU is held by an interactive lease
  AddRunning(in, Running(90, 1001, {0, 1}, kNow, kHour));
  in.leases.push_back(Interactive(7, 1002, {4}));
  in.jobs.push_back(Queued(1, 1000, 3, kNow - 3 * kHour));
  in.jobs.push_back(Queued(2, 1001, 1, kNow - kHour));
  SchedulerOutput out = Schedule(in);
  // Then the head takes 3 of {0,1,2,3} in an hour; the last one is free for job 2
  ASSERT_TRUE(out.reserved_job);
  EXPECT_EQ(out.reserved_gpus.size(), 3u);
  ASSERT_THAT(Started(out), ElementsAre(2));
  EXPECT_TRUE(out.start[0].backfilled);
  for (const auto& g : out.reserved_gpus) {
    EXPECT_THAT(out.start[0].gpu_uuids, ::testing::Not(::testing::Contains(g)));
  }
}

TEST(SchedulerTest, InteractiveLeasesGiveNoEstimateAndReserveNothing) {
  SchedulerInput in = Given(Plain(2));
  in.leases.push_back(Interactive(7, 1002, {0}));
  in.jobs.push_back(Queued(1, 1000, 2, kNow - 2 * kHour));
  in.jobs.push_back(Queued(2, 1001, 1, kNow - kHour));
  SchedulerOutput out = Schedule(in);
  EXPECT_FALSE(out.reserved_job);
  EXPECT_EQ(ReasonOf(out, 1),
            "waiting for 2 GPUs; 1 free; no estimate (the GPUs it needs are held without a "
            "time limit)");
  EXPECT_FALSE(WaitOf(out, 1)->estimated_start_unix_ms);
  EXPECT_THAT(Started(out), ElementsAre(2));
}

// Replays the queue in virtual time: every pass starts what it decides, and the clock
// jumps to the next job end. A 4-GPU job among a steady stream of 1-GPU jobs must run.
TEST(SchedulerTest, BigJobIsNotStarvedByAStreamOfSmallOnes) {
  SchedulerInput in = Given(Plain(4));
  std::map<int64_t, int64_t> end_of;  // running job id -> end
  int64_t next_id = 100;
  auto submit_small = [&](int64_t when) {
    Job j = Queued(next_id++, 1001, 1, when);
    j.time_limit_ms = 2 * kHour;
    in.jobs.push_back(j);
  };
  for (int i = 0; i < 4; ++i) submit_small(kNow - kHour);
  Job big = Queued(1, 1000, 4, kNow - 30 * kMinute);
  big.time_limit_ms = kHour;
  in.jobs.push_back(big);

  std::optional<int64_t> big_started;
  for (int pass = 0; pass < 50 && !big_started; ++pass) {
    SchedulerOutput out = Schedule(in);
    for (const auto& s : out.start) {
      for (auto& j : in.jobs) {
        if (j.id != s.job_id) continue;
        j.state = JobState::kRunning;
        j.started_unix_ms = in.now_unix_ms;
        j.gpu_uuids = s.gpu_uuids;
        end_of[j.id] = in.now_unix_ms + *j.time_limit_ms;
      }
      if (s.job_id == 1) big_started = in.now_unix_ms;
    }
    // Two more small jobs arrive every pass, and the clock moves to the next end.
    submit_small(in.now_unix_ms);
    submit_small(in.now_unix_ms);
    if (end_of.empty()) break;
    auto first = std::min_element(end_of.begin(), end_of.end(),
                                  [](const auto& a, const auto& b) { return a.second < b.second; });
    in.now_unix_ms = first->second;
    for (auto& j : in.jobs) {
      if (j.id == first->first) j.state = JobState::kSucceeded;
    }
    end_of.erase(first);
  }
  ASSERT_TRUE(big_started);
  EXPECT_EQ(*big_started, kNow + 2 * kHour);  // when the first four small jobs ended
}

// --- placement comes from policy::Select ---------------------------------------------

TEST(SchedulerTest, TwoGpuJobGetsAnNvlinkPair) {
  SchedulerInput in = Given(FourA100());
  in.leases.push_back(Interactive(7, 1002, {0}));
  in.jobs.push_back(Queued(1, 1000, 2, kNow - 2 * kHour));
  in.jobs.push_back(Queued(2, 1000, 1, kNow - kHour));
  SchedulerOutput out = Schedule(in);
  ASSERT_THAT(Started(out), ElementsAre(1, 2));
  EXPECT_THAT(StartOf(out, 1)->gpu_uuids, ElementsAre(Uuid(2), Uuid(3)));
  EXPECT_THAT(StartOf(out, 2)->gpu_uuids, ElementsAre(Uuid(1)));  // best fit: next to GPU 0
}

TEST(SchedulerTest, PlacementMatchesSelectOnTheWholeMachine) {
  // Given 16 GPUs in two NVSwitch islands of 8 (NUMA halves within each), some leased
  MachineSnapshot snap = A100s()
                             .Add(16)
                             .ForEach([](model::DeviceSnapshot& g) { g.numa_node = g.index / 4; })
                             .Topology([](int a, int b) { return a / 8 == b / 8 ? 18 : 0; },
                                       [](int a, int b) {
                                         if (a / 2 == b / 2) return PcieLevel::kMultipleSwitch;
                                         return a / 4 == b / 4 ? PcieLevel::kNumaNode : PcieLevel::kSystem;
                                       })
                             .Build();
  std::vector<Lease> leases = {Interactive(7, 1002, {0, 1, 2, 3, 4, 5, 6, 7, 9, 12})};
  for (int count = 1; count <= 5; ++count) {
    SchedulerInput in = Given(snap);
    in.leases = leases;
    in.jobs.push_back(Queued(1, 1000, count));
    // When the free GPUs all lie in one island
    SchedulerOutput out = Schedule(in);
    // Then the scheduler hands out exactly what Select picks on the whole machine
    model::GpuRequest req;
    req.count = count;
    Result<policy::Selection> direct = policy::Select(snap, leases, req);
    ASSERT_TRUE(direct.has_value());
    ASSERT_EQ(out.start.size(), 1u) << count;
    EXPECT_EQ(out.start[0].gpu_uuids, direct->uuids) << count;
  }
}

TEST(SchedulerTest, FiltersGoThroughSelect) {
  SchedulerInput in = Given(Plain(2));
  in.snapshot.gpus[1].name = "NVIDIA H100 80GB HBM3";
  Job wants_h100 = Queued(1, 1000, 1);
  wants_h100.request.model = "H100";
  in.jobs.push_back(wants_h100);
  Job wants_two = Queued(2, 1000, 2, kNow);
  wants_two.request.model = "H100";
  in.jobs.push_back(wants_two);
  SchedulerOutput out = Schedule(in);
  ASSERT_THAT(Started(out), ElementsAre(1));
  EXPECT_THAT(out.start[0].gpu_uuids, ElementsAre(Uuid(1)));
  // The true reason, as `run` would give it, not a count of free GPUs.
  EXPECT_EQ(ReasonOf(out, 2),
            "waiting for 2 GPUs matching its filters; only 1 of 2 can ever be eligible: GPU 0 not model \"H100\"");
}

TEST(SchedulerTest, AFilterThatRejectsFreeGpusIsTheReason) {
  SchedulerInput in = Given(Plain(3));
  for (auto& gpu : in.snapshot.gpus) {
    gpu.memory_total_bytes = int64_t{80} << 30;
    gpu.memory_free_bytes = int64_t{10} << 30;
  }
  Job roomy = Queued(1, 1000, 2);
  roomy.request.min_free_memory_bytes = int64_t{40} << 30;
  in.jobs.push_back(roomy);
  SchedulerOutput out = Schedule(in);
  EXPECT_THAT(Started(out), ElementsAre());
  EXPECT_THAT(ReasonOf(out, 1), StartsWith("waiting for 2 GPUs matching its filters; 0 eligible: GPU 0-2 free memory"));
}

// --- reasons and edge cases ----------------------------------------------------------

TEST(SchedulerTest, ReasonsForImpossibleRequests) {
  SchedulerInput in = Given(Plain(2));
  in.jobs.push_back(Queued(1, 1000, 3));
  Job pinned = Queued(2, 1000, 1);
  pinned.request.gpus = std::vector<std::string>{"GPU-nope"};
  in.jobs.push_back(pinned);
  SchedulerOutput out = Schedule(in);
  EXPECT_EQ(ReasonOf(out, 1), "needs 3 GPUs; the machine has 2");
  EXPECT_EQ(ReasonOf(out, 2), "needs 1 GPU of its --gpus list; 0 are on this machine");
}

TEST(SchedulerTest, WaitingReasonCountsFreeGpus) {
  SchedulerInput in = Given(Plain(4));
  in.leases.push_back(Interactive(7, 1002, {0, 1}));
  in.jobs.push_back(Queued(1, 1000, 4));
  SchedulerOutput out = Schedule(in);
  EXPECT_THAT(ReasonOf(out, 1), StartsWith("waiting for 4 GPUs; 2 free"));
}

TEST(SchedulerTest, FinalJobsAreIgnoredAndEmptyQueueIsFine) {
  SchedulerInput in = Given(Plain(1));
  Job done = Queued(1, 1000, 1);
  done.state = JobState::kCancelled;
  in.jobs.push_back(done);
  SchedulerOutput out = Schedule(in);
  EXPECT_THAT(out.start, IsEmpty());
  EXPECT_THAT(out.waiting, IsEmpty());
}

// --- fair-share decay ------------------------------------------------------------------

TEST(DecayUsageTest, HalfLifeMath) {
  const double week = 7.0 * 24 * 3600;
  const int64_t week_ms = static_cast<int64_t>(week * 1000);
  EXPECT_DOUBLE_EQ(DecayUsage(1000, 0, week), 1000);
  EXPECT_DOUBLE_EQ(DecayUsage(1000, week_ms, week), 500);
  EXPECT_DOUBLE_EQ(DecayUsage(1000, 2 * week_ms, week), 250);
  EXPECT_NEAR(DecayUsage(1000, week_ms / 2, week), 1000 / std::sqrt(2.0), 1e-9);
  EXPECT_DOUBLE_EQ(DecayUsage(1000, -5, week), 1000);  // clock skew: no growth
  EXPECT_DOUBLE_EQ(DecayUsage(1000, week_ms, 0), 1000);  // no half-life: no decay
  // Decaying in two steps equals decaying once.
  EXPECT_NEAR(DecayUsage(DecayUsage(1000, 3600'000, 86400), 7200'000, 86400),
              DecayUsage(1000, 10800'000, 86400), 1e-9);
}

// ---- What a daemon may skip a pass on (SnapshotKey, AnyMomentaryFilters)

TEST(SnapshotKeyTest, ChangesWithWhatPlacementReadsAndOnlyThen) {
  const MachineSnapshot base = Plain(2);
  const uint64_t key = SnapshotKey(base, /*momentary=*/false);
  EXPECT_EQ(SnapshotKey(Plain(2), false), key) << "the same GPUs, the same key";

  MachineSnapshot busier = base;  // a process appears: the GPU is no longer free
  model::GpuProcess p;
  p.pid = 4242;
  p.used_memory_bytes = int64_t{1} << 30;
  busier.gpus[1].processes.push_back(p);
  EXPECT_NE(SnapshotKey(busier, false), key);

  MachineSnapshot sick = base;  // a GPU fails
  sick.gpus[0].is_healthy = false;
  EXPECT_NE(SnapshotKey(sick, false), key);

  MachineSnapshot fewer = Plain(1);  // a GPU is lost
  EXPECT_NE(SnapshotKey(fewer, false), key);

  // Memory and utilization move every sample on a busy machine: they count only while a
  // queued job filters on them.
  MachineSnapshot moved = base;
  moved.gpus[0].memory_free_bytes = int64_t{3} << 30;
  moved.gpus[0].gpu_utilization_percent = 97;
  EXPECT_EQ(SnapshotKey(moved, false), key);
  EXPECT_NE(SnapshotKey(moved, true), SnapshotKey(base, true));

  MachineSnapshot used_more = busier;  // the same process, using more memory
  used_more.gpus[1].processes[0].used_memory_bytes = int64_t{5} << 30;
  EXPECT_EQ(SnapshotKey(used_more, false), SnapshotKey(busier, false));
}

TEST(SnapshotKeyTest, MomentaryFiltersAreThoseOfJobsThatWait) {
  std::vector<Job> jobs = {Queued(1, 1000, 1), Queued(2, 1000, 1)};
  EXPECT_FALSE(AnyMomentaryFilters(jobs));
  jobs[1].request.model = "A100";  // a static filter: the key need not follow memory
  EXPECT_FALSE(AnyMomentaryFilters(jobs));
  jobs[1].request.min_free_memory_bytes = int64_t{10} << 30;
  EXPECT_TRUE(AnyMomentaryFilters(jobs));
  jobs[1].state = JobState::kRunning;  // running: its filters were met
  EXPECT_FALSE(AnyMomentaryFilters(jobs));
  jobs[0].request.max_utilization_percent = 10;
  jobs[0].state = JobState::kHeld;
  EXPECT_TRUE(AnyMomentaryFilters(jobs));
}

TEST(SchedulerTest, AJobsViewIsScheduledInsteadOfTheJobs) {
  SchedulerInput in = Given(Plain(2));
  const std::vector<Job> view = {Queued(7, 1000, 2)};
  in.jobs.push_back(Queued(1, 1000, 1));  // ignored while a view is set
  in.jobs_view = &view;
  SchedulerOutput out = Schedule(in);
  ASSERT_EQ(out.start.size(), 1u);
  EXPECT_EQ(out.start[0].job_id, 7);
  EXPECT_EQ(out.start[0].gpu_uuids.size(), 2u);
}

// --- memory slices (docs/share.md) ----------------------------------------------------

constexpr int64_t kSGiB = int64_t{1} << 30;

Job QueuedSlice(int64_t id, uint32_t uid, int64_t gib, int count = 1) {
  Job job = Queued(id, uid, count, kNow - kHour + id);
  job.request.gpu_memory_bytes = gib * kSGiB;
  return job;
}

TEST(SchedulerSliceTest, TwoUsersSlicesShareOneGpuAndAThirdWaitsWithWhy) {
  SchedulerInput in = Given(Plain(1));  // one 80 GiB GPU
  in.jobs = {QueuedSlice(1, 1000, 30), QueuedSlice(2, 1001, 30), QueuedSlice(3, 1002, 30)};
  SchedulerOutput out = Schedule(in);
  EXPECT_THAT(Started(out), ElementsAre(1, 2));
  EXPECT_EQ(StartOf(out, 1)->gpu_uuids, StartOf(out, 2)->gpu_uuids);
  EXPECT_EQ(ReasonOf(out, 3), "needs 30 GiB on one GPU; the most free declared memory is 20 GiB on GPU 0");
}

TEST(SchedulerSliceTest, AWholeGpuJobWaitsForTheSlicesAndSlicesAvoidWholeGpus) {
  SchedulerInput in = Given(Plain(2));
  Lease slice = Interactive(7, 1003, {0});
  slice.gpu_memory_bytes = 10 * kSGiB;
  in.leases = {slice};
  in.jobs = {Queued(1, 1000, 2), QueuedSlice(2, 1001, 10)};
  SchedulerOutput out = Schedule(in);
  // The 2-GPU job cannot have the sliced GPU 0; the slice goes beside the other (best fit),
  // never onto GPU 1, which the head reserved.
  EXPECT_THAT(Started(out), ElementsAre(2));
  ASSERT_NE(StartOf(out, 2), nullptr);
  EXPECT_THAT(StartOf(out, 2)->gpu_uuids, ElementsAre(Uuid(0)));
  EXPECT_THAT(ReasonOf(out, 1), ::testing::HasSubstr("waiting for 2 GPUs"));
}

TEST(SchedulerSliceTest, ASliceNeverLandsOnAGpuLeasedWhole) {
  SchedulerInput in = Given(Plain(2));
  in.leases = {Interactive(7, 1003, {0, 1})};
  in.jobs = {QueuedSlice(1, 1000, 1)};
  SchedulerOutput out = Schedule(in);
  EXPECT_THAT(Started(out), ElementsAre());
  EXPECT_THAT(ReasonOf(out, 1), ::testing::HasSubstr("needs 1 GiB on one GPU"));
}

TEST(SchedulerSliceTest, ManyIdenticalSlicesArePackedAndTheRestWaitOnTheirFirstRefusal) {
  SchedulerInput in = Given(Plain(8));
  for (int i = 1; i <= 10000; ++i) in.jobs.push_back(QueuedSlice(i, 1000 + i % 3, 20));
  SchedulerOutput out = Schedule(in);
  EXPECT_EQ(out.start.size(), 32u);  // 4 slices of 20 GiB on each 80 GiB GPU
  std::map<std::string, int> per_gpu;
  for (const auto& s : out.start) ++per_gpu[s.gpu_uuids.at(0)];
  for (const auto& [uuid, n] : per_gpu) EXPECT_EQ(n, 4) << uuid;
  EXPECT_EQ(out.waiting.size(), 10000u - 32u);
  EXPECT_EQ(ReasonOf(out, 10000), "needs 20 GiB on one GPU; the most free declared memory is 0 B on GPU 0");
}

TEST(SchedulerSliceTest, MpsSlicesOfTwoUsersNeverShareAGpuAndPlainSlicesStayApart) {
  SchedulerInput in = Given(Plain(1));  // one 80 GiB GPU
  Job alice = QueuedSlice(1, 1000, 10);
  alice.request.mps = true;
  Job bob = QueuedSlice(2, 1001, 10);
  bob.request.mps = true;
  bob.user = "bob";
  Job plain = QueuedSlice(3, 1002, 10);
  Job alice_again = QueuedSlice(4, 1000, 10);
  alice_again.request.mps = true;
  in.jobs = {alice, bob, plain, alice_again};
  SchedulerOutput out = Schedule(in);
  // alice's two MPS slices share the GPU; bob's MPS slice and the plain one wait.
  EXPECT_THAT(Started(out), ElementsAre(1, 4));
  EXPECT_EQ(ReasonOf(out, 2), "needs 10 GiB on one GPU; GPU 0 runs MPS for alice; MPS serves one user at a time");
  EXPECT_EQ(ReasonOf(out, 3), "needs 10 GiB on one GPU; GPU 0 runs MPS for alice; only their --mps slices may share it");

  // A live MPS lease of alice's counts as this pass's own do.
  SchedulerInput live = Given(Plain(2));
  Lease lease = Interactive(7, 1000, {0});
  lease.user = "alice";
  lease.gpu_memory_bytes = 10 * kSGiB;
  lease.mps = true;
  live.leases = {lease};
  live.jobs = {bob};
  out = Schedule(live);
  ASSERT_NE(StartOf(out, 2), nullptr);
  EXPECT_THAT(StartOf(out, 2)->gpu_uuids, ElementsAre(Uuid(1)));  // not beside alice's clients
}

TEST(SchedulerSliceTest, GpusLeftOutOfSlicingGetNoSliceJob) {
  SchedulerInput in = Given(Plain(2));
  in.not_sliceable[Uuid(0)] = "[share] gpus";
  in.jobs = {QueuedSlice(1, 1000, 10), QueuedSlice(2, 1000, 10)};
  SchedulerOutput out = Schedule(in);
  ASSERT_EQ(out.start.size(), 2u);
  EXPECT_THAT(out.start[0].gpu_uuids, ElementsAre(Uuid(1)));
  EXPECT_THAT(out.start[1].gpu_uuids, ElementsAre(Uuid(1)));
}

// ---- MIG (docs/share.md, "MIG"): queued jobs placed on MIG devices of their profile.

// An H100 split 3g.40gb + 2x 2g.20gb (GPU 0) beside one whole GPU (GPU 1), as h100-mig.
MachineSnapshot MigMachine() {
  MachineSnapshot snap = A100s().Add(2).Build();
  snap.gpus[0].mig_mode_current = true;
  const char* profiles[] = {"3g.40gb", "2g.20gb", "2g.20gb"};
  for (int i = 0; i < 3; ++i) {
    model::MigDevice m;
    m.index = i;
    m.uuid = "MIG-" + std::to_string(i);
    m.parent_uuid = snap.gpus[0].uuid.value_or("");
    m.profile = profiles[i];
    m.memory_total_bytes = (i == 0 ? 40 : 20) * (int64_t{1} << 30);
    m.memory_used_bytes = 0;
    snap.gpus[0].mig_devices.push_back(m);
  }
  return snap;
}

Job QueuedMig(int64_t id, uint32_t uid, const std::string& profile, int count = 1) {
  Job job = Queued(id, uid, count, kNow - kHour + id);
  job.request.mig_profile = profile;
  return job;
}

TEST(SchedulerMigTest, QueuedMigJobsGetFreeMigDevicesOfTheirProfileAndTheRestWaitWithWhy) {
  SchedulerInput in = Given(MigMachine());
  Lease held = Interactive(7, 1003, {});
  held.gpu_uuids = {"MIG-1"};  // one 2g.20gb leased by `run --mig`
  in.leases = {held};
  in.jobs = {QueuedMig(1, 1000, "2g.20gb"), QueuedMig(2, 1001, "2g.20gb"), QueuedMig(3, 1002, "3g.40gb"),
             Queued(4, 1003, 1, kNow)};
  SchedulerOutput out = Schedule(in);
  EXPECT_THAT(Started(out), ::testing::UnorderedElementsAre(1, 3, 4));
  ASSERT_NE(StartOf(out, 1), nullptr);
  EXPECT_THAT(StartOf(out, 1)->gpu_uuids, ElementsAre("MIG-2"));
  EXPECT_THAT(StartOf(out, 3)->gpu_uuids, ElementsAre("MIG-0"));
  EXPECT_THAT(StartOf(out, 4)->gpu_uuids, ElementsAre(Uuid(1))) << "the GPU in MIG mode is never given whole";
  EXPECT_EQ(ReasonOf(out, 2), "needs 1 MIG device of profile 2g.20gb; all 2 are leased");

  // A whole-GPU job counts no GPU in MIG mode.
  SchedulerInput whole = Given(MigMachine());
  whole.jobs = {Queued(1, 1000, 2)};
  out = Schedule(whole);
  EXPECT_THAT(Started(out), IsEmpty());
  EXPECT_EQ(ReasonOf(out, 1), "needs 2 GPUs; the machine has 1 besides GPU 0 in MIG mode (never leased whole)");
}

TEST(SchedulerMigTest, MigJobsCountMigDevicesNotGpusAndSayWhyTheyCannotStart) {
  SchedulerInput in = Given(MigMachine());
  // Two MIG devices on a machine of two GPUs, one of which is whole: counted as MIG devices.
  in.jobs = {QueuedMig(1, 1000, "2g.20gb", 2), QueuedMig(2, 1001, "1g.10gb"), QueuedMig(3, 1002, "2g.20gb")};
  in.jobs[0].request.mig_profile = "2g.20gb";
  SchedulerOutput out = Schedule(in);
  EXPECT_THAT(Started(out), ElementsAre(1));
  EXPECT_THAT(StartOf(out, 1)->gpu_uuids, ::testing::UnorderedElementsAre("MIG-1", "MIG-2"));
  EXPECT_EQ(ReasonOf(out, 2),
            "needs 1 MIG device of profile 1g.10gb; --mig: no MIG device of profile 1g.10gb here; the profiles here: "
            "2g.20gb, 3g.40gb");
  EXPECT_EQ(ReasonOf(out, 3), "needs 1 MIG device of profile 2g.20gb; all 2 are leased");

  // A drained parent keeps its MIG devices from queued jobs, with the drain as the reason.
  SchedulerInput drained = Given(MigMachine());
  drained.drained.insert(Uuid(0));
  drained.jobs = {QueuedMig(1, 1000, "3g.40gb")};
  out = Schedule(drained);
  EXPECT_THAT(Started(out), IsEmpty());
  EXPECT_THAT(ReasonOf(out, 1), HasSubstr("needs 1 MIG device of profile 3g.40gb; "));
  EXPECT_THAT(ReasonOf(out, 1), HasSubstr("drained"));

  // --gpus MIG-<uuid>: that MIG device, once free.
  SchedulerInput named = Given(MigMachine());
  Job by_uuid = Queued(1, 1000, 1);
  by_uuid.request.gpus = std::vector<std::string>{"MIG-0"};
  named.jobs = {by_uuid};
  out = Schedule(named);
  ASSERT_NE(StartOf(out, 1), nullptr);
  EXPECT_THAT(StartOf(out, 1)->gpu_uuids, ElementsAre("MIG-0"));
}

}  // namespace
}  // namespace gpuman::sched
