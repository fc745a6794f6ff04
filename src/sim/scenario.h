// The stand-in NVML's scenario (docs/scenarios.md): the parsed form of a scenario file,
// its return-code names, and the reader. Internal to libnvidia-ml.so.1 (hidden symbols).
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "nvml/nvml_abi.h"

namespace gpuman::sim {

// Handles are fixed slots (sim/state.h): a scenario has at most this many GPUs.
inline constexpr unsigned kMaxGpus = 64;
// NVSwitch numbers in nvlinks: 0..15. Switch k has PCI address 0000FFFF:<k>:00.0, a domain
// no GPU of a shipped scenario uses (nvml_exports.cc).
inline constexpr unsigned kMaxNvSwitches = 16;
// MIG device slots per GPU (nvmlDeviceGetMaxMigDeviceCount; 7 on A100 and H100).
inline constexpr unsigned kMaxMigDevices = 8;

// ---------------------------------------------------------------------------------------
// Return codes: scenario names (the NVML_ERROR_ suffix) and nvmlErrorString texts.

struct CodeInfo {
  nvmlReturn_t code;
  const char* name;
  const char* text;  // as the real nvmlErrorString prints it
};
inline constexpr CodeInfo kCodes[] = {
    {NVML_SUCCESS, "SUCCESS", "Success"},
    {NVML_ERROR_UNINITIALIZED, "UNINITIALIZED", "Uninitialized"},
    {NVML_ERROR_INVALID_ARGUMENT, "INVALID_ARGUMENT", "Invalid Argument"},
    {NVML_ERROR_NOT_SUPPORTED, "NOT_SUPPORTED", "Not Supported"},
    {NVML_ERROR_NO_PERMISSION, "NO_PERMISSION", "Insufficient Permissions"},
    {NVML_ERROR_ALREADY_INITIALIZED, "ALREADY_INITIALIZED", "Already Initialized"},
    {NVML_ERROR_NOT_FOUND, "NOT_FOUND", "Not Found"},
    {NVML_ERROR_INSUFFICIENT_SIZE, "INSUFFICIENT_SIZE", "Insufficient Size"},
    {NVML_ERROR_INSUFFICIENT_POWER, "INSUFFICIENT_POWER", "Insufficient External Power"},
    {NVML_ERROR_DRIVER_NOT_LOADED, "DRIVER_NOT_LOADED", "Driver Not Loaded"},
    {NVML_ERROR_TIMEOUT, "TIMEOUT", "Timeout"},
    {NVML_ERROR_IRQ_ISSUE, "IRQ_ISSUE", "Interrupt request issue"},
    {NVML_ERROR_LIBRARY_NOT_FOUND, "LIBRARY_NOT_FOUND", "NVML Shared Library Not Found"},
    {NVML_ERROR_FUNCTION_NOT_FOUND, "FUNCTION_NOT_FOUND", "Function Not Found"},
    {NVML_ERROR_CORRUPTED_INFOROM, "CORRUPTED_INFOROM", "Corrupted infoROM"},
    {NVML_ERROR_GPU_IS_LOST, "GPU_IS_LOST", "GPU is lost"},
    {NVML_ERROR_RESET_REQUIRED, "RESET_REQUIRED", "GPU requires restart"},
    {NVML_ERROR_OPERATING_SYSTEM, "OPERATING_SYSTEM",
     "The operating system has blocked the request."},
    {NVML_ERROR_LIB_RM_VERSION_MISMATCH, "LIB_RM_VERSION_MISMATCH",
     "RM has detected an NVML/RM version mismatch."},
    {NVML_ERROR_IN_USE, "IN_USE", "In use by another client"},
    {NVML_ERROR_MEMORY, "MEMORY", "Insufficient Memory"},
    {NVML_ERROR_NO_DATA, "NO_DATA", "No data"},
    {NVML_ERROR_VGPU_ECC_NOT_ENABLED, "VGPU_ECC_NOT_ENABLED",
     "Requested vGPU operation is not available because ECC is enabled"},
    {NVML_ERROR_INSUFFICIENT_RESOURCES, "INSUFFICIENT_RESOURCES",
     "Ran out of critical resources, other than memory"},
    {NVML_ERROR_FREQ_NOT_SUPPORTED, "FREQ_NOT_SUPPORTED", "Frequency not supported"},
    {NVML_ERROR_ARGUMENT_VERSION_MISMATCH, "ARGUMENT_VERSION_MISMATCH",
     "Argument version mismatch"},
    {NVML_ERROR_DEPRECATED, "DEPRECATED", "Deprecated"},
    {NVML_ERROR_NOT_READY, "NOT_READY", "Not Ready"},
    {NVML_ERROR_GPU_NOT_FOUND, "GPU_NOT_FOUND", "GPU not found"},
    {NVML_ERROR_INVALID_STATE, "INVALID_STATE", "Invalid state"},
    {NVML_ERROR_UNKNOWN, "UNKNOWN", "Unknown Error"},
};

// ---------------------------------------------------------------------------------------
// The scenario, as parsed. std::nullopt everywhere means "field absent or null", which
// the matching query reports as NVML_ERROR_NOT_SUPPORTED.

struct ErrorRule {
  nvmlReturn_t code = NVML_ERROR_UNKNOWN;
  long times = -1;  // fail only the first `times` calls; -1 = always
  bool operator==(const ErrorRule&) const = default;
};
using ErrorRules = std::map<std::string, ErrorRule, std::less<>>;  // by NVML function name

struct Pci {
  unsigned domain = 0, bus = 0, device = 0;
  unsigned device_id = 0, subsystem_id = 0, subsystem_vendor_id = 0x10DE;
};
struct Memory {
  uint64_t total = 0, reserved = 0, used = 0;  // used excludes reserved (v2 meaning)
};
struct Process {
  unsigned pid = 0;
  uint64_t used_memory = NVML_VALUE_NOT_AVAILABLE_ULL;
  bool is_compute = true, is_graphics = false;
  unsigned gpu_instance_id = NVML_VALUE_NOT_AVAILABLE_U32;
  unsigned compute_instance_id = NVML_VALUE_NOT_AVAILABLE_U32;
  std::optional<unsigned> sm_util, mem_util;  // nvmlDeviceGetProcessUtilization
};
struct RemappedRows {
  unsigned corrected = 0, uncorrected = 0, pending = 0, failure = 0;
};

// One active NVLink: to another GPU of the scenario, or to NVSwitch number `target`
// (NVSwitches have no entry of their own; each number stands for one switch chip).
struct NvLink {
  unsigned link = 0;
  unsigned target = 0;  // GPU index, or switch number when to_switch
  bool to_switch = false;
};

// One MIG device (a compute instance) of a GPU in MIG mode ("mig_devices").
struct MigDevice {
  unsigned index = 0;  // nvmlDeviceGetMigDeviceHandleByIndex slot
  std::string uuid;    // "MIG-…"
  unsigned gpu_instance_id = 0, compute_instance_id = 0;
  nvmlDeviceAttributes_t attributes{};  // slices, engines, memorySizeMB
  Memory memory;                        // total, used (reserved 0)
};

struct Gpu {
  std::string uuid;
  std::optional<std::string> name, serial;
  std::optional<unsigned> minor_number;
  std::optional<Pci> pci;
  std::optional<Memory> memory;
  std::optional<nvmlUtilization_t> utilization;
  std::optional<unsigned> temperature, power_usage_mw, power_limit_mw, fan;
  std::optional<unsigned> clock_sm, clock_sm_max, clock_mem, clock_mem_max;
  std::optional<int> pstate, compute_mode, persistence_mode, retired_pages_pending;
  std::optional<std::pair<int, int>> compute_capability;
  std::optional<unsigned> cuda_cores, memory_bus_width;  // nvmlDeviceGetNumGpuCores, ...MemoryBusWidth
  std::optional<std::pair<unsigned, int>> fabric;       // nvmlDeviceGetGpuFabricInfo: state, status
  std::optional<std::pair<unsigned, unsigned>> mig_mode;  // current, pending
  std::optional<unsigned long long> ecc[2][2];  // [nvmlMemoryErrorType_t][nvmlEccCounterType_t]
  std::optional<RemappedRows> remapped_rows;
  std::optional<unsigned long long> clock_event_reasons;
  std::optional<std::vector<unsigned>> cpu_affinity;  // CPU numbers
  std::optional<unsigned> numa_node;
  std::optional<std::string> pci_switch, host_bridge;
  std::optional<std::vector<NvLink>> nvlinks;
  std::vector<Process> processes;
  std::optional<unsigned> max_mig_devices;  // default 7 while MIG mode is on
  std::vector<MigDevice> mig_devices;
  std::vector<unsigned long long> xid_events;  // appended over time; delivered to event sets
  bool events_supported = true;
  bool is_lost = false;
  ErrorRules errors;
};

struct Scenario {
  std::optional<std::string> driver_version, nvml_version;
  std::optional<int> cuda_driver_version;
  ErrorRules errors;
  std::vector<Gpu> gpus;
  // The "host_processes" member as JSON text ("{}" when absent), handed as it is to
  // gpuman --simulate (gpumanSimHostProcesses), which owns its meaning: NVML has no such
  // table, so the stand-in does not interpret it.
  std::string host_processes_json = "{}";
};

// Identity of the scenario file as last seen; any difference triggers a reload.
struct FileId {
  dev_t dev = 0;
  ino_t ino = 0;
  off_t size = -1;
  int64_t mtime_ns = -1;
  bool operator==(const FileId&) const = default;
};

// stat() of the scenario file; nullopt with `*error` set when it cannot be read.
std::optional<FileId> StatFile(const std::string& path, std::string* error);

// Reads and parses a scenario file; nullopt with `*error` naming the field or the OS error.
std::optional<Scenario> LoadScenario(const std::string& path, std::string* error);

// Parses a scenario file's text (LoadScenario after reading; the fuzz target's entry).
std::optional<Scenario> ParseScenarioText(std::string_view text, std::string* error);

}  // namespace gpuman::sim
