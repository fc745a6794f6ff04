// GPU selection: which GPUs a new job may have and which of them it should get, with
// the reasons behind every no. Pure: the caller passes the snapshot and the leases it
// read (and resolves indices to UUIDs first); nothing here reads a clock, a file or
// NVML. Thread-compatible value types; Select() may be called from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "model/device_snapshot.h"
#include "model/job.h"
#include "model/lease.h"

namespace gpuman::policy {

/// One GPU's answer: eligible, or every reason why not ("leased to bob (lease 12)",
/// "2 foreign processes: pid 4242 (alice), pid 4243", "utilization 97% > 50%").
struct GpuVerdict {
  std::string uuid;  // "" when the driver did not report one
  int index = 0;     // DeviceSnapshot::index
  bool eligible = false;
  std::vector<std::string> reasons;  // empty exactly when eligible
  /// For a slice request (`gpu_memory_bytes`): the memory on this GPU that no slice
  /// declares and no process outside gpuman uses; absent when a whole-GPU lease holds it,
  /// its total memory is unknown, or a filter that waiting does not change (--gpus,
  /// --model, may not be sliced, ...) leaves it out.
  std::optional<int64_t> slice_room_bytes;
};

struct Selection {
  std::vector<std::string> uuids;  // the chosen GPUs, in index order
  std::vector<int> indices;        // their DeviceSnapshot::index, same order
  /// How the chosen GPUs connect: "single GPU", "NVLink (NV12)", "same PCIe switch (PIX)",
  /// "same NUMA node (NODE)", "across NUMA nodes (SYS)", ...; "none" for count 0.
  std::string placement;
  std::vector<GpuVerdict> verdicts;  // every GPU of the snapshot, in snapshot order
};

/// Picks req.count GPUs among the eligible ones, best connected first, then the set
/// that fragments the machine least, then lowest indices (see selection.cc and
/// placement.cc for the rules and the reasons behind them).
/// Errors:
///   kInvalidArgument  count < 0, count 0 without gpus == none, count > 0 with gpus ==
///                     none, a UUID in gpus/exclude that is not on this machine, a
///                     malformed min_compute_capability, max_utilization outside 0..100,
///                     negative min_free_memory.
///   kNotFound         the request can never be met here: fewer GPUs than count pass
///                     the filters that do not change over time (uuid known, gpus,
///                     allowed, exclude, model, compute capability, total memory).
///                     Callers waiting with --wait should give up.
///   kBusy             it could be met, but not enough GPUs are eligible now (unhealthy,
///                     drained, leased, foreign processes, free memory, utilization). The message
///                     says how many are eligible and why the others are not, e.g.
///                     "need 2 GPUs, 1 eligible: GPU 1 leased to alice (lease 3);
///                     GPU 2,3 busy: foreign processes".
Result<Selection> Select(const model::MachineSnapshot& snap,
                         const std::vector<model::Lease>& leases,
                         const model::GpuRequest& req);

/// The verdicts Select() would report, without choosing; useful to explain a kBusy or
/// kNotFound answer GPU by GPU. Errors: kInvalidArgument as for Select().
Result<std::vector<GpuVerdict>> EvaluateGpus(const model::MachineSnapshot& snap,
                                             const std::vector<model::Lease>& leases,
                                             const model::GpuRequest& req);

}  // namespace gpuman::policy
