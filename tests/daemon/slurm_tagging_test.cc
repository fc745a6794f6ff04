// The collector tags history samples with the Slurm job holding each GPU (from the job
// records of slurm/job_record.h), re-reading the record directory only when it changed.
// A fixed clock passed to Tick; real history and state dbs in a temp dir.
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>

#include <gtest/gtest.h>

#include <fstream>

#include "daemon/collector.h"
#include "slurm/job_record.h"
#include "store/history_store.h"
#include "store/job_store.h"
#include "store/lease_store.h"
#include "support/fake_clock.h"
#include "support/temp_dir.h"

namespace gpuman::daemon {
namespace {

using ::gpuman::testing::FakeClock;

constexpr int64_t kT0 = 1'700'000'000'000;

std::string Uuid(int i) { return "GPU-0000000" + std::to_string(i) + "-0000-0000-0000-000000000000"; }

model::MachineSnapshot TwoGpus() {
  model::MachineSnapshot snap;
  for (int i = 0; i < 2; ++i) {
    model::DeviceSnapshot g;
    g.index = i;
    g.uuid = Uuid(i);
    g.memory_total_bytes = int64_t{80} << 30;
    g.memory_used_bytes = int64_t{i + 1} << 30;
    g.gpu_utilization_percent = 40 + i;
    snap.gpus.push_back(g);
  }
  return snap;
}

slurm::SlurmJobRecord Rec(const std::string& id, const std::string& user, std::vector<std::string> gpus,
                          int64_t start, std::optional<int64_t> end = std::nullopt) {
  slurm::SlurmJobRecord r;
  r.job_id = id;
  r.user = user;
  r.uid = 1001;
  r.host = "node1";
  r.gpu_uuids = std::move(gpus);
  r.started_unix_ms = start;
  r.ended_unix_ms = end;
  return r;
}

TEST(SlurmTaggingTest, SamplesCarryTheJobHoldingTheirGpu) {
  ::gpuman::testing::TempDir dir;
  auto jobs = store::JobStore::Open(dir.Join("state.db"));
  ASSERT_TRUE(jobs) << jobs.error().message;
  auto leases = store::LeaseStore::Open(dir.Join("state.db"), {});
  ASSERT_TRUE(leases) << leases.error().message;
  const std::string records = dir.Join("slurm");
  CollectorOptions options;
  options.kernel_log = "";
  options.history_path = dir.Join("history.db");
  options.slurm_state_dir = records;
  FakeClock clock{kT0};
  Collector collector(options, **jobs, **leases, clock);
  ASSERT_TRUE(collector.Start());
  const auto snap = TwoGpus();

  collector.Tick(kT0, &snap, "");  // no record directory yet: no tags
  ASSERT_TRUE(slurm::WriteJobRecord(records, Rec("12", "alice", {Uuid(1)}, kT0 + 500)));
  collector.Tick(kT0 + 1000, &snap, "");  // job 12 on GPU 1
  // Job 12 ends; job 13 (bob) starts on both GPUs.
  ASSERT_TRUE(slurm::WriteJobRecord(records, Rec("12", "alice", {Uuid(1)}, kT0 + 500, kT0 + 1500)));
  ASSERT_TRUE(slurm::WriteJobRecord(records, Rec("13", "bob", {Uuid(0), Uuid(1)}, kT0 + 1800)));
  collector.Tick(kT0 + 2000, &snap, "");
  // A bad file beside them is skipped (and logged), the good records still count.
  {
    std::ofstream(records + "/14.json") << "{not json";
  }
  collector.Tick(kT0 + 3000, &snap, "");

  auto history = store::HistoryStore::Open(options.history_path, /*read_only=*/true);
  ASSERT_TRUE(history) << history.error().message;
  auto rows = (*history)->Samples({});
  ASSERT_TRUE(rows) << rows.error().message;
  ASSERT_EQ(rows->size(), 8u);
  auto tag = [&](int64_t t, int gpu) {
    for (const auto& s : *rows) {
      if (s.t_unix_ms == t && s.gpu_uuid == Uuid(gpu)) return s.slurm_job_id + "/" + s.slurm_user;
    }
    return std::string("missing");
  };
  EXPECT_EQ(tag(kT0, 0), "/");
  EXPECT_EQ(tag(kT0, 1), "/");
  EXPECT_EQ(tag(kT0 + 1000, 0), "/");
  EXPECT_EQ(tag(kT0 + 1000, 1), "12/alice");
  EXPECT_EQ(tag(kT0 + 2000, 0), "13/bob");
  EXPECT_EQ(tag(kT0 + 2000, 1), "13/bob");
  EXPECT_EQ(tag(kT0 + 3000, 1), "13/bob");
  auto span = (*history)->SlurmJob("12");
  ASSERT_TRUE(span && *span);
  EXPECT_EQ((*span)->first_unix_ms, kT0 + 1000);
  EXPECT_EQ((*span)->last_unix_ms, kT0 + 1000);
}

// Sets the directory's modification time `hours_ago` hours back, as an old change.
void AgeDir(const std::string& path, int hours_ago) {
  struct timespec times[2] = {};
  clock_gettime(CLOCK_REALTIME, &times[0]);
  times[0].tv_sec -= hours_ago * 3600;
  times[1] = times[0];
  ASSERT_EQ(utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
}

TEST(SlurmTaggingTest, TheRecordCacheRereadsOnlyWhenTheDirectoryChanges) {
  ::gpuman::testing::TempDir dir;
  const std::string records = dir.Join("slurm");
  slurm::JobRecordCache cache(records, /*max_age_ms=*/60'000);
  EXPECT_TRUE(cache.Get(kT0).empty());
  ASSERT_TRUE(slurm::WriteJobRecord(records, Rec("1", "alice", {Uuid(0)}, kT0)));
  EXPECT_EQ(cache.Get(kT0 + 1000).size(), 1u);
  EXPECT_EQ(cache.Get(kT0 + 1500).size(), 1u);  // a change under 2 s old: read again
  const int recent = cache.reads();
  EXPECT_EQ(cache.Get(kT0 + 1600).size(), 1u);
  EXPECT_EQ(cache.reads(), recent + 1);
  AgeDir(records, 2);
  EXPECT_EQ(cache.Get(kT0 + 1700).size(), 1u);  // the (older) time differs: read
  const int reads = cache.reads();
  for (int i = 2; i < 10; ++i) EXPECT_EQ(cache.Get(kT0 + i * 1000).size(), 1u);
  EXPECT_EQ(cache.reads(), reads);  // unchanged, settled directory: no re-read
  ASSERT_TRUE(slurm::WriteJobRecord(records, Rec("2", "bob", {Uuid(1)}, kT0)));
  AgeDir(records, 1);
  std::vector<std::string> problems = {"stale"};
  EXPECT_EQ(cache.Get(kT0 + 11'000, &problems).size(), 2u);
  EXPECT_EQ(cache.reads(), reads + 1);
  EXPECT_TRUE(problems.empty());
  EXPECT_EQ(cache.Get(kT0 + 11'000 + 60'000).size(), 2u);  // max age: read again
  EXPECT_EQ(cache.reads(), reads + 2);
}

}  // namespace
}  // namespace gpuman::daemon
