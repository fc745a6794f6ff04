// The Slurm layer: which GPUs a Slurm job or step holds, mapped from Slurm's GPU indices
// to NVML devices through gres.conf and device minor numbers, and whether Slurm confines
// the job's devices (ConstrainDevices), which renumbers CUDA_VISIBLE_DEVICES from 0.
// Pure: the node-side facts (gres.conf, cgroup) are read by src/slurm/ and passed in as a
// SlurmNode. Thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "model/device_snapshot.h"
#include "visibility/ids.h"

namespace gpuman::visibility {

/// One GPU line of gres.conf for this node, in Slurm index order (position = index).
struct GresGpu {
  std::string file;          // File= path, e.g. "/dev/nvidia3"
  std::optional<int> minor;  // the device's minor number (stat, else the N of "nvidiaN")
  std::optional<std::string> type;  // Type=, when given
};

/// What the node says about Slurm, read from files by slurm::ReadSlurmNode. Every field
/// may be unknown; ParseSlurmGpus then falls back and says so.
struct SlurmNode {
  std::string gres_path;               // where gres.conf was looked for
  std::vector<GresGpu> gres;           // empty: unknown (see gres_error)
  std::optional<std::string> gres_error;  // why gres.conf gave no GPUs for this node
  std::optional<bool> devices_constrained;  // nullopt: no evidence either way
  std::string constrained_evidence;    // "cgroup devices.list allows only ..." etc.
  std::optional<std::string> job_id;   // SLURM_JOB_ID
  /// Pids of GPU processes known to belong to the job (its cgroup); nullopt when the job's
  /// processes cannot be told apart (e.g. proctrack/linuxproc).
  std::optional<std::set<uint32_t>> job_pids;
};

/// One Slurm GPU index and where it leads: Slurm index -> gres.conf File= -> minor ->
/// NVML device with that minor -> UUID.
struct SlurmGpuMapping {
  int slurm_index = 0;
  std::optional<std::string> file;
  std::optional<int> minor;
  std::optional<PhysicalIndex> index;  // NVML index; absent when no GPU has that minor
  std::optional<std::string> uuid;
};

struct SlurmGpus {
  std::string variable;  // "SLURM_STEP_GPUS" or "SLURM_JOB_GPUS"
  std::string value;
  std::vector<PhysicalIndex> devices;     // the allocation, NVML indices, list order
  std::vector<SlurmGpuMapping> mapping;   // one per Slurm index named
  std::vector<std::string> problems;      // entries that lead to no GPU
  /// Slurm confines the job's devices: CUDA_VISIBLE_DEVICES (and CUDA, and perhaps NVML)
  /// number the job's GPUs from 0. From SlurmNode evidence, else inferred from the lists.
  bool is_constrained = false;
  std::string constrained_reason;
  /// CUDA_VISIBLE_DEVICES holds exactly what Slurm put there for this allocation
  /// (constrained: 0..n-1; otherwise the Slurm indices themselves). It then says nothing
  /// beyond the allocation and does not restrict further.
  bool cvd_is_slurms = false;
  /// How Slurm indices were turned into minors: "gres.conf" or a fallback sentence.
  std::string mapping_source;
  bool minor_is_slurm_index = false;  // the fallback: gres.conf unreadable
  bool nvml_shows_only_job = false;   // allocation = every GPU NVML shows (see .cc)
};

/// The Slurm allocation: SLURM_STEP_GPUS when set and non-empty (a step), else
/// SLURM_JOB_GPUS (a batch script); nullopt when neither is. Entries are Slurm GPU indices
/// ("0,1" or ranges "0-3"), positions in gres.conf, mapped through `node->gres` to minor
/// numbers and then to the NVML device with that minor. Without gres.conf the minor is
/// taken to be the Slurm index; when no GPU reports a minor, the NVML index is.
std::optional<SlurmGpus> ParseSlurmGpus(const Environment& env,
                                        const std::vector<model::DeviceSnapshot>& gpus,
                                        const SlurmNode* node = nullptr);

/// gres.conf mapped onto NVML: for each Slurm index, the NVML index of its GPU (nullopt
/// when unknown). Empty when gres.conf is unknown.
std::vector<std::optional<PhysicalIndex>> GresToNvml(const SlurmNode& node,
                                                     const std::vector<model::DeviceSnapshot>& gpus);

/// True when the GPUs gres.conf lists (those found in NVML) are in NVML (= PCI bus) order.
bool GresInPciOrder(const SlurmNode& node, const std::vector<model::DeviceSnapshot>& gpus);

}  // namespace gpuman::visibility
