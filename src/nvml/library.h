// NvmlLibrary: owns one dlopen()ed libnvidia-ml.so.1, the resolved entry points and the
// NVML init reference. The only place that calls dlopen/dlsym for NVML. Created by main
// (or a test) and passed down; NVML itself is thread-safe, so the resolved functions may
// be called from any thread while the object lives.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "base/result.h"
#include "nvml/nvml_abi.h"

namespace gpuman::nvml {

/// Logical entry points. Each resolves to the newest symbol name the library exports.
enum class Sym : int {
  kInit, kShutdown, kErrorString,
  kSystemGetDriverVersion, kSystemGetNvmlVersion, kSystemGetCudaDriverVersion,
  kDeviceGetCount, kDeviceGetHandleByIndex,
  kDeviceGetUuid, kDeviceGetName, kDeviceGetSerial, kDeviceGetMinorNumber,
  kDeviceGetPciInfo, kDeviceGetMemoryInfoV2, kDeviceGetMemoryInfo,
  kDeviceGetUtilizationRates, kDeviceGetTemperature,
  kDeviceGetPowerUsage, kDeviceGetEnforcedPowerLimit, kDeviceGetPowerManagementLimit,
  kDeviceGetFanSpeed, kDeviceGetClockInfo, kDeviceGetMaxClockInfo,
  kDeviceGetPerformanceState, kDeviceGetCudaComputeCapability, kDeviceGetComputeMode,
  kDeviceGetPersistenceMode, kDeviceGetMigMode, kDeviceGetTotalEccErrors,
  kDeviceGetRetiredPagesPendingStatus, kDeviceGetRemappedRows, kDeviceGetClocksEventReasons,
  kDeviceGetCpuAffinity, kDeviceGetMemoryAffinity, kDeviceGetNumaNodeId,
  kDeviceGetComputeRunningProcesses, kDeviceGetGraphicsRunningProcesses,
  kDeviceGetTopologyCommonAncestor, kDeviceGetNvLinkState, kDeviceGetNvLinkRemotePciInfo,
  kDeviceGetNvLinkRemoteDeviceType,
  kDeviceGetProcessUtilization, kDeviceGetSupportedEventTypes,
  kEventSetCreate, kDeviceRegisterEvents, kEventSetWait, kEventSetFree,
  kDeviceGetNumGpuCores, kDeviceGetMemoryBusWidth, kDeviceGetGpuFabricInfo,
  kDeviceGetMaxMigDeviceCount, kDeviceGetMigDeviceHandleByIndex, kDeviceIsMigDeviceHandle,
  kDeviceGetGpuInstanceId, kDeviceGetComputeInstanceId, kDeviceGetDeviceHandleFromMigDeviceHandle,
  kDeviceGetAttributes, kDeviceSetMemoryLimits,
  kCount,
};
inline constexpr size_t kSymCount = static_cast<size_t>(Sym::kCount);

class NvmlLibrary {
 public:
  /// dlopen()s `path` (a soname such as "libnvidia-ml.so.1", searched the usual way, or a
  /// file path), resolves the symbol table and calls nvmlInit.
  /// Errors: kUnavailable when the library cannot be opened, lacks a required symbol, or
  /// init fails (driver not loaded, no permission, version mismatch); the message names
  /// the library and carries dlerror()/nvmlErrorString() text. kInvalidArgument, "scenario
  /// PATH: reason", when the library is gpuman's stand-in and could not load its scenario.
  static Result<std::unique_ptr<NvmlLibrary>> Load(const std::string& path);

  ~NvmlLibrary();  // nvmlShutdown, then dlclose
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  /// The resolved function, or nullptr when the library exports none of its names.
  template <typename Fn>
  Fn Get(Sym sym) const {
    return reinterpret_cast<Fn>(fns_[static_cast<size_t>(sym)]);
  }
  bool Has(Sym sym) const { return fns_[static_cast<size_t>(sym)] != nullptr; }
  /// The exported name that `sym` resolved to ("nvmlDeviceGetCount_v2"), or "" if absent.
  const char* SymbolName(Sym sym) const { return names_[static_cast<size_t>(sym)]; }

  /// NVML's text for a return code ("GPU is lost"), lower-cased for error messages.
  std::string ErrorString(nvmlReturn_t code) const;

  /// gpuman's stand-in only: its scenario's "host_processes" member as JSON text. nullopt
  /// for a real NVML (which has no such table).
  std::optional<std::string> SimulatedHostProcesses() const;

  /// Bytes per entry of the chosen *RunningProcesses symbol: 24 (_v3/_v2) or 16 (v1).
  size_t process_entry_size() const { return process_entry_size_; }
  const std::string& path() const { return path_; }

 private:
  NvmlLibrary() = default;

  std::string path_;
  void* handle_ = nullptr;
  using SimText_fn = const char* (*)();
  SimText_fn sim_host_processes_ = nullptr;  // the stand-in's gpumanSimHostProcesses, if any
  bool initialized_ = false;
  std::array<void*, kSymCount> fns_{};
  std::array<const char*, kSymCount> names_{};
  size_t process_entry_size_ = sizeof(nvmlProcessInfo_t);
};

}  // namespace gpuman::nvml
