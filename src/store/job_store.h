// JobStore: the job queue of one machine (jobs, their event log, fair-share usage and
// drained GPUs), in the same SQLite file as the leases (the daemon's state.db). Opening
// it migrates the whole file, like LeaseStore::Open. One JobStore per thread; processes
// and threads each open their own on the same file. Every state change is a
// compare-and-set inside one short write transaction, so that a job never starts twice.
// Schema and rules: docs/state.md.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/result.h"
#include "model/job.h"
#include "store/sqlite.h"

namespace gpuman::store {

/// Says whether a job may go from `from` to `to` (the scheduler owns the table). Runs
/// inside the write transaction: it must be quick and must not touch the state db.
/// An error refuses the transition; its message becomes part of the kConflict error.
using JobTransitionCheck = std::function<Status(model::JobState from, model::JobState to)>;

struct JobStoreOptions {
  /// How long to wait for another process's write transaction before failing with kBusy.
  std::chrono::milliseconds busy_timeout{5000};
  /// Checks every Transition. Empty: only the compare-and-set applies (tools, tests).
  JobTransitionCheck check_transition;
  /// Usage is summed per user in buckets this wide; Usage() dates a bucket by its start.
  std::chrono::milliseconds usage_bucket{std::chrono::hours(1)};
  /// AddUsage deletes buckets older than this (relative to the usage being added).
  std::chrono::milliseconds usage_retention{std::chrono::hours(24 * 90)};
};

/// Which fields a read fills in. A summary leaves argv and env empty: what the scheduler,
/// `queue` and `status` need, without the megabytes of a sweep's environments.
enum class JobFields { kAll, kSummary };

/// A drained GPU, as recorded by Drain.
struct DrainedGpu {
  std::string uuid;
  std::string reason;
  uint32_t by_uid = 0;
  int64_t since_unix_ms = 0;
};

class JobStore {
 public:
  /// Opens the state db at `path` (creating it and its parent directories if needed) and
  /// migrates it to the current schema. Errors: as LeaseStore::Open (kPermissionDenied,
  /// kIo, also for a newer schema, kBusy).
  static Result<std::unique_ptr<JobStore>> Open(const std::string& path,
                                                JobStoreOptions options = {});
  /// A job store on a connection already opened and migrated (store/state_db.h: one owner
  /// of the daemon's state db for the job and lease tables). Errors: kIo, kInvalidArgument.
  static Result<std::unique_ptr<JobStore>> Attach(std::shared_ptr<Database> db, JobStoreOptions options = {});
  ~JobStore();
  JobStore(const JobStore&) = delete;
  JobStore& operator=(const JobStore&) = delete;

  /// Stores a new job: everything `draft` asks for (name .. after, submitted_unix_ms,
  /// reason), with a new id and state queued; the run fields (started/ended, exit code,
  /// GPUs, lease, supervisor) start empty. Logs a 'submitted' event. Returns the stored
  /// job. Errors: kInvalidArgument (empty argv, GPU count below 1); kBusy; kIo.
  Result<model::Job> Submit(model::Job draft);
  /// Stores a job array in one transaction: one job per task of `tasks` (ascending, not
  /// empty), each as Submit stores `draft`, with array_task set, array_id the id of the
  /// first, and array_limit `limit`. --output patterns are filled in per task (%A, %a).
  /// Returns the tasks in order, as summaries (argv and env empty). Errors: as Submit.
  Result<std::vector<model::Job>> SubmitArray(model::Job draft, const std::vector<int64_t>& tasks,
                                              std::optional<int> limit);
  /// The tasks of array `array_id` (every state), as summaries, in task order; empty when
  /// there is no such array. Errors: kIo.
  Result<std::vector<model::Job>> ArrayTasks(int64_t array_id);
  /// How a whole array stands, for `wait`, without reading its tasks: while a task is
  /// unfinished, that task (the lowest such index) and its state; then the first task (by
  /// index) that did not succeed, else the last task. nullopt when there is no such array.
  /// Errors: kIo.
  struct ArrayStanding {
    int64_t task = 0;
    model::JobState state = model::JobState::kQueued;
    std::optional<int> exit_code;
  };
  Result<std::optional<ArrayStanding>> ArrayOutcome(int64_t array_id);
  /// Task `task` of array `array_id`, or nullopt. Errors: kIo.
  Result<std::optional<model::Job>> GetTask(int64_t array_id, int64_t task, JobFields fields = JobFields::kAll);

  /// The job with this id, or nullopt. Errors: kIo.
  Result<std::optional<model::Job>> Get(int64_t id, JobFields fields = JobFields::kAll);

  /// Jobs in id order: the unfinished ones, plus the finished ones if `include_final`;
  /// only those of `only_uid` when given; only ids above `after_id`, at most `limit` of
  /// them (negative: no limit), for paging. Errors: kIo.
  Result<std::vector<model::Job>> List(bool include_final, std::optional<uint32_t> only_uid, int64_t after_id = 0,
                                       int64_t limit = -1, JobFields fields = JobFields::kAll);

  /// The unfinished jobs (queued, held, starting, running), in id order. Errors: kIo.
  Result<std::vector<model::Job>> Active();

  /// The unfinished jobs as summaries (JobFields::kSummary), in id order: the daemon's
  /// view on every scheduling pass. Kept between calls: read again only after another
  /// connection committed (PRAGMA data_version) or this one wrote outside Submit and
  /// Transition; those two apply their change to the list in place. A returned list never
  /// changes afterwards (a later change makes a new one). Errors: kIo.
  Result<std::shared_ptr<const std::vector<model::Job>>> ActiveSummaries();
  /// Changes whenever the list ActiveSummaries returns changes (read again, or changed in
  /// place): callers that work something out of the list keep this, not the list, since a
  /// list kept alive is copied on this store's next write.
  uint64_t summaries_generation() const { return summaries_generation_; }

  /// Changes whenever anything in the state db changed: jobs, leases, drains, usage,
  /// committed by this connection or another. Equal versions: nothing changed between.
  struct Version {
    int64_t data_version = 0;   // PRAGMA data_version: others' commits
    int64_t total_changes = 0;  // rows this connection changed
    bool operator==(const Version&) const = default;
  };
  /// Errors: kBusy; kIo.
  Result<Version> CurrentVersion();

  /// Fields a Transition sets besides the state; unset ones keep their value.
  struct Update {
    std::optional<std::vector<std::string>> gpu_uuids;
    std::optional<int64_t> lease_id;
    std::optional<int32_t> supervisor_pid;
    std::optional<int64_t> supervisor_start_ticks;
    std::optional<int64_t> started_unix_ms, ended_unix_ms;
    std::optional<int> exit_code;
    std::optional<std::string> reason;
    std::optional<model::JobFailure> failure;
    // What `gpuman update` changes (a same-state Transition of a queued or held job).
    std::optional<int> priority;
    std::optional<int64_t> time_limit_ms;
    std::optional<std::string> name;
    /// First empties gpu_uuids and clears lease_id, supervisor_pid, supervisor_start_ticks,
    /// started_unix_ms, ended_unix_ms, exit_code and failure (a requeued job); the fields above
    /// are applied after that.
    bool clear_run = false;
  };

  /// Compare-and-set: in one write transaction, checks that job `id` is in state
  /// `from_expected`, asks the transition check about `from_expected` -> `to`, and stores
  /// `to` with `update`. Of several processes racing for the same change, exactly one
  /// wins; the others get kConflict. `to == from_expected` updates fields only: the
  /// check is not consulted and no event is logged. Returns the updated job.
  /// Errors: kNotFound ("job 12: no such job"); kConflict when the job is in another
  /// state ("job 12 is already succeeded", "job 12 is queued, not running") or the check
  /// refuses ("job 12: <check's message>"); kBusy; kIo.
  Result<model::Job> Transition(int64_t id, model::JobState from_expected, model::JobState to,
                                const Update& update);

  /// Several Transitions in one write transaction (cancelling 10,000 tasks of an array at
  /// once): each request's outcome as Transition gives it, in order. A request refused
  /// (kConflict, kNotFound) is that request's outcome and the others still apply; any
  /// other error undoes all of them and is returned. The jobs returned are summaries
  /// (JobFields::kSummary: no argv or env). Errors: kBusy; kIo.
  struct TransitionRequest {
    int64_t id = 0;
    model::JobState from_expected = model::JobState::kQueued;
    model::JobState to = model::JobState::kQueued;
    Update update;
  };
  Result<std::vector<Result<model::Job>>> TransitionAll(const std::vector<TransitionRequest>& requests);

  /// End-of-job notifications due (docs/scheduling.md, "End-of-job notifications"), as
  /// summaries in id order, only ids above `after_id`, at most `limit` (negative: all): jobs
  /// with a notify that are final and not yet marked notified, and of an array only its
  /// first task, once every task of it is final. Errors: kIo.
  Result<std::vector<model::Job>> DueNotifications(int64_t after_id = 0, int64_t limit = -1);
  /// Records that the notification of job `id` ended at `at_unix_ms` with `outcome`: on
  /// the job, or on every task of the array `id` names. Only final jobs not yet marked are
  /// changed; returns how many were. Errors: kBusy; kIo.
  Result<int64_t> MarkNotified(int64_t id, int64_t at_unix_ms, const std::string& outcome);
  /// How many tasks of array `array_id` are in each state (states without tasks are left
  /// out; empty: no such array). Errors: kIo.
  Result<std::map<model::JobState, int64_t>> ArrayStateCounts(int64_t array_id);

  /// Adds GPU-seconds used by `uid` at `at_unix_ms` (to the bucket holding it), and drops
  /// buckets older than the retention. Errors: kInvalidArgument (negative or not finite);
  /// kBusy; kIo.
  Status AddUsage(uint32_t uid, double gpu_seconds, int64_t at_unix_ms);

  /// Every user's usage, decayed to `now_unix_ms` with the given half-life (a bucket
  /// `h` half-lives old counts 2^-h; buckets in the future count fully), in uid order.
  /// Errors: kInvalidArgument (half-life not positive); kIo.
  Result<std::vector<std::pair<uint32_t, double>>> Usage(int64_t now_unix_ms, double half_life_s);

  /// Takes a GPU out of scheduling; draining it again replaces reason, by and since.
  /// Errors: kInvalidArgument (empty uuid); kBusy; kIo.
  Status Drain(const std::string& uuid, const std::string& reason, uint32_t by_uid,
               int64_t at_unix_ms);
  /// Errors: kNotFound (not drained); kBusy; kIo.
  Status Undrain(const std::string& uuid);
  /// uuid -> reason of every drained GPU. Errors: kIo.
  Result<std::map<std::string, std::string>> Drained();
  /// The drained GPUs with who drained them and since when, in uuid order. Errors: kIo.
  Result<std::vector<DrainedGpu>> DrainedDetails();

  /// The connection, for tests that need to reach below the API.
  Database& DatabaseForTesting() { return *db_; }

 private:
  struct Statements;
  JobStore(std::shared_ptr<Database> db, std::unique_ptr<Statements> stmts,
           JobStoreOptions options);

  Result<std::vector<model::Job>> ReadJobs(Statement& stmt);
  Result<std::vector<model::Job>> SubmitTasks(model::Job draft, const std::vector<int64_t>& tasks,
                                              std::optional<int> limit);
  Result<int64_t> DataVersionLocked();
  /// Inside a transaction: whether summaries_ has seen every commit so far.
  bool SummariesCurrentLocked();
  /// After this connection committed `job` (submitted or changed): brings summaries_ up to
  /// date in place if it was current before (`was_current`), or drops it.
  void NoteOwnWrite(bool was_current, const model::Job& job);
  /// NoteOwnWrite for several jobs, in one pass over the list when there are many.
  void NoteOwnWrites(bool was_current, const std::vector<model::Job>& jobs);
  /// Transition's work inside a write transaction this store holds; the job it returns
  /// has `fields`.
  Result<model::Job> TransitionLocked(int64_t id, model::JobState from_expected, model::JobState to,
                                      const Update& update, JobFields fields);
  Status LogEventLocked(int64_t job_id, const char* kind, std::optional<model::JobState> from,
                        model::JobState to, const std::string& reason);

  std::shared_ptr<Database> db_;       // shared with the lease store of the same state db
  std::unique_ptr<Statements> stmts_;  // finalized before db_ closes (reverse order)
  JobStoreOptions options_;
  std::shared_ptr<std::vector<model::Job>> summaries_;  // ActiveSummaries' list, or null
  Version summaries_version_;                          // the state it was current at
  uint64_t summaries_generation_ = 0;
};

}  // namespace gpuman::store
