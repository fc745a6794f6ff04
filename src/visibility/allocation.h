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

struct SlurmGpus {
  std::string variable;  // "SLURM_STEP_GPUS" or "SLURM_JOB_GPUS"
  std::string value;
  std::vector<PhysicalIndex> devices;
  std::vector<std::string> problems;
};

/// The Slurm allocation: SLURM_STEP_GPUS when set and non-empty (a step), else
/// SLURM_JOB_GPUS (a batch script); nullopt when neither is. Entries are Slurm GPU
/// indices ("0,1" or ranges "0-3"), which are positions in gres.conf. ASSUMPTION: we
/// read them as NVML indices, true when gres.conf lists the GPUs in PCI bus order
/// (reference section 5.2); a site that orders gres.conf otherwise gets wrong answers.
std::optional<SlurmGpus> ParseSlurmGpus(const Environment& env,
                                        const std::vector<model::DeviceSnapshot>& gpus);

/// The GPUs (full UUIDs, in the order of `gpus`) that the enclosing allocation permits: the
/// intersection of the Slurm allocation, the container's devices, and an outer
/// CUDA_VISIBLE_DEVICES resolved by CUDA's rules (with CUDA_DEVICE_ORDER from `env`;
/// a MIG entry permits its parent GPU when known). nullopt when none of them constrains
/// anything. GPUs without a known UUID are never included.
std::optional<std::vector<std::string>> AllowedGpus(const Environment& env,
                                                    const std::vector<model::DeviceSnapshot>& gpus);

/// Looks up `name` in `env`; nullopt when absent.
std::optional<std::string_view> GetVar(const Environment& env, const std::string& name);

}  // namespace gpuman::visibility
