// Plain value types describing what the machine's GPUs look like at one instant.
// Produced by a devices::DeviceSource (NVML or a fake), consumed by render/, policy/ and
// the daemon. No I/O here. std::optional means "the driver did not say" (not supported,
// no permission, or the query failed); it is never silently 0.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/topology.h"

namespace gpuman::model {

enum class ProcessType { kCompute, kGraphics, kComputeAndGraphics };

/// "compute", "graphics" or "compute+graphics".
const char* ProcessTypeName(ProcessType type);

struct GpuProcess {
  uint32_t pid = 0;
  ProcessType type = ProcessType::kCompute;
  std::optional<int64_t> used_memory_bytes;     // absent when NVML reports "not available"
  std::optional<uint32_t> gpu_instance_id;      // MIG only
  std::optional<uint32_t> compute_instance_id;  // MIG only
  // Filled from /proc by a devices::ProcessInspector; all absent when the pid is not
  // visible in our PID namespace (is_visible == false).
  bool is_visible = false;
  std::optional<uint32_t> uid;
  std::optional<std::string> user;
  std::optional<std::string> command;
  std::optional<int64_t> start_time_unix;  // seconds since the epoch
  // From nvmlDeviceGetProcessUtilization: SM busy % of this process over the last sample
  // period; absent when NVML does not report it (MIG, old GPUs). A listed process without
  // a sample in the period has 0.
  std::optional<int> sm_util_percent;
};

struct ClockInfo {
  std::optional<int64_t> sm_mhz;
  std::optional<int64_t> sm_max_mhz;
  std::optional<int64_t> memory_mhz;
  std::optional<int64_t> memory_max_mhz;
};

/// One MIG device (a compute instance inside a GPU instance) of a GPU in MIG mode, as NVML
/// lists it under its parent (nvmlDeviceGetMigDeviceHandleByIndex). Its UUID ("MIG-…") is
/// what CUDA_VISIBLE_DEVICES names and what a lease of it stores (docs/share.md, "MIG").
struct MigDevice {
  int index = 0;  // NVML's MIG device index under the parent (0 .. max MIG devices - 1)
  std::optional<std::string> uuid;
  std::string parent_uuid;  // the GPU's UUID ("" when NVML did not give it)
  int parent_index = 0;     // the GPU's NVML index
  std::optional<uint32_t> gpu_instance_id;
  std::optional<uint32_t> compute_instance_id;
  std::optional<int> gpu_slices;      // nvmlDeviceAttributes_t::gpuInstanceSliceCount
  std::optional<int> compute_slices;  // computeInstanceSliceCount
  std::optional<int> multiprocessors;
  /// nvidia-smi's profile name ("1g.10gb", "1c.3g.40gb"), MigProfileName; absent when the
  /// attributes are unknown.
  std::optional<std::string> profile;
  std::optional<int64_t> memory_total_bytes;
  std::optional<int64_t> memory_used_bytes;
  /// The parent's processes that run on this instance (matched by GPU and compute instance id).
  std::vector<GpuProcess> processes;
};

/// One GPU at one instant. `index` is NVML's enumeration index (PCI order on Linux);
/// `uuid` is its identity. A device that NVML cannot reach stays in the list with
/// is_healthy == false and the reason in health_problems.
struct DeviceSnapshot {
  int index = 0;
  std::optional<std::string> uuid;
  std::optional<std::string> name;
  std::optional<std::string> pci_bus_id;  // NVML form "00000000:07:00.0"
  std::optional<std::string> serial;
  // The N of /dev/nvidiaN (nvmlDeviceGetMinorNumber): how Slurm's gres.conf and container
  // runtimes name a GPU. Not the NVML index; absent on platforms without device nodes.
  std::optional<int> minor_number;

  std::optional<int64_t> memory_total_bytes;
  std::optional<int64_t> memory_used_bytes;
  std::optional<int64_t> memory_free_bytes;
  std::optional<int64_t> memory_reserved_bytes;  // only from nvmlDeviceGetMemoryInfo_v2

  std::optional<int> gpu_utilization_percent;
  std::optional<int> memory_utilization_percent;
  std::optional<int> temperature_c;
  std::optional<double> power_usage_w;
  std::optional<double> power_limit_w;
  std::optional<int> fan_percent;
  ClockInfo clocks;
  std::optional<int> performance_state;  // 0 = P0 (max performance) .. 15
  std::optional<std::string> compute_capability;  // "8.0"
  /// For the peak figures (model/peak.h): CUDA cores (nvmlDeviceGetNumGpuCores) and the
  /// memory bus width in bits (nvmlDeviceGetMemoryBusWidth); absent on older drivers.
  std::optional<int64_t> cuda_cores;
  std::optional<int64_t> memory_bus_width_bits;
  std::optional<std::string> compute_mode;  // default, exclusive_thread, prohibited, exclusive_process
  std::optional<bool> persistence_mode;
  /// The GPU's NVSwitch fabric registration (nvmlDeviceGetGpuFabricInfo), which Fabric
  /// Manager completes: "not_supported" (no fabric), "not_started", "in_progress",
  /// "completed", "failed" (completed with an error); absent when the driver cannot say.
  std::optional<std::string> fabric_state;
  std::optional<bool> mig_mode_current;
  std::optional<bool> mig_mode_pending;
  std::optional<int64_t> ecc_volatile_corrected;
  std::optional<int64_t> ecc_volatile_uncorrected;
  std::optional<int64_t> ecc_aggregate_corrected;    // persist across reboots
  std::optional<int64_t> ecc_aggregate_uncorrected;
  std::optional<bool> retired_pages_pending;
  std::optional<bool> remapped_rows_pending;
  std::optional<bool> remapped_rows_failure;
  std::optional<uint64_t> clock_event_reasons;  // NVML bit mask
  std::vector<int> cpu_affinity;                // logical CPU ids; empty when unknown
  std::optional<int> numa_node;

  std::vector<GpuProcess> processes;
  /// MIG devices, when the GPU is in MIG mode and the driver lists them (empty otherwise).
  std::vector<MigDevice> mig_devices;

  bool is_healthy = true;
  std::vector<std::string> health_problems;  // why is_healthy is false
  std::vector<std::string> warnings;         // noteworthy but not unhealthy (throttling, …)
};

struct SystemInfo {
  std::optional<std::string> driver_version;
  std::optional<std::string> nvml_version;
  std::optional<std::string> cuda_driver_version;  // "12.4"
};

struct MachineSnapshot {
  SystemInfo system;
  std::vector<DeviceSnapshot> gpus;
  int64_t taken_at_unix_ms = 0;
  /// Filled only when asked for (devices::SnapshotOptions::topology); indices are
  /// positions in `gpus`.
  std::optional<Topology> topology;
};

/// Bits of DeviceSnapshot::clock_event_reasons (NVML's nvmlClocksEventReason* values).
enum ClockEventReason : uint64_t {
  kClockGpuIdle = 0x1,
  kClockApplicationsSetting = 0x2,
  kClockSwPowerCap = 0x4,
  kClockHwSlowdown = 0x8,
  kClockSyncBoost = 0x10,
  kClockSwThermalSlowdown = 0x20,
  kClockHwThermalSlowdown = 0x40,
  kClockHwPowerBrakeSlowdown = 0x80,
  kClockDisplaySetting = 0x100,
};

/// Names of the bits set in an NVML clock event reason mask ("gpu_idle", "sw_power_cap", ...).
std::vector<std::string> ClockEventReasonNames(uint64_t mask);

/// Formats a CPU list compactly: {0,1,2,3,8} -> "0-3,8".
std::string FormatCpuList(const std::vector<int>& cpus);

/// NVIDIA's name for a MIG profile, as nvidia-smi and the device plugins print it:
/// "<gpu slices>g.<memory>gb", with "<compute slices>c." in front when the compute instance
/// has fewer slices than its GPU instance ("1c.3g.40gb"). The memory is the instance's share
/// of the GPU's memory rounded up to an eighth, times the GPU's memory in GB rounded up, and
/// rounded (A100 40GB: 4864 MiB -> "5gb"; H100 80GB: 9856 MiB -> "10gb"). Without the
/// parent's total (0), the instance's own memory rounded up to whole GiB.
std::string MigProfileName(int gpu_slices, int compute_slices, int64_t memory_mib, int64_t parent_total_bytes);

/// A GPU is in MIG mode when NVML says so or lists MIG devices under it.
bool InMigMode(const DeviceSnapshot& gpu);

/// The MIG device with this UUID in `snap`, with its parent; nullptr when there is none.
const MigDevice* FindMigDevice(const MachineSnapshot& snap, const std::string& uuid,
                               const DeviceSnapshot** parent = nullptr);

/// The NVML index of the GPU `uuid` names, or of the parent of the MIG device it names;
/// -1 when neither is in `snap`.
int UnitIndex(const MachineSnapshot& snap, const std::string& uuid);

/// The distinct MIG profiles of `snap`'s MIG devices, sorted ("1g.10gb", "2g.20gb", ...).
std::vector<std::string> MigProfiles(const MachineSnapshot& snap);

/// The smallest total memory among the GPUs of `snap` named in `uuids` (a memory slice's
/// share of its GPUs, docs/share.md); 0 when none of them reports one.
int64_t SmallestMemoryTotal(const MachineSnapshot& snap, const std::vector<std::string>& uuids);

}  // namespace gpuman::model
