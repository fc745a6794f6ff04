// GPU history: per-GPU samples the daemon records once per sample period, and queue wait
// times of started jobs. Plain values shared by store/history_store (SQLite), the
// `history` and `report` commands and render/report_html. No I/O.
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/device_snapshot.h"
#include "model/job.h"
#include "model/lease.h"

namespace gpuman::model {

/// Who held a GPU: nobody, a gpuman lease, a queue job (through its lease), or processes
/// that run on it outside gpuman (no lease covers the GPU). Stored as these numbers.
enum class HolderKind : int { kFree = 0, kLease = 1, kJob = 2, kOutside = 3 };

/// "free", "lease", "job", "outside".
const char* HolderKindName(HolderKind kind);

/// One holder's share of a sample (or of an averaged step).
struct HolderShare {
  HolderKind kind = HolderKind::kFree;
  std::string user;    // Unix user; "" when free
  double share = 1.0;  // of the sample's time, 0..1; a sample's shares sum to 1
  bool operator==(const HolderShare&) const = default;
};

/// One GPU at one instant (1 s samples), or the mean over one step (1 min roll-ups and
/// re-bucketed rows: the numbers are means, `holders` the share of the step each holder
/// had, and `user`/`holder_kind`/`job_id` the main holder: the largest share, ties going
/// to the holder seen last).
struct GpuSample {
  int64_t t_unix_ms = 0;
  std::string gpu_uuid;
  int gpu_index = 0;
  std::optional<double> utilization_percent;
  std::optional<double> memory_utilization_percent;
  std::optional<int64_t> memory_used_bytes;
  std::optional<int64_t> memory_total_bytes;
  std::optional<double> temperature_c;
  std::optional<double> power_w;
  std::string user;               // main holder: lease/job owner or outside user; "" when free
  std::optional<int64_t> job_id;  // queue job holding it, if any
  HolderKind holder_kind = HolderKind::kFree;  // of `user`: free exactly when `user` is ""
  /// Every holder with its share, the main one included, when there was more than one
  /// (several users outside gpuman, or a step whose holder changed). Empty: `user` held
  /// all of it.
  std::vector<HolderShare> holders;
  /// The Slurm job that held the GPU (from its job record, docs/slurm.md "Accounting") and
  /// its user; "" when none (not a Slurm node, or no job on the GPU).
  std::string slurm_job_id, slurm_user;
};

/// The sample's holders with their shares: `holders`, or the main holder with share 1.
std::vector<HolderShare> SharesOf(const GpuSample& sample);

/// Whose GPU time a report counts: a user through gpuman (lease or job), a user outside
/// gpuman, or nobody ("" and not outside: free).
struct UsageKey {
  std::string user;
  bool outside = false;
  auto operator<=>(const UsageKey&) const = default;
};
UsageKey UsageKeyOf(HolderKind kind, const std::string& user);

/// "alice", "alice (outside gpuman)", or "(free)".
std::string UsageLabel(const UsageKey& key);

/// The user name the history records for a GPU process: its user, else "uid N", else
/// "(unknown)" (a process in another PID namespace).
std::string ProcessUserLabel(const GpuProcess& process);

/// The holders of one GPU now (the rule of docs/history.md). A lease that lists the GPU
/// holds it (kind job when a job owns the lease; the newest such lease if several);
/// otherwise the users of the processes running on it hold it outside gpuman, in equal
/// shares (the main one: the user whose processes use the most GPU memory, ties to the
/// first by name); otherwise it is free. `job_id` is the job's.
struct HolderAttribution {
  HolderKind kind = HolderKind::kFree;
  std::string user;
  std::optional<int64_t> job_id;
  std::vector<HolderShare> holders;  // set when several outside users share the GPU
};
HolderAttribution AttributeHolder(const DeviceSnapshot& gpu, const std::vector<Lease>& leases,
                                  const std::vector<Job>& jobs);

/// How long a started job waited in the queue.
/// A step of the daemon's intruder watch, as the history db keeps it.
struct IntruderEvent {
  int64_t t_unix_ms = 0;
  std::string event;  // "seen", "term", "kill", "gone"
  std::string gpu_uuid;
  int gpu_index = 0;
  uint32_t pid = 0;
  std::string user;     // "" when its owner cannot be seen
  std::string command;  // "" likewise
  int64_t lease_id = 0;
  std::string lease_user;
};

/// One step of the slice watch (monitor/slice_watch.h; docs/share.md): a holder over the
/// GPU memory their slices of one GPU declare.
struct SliceEvent {
  int64_t t_unix_ms = 0;
  std::string event;  // "over", "term", "kill", "within"
  std::string gpu_uuid;
  int gpu_index = 0;
  std::string user;
  int64_t lease_id = 0;              // the holder's first slice of the GPU
  std::optional<int64_t> job_id;     // the gpuman job that lease runs
  int64_t used_bytes = 0;
  int64_t declared_bytes = 0;
  std::vector<uint32_t> pids;        // signalled ("term", "kill")
};

struct JobWait {
  int64_t job_id = 0;
  std::string user;
  int64_t submitted_unix_ms = 0;
  int64_t started_unix_ms = 0;
  int gpus = 0;
};

}  // namespace gpuman::model
