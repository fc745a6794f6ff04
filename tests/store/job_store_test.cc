#include "store/job_store.h"

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "store/lease_store.h"
#include "store/migrations.h"
#include "support/temp_dir.h"

namespace gpuman::store {
namespace {

using model::Job;
using model::JobState;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

// A small stand-in for the scheduler's table (sched/job_state.h; tests link only their
// layer): enough to show the store consults it.
Status TestCheck(JobState from, JobState to) {
  if (from == to) return MakeError(ErrorCode::kConflict, "a state never moves to itself");
  if (model::IsFinal(from)) {
    return MakeError(ErrorCode::kConflict, std::string("cannot leave ") + model::JobStateName(from));
  }
  if (from == JobState::kQueued && to == JobState::kSucceeded) {
    return MakeError(ErrorCode::kConflict, "cannot go from queued to succeeded");
  }
  return {};
}

JobStoreOptions WithCheck() {
  JobStoreOptions options;
  options.check_transition = TestCheck;
  return options;
}

Job Draft(uint32_t uid = 1000) {
  Job job;
  job.name = "train";
  job.uid = uid;
  job.gid = 100;
  job.user = "ada";
  job.argv = {"python3", "train.py"};
  job.cwd = "/home/ada";
  job.output_path = "/home/ada/out.log";
  job.submitted_unix_ms = 1'700'000'000'000;
  return job;
}

// A job with every field set to something unusual.
Job FullDraft() {
  Job job = Draft(4'000'000'000u);  // above INT32_MAX
  job.name = "naïve résumé 🚀";
  job.gid = 4'000'000'001u;
  job.user = "jürgen";
  job.argv = {"sh", "-c", "echo \"hi there\" 'x y'\n\tnext line", "", "a:b", "10:x", "",
              "ünïcödé ✓", std::string("nul\0inside", 10), "2:"};
  job.env = {{"PATH", "/usr/bin:/bin"},
             {"EQ", "a=b=c"},
             {"EMPTY", ""},
             {"MULTI", "line1\nline2"},
             {"UNI", "日本語"},
             {"", "empty name"}};
  job.cwd = "/tmp/dir with spaces";
  job.output_path = "/tmp/out\nlog";
  job.request.count = 3;
  job.request.gpus = std::vector<std::string>{"GPU-aaaa", "GPU-bbbb"};
  job.request.min_free_memory_bytes = int64_t{80} << 30;
  job.request.max_utilization_percent = 15;
  job.request.model = "H100";
  job.request.min_compute_capability = "8.0";
  job.request.exclude = {"GPU-cccc"};
  job.request.allow_shared = true;
  job.priority = -7;
  job.time_limit_ms = 3'600'000;
  job.requeue = true;
  job.after = {1, 22, 333};
  job.reason = "waiting for job 333";
  job.notify = model::JobNotify{false, {"/opt/tell me", "%j:%s", "", "10:x", "ünï\n"}};
  return job;
}

void ExpectSameJob(const Job& a, const Job& b) {
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.uid, b.uid);
  EXPECT_EQ(a.gid, b.gid);
  EXPECT_EQ(a.user, b.user);
  EXPECT_EQ(a.argv, b.argv);
  EXPECT_EQ(a.env, b.env);
  EXPECT_EQ(a.cwd, b.cwd);
  EXPECT_EQ(a.output_path, b.output_path);
  EXPECT_EQ(a.request.count, b.request.count);
  EXPECT_EQ(a.request.gpus, b.request.gpus);
  EXPECT_EQ(a.request.min_free_memory_bytes, b.request.min_free_memory_bytes);
  EXPECT_EQ(a.request.max_utilization_percent, b.request.max_utilization_percent);
  EXPECT_EQ(a.request.model, b.request.model);
  EXPECT_EQ(a.request.min_compute_capability, b.request.min_compute_capability);
  EXPECT_EQ(a.request.exclude, b.request.exclude);
  EXPECT_EQ(a.request.allow_shared, b.request.allow_shared);
  EXPECT_EQ(a.priority, b.priority);
  EXPECT_EQ(a.time_limit_ms, b.time_limit_ms);
  EXPECT_EQ(a.requeue, b.requeue);
  EXPECT_EQ(a.after, b.after);
  EXPECT_EQ(a.state, b.state);
  EXPECT_EQ(a.submitted_unix_ms, b.submitted_unix_ms);
  EXPECT_EQ(a.started_unix_ms, b.started_unix_ms);
  EXPECT_EQ(a.ended_unix_ms, b.ended_unix_ms);
  EXPECT_EQ(a.exit_code, b.exit_code);
  EXPECT_EQ(a.gpu_uuids, b.gpu_uuids);
  EXPECT_EQ(a.lease_id, b.lease_id);
  EXPECT_EQ(a.supervisor_pid, b.supervisor_pid);
  EXPECT_EQ(a.supervisor_start_ticks, b.supervisor_start_ticks);
  EXPECT_EQ(a.reason, b.reason);
  EXPECT_EQ(a.notify, b.notify);
  EXPECT_EQ(a.notified_unix_ms, b.notified_unix_ms);
  EXPECT_EQ(a.notify_outcome, b.notify_outcome);
}

std::vector<int64_t> Ids(const std::vector<Job>& jobs) {
  std::vector<int64_t> ids;
  for (const Job& job : jobs) ids.push_back(job.id);
  return ids;
}

int64_t QueryInt(Database& db, const std::string& sql) {
  auto stmt = db.Prepare("query", sql);
  EXPECT_TRUE(stmt.has_value()) << stmt.error().message;
  if (!stmt) return -1;
  auto use = stmt->Use();
  auto row = stmt->Step();
  return (row && *row) ? stmt->ColumnInt64(0) : -1;
}

class JobStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.Join("state/state.db");
    auto store = JobStore::Open(path_, WithCheck());
    ASSERT_TRUE(store.has_value()) << store.error().message;
    store_ = std::move(*store);
  }

  Job Submit(Job draft) {
    auto job = store_->Submit(std::move(draft));
    EXPECT_TRUE(job.has_value()) << job.error().message;
    return job ? *job : Job{};
  }

  testing::TempDir dir_;
  std::string path_;
  std::unique_ptr<JobStore> store_;
};

// ---- Submit, Get, List

TEST_F(JobStoreTest, SubmitAssignsIdsAndQueuesTheJob) {
  Job draft = Draft();
  draft.id = 99;
  draft.state = JobState::kRunning;
  draft.gpu_uuids = {"GPU-x"};
  draft.lease_id = 5;
  draft.exit_code = 3;
  Job first = Submit(draft);
  Job second = Submit(Draft());
  EXPECT_GT(first.id, 0);
  EXPECT_GT(second.id, first.id);
  EXPECT_EQ(first.state, JobState::kQueued);
  EXPECT_TRUE(first.gpu_uuids.empty());
  EXPECT_FALSE(first.lease_id.has_value());
  EXPECT_FALSE(first.exit_code.has_value());
}

TEST_F(JobStoreTest, EveryFieldRoundTrips) {
  Job submitted = Submit(FullDraft());
  Job expected = FullDraft();
  expected.id = submitted.id;
  ExpectSameJob(submitted, expected);

  auto got = store_->Get(submitted.id);
  ASSERT_TRUE(got.has_value()) << got.error().message;
  ASSERT_TRUE(got->has_value());
  ExpectSameJob(**got, expected);

  // The run fields, set by a transition, round-trip too.
  JobStore::Update update;
  update.gpu_uuids = std::vector<std::string>{"GPU-1", "GPU-0", "MIG-GPU-1/1/0"};
  update.lease_id = 77;
  update.supervisor_pid = 4242;
  update.supervisor_start_ticks = 123456789012;
  update.started_unix_ms = 1'700'000'000'500;
  update.reason = "";
  auto started = store_->Transition(submitted.id, JobState::kQueued, JobState::kStarting, update);
  ASSERT_TRUE(started.has_value()) << started.error().message;
  JobStore::Update done;
  done.ended_unix_ms = 1'700'000'009'000;
  done.exit_code = -9;
  done.reason = "killed by signal 9";
  ASSERT_TRUE(store_->Transition(submitted.id, JobState::kStarting, JobState::kFailed, done));

  expected.state = JobState::kFailed;
  expected.gpu_uuids = *update.gpu_uuids;
  expected.lease_id = 77;
  expected.supervisor_pid = 4242;
  expected.supervisor_start_ticks = 123456789012;
  expected.started_unix_ms = 1'700'000'000'500;
  expected.ended_unix_ms = 1'700'000'009'000;
  expected.exit_code = -9;
  expected.reason = "killed by signal 9";
  auto after = store_->Get(submitted.id);
  ASSERT_TRUE(after.has_value() && after->has_value());
  ExpectSameJob(**after, expected);
}

TEST_F(JobStoreTest, EmptyAndUnsetValuesStayDistinct) {
  Job draft = Draft();
  draft.request.gpus = std::vector<std::string>{};  // "none of them", not "any"
  draft.argv = {""};
  Job a = Submit(draft);
  Job b = Submit(Draft());  // request.gpus unset
  auto got_a = store_->Get(a.id);
  auto got_b = store_->Get(b.id);
  ASSERT_TRUE(got_a.has_value() && got_a->has_value());
  ASSERT_TRUE(got_b.has_value() && got_b->has_value());
  ASSERT_TRUE((*got_a)->request.gpus.has_value());
  EXPECT_TRUE((*got_a)->request.gpus->empty());
  EXPECT_EQ((*got_a)->argv, std::vector<std::string>{""});
  EXPECT_FALSE((*got_b)->request.gpus.has_value());
  EXPECT_FALSE((*got_b)->request.model.has_value());
  EXPECT_FALSE((*got_b)->time_limit_ms.has_value());
  EXPECT_TRUE((*got_b)->env.empty());
  EXPECT_TRUE((*got_b)->after.empty());
}

TEST_F(JobStoreTest, SubmitRefusesAJobWithoutCommandOrGpus) {
  Job no_argv = Draft();
  no_argv.argv.clear();
  auto refused = store_->Submit(no_argv);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, ErrorCode::kInvalidArgument);
  Job no_gpus = Draft();
  no_gpus.request.count = 0;
  refused = store_->Submit(no_gpus);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, ErrorCode::kInvalidArgument);
  EXPECT_TRUE(store_->List(true, std::nullopt)->empty());
}

TEST_F(JobStoreTest, GetOfAnUnknownIdIsEmpty) {
  auto got = store_->Get(12345);
  ASSERT_TRUE(got.has_value()) << got.error().message;
  EXPECT_FALSE(got->has_value());
}

TEST_F(JobStoreTest, ListFiltersByFinalStateAndUser) {
  Job a = Submit(Draft(1000));
  Job b = Submit(Draft(1001));
  Job c = Submit(Draft(1000));
  Job d = Submit(Draft(1000));
  ASSERT_TRUE(store_->Transition(b.id, JobState::kQueued, JobState::kHeld, {}));
  ASSERT_TRUE(store_->Transition(c.id, JobState::kQueued, JobState::kCancelled, {}));
  ASSERT_TRUE(store_->Transition(d.id, JobState::kQueued, JobState::kStarting, {}));
  ASSERT_TRUE(store_->Transition(d.id, JobState::kStarting, JobState::kRunning, {}));

  EXPECT_THAT(Ids(*store_->List(true, std::nullopt)), ElementsAre(a.id, b.id, c.id, d.id));
  EXPECT_THAT(Ids(*store_->List(false, std::nullopt)), ElementsAre(a.id, b.id, d.id));
  EXPECT_THAT(Ids(*store_->List(true, 1000u)), ElementsAre(a.id, c.id, d.id));
  EXPECT_THAT(Ids(*store_->List(false, 1000u)), ElementsAre(a.id, d.id));
  EXPECT_THAT(Ids(*store_->List(true, 4242u)), ElementsAre());
  EXPECT_THAT(Ids(*store_->Active()), ElementsAre(a.id, b.id, d.id));
}

// ---- Transition

TEST_F(JobStoreTest, ManyTransitionsReadSummariesAndKeepTheCommandAndEnvironment) {
  Job a = Submit(FullDraft());
  Job b = Submit(FullDraft());
  ASSERT_FALSE(a.env.empty());
  JobStore::Update hold;
  hold.reason = "by ada";
  auto changed = store_->TransitionAll({{a.id, JobState::kQueued, JobState::kHeld, hold},
                                        {b.id, JobState::kHeld, JobState::kQueued, hold}});
  ASSERT_TRUE(changed.has_value()) << changed.error().message;
  ASSERT_EQ(changed->size(), 2u);
  ASSERT_TRUE((*changed)[0].has_value());
  EXPECT_EQ((*changed)[0]->state, JobState::kHeld);
  EXPECT_TRUE((*changed)[0]->env.empty()) << "a summary";
  EXPECT_TRUE((*changed)[0]->argv.empty());
  ASSERT_FALSE((*changed)[1].has_value());
  EXPECT_EQ((*changed)[1].error().message, "job " + std::to_string(b.id) + " is queued, not held");
  // The stored job keeps what the summary left out.
  auto stored = store_->Get(a.id);
  ASSERT_TRUE(stored.has_value() && stored->has_value());
  EXPECT_EQ((*stored)->argv, a.argv);
  EXPECT_EQ((*stored)->env, a.env);
  EXPECT_EQ((*stored)->state, JobState::kHeld);
  auto summary = store_->Get(a.id, JobFields::kSummary);
  ASSERT_TRUE(summary.has_value() && summary->has_value());
  EXPECT_TRUE((*summary)->env.empty());
  EXPECT_EQ((*summary)->name, a.name);
}

TEST_F(JobStoreTest, TransitionIsACompareAndSet) {
  Job job = Submit(Draft());
  JobStore::Update update;
  update.gpu_uuids = std::vector<std::string>{"GPU-1"};
  update.lease_id = 3;
  auto won = store_->Transition(job.id, JobState::kQueued, JobState::kStarting, update);
  ASSERT_TRUE(won.has_value()) << won.error().message;
  EXPECT_EQ(won->state, JobState::kStarting);
  EXPECT_EQ(won->gpu_uuids, std::vector<std::string>{"GPU-1"});
  EXPECT_EQ(won->lease_id, 3);

  // A second starter (stale view: it still thinks the job is queued) loses.
  JobStore::Update other;
  other.gpu_uuids = std::vector<std::string>{"GPU-2"};
  auto lost = store_->Transition(job.id, JobState::kQueued, JobState::kStarting, other);
  ASSERT_FALSE(lost.has_value());
  EXPECT_EQ(lost.error().code, ErrorCode::kConflict);
  EXPECT_EQ(lost.error().message,
            "job " + std::to_string(job.id) + " is starting, not queued");
  // ...and changed nothing.
  auto got = store_->Get(job.id);
  EXPECT_EQ((*got)->gpu_uuids, std::vector<std::string>{"GPU-1"});
  EXPECT_EQ((*got)->state, JobState::kStarting);
}

TEST_F(JobStoreTest, TransitionOfAFinishedJobSaysSo) {
  Job job = Submit(Draft());
  ASSERT_TRUE(store_->Transition(job.id, JobState::kQueued, JobState::kStarting, {}));
  ASSERT_TRUE(store_->Transition(job.id, JobState::kStarting, JobState::kRunning, {}));
  ASSERT_TRUE(store_->Transition(job.id, JobState::kRunning, JobState::kSucceeded, {}));
  const std::string expected = "job " + std::to_string(job.id) + " is already succeeded";

  // Cancel with a stale view (CAS fails)...
  auto cancel = store_->Transition(job.id, JobState::kRunning, JobState::kCancelled, {});
  ASSERT_FALSE(cancel.has_value());
  EXPECT_EQ(cancel.error().code, ErrorCode::kConflict);
  EXPECT_EQ(cancel.error().message, expected);
  // ...or with an up-to-date one (the check refuses).
  cancel = store_->Transition(job.id, JobState::kSucceeded, JobState::kCancelled, {});
  ASSERT_FALSE(cancel.has_value());
  EXPECT_EQ(cancel.error().code, ErrorCode::kConflict);
  EXPECT_EQ(cancel.error().message, expected);
}

TEST_F(JobStoreTest, TheTransitionCheckCanRefuse) {
  Job job = Submit(Draft());
  JobStore::Update update;
  update.exit_code = 0;
  auto refused = store_->Transition(job.id, JobState::kQueued, JobState::kSucceeded, update);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, ErrorCode::kConflict);
  EXPECT_EQ(refused.error().message,
            "job " + std::to_string(job.id) + ": cannot go from queued to succeeded");
  auto got = store_->Get(job.id);
  EXPECT_EQ((*got)->state, JobState::kQueued);
  EXPECT_FALSE((*got)->exit_code.has_value());
}

TEST_F(JobStoreTest, WithoutACheckOnlyTheCompareAndSetApplies) {
  auto store = JobStore::Open(path_);
  ASSERT_TRUE(store.has_value());
  Job job = Submit(Draft());
  EXPECT_TRUE((*store)->Transition(job.id, JobState::kQueued, JobState::kSucceeded, {}));
  EXPECT_TRUE((*store)->Transition(job.id, JobState::kSucceeded, JobState::kQueued, {}));
  EXPECT_FALSE((*store)->Transition(job.id, JobState::kSucceeded, JobState::kQueued, {}));
}

TEST_F(JobStoreTest, TransitionOfAnUnknownJobIsNotFound) {
  auto missing = store_->Transition(404, JobState::kQueued, JobState::kStarting, {});
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(missing.error().message, "job 404: no such job");
}

TEST_F(JobStoreTest, SameStateTransitionUpdatesFieldsOnly) {
  Job job = Submit(Draft());
  ASSERT_TRUE(store_->Transition(job.id, JobState::kQueued, JobState::kStarting, {}));
  JobStore::Update update;
  update.supervisor_pid = 31337;
  update.supervisor_start_ticks = 99;
  auto updated = store_->Transition(job.id, JobState::kStarting, JobState::kStarting, update);
  ASSERT_TRUE(updated.has_value()) << updated.error().message;
  EXPECT_EQ(updated->supervisor_pid, 31337);
  EXPECT_EQ(QueryInt(store_->DatabaseForTesting(),
                     "SELECT COUNT(*) FROM job_events WHERE job_id = " + std::to_string(job.id)),
            2);  // submitted, queued -> starting
}

TEST_F(JobStoreTest, ClearRunForgetsTheLastAttempt) {
  Job job = Submit(Draft());
  JobStore::Update start;
  start.gpu_uuids = std::vector<std::string>{"GPU-1"};
  start.lease_id = 8;
  start.supervisor_pid = 100;
  start.supervisor_start_ticks = 5;
  start.started_unix_ms = 10;
  ASSERT_TRUE(store_->Transition(job.id, JobState::kQueued, JobState::kStarting, start));
  ASSERT_TRUE(store_->Transition(job.id, JobState::kStarting, JobState::kRunning, {}));
  JobStore::Update requeue;
  requeue.clear_run = true;
  requeue.reason = "GPU-1 was lost; requeued";
  auto queued = store_->Transition(job.id, JobState::kRunning, JobState::kQueued, requeue);
  ASSERT_TRUE(queued.has_value()) << queued.error().message;
  auto got = store_->Get(job.id);
  const Job& j = **got;
  EXPECT_EQ(j.state, JobState::kQueued);
  EXPECT_TRUE(j.gpu_uuids.empty());
  EXPECT_FALSE(j.lease_id || j.supervisor_pid || j.supervisor_start_ticks || j.started_unix_ms);
  EXPECT_EQ(j.reason, "GPU-1 was lost; requeued");
}

TEST_F(JobStoreTest, EventsRecordSubmissionAndStateChanges) {
  Job job = Submit(Draft());
  ASSERT_TRUE(store_->Transition(job.id, JobState::kQueued, JobState::kHeld, {}));
  JobStore::Update update;
  update.reason = "resumed by ada";
  ASSERT_TRUE(store_->Transition(job.id, JobState::kHeld, JobState::kQueued, update));
  auto stmt = store_->DatabaseForTesting().Prepare(
      "events", "SELECT kind, COALESCE(from_state, '-'), to_state, reason, at_unix_ms "
                "FROM job_events WHERE job_id = ?1 ORDER BY id");
  ASSERT_TRUE(stmt.has_value());
  auto use = stmt->Use();
  stmt->Bind(1, job.id);
  std::vector<std::string> rows;
  while (*stmt->Step()) {
    rows.push_back(stmt->ColumnText(0) + " " + stmt->ColumnText(1) + " " + stmt->ColumnText(2) +
                   " " + stmt->ColumnText(3));
    EXPECT_GT(stmt->ColumnInt64(4), 1'600'000'000'000);  // a real clock, in ms
  }
  EXPECT_THAT(rows, ElementsAre("submitted - queued ", "state queued held ",
                                "state held queued resumed by ada"));
}

// ---- Usage

TEST_F(JobStoreTest, UsageAccumulatesAndDecays) {
  const int64_t hour = 3'600'000;
  const int64_t t0 = 1000 * hour;  // bucket-aligned
  ASSERT_TRUE(store_->AddUsage(1000, 100.0, t0));
  ASSERT_TRUE(store_->AddUsage(1000, 50.0, t0 + 10));  // same bucket
  ASSERT_TRUE(store_->AddUsage(1001, 8.0, t0 + 2 * hour));
  ASSERT_TRUE(store_->AddUsage(1002, 0.0, t0));  // nothing recorded

  auto now = store_->Usage(t0 + 2 * hour, 3600.0);  // one-hour half-life
  ASSERT_TRUE(now.has_value()) << now.error().message;
  ASSERT_EQ(now->size(), 2u);
  EXPECT_EQ((*now)[0].first, 1000u);
  EXPECT_NEAR((*now)[0].second, 150.0 / 4, 1e-9);  // two half-lives old
  EXPECT_EQ((*now)[1].first, 1001u);
  EXPECT_NEAR((*now)[1].second, 8.0, 1e-9);

  auto undecayed = store_->Usage(t0, 1e12);
  ASSERT_TRUE(undecayed.has_value());
  EXPECT_NEAR((*undecayed)[0].second, 150.0, 1e-6);
  EXPECT_NEAR((*undecayed)[1].second, 8.0, 1e-6);  // in the future: counts fully

  EXPECT_EQ(store_->AddUsage(1000, -1.0, t0).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(store_->AddUsage(1000, std::nan(""), t0).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(store_->Usage(t0, 0.0).error().code, ErrorCode::kInvalidArgument);
}

TEST_F(JobStoreTest, UsageBucketsAreConfigurableAndOldOnesArePruned) {
  JobStoreOptions options;
  options.usage_bucket = std::chrono::milliseconds(1000);
  options.usage_retention = std::chrono::milliseconds(60'000);
  auto store = JobStore::Open(path_, options);
  ASSERT_TRUE(store.has_value());
  ASSERT_TRUE((*store)->AddUsage(7, 10.0, 1'500));     // bucket 1000
  ASSERT_TRUE((*store)->AddUsage(7, 0.000001, 2'999));  // bucket 2000; one microsecond
  auto used = (*store)->Usage(2'000, 1.0);
  ASSERT_TRUE(used.has_value());
  EXPECT_THAT(*used, ElementsAre(Pair(7u, ::testing::DoubleNear(5.0 + 0.000001, 1e-12))));

  ASSERT_TRUE((*store)->AddUsage(8, 1.0, 62'000));  // buckets before 2000 are now too old
  used = (*store)->Usage(62'000, 1e12);
  ASSERT_TRUE(used.has_value());
  EXPECT_THAT(*used, ElementsAre(Pair(7u, ::testing::DoubleNear(0.000001, 1e-9)),
                                 Pair(8u, ::testing::DoubleNear(1.0, 1e-9))));
}

// ---- Drain

TEST_F(JobStoreTest, DrainAndUndrain) {
  ASSERT_TRUE(store_->Drain("GPU-b", "fan noise", 0, 100));
  ASSERT_TRUE(store_->Drain("GPU-a", "ECC errors", 0, 200));
  ASSERT_TRUE(store_->Drain("GPU-b", "fan replaced, burn-in", 1000, 300));  // replaces
  auto drained = store_->Drained();
  ASSERT_TRUE(drained.has_value()) << drained.error().message;
  EXPECT_THAT(*drained, ElementsAre(Pair("GPU-a", "ECC errors"),
                                    Pair("GPU-b", "fan replaced, burn-in")));
  auto details = store_->DrainedDetails();
  ASSERT_TRUE(details.has_value());
  ASSERT_EQ(details->size(), 2u);
  EXPECT_EQ((*details)[1].by_uid, 1000u);
  EXPECT_EQ((*details)[1].since_unix_ms, 300);

  ASSERT_TRUE(store_->Undrain("GPU-a"));
  auto again = store_->Undrain("GPU-a");
  ASSERT_FALSE(again.has_value());
  EXPECT_EQ(again.error().code, ErrorCode::kNotFound);
  EXPECT_THAT(*store_->Drained(), ElementsAre(Pair("GPU-b", "fan replaced, burn-in")));
  EXPECT_EQ(store_->Drain("", "x", 0, 1).error().code, ErrorCode::kInvalidArgument);
}

// ---- Files, schema, restart

TEST_F(JobStoreTest, EverythingSurvivesReopening) {
  Job job = Submit(FullDraft());
  Job other = Submit(Draft());
  ASSERT_TRUE(store_->Transition(other.id, JobState::kQueued, JobState::kStarting, {}));
  ASSERT_TRUE(store_->AddUsage(1000, 30.0, 0));
  ASSERT_TRUE(store_->Drain("GPU-z", "broken", 0, 5));
  store_.reset();  // the daemon stops

  auto reopened = JobStore::Open(path_, WithCheck());
  ASSERT_TRUE(reopened.has_value()) << reopened.error().message;
  auto got = (*reopened)->Get(job.id);
  ASSERT_TRUE(got.has_value() && got->has_value());
  Job expected = FullDraft();
  expected.id = job.id;
  ExpectSameJob(**got, expected);
  EXPECT_EQ((*(*reopened)->Get(other.id))->state, JobState::kStarting);
  EXPECT_THAT(*(*reopened)->Usage(0, 60.0), ElementsAre(Pair(1000u, 30.0)));
  EXPECT_THAT(*(*reopened)->Drained(), ElementsAre(Pair("GPU-z", "broken")));
  // Ids keep increasing across restarts.
  auto next = (*reopened)->Submit(Draft());
  ASSERT_TRUE(next.has_value());
  EXPECT_GT(next->id, other.id);
}

TEST(JobStoreFileTest, LeaseAndJobStoresShareOneFileAtTheLatestVersion) {
  testing::TempDir dir;
  const std::string path = dir.Join("state.db");
  auto leases = LeaseStore::Open(path);
  ASSERT_TRUE(leases.has_value()) << leases.error().message;
  auto jobs = JobStore::Open(path);
  ASSERT_TRUE(jobs.has_value()) << jobs.error().message;
  EXPECT_EQ(QueryInt((*jobs)->DatabaseForTesting(), "PRAGMA user_version"), AllMigrations().back().version);
  EXPECT_GE(AllMigrations().back().version, 3);

  auto submitted = (*jobs)->Submit(Draft());
  ASSERT_TRUE(submitted.has_value());
  model::Lease draft;
  draft.uid = 1000;
  draft.user = "ada";
  draft.command = "job " + std::to_string(submitted->id);
  draft.kind = "run";
  draft.processes = {{1, 1}};
  auto take = [](const std::vector<model::Lease>&) -> Result<std::vector<std::string>> {
    return std::vector<std::string>{"GPU-1"};
  };
  auto alive = [](const model::LeaseProcess&) { return true; };
  auto lease = (*leases)->Acquire(draft, take, alive);
  ASSERT_TRUE(lease.has_value()) << lease.error().message;
  JobStore::Update update;
  update.lease_id = lease->id;
  update.gpu_uuids = lease->gpu_uuids;
  auto started =
      (*jobs)->Transition(submitted->id, JobState::kQueued, JobState::kStarting, update);
  ASSERT_TRUE(started.has_value()) << started.error().message;
  EXPECT_EQ(started->lease_id, lease->id);
  EXPECT_TRUE((*leases)->Release(lease->id));
  EXPECT_EQ((*(*jobs)->Get(submitted->id))->lease_id, lease->id);  // history stays
}

TEST(JobStoreFileTest, VersionOneFileMigratesAndKeepsItsLeases) {
  testing::TempDir dir;
  const std::string path = dir.Join("state.db");
  {
    // A file as a gpuman of schema version 1 left it.
    auto db = Database::Open(path);
    ASSERT_TRUE(db.has_value()) << db.error().message;
    ASSERT_EQ(*Migrate(**db, AllMigrations().first(1)), 0);
    ASSERT_TRUE((*db)->ExecScript("v1 rows", R"sql(
      INSERT INTO leases (id, uid, user, command, kind, created_unix_ms)
        VALUES (41, 1000, 'ada', 'python3 train.py', 'run', 1700000000000);
      INSERT INTO lease_gpus (gpu_uuid, lease_id, position) VALUES ('GPU-7', 41, 0);
      INSERT INTO lease_processes (lease_id, pid, start_time_ticks) VALUES (41, 4321, 99);
      INSERT INTO events (at_unix_ms, kind, lease_id, uid, gpu_uuids)
        VALUES (1700000000000, 'acquired', 41, 1000, 'GPU-7');
    )sql"));
    EXPECT_EQ(QueryInt(**db, "PRAGMA user_version"), 1);
  }
  auto jobs = JobStore::Open(path);
  ASSERT_TRUE(jobs.has_value()) << jobs.error().message;
  EXPECT_EQ(QueryInt((*jobs)->DatabaseForTesting(), "PRAGMA user_version"), AllMigrations().back().version);
  EXPECT_TRUE((*jobs)->Active()->empty());
  EXPECT_TRUE((*jobs)->Submit(Draft()).has_value());

  auto leases = LeaseStore::Open(path);
  ASSERT_TRUE(leases.has_value()) << leases.error().message;
  auto recorded = (*leases)->ListRecorded();
  ASSERT_TRUE(recorded.has_value());
  ASSERT_EQ(recorded->size(), 1u);
  EXPECT_EQ((*recorded)[0].id, 41);
  EXPECT_EQ((*recorded)[0].gpu_uuids, std::vector<std::string>{"GPU-7"});
  ASSERT_EQ((*recorded)[0].processes.size(), 1u);
  EXPECT_EQ((*recorded)[0].processes[0].pid, 4321);
  EXPECT_EQ(QueryInt((*leases)->DatabaseForTesting(), "SELECT COUNT(*) FROM events"), 1);
}

// Schema 3 added jobs.failure: a version 2 file keeps its jobs, which read as "ran".
TEST(JobStoreFileTest, VersionTwoFileMigratesAndItsJobsHaveNoFailureKind) {
  testing::TempDir dir;
  const std::string path = dir.Join("state.db");
  int64_t old_id = 0;
  {
    auto db = Database::Open(path);
    ASSERT_TRUE(db.has_value()) << db.error().message;
    ASSERT_EQ(*Migrate(**db, AllMigrations().first(2)), 0);
    ASSERT_TRUE((*db)->ExecScript("v2 rows", R"sql(
      INSERT INTO jobs (id, name, uid, gid, user, argv, env, cwd, output_path, req_count,
        req_exclude, req_allow_shared, priority, requeue, after, state, submitted_unix_ms,
        ended_unix_ms, exit_code, gpu_uuids, reason)
      VALUES (7, 'old', 1000, 1000, 'ada', '4:true', '', '/home/ada', '', 1, '', 0, 0, 0, '',
        'failed', 1700000000000, 1700000001000, 2, '', 'exit code 2');
    )sql"));
    old_id = 7;
  }
  auto jobs = JobStore::Open(path);
  ASSERT_TRUE(jobs.has_value()) << jobs.error().message;
  EXPECT_EQ(QueryInt((*jobs)->DatabaseForTesting(), "PRAGMA user_version"), AllMigrations().back().version);
  auto old = (*jobs)->Get(old_id);
  ASSERT_TRUE(old.has_value() && *old) << (old ? "" : old.error().message);
  EXPECT_EQ((*old)->state, JobState::kFailed);
  EXPECT_EQ((*old)->exit_code, 2);
  EXPECT_EQ((*old)->failure, model::JobFailure::kNone);
}

TEST(JobStoreFileTest, FailureKindIsStoredByTransitionAndClearedByARequeue) {
  testing::TempDir dir;
  auto store = JobStore::Open(dir.Join("state.db"));
  ASSERT_TRUE(store.has_value());
  auto job = (*store)->Submit(Draft());
  ASSERT_TRUE(job.has_value());
  JobStore::Update failed;
  failed.failure = model::JobFailure::kCommandNotFound;
  failed.reason = "command not found: x";
  ASSERT_TRUE((*store)->Transition(job->id, JobState::kQueued, JobState::kFailed, failed).has_value());
  EXPECT_EQ((*(*store)->Get(job->id))->failure, model::JobFailure::kCommandNotFound);
  auto other = (*store)->Submit(Draft());
  JobStore::Update starting;
  starting.failure = model::JobFailure::kCannotStart;
  ASSERT_TRUE((*store)->Transition(other->id, JobState::kQueued, JobState::kStarting, starting).has_value());
  JobStore::Update requeue;
  requeue.clear_run = true;
  auto back = (*store)->Transition(other->id, JobState::kStarting, JobState::kQueued, requeue);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->failure, model::JobFailure::kNone);
  EXPECT_EQ((*(*store)->Get(other->id))->failure, model::JobFailure::kNone);
  ASSERT_TRUE((*store)->DatabaseForTesting().ExecScript("break", "UPDATE jobs SET failure = 'odd'"));
  auto got = (*store)->Get(job->id);
  ASSERT_FALSE(got.has_value());
  EXPECT_THAT(got.error().message, HasSubstr("unreadable failure column"));
}

TEST(JobStoreFileTest, CorruptListColumnIsReportedNotGuessed) {
  testing::TempDir dir;
  auto store = JobStore::Open(dir.Join("state.db"));
  ASSERT_TRUE(store.has_value());
  auto job = (*store)->Submit(Draft());
  ASSERT_TRUE(job.has_value());
  ASSERT_TRUE((*store)->DatabaseForTesting().ExecScript(
      "break argv", "UPDATE jobs SET argv = '9:short'"));
  auto got = (*store)->Get(job->id);
  ASSERT_FALSE(got.has_value());
  EXPECT_EQ(got.error().code, ErrorCode::kIo);
  EXPECT_THAT(got.error().message, HasSubstr("unreadable argv column"));
}

// ---- Concurrency: two schedulers race to start the same jobs

constexpr int kJobs = 100;
constexpr int kRacers = 2;

struct Shared {
  std::atomic<int32_t> wins[kJobs];
  std::atomic<int32_t> ready;
};
static_assert(std::atomic<int32_t>::is_always_lock_free);

int Racer(const std::string& path, int64_t first_id, Shared* shared) {
  auto store = JobStore::Open(path, WithCheck());
  if (!store) {
    std::fprintf(stderr, "racer %d: %s\n", getpid(), store.error().message.c_str());
    return 2;
  }
  shared->ready++;
  while (shared->ready.load() < kRacers) sched_yield();  // start together
  for (int i = 0; i < kJobs; ++i) {
    JobStore::Update update;
    update.supervisor_pid = getpid();
    auto won = (*store)->Transition(first_id + i, JobState::kQueued, JobState::kStarting, update);
    if (won) {
      shared->wins[i]++;
    } else if (won.error().code != ErrorCode::kConflict) {
      std::fprintf(stderr, "racer %d: %s\n", getpid(), won.error().message.c_str());
      return 3;
    }
  }
  return 0;
}

TEST(JobStoreConcurrencyTest, EachJobIsStartedExactlyOnce) {
  testing::TempDir dir;
  const std::string path = dir.Join("state.db");
  int64_t first_id = 0;
  {
    auto store = JobStore::Open(path);
    ASSERT_TRUE(store.has_value()) << store.error().message;
    for (int i = 0; i < kJobs; ++i) {
      auto job = (*store)->Submit(Draft());
      ASSERT_TRUE(job.has_value());
      if (i == 0) first_id = job->id;
      ASSERT_EQ(job->id, first_id + i);
    }
  }
  void* mem = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                   -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  auto* shared = new (mem) Shared{};
  std::vector<pid_t> children;
  for (int p = 0; p < kRacers; ++p) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) _exit(Racer(path, first_id, shared));
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "racer exit status " << status;
  }
  for (int i = 0; i < kJobs; ++i) EXPECT_EQ(shared->wins[i].load(), 1) << "job " << first_id + i;

  // The database agrees: every job is starting, with the pid of one racer, and logged
  // one state change.
  auto store = JobStore::Open(path);
  ASSERT_TRUE(store.has_value());
  auto jobs = (*store)->Active();
  ASSERT_TRUE(jobs.has_value());
  ASSERT_EQ(jobs->size(), static_cast<size_t>(kJobs));
  for (const Job& job : *jobs) {
    EXPECT_EQ(job.state, JobState::kStarting);
    ASSERT_TRUE(job.supervisor_pid.has_value());
    EXPECT_TRUE(*job.supervisor_pid == children[0] || *job.supervisor_pid == children[1]);
  }
  EXPECT_EQ(QueryInt((*store)->DatabaseForTesting(),
                     "SELECT COUNT(*) FROM job_events WHERE kind = 'state'"),
            kJobs);
  munmap(mem, sizeof(Shared));
}

TEST_F(JobStoreTest, OutputPatternsAreFilledInWithTheNewId) {
  Job draft = Draft();
  draft.output_path = "/home/ada/%x-%j.log";
  Job a = Submit(draft);
  EXPECT_EQ(a.output_path, "/home/ada/train-" + std::to_string(a.id) + ".log");
  auto stored = store_->Get(a.id);
  ASSERT_TRUE(stored.has_value() && stored->has_value());
  EXPECT_EQ((*stored)->output_path, a.output_path) << "stored expanded: supervisor, logs and show agree";
  draft.output_path = "/" + std::string(model::kMaxJobPathBytes - 3, 'x') + "%x";  // "train": 3 bytes more
  auto over = store_->Submit(draft);
  ASSERT_FALSE(over.has_value());
  EXPECT_EQ(over.error().code, ErrorCode::kInvalidArgument);
  EXPECT_THAT(over.error().message, HasSubstr("once its patterns are filled in"));
  auto active = store_->Active();
  ASSERT_TRUE(active.has_value());
  EXPECT_EQ(active->size(), 1u) << "the refused job was not stored";
}

// ---- Summaries (the daemon's view of the queue)

TEST_F(JobStoreTest, SummariesLeaveTheCommandAndEnvironmentOnDisk) {
  Job a = Submit(FullDraft());
  auto list = store_->ActiveSummaries();
  ASSERT_TRUE(list.has_value()) << list.error().message;
  ASSERT_EQ((*list)->size(), 1u);
  const Job& summary = (*list)->front();
  EXPECT_EQ(summary.id, a.id);
  EXPECT_TRUE(summary.argv.empty());
  EXPECT_TRUE(summary.env.empty());
  EXPECT_EQ(summary.name, a.name) << "everything else is read";
  EXPECT_EQ(summary.cwd, a.cwd);
  EXPECT_EQ(summary.request.count, 3);
  EXPECT_EQ(summary.request.exclude, a.request.exclude);
  // `queue`'s pages: the same, through List.
  auto page = store_->List(true, std::nullopt, 0, -1, JobFields::kSummary);
  ASSERT_TRUE(page.has_value());
  ASSERT_EQ(page->size(), 1u);
  EXPECT_TRUE(page->front().env.empty());
  EXPECT_EQ(page->front().user, a.user);
  // The whole job is still there for whoever starts it.
  auto whole = store_->Get(a.id);
  ASSERT_TRUE(whole.has_value() && whole->has_value());
  EXPECT_EQ((*whole)->env, a.env);
}

TEST_F(JobStoreTest, SummariesFollowThisStoresWritesWithoutChangingAListAlreadyHandedOut) {
  Job a = Submit(Draft());
  auto before = store_->ActiveSummaries();
  ASSERT_TRUE(before.has_value());
  EXPECT_THAT(Ids(**before), ElementsAre(a.id));
  auto again = store_->ActiveSummaries();
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->get(), before->get()) << "nothing changed: the same list, not read again";

  Job b = Submit(Draft());
  Job c = Submit(Draft());
  JobStore::Update start;
  start.gpu_uuids = std::vector<std::string>{"GPU-1"};
  ASSERT_TRUE(store_->Transition(a.id, JobState::kQueued, JobState::kStarting, start));
  ASSERT_TRUE(store_->Transition(b.id, JobState::kQueued, JobState::kCancelled, {}));
  auto after = store_->ActiveSummaries();
  ASSERT_TRUE(after.has_value());
  EXPECT_THAT(Ids(**after), ElementsAre(a.id, c.id)) << "cancelled b left, c joined";
  EXPECT_EQ((*after)->front().state, JobState::kStarting);
  EXPECT_THAT((*after)->front().gpu_uuids, ElementsAre("GPU-1"));
  EXPECT_TRUE((*after)->back().env.empty()) << "a submitted job joins as a summary";
  // The list handed out before is as it was.
  EXPECT_THAT(Ids(**before), ElementsAre(a.id));
  EXPECT_EQ((*before)->front().state, JobState::kQueued);
  // And what was applied in place equals a fresh read.
  auto fresh = JobStore::Open(path_);
  ASSERT_TRUE(fresh.has_value());
  auto read = (*fresh)->ActiveSummaries();
  ASSERT_TRUE(read.has_value());
  ASSERT_EQ((*read)->size(), (*after)->size());
  for (size_t i = 0; i < (*read)->size(); ++i) {
    EXPECT_EQ((**read)[i].id, (**after)[i].id);
    EXPECT_EQ((**read)[i].state, (**after)[i].state);
    EXPECT_EQ((**read)[i].gpu_uuids, (**after)[i].gpu_uuids);
    EXPECT_EQ((**read)[i].reason, (**after)[i].reason);
  }
}

TEST_F(JobStoreTest, SummariesSeeAnotherProcesssCommits) {
  Job a = Submit(Draft());
  ASSERT_TRUE(store_->ActiveSummaries().has_value());
  auto v1 = store_->CurrentVersion();
  ASSERT_TRUE(v1.has_value());
  // A supervisor (its own connection) records the start, then the end.
  auto other = JobStore::Open(path_, WithCheck());
  ASSERT_TRUE(other.has_value());
  ASSERT_TRUE((*other)->Transition(a.id, JobState::kQueued, JobState::kRunning, {}));
  auto v2 = store_->CurrentVersion();
  ASSERT_TRUE(v2.has_value());
  EXPECT_FALSE(*v1 == *v2) << "another connection's commit changes the version";
  auto running = store_->ActiveSummaries();
  ASSERT_TRUE(running.has_value());
  ASSERT_EQ((*running)->size(), 1u);
  EXPECT_EQ((*running)->front().state, JobState::kRunning);
  // This store writes while another commit is unseen: it must not paper over it.
  Job b = Submit(Draft());
  ASSERT_TRUE((*other)->Transition(a.id, JobState::kRunning, JobState::kSucceeded, {}));
  Job c = Submit(Draft());
  auto now = store_->ActiveSummaries();
  ASSERT_TRUE(now.has_value());
  EXPECT_THAT(Ids(**now), ElementsAre(b.id, c.id));
  auto v3 = store_->CurrentVersion();
  auto v4 = store_->CurrentVersion();
  ASSERT_TRUE(v3.has_value() && v4.has_value());
  EXPECT_TRUE(*v3 == *v4) << "no change, same version";
}

// ---- Job arrays

TEST_F(JobStoreTest, AnArrayIsOneTaskRowPerIndexNamedByItsFirstTasksId) {
  Job before = Submit(Draft());
  Job draft = Draft();
  draft.output_path = "/logs/%x-%A_%a-%j.log";
  draft.name = "sweep";
  auto tasks = store_->SubmitArray(draft, {0, 1, 5}, 2);
  ASSERT_TRUE(tasks.has_value()) << tasks.error().message;
  ASSERT_EQ(tasks->size(), 3u);
  const int64_t array = tasks->front().id;
  EXPECT_GT(array, before.id);
  for (size_t i = 0; i < tasks->size(); ++i) {
    const Job& t = (*tasks)[i];
    EXPECT_EQ(t.array_id, array);
    EXPECT_EQ(t.array_limit, 2);
    EXPECT_TRUE(t.argv.empty()) << "returned as summaries";
  }
  EXPECT_EQ((*tasks)[2].array_task, 5);
  // Read back: whole rows, patterns filled in per task, the array's own listing.
  auto task5 = store_->GetTask(array, 5);
  ASSERT_TRUE(task5.has_value() && *task5);
  EXPECT_EQ((*task5)->id, (*tasks)[2].id);
  EXPECT_EQ((*task5)->argv, draft.argv) << "every task has the command";
  EXPECT_EQ((*task5)->output_path, "/logs/sweep-" + std::to_string(array) + "_5-" + std::to_string((*task5)->id) + ".log");
  auto head = store_->Get(array);
  ASSERT_TRUE(head.has_value() && *head);
  EXPECT_TRUE(model::IsArrayHead(**head));
  EXPECT_EQ((*head)->array_task, 0);
  EXPECT_FALSE(model::IsArrayHead(**store_->GetTask(array, 1)));
  auto listed = store_->ArrayTasks(array);
  ASSERT_TRUE(listed.has_value());
  EXPECT_THAT(Ids(*listed), ElementsAre((*tasks)[0].id, (*tasks)[1].id, (*tasks)[2].id));
  EXPECT_TRUE((*store_->GetTask(array, 2)) == std::nullopt);
  EXPECT_TRUE(store_->ArrayTasks(before.id)->empty()) << "a plain job is no array";
  EXPECT_FALSE(before.array_id.has_value());
  // The kept summaries saw the whole array, as a fresh read does.
  auto kept = store_->ActiveSummaries();
  ASSERT_TRUE(kept.has_value());
  EXPECT_EQ((*kept)->size(), 4u);
  auto fresh = JobStore::Open(path_);
  ASSERT_TRUE(fresh.has_value());
  auto read = (*fresh)->ActiveSummaries();
  ASSERT_TRUE(read.has_value());
  ASSERT_EQ((*read)->size(), 4u);
  EXPECT_EQ((*read)->back().array_task, 5);
  EXPECT_EQ((**kept).back().array_task, 5);
  EXPECT_FALSE(store_->SubmitArray(Draft(), {}, std::nullopt).has_value());
}

TEST_F(JobStoreTest, AnArraysOutcomeIsReadWithoutItsTasks) {
  auto tasks = store_->SubmitArray(Draft(), {0, 1, 2}, std::nullopt);
  ASSERT_TRUE(tasks.has_value()) << tasks.error().message;
  const int64_t array = tasks->front().id;
  auto standing = [&] {
    auto s = store_->ArrayOutcome(array);
    EXPECT_TRUE(s.has_value() && *s);
    return s && *s ? **s : JobStore::ArrayStanding{-1};
  };
  // Through the states the transition table allows: queued, starting, running, the end.
  auto finish = [&](int64_t id, JobState to, std::optional<int> code) {
    ASSERT_TRUE(store_->Transition(id, JobState::kQueued, JobState::kStarting, {}).has_value());
    ASSERT_TRUE(store_->Transition(id, JobState::kStarting, JobState::kRunning, {}).has_value());
    JobStore::Update u;
    u.exit_code = code;
    ASSERT_TRUE(store_->Transition(id, JobState::kRunning, to, u).has_value());
  };
  auto end = [&](size_t i, JobState to, std::optional<int> code) { finish((*tasks)[i].id, to, code); };
  EXPECT_EQ(standing().state, JobState::kQueued);
  end(0, JobState::kSucceeded, 0);
  end(2, JobState::kFailed, 3);
  EXPECT_EQ(standing().task, 1) << "an unfinished task first, though task 2 failed";
  EXPECT_EQ(standing().state, JobState::kQueued);
  end(1, JobState::kSucceeded, 0);
  EXPECT_EQ(standing().task, 2) << "then the first that did not succeed";
  EXPECT_EQ(standing().state, JobState::kFailed);
  EXPECT_EQ(standing().exit_code, 3);
  auto ok = store_->SubmitArray(Draft(), {4, 9}, std::nullopt);
  ASSERT_TRUE(ok.has_value());
  for (const Job& t : *ok) finish(t.id, JobState::kSucceeded, 0);
  auto all_ok = store_->ArrayOutcome(ok->front().id);
  ASSERT_TRUE(all_ok.has_value() && *all_ok);
  EXPECT_EQ((*all_ok)->task, 9) << "all succeeded: the last task";
  EXPECT_EQ((*all_ok)->state, JobState::kSucceeded);
  EXPECT_EQ(*store_->ArrayOutcome(12345), std::nullopt);
}


// ---- End-of-job notifications (schema 8)

void Finish(JobStore& store, int64_t id, JobState to, std::optional<int> code) {
  ASSERT_TRUE(store.Transition(id, JobState::kQueued, JobState::kStarting, {}).has_value());
  ASSERT_TRUE(store.Transition(id, JobState::kStarting, JobState::kRunning, {}).has_value());
  JobStore::Update u;
  u.exit_code = code;
  ASSERT_TRUE(store.Transition(id, JobState::kRunning, to, u).has_value());
}

std::vector<int64_t> DueIds(JobStore& store) {
  auto due = store.DueNotifications();
  EXPECT_TRUE(due.has_value()) << due.error().message;
  return due ? Ids(*due) : std::vector<int64_t>{-1};
}

TEST_F(JobStoreTest, ANotifyIsStoredWithTheJobAndReadBackInEveryView) {
  Job program = Draft();
  program.notify = model::JobNotify{false, {"/home/ada/bin/tell", "job %j", "", "it's \"%s\""}};
  Job mail = Draft();
  mail.notify = model::JobNotify{true, {}};
  const Job a = Submit(program), b = Submit(mail), c = Submit(Draft());
  EXPECT_EQ((*store_->Get(a.id))->notify, program.notify);
  EXPECT_EQ((*store_->Get(b.id))->notify, mail.notify);
  EXPECT_EQ((*store_->Get(c.id))->notify, std::nullopt);
  auto summaries = store_->ActiveSummaries();
  ASSERT_TRUE(summaries.has_value());
  ASSERT_EQ((*summaries)->size(), 3u);
  EXPECT_EQ((**summaries)[0].notify, program.notify) << "summaries carry it too (show, the daemon)";
  EXPECT_EQ((*store_->Get(a.id))->notified_unix_ms, std::nullopt);
  ASSERT_TRUE(store_->DatabaseForTesting().ExecScript("break", "UPDATE jobs SET notify_kind = 'pager' WHERE id = " + std::to_string(a.id)));
  auto broken = store_->Get(a.id);
  ASSERT_FALSE(broken.has_value());
  EXPECT_THAT(broken.error().message, HasSubstr("unreadable notify_kind column"));
}

TEST_F(JobStoreTest, ANotificationIsDueOnceTheJobIsFinalAndUntilItIsMarked) {
  Job draft = Draft();
  draft.notify = model::JobNotify{false, {"/bin/true"}};
  const Job ends = Submit(draft), cancelled = Submit(draft), runs = Submit(draft), plain = Submit(Draft());
  EXPECT_TRUE(DueIds(*store_).empty()) << "nothing is final yet";
  Finish(*store_, ends.id, JobState::kFailed, 3);
  Finish(*store_, plain.id, JobState::kSucceeded, 0);
  JobStore::Update cancel;
  cancel.reason = "cancelled by ada";
  ASSERT_TRUE(store_->Transition(cancelled.id, JobState::kQueued, JobState::kCancelled, cancel).has_value());
  ASSERT_TRUE(store_->Transition(runs.id, JobState::kQueued, JobState::kStarting, {}).has_value());
  EXPECT_EQ(DueIds(*store_), (std::vector<int64_t>{ends.id, cancelled.id})) << "a job without --notify is never due";
  EXPECT_EQ(Ids(*store_->DueNotifications(ends.id, 5)), (std::vector<int64_t>{cancelled.id})) << "paged by id";
  EXPECT_EQ(Ids(*store_->DueNotifications(0, 1)), (std::vector<int64_t>{ends.id}));

  auto marked = store_->MarkNotified(ends.id, 1'700'000'005'000, "exited with status 0");
  ASSERT_TRUE(marked.has_value()) << marked.error().message;
  EXPECT_EQ(*marked, 1);
  EXPECT_EQ(DueIds(*store_), (std::vector<int64_t>{cancelled.id}));
  auto read = *store_->Get(ends.id);
  EXPECT_EQ(read->notified_unix_ms, 1'700'000'005'000);
  EXPECT_EQ(read->notify_outcome, "exited with status 0");
  EXPECT_EQ(*store_->MarkNotified(ends.id, 1'700'000'009'000, "again"), 0) << "marked once";
  EXPECT_EQ((*store_->Get(ends.id))->notify_outcome, "exited with status 0");
  EXPECT_EQ(*store_->MarkNotified(runs.id, 1, "early"), 0) << "an unfinished job is never marked";
}

TEST_F(JobStoreTest, AnArrayIsDueOnceThroughItsFirstTaskWhenItsLastTaskIsFinal) {
  Job draft = Draft();
  draft.notify = model::JobNotify{true, {}};
  auto tasks = store_->SubmitArray(draft, {0, 1, 2}, std::nullopt);
  ASSERT_TRUE(tasks.has_value()) << tasks.error().message;
  const int64_t head = tasks->front().id;
  EXPECT_EQ(tasks->back().notify, draft.notify);
  Finish(*store_, (*tasks)[0].id, JobState::kSucceeded, 0);
  Finish(*store_, (*tasks)[2].id, JobState::kFailed, 4);
  EXPECT_TRUE(DueIds(*store_).empty()) << "task 1 has not ended";
  ASSERT_TRUE(store_->Transition((*tasks)[1].id, JobState::kQueued, JobState::kCancelled, {}).has_value());
  EXPECT_EQ(DueIds(*store_), (std::vector<int64_t>{head})) << "one notification, not one per task";
  auto counts = store_->ArrayStateCounts(head);
  ASSERT_TRUE(counts.has_value());
  EXPECT_THAT(*counts, ElementsAre(Pair(JobState::kSucceeded, 1), Pair(JobState::kFailed, 1), Pair(JobState::kCancelled, 1)));
  EXPECT_EQ(*store_->MarkNotified(head, 1'700'000'005'000, "exited with status 0"), 3) << "every task is marked";
  EXPECT_TRUE(DueIds(*store_).empty());
  EXPECT_EQ((*store_->GetTask(head, 2))->notified_unix_ms, 1'700'000'005'000);
  EXPECT_TRUE(store_->ArrayStateCounts(999)->empty());
}

// Schema 9 added the notify columns (8 the slices): a version 7 file keeps its jobs (no
// notify, never due, whole GPUs) and its arrays, and new jobs store one.
TEST(JobStoreFileTest, VersionSevenFileMigratesAndItsJobsHaveNoNotify) {
  testing::TempDir dir;
  const std::string path = dir.Join("state.db");
  {
    auto db = Database::Open(path);
    ASSERT_TRUE(db.has_value()) << db.error().message;
    ASSERT_EQ(*Migrate(**db, AllMigrations().first(7)), 0);
    ASSERT_TRUE((*db)->ExecScript("v7 rows", R"sql(
      INSERT INTO jobs (id, name, uid, gid, user, argv, env, cwd, output_path, req_count,
        req_exclude, req_allow_shared, priority, requeue, after, state, submitted_unix_ms,
        ended_unix_ms, exit_code, gpu_uuids, reason, array_id, array_task)
      VALUES (7, 'old', 1000, 1000, 'ada', '4:true', '', '/home/ada', '', 1, '', 0, 0, 0, '',
        'succeeded', 1700000000000, 1700000001000, 0, '', '', 7, 0);
    )sql"));
    EXPECT_EQ(QueryInt(**db, "PRAGMA user_version"), 7);
  }
  auto jobs = JobStore::Open(path);
  ASSERT_TRUE(jobs.has_value()) << jobs.error().message;
  EXPECT_EQ(QueryInt((*jobs)->DatabaseForTesting(), "PRAGMA user_version"), AllMigrations().back().version);
  auto old = (*jobs)->Get(7);
  ASSERT_TRUE(old.has_value() && *old) << (old ? "" : old.error().message);
  EXPECT_EQ((*old)->state, JobState::kSucceeded);
  EXPECT_EQ((*old)->array_id, 7);
  EXPECT_EQ((*old)->notify, std::nullopt);
  EXPECT_EQ((*old)->notified_unix_ms, std::nullopt);
  EXPECT_TRUE((*jobs)->DueNotifications()->empty()) << "old jobs never notify";
  Job draft = Draft();
  draft.notify = model::JobNotify{false, {"/bin/echo", "%j"}};
  auto added = (*jobs)->Submit(draft);
  ASSERT_TRUE(added.has_value()) << added.error().message;
  EXPECT_EQ((*(*jobs)->Get(added->id))->notify, draft.notify);
}

// Schema 11 added req_mig_profile (submit --mig, docs/share.md "MIG"): a version 10 file
// keeps its jobs (no MIG profile: whole GPUs, or the MIG UUIDs in req_gpus), and new
// jobs store and read back their profile in every view.
TEST(JobStoreFileTest, VersionTenFileMigratesAndAJobsMigProfileRoundTrips) {
  testing::TempDir dir;
  const std::string path = dir.Join("state.db");
  {
    auto db = Database::Open(path);
    ASSERT_TRUE(db.has_value()) << db.error().message;
    ASSERT_EQ(*Migrate(**db, AllMigrations().first(10)), 0);
    ASSERT_TRUE((*db)->ExecScript("v10 rows", R"sql(
      INSERT INTO jobs (id, name, uid, gid, user, argv, env, cwd, output_path, req_count,
        req_exclude, req_allow_shared, priority, requeue, after, state, submitted_unix_ms,
        gpu_uuids, reason, req_mps)
      VALUES (3, 'old', 1000, 1000, 'ada', '4:true', '', '/home/ada', '', 2, '', 0, 0, 0, '',
        'queued', 1700000000000, '', '', 0);
    )sql"));
    EXPECT_EQ(QueryInt(**db, "PRAGMA user_version"), 10);
  }
  auto jobs = JobStore::Open(path);
  ASSERT_TRUE(jobs.has_value()) << jobs.error().message;
  EXPECT_EQ(QueryInt((*jobs)->DatabaseForTesting(), "PRAGMA user_version"), 11);
  EXPECT_EQ(AllMigrations().back().version, 11);
  auto old = (*jobs)->Get(3);
  ASSERT_TRUE(old.has_value() && *old) << (old ? "" : old.error().message);
  EXPECT_EQ((*old)->state, JobState::kQueued);
  EXPECT_EQ((*old)->request.count, 2);
  EXPECT_EQ((*old)->request.mig_profile, std::nullopt);

  Job draft = Draft();
  draft.request.count = 2;
  draft.request.mig_profile = "2g.20gb";
  auto added = (*jobs)->Submit(draft);
  ASSERT_TRUE(added.has_value()) << added.error().message;
  auto read = (*jobs)->Get(added->id);
  ASSERT_TRUE(read.has_value() && *read);
  EXPECT_EQ((*read)->request.mig_profile, "2g.20gb");
  EXPECT_EQ((*read)->request.count, 2);
  Job by_uuid = Draft();
  by_uuid.request.gpus = std::vector<std::string>{"MIG-4f1c"};
  auto second = (*jobs)->Submit(by_uuid);
  ASSERT_TRUE(second.has_value()) << second.error().message;
  auto summaries = (*jobs)->ActiveSummaries();
  ASSERT_TRUE(summaries.has_value());
  ASSERT_EQ((*summaries)->size(), 3u);
  EXPECT_EQ((**summaries)[1].request.mig_profile, "2g.20gb") << "summaries carry it too (queue, the scheduler)";
  EXPECT_EQ((**summaries)[2].request.mig_profile, std::nullopt);
  EXPECT_EQ((**summaries)[2].request.gpus, (std::vector<std::string>{"MIG-4f1c"}));
  auto array = (*jobs)->SubmitArray(draft, {0, 1}, std::nullopt);
  ASSERT_TRUE(array.has_value()) << array.error().message;
  EXPECT_EQ((*(*jobs)->Get(array->back().id))->request.mig_profile, "2g.20gb") << "every task of an array";
}

}  // namespace
}  // namespace gpuman::store
