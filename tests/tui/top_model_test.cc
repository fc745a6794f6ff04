#include "tui/top_model.h"

#include <gtest/gtest.h>

#include "tui/history.h"
#include "tui_fixtures.h"

namespace gpuman::tui {
namespace {

using testing::kNowMs;
using testing::Machine;
using testing::MakeFrame;

std::vector<uint32_t> Pids(const std::vector<ProcessRow>& rows) {
  std::vector<uint32_t> out;
  for (const auto& r : rows) out.push_back(r.pid);
  return out;
}

TEST(HistoryTest, KeepsTheNewestSamplesInOrder) {
  History h(3);
  EXPECT_EQ(h.size(), 0u);
  h.Push(1);
  h.Push(2);
  EXPECT_EQ(h.size(), 2u);
  EXPECT_EQ(h.At(0), 1.0);
  h.Push(3);
  h.Push(std::nullopt);
  h.Push(5);
  ASSERT_EQ(h.size(), 3u);
  EXPECT_EQ(h.At(0), 3.0);
  EXPECT_EQ(h.At(1), std::nullopt);
  EXPECT_EQ(h.At(2), 5.0);
  EXPECT_EQ(h.At(3), std::nullopt);  // out of range
  auto last = h.Last(2);
  ASSERT_EQ(last.size(), 2u);
  EXPECT_EQ(last[0], std::nullopt);
  EXPECT_EQ(last[1], 5.0);
  EXPECT_EQ(h.Last(10).size(), 3u);
}

TEST(HistoryTest, SparklineIsRightAlignedAndScaled) {
  History h(10);
  h.Push(0);
  h.Push(100);
  h.Push(std::nullopt);
  EXPECT_EQ(Sparkline(h, 5, 100, false), "  .@ ");
  EXPECT_EQ(Sparkline(h, 5, 100, true), "  ▁█ ");
  EXPECT_EQ(Sparkline(h, 2, 100, false), "@ ");
  EXPECT_EQ(Sparkline(h, 0, 100, false), "");
}

TEST(TopModelTest, RowsCarryOwnersMemoryAndHolders) {
  model::Lease lease;
  lease.id = 7;
  lease.uid = 1001;  // alice's
  lease.user = "alice";
  lease.gpu_uuids = {"GPU-00000001-aaaa-bbbb-cccc-dddddddddddd"};
  lease.processes = {{4243, 0}};
  model::Job job;
  job.id = 12;
  job.state = model::JobState::kRunning;
  job.gpu_uuids = {"GPU-00000002-aaaa-bbbb-cccc-dddddddddddd"};
  auto rows = BuildProcessRows(Machine(), {lease}, {job});
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].pid, 4242u);
  EXPECT_EQ(rows[0].user, "alice");
  EXPECT_EQ(rows[0].gpu_index, 1);
  EXPECT_EQ(rows[0].memory_bytes, 52 * testing::kGiB);
  EXPECT_EQ(rows[0].held_by, "lease 7");  // the lease holds GPU 1
  EXPECT_EQ(rows[1].held_by, "lease 7");  // and lists pid 4243
  EXPECT_EQ(rows[2].held_by, "job 12");
  EXPECT_EQ(rows[3].held_by, "");
  EXPECT_FALSE(rows[3].is_visible);
}

// Issue 23: a process on a GPU leased to someone else is no holder's: the table says so.
TEST(TopModelTest, AnotherUsersProcessOnALeasedGpuIsAnIntruder) {
  model::Lease lease;
  lease.id = 7;
  lease.uid = 1002;  // bob holds GPU 1, where alice's processes run
  lease.user = "bob";
  lease.gpu_uuids = {"GPU-00000001-aaaa-bbbb-cccc-dddddddddddd"};
  auto rows = BuildProcessRows(Machine(), {lease}, {});
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].held_by, "INTRUDER");
  EXPECT_EQ(rows[1].held_by, "INTRUDER");
  EXPECT_EQ(rows[2].held_by, "");  // bob's own process on a GPU nobody leased
}

TEST(TopModelTest, HeldByPrefersTheLeaseListingThePidThenAJobOfTheLease) {
  model::Lease a, b;
  a.id = 1;
  a.gpu_uuids = {"G"};
  b.id = 2;
  b.gpu_uuids = {"G"};
  b.processes = {{99, 0}};
  EXPECT_EQ(HeldBy("G", 99, {a, b}, {}), "lease 2");
  EXPECT_EQ(HeldBy("G", 5, {a, b}, {}), "lease 1");
  model::Job j;
  j.id = 30;
  j.lease_id = 2;
  j.state = model::JobState::kRunning;
  EXPECT_EQ(HeldBy("G", 99, {a, b}, {j}), "job 30");
  EXPECT_EQ(HeldBy("other", 99, {a, b}, {j}), "");
}

TEST(TopModelTest, SortOrders) {
  auto rows = BuildProcessRows(Machine(), {}, {});
  SortRows(rows, SortKey::kGpuMemory, false);
  EXPECT_EQ(Pids(rows), (std::vector<uint32_t>{4242, 5000, 4243, 777}));
  SortRows(rows, SortKey::kSmUtil, false);  // unknown SM % last
  EXPECT_EQ(Pids(rows), (std::vector<uint32_t>{4242, 4243, 5000, 777}));
  SortRows(rows, SortKey::kPid, false);
  EXPECT_EQ(Pids(rows), (std::vector<uint32_t>{777, 4242, 4243, 5000}));
  SortRows(rows, SortKey::kUser, false);  // alice (by memory), bob, unknown last
  EXPECT_EQ(Pids(rows), (std::vector<uint32_t>{4242, 4243, 5000, 777}));
  SortRows(rows, SortKey::kGpu, false);
  EXPECT_EQ(Pids(rows), (std::vector<uint32_t>{4242, 4243, 5000, 777}));
  SortRows(rows, SortKey::kPid, true);
  EXPECT_EQ(Pids(rows), (std::vector<uint32_t>{5000, 4243, 4242, 777}));
}

TEST(TopModelTest, SortKeysCycleThroughAllFive) {
  SortKey k = SortKey::kGpuMemory;
  std::vector<std::string> names;
  for (int i = 0; i < 5; ++i) {
    names.push_back(SortKeyName(k));
    k = NextSortKey(k);
  }
  EXPECT_EQ(k, SortKey::kGpuMemory);
  EXPECT_EQ(names, (std::vector<std::string>{"gpu-mem", "sm", "pid", "user", "gpu"}));
}

TEST(TopModelTest, OnlyMineAndGpuFilters) {
  auto rows = BuildProcessRows(Machine(), {}, {});
  EXPECT_EQ(Pids(FilterRows(rows, {1001, std::nullopt})), (std::vector<uint32_t>{4242, 4243}));
  EXPECT_EQ(Pids(FilterRows(rows, {1002, std::nullopt})), (std::vector<uint32_t>{5000}));
  EXPECT_EQ(Pids(FilterRows(rows, {std::nullopt, 3})), (std::vector<uint32_t>{777}));
  EXPECT_TRUE(FilterRows(rows, {1002, 1}).empty());
  EXPECT_EQ(FilterRows(rows, {}).size(), 4u);
}

TEST(TopModelTest, IngestBuildsHistoryAndKeepsTheLastGoodSnapshot) {
  TopModel m(4);
  auto s1 = Machine();
  m.Ingest(MakeFrame(1, s1));
  auto s2 = Machine();
  s2.gpus[1].gpu_utilization_percent = 50;
  m.Ingest(MakeFrame(2, s2));
  m.Ingest(MakeFrame(2, Machine()));  // same sequence: ignored
  const GpuHistory* h = m.HistoryFor(s1.gpus[1]);
  ASSERT_NE(h, nullptr);
  ASSERT_EQ(h->utilization.size(), 2u);
  EXPECT_EQ(h->utilization.At(0), 97.0);
  EXPECT_EQ(h->utilization.At(1), 50.0);
  EXPECT_NEAR(*h->memory_percent.At(1), 71.0 / 80 * 100, 1e-9);
  EXPECT_EQ(h->power_w.At(1), 362.0);

  auto failed = std::make_shared<Frame>();
  failed->sequence = 3;
  failed->snapshot_error = "GPU is lost";
  m.Ingest(failed);
  ASSERT_NE(m.snapshot(), nullptr);  // still the last good one
  EXPECT_EQ(m.frame()->snapshot_error, "GPU is lost");
  EXPECT_EQ(m.rows().size(), 4u);
  EXPECT_EQ(h->utilization.size(), 2u);  // no sample for a failed frame
}

TEST(TopModelTest, HolderRowsShowLeasesThenJobsWithIdleTimes) {
  model::Lease l;
  l.id = 7;
  l.user = "alice";
  l.command = "python train.py";
  l.gpu_uuids = {"GPU-00000001-aaaa-bbbb-cccc-dddddddddddd"};
  l.created_unix_ms = kNowMs - 3600 * 1000;
  l.idle_since_unix_ms = kNowMs - 15 * 60 * 1000;
  model::Lease job_lease;
  job_lease.id = 8;
  model::Job running;
  running.id = 12;
  running.state = model::JobState::kRunning;
  running.lease_id = 8;
  running.user = "bob";
  running.name = "sweep";
  running.gpu_uuids = {"GPU-00000002-aaaa-bbbb-cccc-dddddddddddd"};
  running.started_unix_ms = kNowMs - 60000;
  model::Job queued;
  queued.id = 13;
  queued.state = model::JobState::kQueued;
  queued.request.count = 2;
  queued.reason = "waiting for 2 GPUs";
  queued.submitted_unix_ms = kNowMs - 5000;
  auto snap = Machine();
  auto rows = BuildHolderRows({l, job_lease}, {queued, running}, &snap);
  ASSERT_EQ(rows.size(), 3u);  // lease 8 is shown as job 12
  EXPECT_EQ(rows[0].what, "lease 7");
  EXPECT_EQ(rows[0].gpus, "1");
  EXPECT_EQ(IdleText(rows[0].idle_since_unix_ms, kNowMs), "15m");
  EXPECT_EQ(rows[1].what, "job 12");
  EXPECT_EQ(rows[1].gpus, "2");
  EXPECT_EQ(rows[1].state, "running");
  EXPECT_EQ(IdleText(rows[1].idle_since_unix_ms, kNowMs), "-");
  EXPECT_EQ(rows[2].what, "job 13");
  EXPECT_EQ(rows[2].gpus, "wants 2");
  EXPECT_EQ(rows[2].detail, "waiting for 2 GPUs");
}

// Issue 25: a slice lease's GPUs say its size, and a holder over what their slices
// declare is "over" (alice's processes use 70 GiB of GPU 1 on a 20 GiB slice; bob's 20 GiB
// on GPU 2 are within his 24 GiB job slice).
TEST(TopModelTest, HolderRowsShowSlicesAndMarkAHolderOverTheirs) {
  model::Lease alice;
  alice.id = 7;
  alice.uid = 1001;
  alice.user = "alice";
  alice.gpu_uuids = {"GPU-00000001-aaaa-bbbb-cccc-dddddddddddd"};
  alice.gpu_memory_bytes = 20 * testing::kGiB;
  model::Lease bobs_job_lease;
  bobs_job_lease.id = 8;
  bobs_job_lease.uid = 1002;
  bobs_job_lease.user = "bob";
  bobs_job_lease.gpu_uuids = {"GPU-00000002-aaaa-bbbb-cccc-dddddddddddd"};
  bobs_job_lease.gpu_memory_bytes = 24 * testing::kGiB;
  model::Job running;
  running.id = 12;
  running.state = model::JobState::kRunning;
  running.lease_id = 8;
  running.user = "bob";
  running.gpu_uuids = bobs_job_lease.gpu_uuids;
  running.request.gpu_memory_bytes = 24 * testing::kGiB;
  model::Job queued;
  queued.id = 13;
  queued.state = model::JobState::kQueued;
  queued.request.gpu_memory_bytes = int64_t{15} * testing::kGiB / 2;  // 7.5 GiB
  auto snap = Machine();
  auto rows = BuildHolderRows({alice, bobs_job_lease}, {queued, running}, &snap);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].what, "lease 7");
  EXPECT_EQ(rows[0].gpus, "1:20G");
  EXPECT_EQ(rows[0].state, "over");
  EXPECT_EQ(rows[1].what, "job 12");
  EXPECT_EQ(rows[1].gpus, "2:24G");
  EXPECT_EQ(rows[1].state, "running");
  EXPECT_EQ(rows[2].gpus, "wants 1:7.5G");
  // Bob's job grows past 24 GiB: now it is the one marked.
  snap.gpus[2].processes[0].used_memory_bytes = 30 * testing::kGiB;
  rows = BuildHolderRows({alice, bobs_job_lease}, {queued, running}, &snap);
  EXPECT_EQ(rows[1].state, "over");
}

// MPS leases (docs/share.md "MPS") carry a mark and their thread share; a MIG device is
// named by its GPU's index and its profile.
TEST(TopModelTest, HolderRowsMarkMpsAndNameMigDevices) {
  const auto snap = testing::MigMachine();
  model::Lease mig;
  mig.id = 7;
  mig.user = "alice";
  mig.gpu_uuids = {"MIG-1"};
  model::Lease mps;
  mps.id = 8;
  mps.user = "bob";
  mps.gpu_uuids = {*snap.gpus[1].uuid};
  mps.gpu_memory_bytes = 20 * testing::kGiB;
  mps.mps = true;
  mps.gpu_share_percent = 25;
  model::Lease whole_mps = mps;
  whole_mps.id = 9;
  whole_mps.gpu_uuids = {*snap.gpus[2].uuid};
  whole_mps.gpu_memory_bytes.reset();
  whole_mps.gpu_share_percent.reset();
  model::Job queued;
  queued.id = 13;
  queued.state = model::JobState::kQueued;
  queued.request.mps = true;
  queued.request.gpu_share_percent = 50;
  queued.request.gpu_memory_bytes = 8 * testing::kGiB;
  auto rows = BuildHolderRows({mig, mps, whole_mps}, {queued}, &snap);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].gpus, "0:2g.20gb");
  EXPECT_EQ(rows[1].gpus, "1:20G MPS 25%");
  EXPECT_EQ(rows[2].gpus, "2 MPS");
  EXPECT_EQ(rows[3].gpus, "wants 1:8G MPS 50%");
  // Without a snapshot the MIG UUID's prefix stands in.
  EXPECT_EQ(BuildHolderRows({mig}, {}, nullptr).at(0).gpus, "MIG-1");
}

TEST(TopModelTest, MigSummarySaysWhichMigDeviceIsTakenAndByWhom) {
  const auto snap = testing::MigMachine();
  model::Lease mig;
  mig.id = 7;
  mig.user = "alice";
  mig.gpu_uuids = {"MIG-1"};
  model::Lease jobs_lease = mig;
  jobs_lease.id = 8;
  jobs_lease.user = "bob";
  jobs_lease.gpu_uuids = {"MIG-0"};
  model::Job job;
  job.id = 12;
  job.state = model::JobState::kRunning;
  job.lease_id = 8;
  EXPECT_EQ(MigSummary(snap.gpus[0], {}, {}), "MIG 0/3 leased; free: 3g.40gb, 2g.20gb x2");
  EXPECT_EQ(MigSummary(snap.gpus[0], {mig}, {}), "MIG 1/3 leased: 2g.20gb alice (lease 7); free: 3g.40gb, 2g.20gb");
  EXPECT_EQ(MigSummary(snap.gpus[0], {mig, jobs_lease}, {job}),
            "MIG 2/3 leased: 3g.40gb bob (job 12), 2g.20gb alice (lease 7); free: 2g.20gb");
  // A whole GPU says nothing; one in MIG mode without MIG devices says so.
  EXPECT_EQ(MigSummary(snap.gpus[1], {mig}, {}), "");
  model::DeviceSnapshot empty = snap.gpus[1];
  empty.mig_mode_current = true;
  EXPECT_EQ(MigSummary(empty, {}, {}), "MIG mode, no MIG devices");
}

TEST(TopModelTest, AProcessOnAMigDeviceIsHeldByItsLease) {
  model::Lease mig;
  mig.id = 7;
  mig.user = "alice";
  mig.gpu_uuids = {"MIG-1"};
  const auto rows = BuildProcessRows(testing::MigMachine(), {mig}, {});
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].pid, 6100u);
  EXPECT_EQ(rows[0].held_by, "lease 7");
  EXPECT_EQ(rows[1].held_by, "");
}

TEST(TopModelTest, IdleText) {
  EXPECT_EQ(IdleText(std::nullopt, kNowMs), "-");
  EXPECT_EQ(IdleText(kNowMs - 45000, kNowMs), "45s");
  EXPECT_EQ(IdleText(kNowMs - (3 * 3600 + 20 * 60) * int64_t{1000}, kNowMs), "3h 20m");
  EXPECT_EQ(IdleText(kNowMs + 5000, kNowMs), "0s");  // a clock step back is not negative
}

}  // namespace
}  // namespace gpuman::tui
