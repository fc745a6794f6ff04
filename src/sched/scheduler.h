// One scheduling pass over the job queue: which queued jobs start now and on which GPUs,
// and why every other job waits. Pure: the caller (the daemon loop, or a trace replayer
// running in virtual time) passes the snapshot, the leases, the jobs and `now`; nothing
// here reads a clock, a file or NVML. Thread-compatible values; Schedule() may be called
// from any thread. The rules are explained at the top of scheduler.cc and in
// docs/scheduling.md.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "model/device_snapshot.h"
#include "model/job.h"
#include "model/lease.h"

namespace gpuman::sched {

/// Fair-share history of one user: GPU-seconds used, already decayed to `now` by the
/// caller (see DecayUsage). Users without an entry have used nothing.
struct UserUsage {
  uint32_t uid = 0;
  double decayed_gpu_seconds = 0;
};

struct SchedulerConfig {
  /// Expected run time of a job without --time-limit (for reservations and backfill).
  int64_t default_time_limit_ms = int64_t{24} * 3600 * 1000;
  /// Most GPUs one user may hold at once, counting starting and running jobs, the
  /// user's interactive leases and the jobs this pass starts; a uid missing here gets
  /// default_max_gpus_per_user, and no cap at all when that is unset.
  std::map<uint32_t, int> max_gpus_per_user;
  std::optional<int> default_max_gpus_per_user;
  /// For callers of DecayUsage(); Schedule() itself takes usage already decayed.
  double usage_half_life_s = 7.0 * 24 * 3600;
};

struct SchedulerInput {
  int64_t now_unix_ms = 0;
  model::MachineSnapshot snapshot;   // GPUs (health, processes) and topology
  std::vector<model::Lease> leases;  // every live lease: interactive runs and running jobs
  /// Queued, held, starting and running jobs, plus every final job that an active job
  /// names in `after` and that did not succeed. An `after` id that is not here counts as
  /// succeeded (finished and forgotten). Final jobs are otherwise ignored.
  std::vector<model::Job> jobs;
  /// When set, the jobs scheduled instead of `jobs`: a caller's list, not copied (the
  /// daemon's 10,000 queued summaries). It must outlive the Schedule() call.
  const std::vector<model::Job>* jobs_view = nullptr;
  std::set<std::string> drained;  // GPU UUIDs an admin drained: never handed out
  /// GPUs the machine's [share] gpus leaves out of slicing (policy::NotSliceable).
  std::map<std::string, std::string> not_sliceable;
  std::vector<UserUsage> usage;
  SchedulerConfig config;
};

struct StartDecision {
  int64_t job_id = 0;
  std::vector<std::string> gpu_uuids;  // in snapshot index order
  bool backfilled = false;  // started ahead of a job that waits (EASY backfill)
};

struct WaitReason {
  int64_t job_id = 0;
  std::string reason;  // "waiting for 4 GPUs; 2 free", "held", "after job 12", ...
  int position = 0;    // 1-based place among the waiting jobs, in scheduling order
  /// Set for the job the pass reserved GPUs for: when those GPUs are expected free.
  std::optional<int64_t> estimated_start_unix_ms;
};

struct SchedulerOutput {
  std::vector<StartDecision> start;  // in the order the pass decided them
  std::vector<WaitReason> waiting;   // every queued or held job not started, by position
  std::optional<int64_t> reserved_job;    // the head of the queue, when it has a reservation
  std::vector<std::string> reserved_gpus;  // the GPUs reserved for it
};

/// Runs one pass at in.now_unix_ms. Never fails: a job whose request can never be met
/// waits with a reason that says so. Starting the jobs (state queued -> starting, taking
/// the leases) is the caller's job.
SchedulerOutput Schedule(const SchedulerInput& in);

/// A fingerprint of what a pass reads of a snapshot: each GPU's index, UUID, name,
/// compute capability, health and processes (pid, user), and its memory and utilization
/// only when `momentary` (a queued job filters on them: AnyMomentaryFilters). With the
/// same jobs, leases, drains and usage, snapshots with the same key give the same starts;
/// only the words of a reason (a process's memory) may differ. The daemon skips passes
/// whose inputs have not changed (docs/scheduling.md).
uint64_t SnapshotKey(const model::MachineSnapshot& snapshot, bool momentary);

/// Whether a queued job asks for free memory or a utilization bound.
bool AnyMomentaryFilters(const std::vector<model::Job>& jobs);

/// `gpu_seconds` after `elapsed_ms` of exponential decay with the given half-life:
/// gpu_seconds * 2^(-elapsed / half_life). Negative elapsed counts as 0; a half-life
/// <= 0 means no decay.
double DecayUsage(double gpu_seconds, int64_t elapsed_ms, double half_life_s);

/// Ids of queued or held jobs that name, in `after`, a job that ended without success
/// (failed, cancelled, timed_out). The daemon fails them; Schedule() lets them wait with
/// "dependency N failed".
std::vector<int64_t> JobsWithFailedDependencies(const std::vector<model::Job>& jobs);

}  // namespace gpuman::sched
