// Enclosing allocations: what a container runtime (NVIDIA_VISIBLE_DEVICES) or Slurm
// (SLURM_STEP_GPUS / SLURM_JOB_GPUS) gave the current process, in the host's NVML
// numbering, and AllowedGpus() which the launcher uses to stay inside them.
// Pure functions over an Environment map and snapshots; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/device_snapshot.h"
#include "visibility/ids.h"
#include "visibility/slurm_gpus.h"

namespace gpuman::visibility {

enum class ContainerMode {
  kUnrestricted,  // unset, "" or "void": plain runc, the toolkit restricts nothing
  kAll,           // "all"
  kNone,          // "none": driver libraries but no GPU
  kList,          // indices (host NVML indices) and/or UUIDs
};

struct ContainerDevices {
  ContainerMode mode = ContainerMode::kUnrestricted;
  std::vector<PhysicalIndex> devices;  // kList: the GPUs named and found, list order
  std::vector<std::string> problems;   // entries that name no GPU ("entry 2 \"7\": no GPU 7")
};

/// Reads NVIDIA_VISIBLE_DEVICES (nullopt = unset). List entries are host NVML indices,
/// full UUIDs or unique UUID prefixes; entries naming no GPU land in `problems` (the
/// toolkit would refuse to start such a container), duplicates are kept once.
ContainerDevices ParseNvidiaVisibleDevices(std::optional<std::string_view> value,
                                           const std::vector<model::DeviceSnapshot>& gpus);

/// The GPUs (full UUIDs, in the order of `gpus`) that the enclosing allocation permits: the
/// intersection of the Slurm allocation (ParseSlurmGpus with `slurm_node`), the
/// container's devices, and an outer CUDA_VISIBLE_DEVICES resolved by CUDA's rules (with
/// CUDA_DEVICE_ORDER from `env`; a MIG entry permits its parent GPU when known). Inside a
/// Slurm allocation a CUDA_VISIBLE_DEVICES that Slurm itself set adds nothing, and in a
/// device-constrained job its integers are job-local (k-th GPU of the allocation in CUDA
/// order). nullopt when none of them constrains anything. GPUs without a known UUID are
/// never included.
std::optional<std::vector<std::string>> AllowedGpus(const Environment& env,
                                                    const std::vector<model::DeviceSnapshot>& gpus,
                                                    const SlurmNode* slurm_node = nullptr);

/// One variable that confines the GPUs gpuman may choose from (AllowedGpus intersects them).
struct AllocationLimit {
  std::string variable;  // "NVIDIA_VISIBLE_DEVICES", "SLURM_STEP_GPUS"/"SLURM_JOB_GPUS", "CUDA_VISIBLE_DEVICES"
  std::string value;     // as set
  std::vector<PhysicalIndex> allows;  // the host GPUs it lets through, ascending
  /// Entries that let no GPU through, one text each: `entry 2 "8": no GPU 8 (1 GPU ...)`.
  std::vector<std::string> problems;
};

/// The variables that confine the GPUs, in AllowedGpus's order (container, Slurm, an outer
/// CUDA_VISIBLE_DEVICES); empty when none does. AllowedGpus is their intersection.
std::vector<AllocationLimit> AllocationLimits(const Environment& env,
                                              const std::vector<model::DeviceSnapshot>& gpus,
                                              const SlurmNode* slurm_node = nullptr);

/// For a selection that left GPUs out because of the enclosing allocation: which variable
/// confines gpuman, its value, what it allows and which of its entries name no GPU here
/// ("CUDA_VISIBLE_DEVICES=\"7\" in this shell (not set by a gpuman lease or Slurm) confines
/// gpuman to GPU 7: if it is left over ..., clear it with `unset CUDA_VISIBLE_DEVICES`"). A
/// NVIDIA_VISIBLE_DEVICES with the same value (as `select --format env` writes them) shares
/// the clause and the `unset`. Inside a gpuman lease (GPUMAN_LEASE_ID set) they are the
/// lease's, and nested commands stay inside it. Limits that leave none of `gpus` out are not
/// named; "" when nothing leaves a GPU out.
std::string DescribeAllocationLimits(const Environment& env, const std::vector<model::DeviceSnapshot>& gpus,
                                     const SlurmNode* slurm_node = nullptr);

/// CUDA's enumeration order (EnumerateCuda) as a constrained job's CUDA sees it: only the
/// allocation's GPUs, renumbered from 0. Unchanged when `slurm` is not constrained.
std::vector<PhysicalIndex> JobLocalOrder(const std::vector<PhysicalIndex>& cuda_order,
                                         const std::optional<SlurmGpus>& slurm);

/// Looks up `name` in `env`; nullopt when absent.
std::optional<std::string_view> GetVar(const Environment& env, const std::string& name);

}  // namespace gpuman::visibility
