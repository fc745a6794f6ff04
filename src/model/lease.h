// Leases: which GPUs (by UUID) are held by whom, for which processes. Plain values shared
// by the lease store, the selection policy and the CLI. No I/O.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpuman::model {

/// A lease's `command` (what `leases` and `top` show) is cut to this when recorded, so that
/// one lease always fits in a page of the daemon's `leases` reply.
inline constexpr size_t kMaxLeaseCommandBytes = 4096;

/// A process that keeps a lease alive. The start time disambiguates a recycled pid:
/// a lease is alive while at least one of its processes exists with the same start time.
struct LeaseProcess {
  int32_t pid = 0;
  int64_t start_time_ticks = 0;  // field 22 of /proc/<pid>/stat (clock ticks since boot)
  bool operator==(const LeaseProcess&) const = default;
};

struct Lease {
  int64_t id = 0;                      // assigned by the store, increasing
  std::vector<std::string> gpu_uuids;  // identity of the GPUs; never indices
  /// Each GPU's NVML index when the lease was taken, for display only (`leases` shows it
  /// without asking the driver); -1 when not recorded. Empty, or as long as gpu_uuids.
  std::vector<int> gpu_indices;
  uint32_t uid = 0;
  std::string user;
  std::string command;                 // what it was taken for, e.g. "python train.py"
  std::string kind;                    // "run" (gpuman run) or "select" (select --lease)
  int64_t created_unix_ms = 0;
  std::vector<LeaseProcess> processes;
  /// The host whose processes hold it (gethostname of the gpuman that took it); "" for a
  /// lease recorded before gpuman stored hosts. Only that host judges whether the
  /// processes live: a lease table in a directory shared between nodes never loses
  /// another node's lease as stale (docs/slurm.md).
  std::string host;
  /// The rendezvous port reserved for it (MASTER_PORT of its processes), unique among the
  /// live leases of its table; absent when none of the range was free.
  std::optional<int> master_port;
  /// A slice lease (`--gpu-memory`, docs/share.md): the memory declared on each of its
  /// GPUs, which other slices may share. Absent: the GPUs are wholly its own.
  std::optional<int64_t> gpu_memory_bytes;
  /// An MPS lease (`--mps`, docs/share.md "MPS"): its processes are clients of the MPS
  /// control daemon gpuman runs on its GPU for its user.
  bool mps = false;
  /// --gpu-share: the CUDA_MPS_ACTIVE_THREAD_PERCENTAGE its processes get.
  std::optional<int> gpu_share_percent;
  /// Set by the daemon's idle watch (never stored with the lease): since when every GPU
  /// of the lease stayed below the idle threshold; absent when busy or not watched.
  std::optional<int64_t> idle_since_unix_ms;
};

}  // namespace gpuman::model
