// The `gpuman explain` model: which environment layers (container, Slurm,
// CUDA_DEVICE_ORDER, CUDA_VISIBLE_DEVICES) apply to a process started with `env`, which
// GPUs CUDA would expose to it (cuda:N -> physical GPU), and what looks wrong.
// Pure: the CLI captures the environment, snapshot, leases and uid and passes them in.
// Thread-safe. Host view: inside a container or a device-constrained Slurm job the
// numbering restarts at 0; we report NVML's host indices (docs/visibility.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/device_snapshot.h"
#include "model/lease.h"
#include "visibility/cuda_visible_devices.h"
#include "visibility/device_order.h"
#include "visibility/ids.h"
#include "visibility/slurm_gpus.h"

namespace gpuman::visibility {

/// Stable warning codes; WarningCodeName gives the snake_case spelling used in JSON.
enum class WarningCode {
  kInvalidEntry,             // a list was truncated / an entry names no GPU
  kDuplicateEntry,           // a duplicate emptied CUDA_VISIBLE_DEVICES
  kIndexWithoutPciBusOrder,  // integer indices, FASTEST_FIRST, GPUs that differ
  kOutsideAllocation,        // CUDA_VISIBLE_DEVICES names GPUs outside Slurm/container
  kUnknownDeviceOrder,       // CUDA_DEVICE_ORDER has a value CUDA does not know
  kNothingVisible,           // CUDA will see no device
  kUnhealthyGpu,             // a visible GPU has is_healthy == false
  kMigSingleDevice,          // MIG devices hidden: CUDA exposes only one
  kLeasedToOther,            // a visible GPU is leased to another uid
  kUsedByOtherUser,          // a visible GPU runs a process of another uid
  kIntruder,                 // a visible GPU runs a process that is not its lease's (model/intruders.h)
  kNoDriver,                 // no snapshot: the driver/NVML could not be reached
  kGresOrderNotPci,          // gres.conf lists GPUs in an order that is not PCI bus order
  kForeignProcess,           // a process that is not the Slurm job's runs on its GPU
};

/// "invalid_entry", "duplicate_entry", "index_without_pci_bus_order",
/// "outside_allocation", "unknown_device_order", "nothing_visible", "unhealthy_gpu",
/// "mig_single_device", "leased_to_other", "used_by_other_user", "no_driver",
/// "gres_order_not_pci", "foreign_process", "intruder".
const char* WarningCodeName(WarningCode code);

struct Warning {
  WarningCode code = WarningCode::kInvalidEntry;
  std::string message;  // one sentence or two, no trailing newline
};

/// One environment layer, outermost first.
struct Layer {
  std::string name;      // "container", "slurm", "device_order", "visible_devices"
  std::string variable;  // e.g. "NVIDIA_VISIBLE_DEVICES"
  std::optional<std::string> value;  // nullopt: unset
  std::string effect;    // what it does here, human text
};

/// One device CUDA would expose.
struct VisibleDevice {
  VisibleOrdinal cuda_index;
  std::optional<PhysicalIndex> index;  // NVML host index; absent for an unknown MIG parent
  std::optional<std::string> uuid;     // the (parent) GPU's UUID, when known
  std::optional<std::string> name;
  std::optional<std::string> compute_capability;  // "9.0", when known
  std::optional<std::string> mig;      // MIG: the entry ("MIG-…") or "first MIG device"
  bool is_healthy = true;
  bool is_outside_allocation = false;
  std::vector<uint32_t> leased_to_uids;  // other users holding it
  std::vector<uint32_t> used_by_uids;    // other users whose processes run on it
  std::vector<uint32_t> intruder_pids;   // processes on it that intrude on its lease
};

struct VisibilityReport {
  std::vector<Layer> layers;
  DeviceOrder device_order = DeviceOrder::kFastestFirst;
  bool order_is_estimate = false;      // cuda:N mapping rests on our FASTEST_FIRST guess
  bool has_driver = true;              // false: ExplainWithoutDriver, `visible` is empty
  std::optional<std::string> driver_error;
  int gpu_count = 0;                   // GPUs on the host (NVML)
  std::vector<VisibleDevice> visible;  // cuda:0, cuda:1, ...
  std::vector<EntryDiagnostic> entries;  // CUDA_VISIBLE_DEVICES, one per entry
  std::optional<std::vector<std::string>> allowed_uuids;  // AllowedGpus(env, gpus, node)
  std::optional<SlurmGpus> slurm;  // the Slurm layer with its index mapping, when present
  std::vector<Warning> warnings;
  /// What the report could not check, one sentence each (e.g. the lease table could
  /// not be read). Not warnings: nothing is known to be wrong.
  std::vector<std::string> notes;

  bool HasWarning(WarningCode code) const;
};

struct ResolveOptions {
  std::vector<model::Lease> leases;
  /// The caller's uid; leases held by other uids, and processes of other uids on a
  /// visible GPU (from the snapshot), are warned about. nullopt: every lease and every
  /// process whose owner is known counts as someone else's.
  std::optional<uint32_t> current_uid;
  /// Set when the lease table could not be read (`leases` is then empty): Resolve says
  /// so in one note instead of warning about leases.
  std::optional<std::string> leases_error;
  /// What the node says about Slurm (src/slurm/ReadSlurmNode); nullopt outside Slurm or
  /// when explaining a given --env (then the Slurm layer infers what it can).
  std::optional<SlurmNode> slurm_node;
};

/// Explains what a CUDA process started with `env` on a machine with `gpus` will see.
/// Never fails; everything CUDA would silently do is a Warning.
VisibilityReport Resolve(const Environment& env, const std::vector<model::DeviceSnapshot>& gpus,
                         const ResolveOptions& options = {});

/// The same without a snapshot (NVML/driver unavailable): the layers as far as they can
/// be read without GPUs (syntax, kinds, lexical truncation), no visible list, and a
/// `no_driver` warning carrying `driver_error`.
VisibilityReport ExplainWithoutDriver(const Environment& env, std::string driver_error);

}  // namespace gpuman::visibility
