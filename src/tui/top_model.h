// The data behind `gpuman top`, without any terminal: the Frame the sampler thread
// publishes (immutable once published), the per-GPU histories, and the process and
// lease/job rows the view shows, with their sorting and filters. The TopModel lives on the
// UI thread; the free functions are pure.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/device_snapshot.h"
#include "model/drain.h"
#include "model/job.h"
#include "model/lease.h"
#include "tui/history.h"
#include "tui/host_process.h"

namespace gpuman::tui {

/// Everything one sample gathered. The sampler fills it and never changes it afterwards.
struct Frame {
  uint64_t sequence = 0;          // set by the Sampler: 1, 2, ...
  int64_t taken_at_unix_ms = 0;   // when gathering finished
  int64_t took_ms = 0;            // how long gathering took
  /// Absent when the snapshot failed (the view keeps the previous one and shows the error).
  std::optional<model::MachineSnapshot> snapshot;
  std::string snapshot_error;
  std::vector<model::Lease> leases;
  std::vector<model::Job> jobs;   // running and queued; only from a daemon
  bool has_daemon = false;
  std::string holders_error;      // leases/jobs could not be read
  std::vector<model::GpuDrain> drains;  // drained GPUs; only from a daemon
  /// Where the GPUs came from when it is worth saying, shown in the title as "via ..."
  /// ("daemon", "NVML: why not the daemon"); "" (plain NVML) shows nothing.
  std::string source;
  /// Host CPU time and RSS of the visible GPU processes, by pid (tui/host_process.h).
  std::map<uint32_t, HostProcessStat> host;
  int64_t clock_ticks_per_s = 100;  // sysconf(_SC_CLK_TCK)
};

/// The drain of `gpu` in `frame`, or nullptr when it is not drained (or has no UUID).
const model::GpuDrain* DrainOf(const Frame* frame, const model::DeviceSnapshot& gpu);

enum class SortKey { kGpuMemory, kSmUtil, kPid, kUser, kGpu };
/// "gpu-mem", "sm", "pid", "user", "gpu".
const char* SortKeyName(SortKey key);
/// The next key in the cycle gpu-mem -> sm -> pid -> user -> gpu -> gpu-mem.
SortKey NextSortKey(SortKey key);

/// One GPU process as the table shows it.
struct ProcessRow {
  int gpu_index = 0;
  std::string gpu_uuid;
  uint32_t pid = 0;
  model::ProcessType type = model::ProcessType::kCompute;
  bool is_visible = false;  // found in this PID namespace
  std::optional<uint32_t> uid;
  std::string user;         // "" when unknown
  std::string command;      // "" when unknown
  std::optional<int64_t> start_time_unix;
  std::optional<int64_t> memory_bytes;
  std::optional<int> sm_percent;
  std::string held_by;      // "job 12", "lease 7", "INTRUDER" (on someone else's lease) or ""
  std::optional<double> cpu_percent;  // host CPU since the previous frame (100 = one core)
  std::optional<int64_t> rss_bytes;   // host resident memory
};

/// The lease or job holding `gpu_uuid` for process `pid`: a lease listing the pid first,
/// then a running job on that GPU, then any lease on it. "" when none does.
std::string HeldBy(const std::string& gpu_uuid, uint32_t pid, const std::vector<model::Lease>& leases,
                   const std::vector<model::Job>& jobs);

/// One row per (GPU, process) in snapshot order.
std::vector<ProcessRow> BuildProcessRows(const model::MachineSnapshot& snap, const std::vector<model::Lease>& leases,
                                         const std::vector<model::Job>& jobs);

struct RowFilter {
  std::optional<uint32_t> only_uid;  // "only mine": rows of this uid (unknown owners are dropped)
  std::optional<int> gpu_index;      // only this GPU
};
std::vector<ProcessRow> FilterRows(std::vector<ProcessRow> rows, const RowFilter& filter);

/// Sorts in place: gpu-mem and sm descending (unknown last), pid ascending, user and gpu
/// ascending then memory descending; ties by GPU then pid. `reverse` reverses the result.
void SortRows(std::vector<ProcessRow>& rows, SortKey key, bool reverse);

/// One line of the leases/jobs panel.
struct HolderRow {
  std::string what;        // "lease 7", "job 12"
  std::string state;       // "held" for leases; the job state otherwise; "over" for either
                           // when its holder uses more than their memory slice declares
  std::string user;
  std::string gpus;        // "0,1" (indices when known, else UUID prefixes) or "wants 2";
                           // a memory slice adds its size: "3:20G", "wants 1:20G"
  int64_t since_unix_ms = 0;
  std::optional<int64_t> idle_since_unix_ms;
  std::string detail;      // the lease's command, or the job's name and reason
};

/// Leases first (by id), then running, then queued jobs. A lease that belongs to a listed
/// job is shown once, as the job.
std::vector<HolderRow> BuildHolderRows(const std::vector<model::Lease>& leases, const std::vector<model::Job>& jobs,
                                       const model::MachineSnapshot* snap);

/// A GPU's MIG devices (docs/share.md "MIG") as top shows them under the GPU, in NVML's
/// order: the leased ones with their holder, then the free ones by profile:
/// "MIG 2/3 leased: 3g.40gb alice (lease 7), 2g.20gb bob (job 12); free: 2g.20gb",
/// "MIG 0/7 leased; free: 1g.10gb x7". "MIG mode, no MIG devices" for a GPU in MIG mode
/// that lists none; "" for a GPU that is neither.
std::string MigSummary(const model::DeviceSnapshot& gpu, const std::vector<model::Lease>& leases,
                       const std::vector<model::Job>& jobs);

/// "-" when idle_since is absent, else how long: "45s", "12m 5s", "3h 20m".
std::string IdleText(std::optional<int64_t> idle_since_unix_ms, int64_t now_unix_ms);

/// Keeps the newest frame and the per-GPU histories (keyed by UUID, so a GPU keeps its
/// history when enumeration order changes). UI thread only.
class TopModel {
 public:
  explicit TopModel(size_t history_capacity = 300) : capacity_(history_capacity) {}

  /// Takes a newer frame; a frame with a sequence already seen is ignored. A frame without
  /// a snapshot keeps the previous snapshot (and its error is shown).
  void Ingest(std::shared_ptr<const Frame> frame);

  const Frame* frame() const { return frame_.get(); }
  /// The newest snapshot that succeeded (possibly from an older frame), or nullptr.
  const model::MachineSnapshot* snapshot() const;
  const GpuHistory* HistoryFor(const model::DeviceSnapshot& gpu) const;
  /// All rows of the newest snapshot (unsorted, unfiltered).
  const std::vector<ProcessRow>& rows() const { return rows_; }

 private:
  size_t capacity_;
  std::shared_ptr<const Frame> frame_;
  std::shared_ptr<const Frame> last_good_;
  std::map<std::string, GpuHistory> history_;
  std::vector<ProcessRow> rows_;
};

/// The key the histories use: the UUID, or "#<index>" without one.
std::string GpuKey(const model::DeviceSnapshot& gpu);

}  // namespace gpuman::tui
