// HistoryStore: the bounded per-GPU sample history and queue wait times, in their own
// SQLite file (<daemon state dir>/history.db, WAL, mode 0644 so that every user may read
// it). The daemon is the only writer (Record every sample period, RecordJobWait when a job
// starts); `gpuman history` and `gpuman report` open it read-only. One HistoryStore per
// thread; other processes open their own. Schema, retention and sizes: docs/history.md.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "model/history.h"
#include "store/sqlite.h"

namespace gpuman::store {

struct HistoryRetention {
  int64_t fine_keep_ms = 3600 * 1000;                // 1 s samples for an hour
  int64_t coarse_step_ms = 60 * 1000;                // rolled up to 1 min means
  int64_t coarse_keep_ms = 31LL * 24 * 3600 * 1000;  // kept a month
};

/// A GPU the history knows: its UUID and the NVML index it was last recorded with.
struct HistoryGpu {
  std::string uuid;
  int index = 0;
};

/// The rows of one Slurm job in the history (HistoryStore::SlurmJob).
struct SlurmJobSpan {
  int64_t first_unix_ms = 0, last_unix_ms = 0;
  std::string user;
  std::vector<std::string> gpu_uuids;
};

class HistoryStore {
 public:
  /// Opens the history db at `path`. Writable (`read_only` false): creates the file (mode
  /// 0644, missing parent directories with the umask's mode) and migrates it. Read-only:
  /// never creates or changes anything; the file must exist and carry a known schema.
  /// Either way the file is checked before anything writes to it (store/migrations.h,
  /// CheckFile): another program's file, or one of a newer gpuman, is refused unchanged.
  /// Errors: kInvalidArgument (retention not positive, or finer than its coarse step);
  /// kNotFound (read-only and no file at `path`); kPermissionDenied; kIo (not a history
  /// db, corrupt, truncated, schema newer than this gpuman knows); kBusy.
  static Result<std::unique_ptr<HistoryStore>> Open(const std::string& path, bool read_only,
                                                    HistoryRetention retention = {});
  ~HistoryStore();
  HistoryStore(const HistoryStore&) = delete;
  HistoryStore& operator=(const HistoryStore&) = delete;

  /// One transaction: inserts the samples (one per GPU, same t; a second sample for the
  /// same GPU and t replaces the first) with their holders and shares, rolls finished
  /// coarse steps up into means and per-holder shares of the step (RebucketSamples), and
  /// prunes rows older than the retention (at most once per coarse step of sample time).
  /// "Now" is the samples' time: the store holds no clock.
  /// Errors: kInvalidArgument (empty GPU UUID; a holder kind of free with a user, or
  /// another kind without one); kPermissionDenied (read-only); kBusy; kIo.
  Status Record(const std::vector<model::GpuSample>& samples);

  /// Stores how long a job waited (a requeued job that starts again gets a second row).
  /// Errors: kPermissionDenied (read-only); kBusy; kIo.
  Status RecordJobWait(const model::JobWait& wait);
  /// One step of the daemon's intruder watch (docs/enforce.md), kept as long as coarse samples.
  Status RecordIntruder(const model::IntruderEvent& event);
  /// The intruder events between the bounds, oldest first; none from a file before schema 4.
  Result<std::vector<model::IntruderEvent>> IntruderEvents(std::optional<int64_t> since_unix_ms,
                                                           std::optional<int64_t> until_unix_ms);

  /// Records one step of the slice watch (history schema 5; docs/share.md).
  Status RecordSlice(const model::SliceEvent& event);
  /// The slice events between the bounds, oldest first; none from a file before schema 5.
  Result<std::vector<model::SliceEvent>> SliceEvents(std::optional<int64_t> since_unix_ms,
                                                     std::optional<int64_t> until_unix_ms);

  struct Query {
    std::optional<int64_t> since_unix_ms, until_unix_ms;  // inclusive bounds
    std::vector<std::string> gpu_uuids;                   // empty: every GPU
    std::optional<int64_t> step_ms;                       // re-bucket to this step
    std::optional<std::string> slurm_job_id;              // only rows this Slurm job held
  };
  /// Samples in [since, until], ordered by time then GPU index. Fine (1 s) rows when the
  /// fine table holds the whole window and no step of at least the coarse step is asked;
  /// otherwise coarse rows, followed by the newest fine rows not rolled up yet (averaged
  /// per coarse step). With `step_ms`, rows are re-bucketed to that step (means and
  /// holder shares as in RebucketSamples; t = start of the bucket). Rows carry their
  /// holders' shares when they had more than one. Errors: kIo.
  Result<std::vector<model::GpuSample>> Samples(const Query& q);

  /// Job waits of jobs started at or after `since_unix_ms`, by start time. Errors: kIo.
  Result<std::vector<model::JobWait>> JobWaits(std::optional<int64_t> since_unix_ms);

  /// GPU-hours per holder in [since, until], from the samples Samples() picks for that
  /// window: per user through gpuman (leases and jobs), per user outside gpuman, and free
  /// time under the empty key. A sample stands for the time up to the next sample of its
  /// GPU when that is at most three sampling periods away (one or two missed samples);
  /// across a longer gap nobody was recording, and it counts one period. That time is
  /// split between the sample's holders by their shares. Errors: kIo.
  Result<std::map<model::UsageKey, double>> GpuHoursByUser(std::optional<int64_t> since,
                                                           std::optional<int64_t> until);

  /// Where a Slurm job's tagged rows lie (either tier; a coarse row's time is its step's
  /// start), its user as tagged, and the GPUs it held by index; nullopt when no row
  /// carries the job (or the file predates schema 3). Errors: kIo.
  Result<std::optional<SlurmJobSpan>> SlurmJob(const std::string& job_id);

  /// Every GPU ever recorded, by index then UUID. Errors: kIo.
  Result<std::vector<HistoryGpu>> Gpus();

  /// Time of the oldest and newest sample (either tier), or nullopt when empty. Errors: kIo.
  Result<std::optional<std::pair<int64_t, int64_t>>> TimeRange();

  const std::string& path() const { return path_; }
  const HistoryRetention& retention() const { return retention_; }
  Database& DatabaseForTesting() { return *db_; }

 private:
  struct Statements;
  HistoryStore(std::string path, bool read_only, HistoryRetention retention,
               std::unique_ptr<Database> db, std::unique_ptr<Statements> stmts, bool has_shares,
               bool has_slurm);

  Result<int64_t> GpuIdLocked(const model::GpuSample& s);
  Status WriteRowLocked(Statement& row, Statement& share, int64_t gpu_id, const model::GpuSample& s,
                        double scale);
  Status RollUpLocked(int64_t now_ms);
  Status PruneLocked(int64_t now_ms);
  // Rows of `stmt` in [since, until] with their shares from `shares` (nullptr: none).
  Result<std::vector<model::GpuSample>> ReadRows(Statement& stmt, Statement* shares, int64_t since,
                                                 int64_t until,
                                                 const std::map<int64_t, HistoryGpu>& gpus);
  Result<std::map<int64_t, HistoryGpu>> GpuMapLocked();

  std::string path_;
  bool read_only_;
  bool has_shares_;  // false: a schema 1 file opened read-only (no holder kinds or shares)
  bool has_slurm_;   // false: a file before schema 3 opened read-only (no Slurm jobs)
  bool has_intruders_ = true;  // false: a file before schema 4 opened read-only
  bool has_slices_ = true;     // false: a file before schema 5 opened read-only
  HistoryRetention retention_;
  std::unique_ptr<Database> db_;
  std::unique_ptr<Statements> stmts_;  // finalized before db_ closes (reverse order)
  std::map<std::string, std::pair<int64_t, int>> gpu_ids_;  // uuid -> (row id, index)
  std::optional<int64_t> rolled_until_ms_;  // coarse steps before this are rolled up
  std::optional<int64_t> last_prune_ms_;
};

/// Re-buckets samples to `step_ms` (> 0): per GPU and bucket [k*step, (k+1)*step), the
/// mean of each metric over the rows that have it, each holder's share of the bucket
/// (the mean of its shares over the bucket's rows, each row weighing the same; free time
/// included; `holders` set when there is more than one), the main holder (largest share,
/// ties to the one seen last) as user/holder_kind with the job of its newest row, the
/// Slurm job that tagged most of the bucket's rows (ties to the newest; untagged rows do
/// not compete), the index of the last row, and t = bucket start. Output ordered by time, then GPU index
/// and UUID. Pure.
std::vector<model::GpuSample> RebucketSamples(const std::vector<model::GpuSample>& samples,
                                              int64_t step_ms);

/// GPU-milliseconds per holder (the rule of HistoryStore::GpuHoursByUser), with coverage
/// clipped at `until_unix_ms` when given. Pure.
std::map<model::UsageKey, double> HeldMsByUser(const std::vector<model::GpuSample>& samples,
                                               std::optional<int64_t> until_unix_ms);

/// Orders shares largest first, then by kind and user. Pure.
void SortShares(std::vector<model::HolderShare>& shares);

}  // namespace gpuman::store
