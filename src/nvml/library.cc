// The NVML loader.
//
// gpuman never links against NVML. It dlopen()s "libnvidia-ml.so.1" at run time, so one
// binary runs on every driver, fails softly on machines with no GPU, and can be pointed
// at the project's stand-in library (tests, `--simulate`) through the very same code:
// the path is the only thing that changes, there is no test-only branch in here.
//
// Why a symbol *table* with several names per entry point: NVIDIA keeps old entry points
// exported forever and adds versioned ones beside them when semantics or struct layouts
// change. We want the newest that this driver has, decided once at load time by probing:
//
// * nvmlInit_v2 (NVML 5.319) initialises devices lazily, so one broken GPU does not make
//   init fail for all of them; nvmlInit (v1) is the fallback for very old drivers.
// * nvmlDeviceGetCount_v2 / nvmlDeviceGetHandleByIndex_v2 must be used as a *pair*: v2
//   counts devices we have no permission for, v1 skips them, so mixing them would shift
//   indices. We therefore only use the v1 pair when the v2 count is missing.
// * nvmlDeviceGetMemoryInfo_v2 (R510+) reports driver-reserved memory separately; v1
//   folds it into "used", which makes idle GPUs look busy (gpustat#141). v2 takes a
//   versioned struct; a wrong version word gets ARGUMENT_VERSION_MISMATCH, after which the
//   device source falls back to v1 and reports reserved memory as unknown.
// * nvmlDeviceGetPciInfo_v3 -> _v2 -> v1 all fill the same 68-byte nvmlPciInfo_t; older
//   versions leave busId in a legacy form on some drivers.
// * *RunningProcesses: v1 returns 16-byte entries; _v2 and _v3 return 24-byte entries
//   (with MIG instance ids) - except _v3 on drivers 535.43-535.86, which briefly had
//   32-byte entries under the same name. Those drivers can be recognised by exporting
//   nvmlDeviceGetConfComputeMemSizeInfo but not yet nvmlDeviceGetRunningProcessDetailList
//   (nvitop's heuristic); there we skip _v3 and use _v2, whose layout never changed.
// * nvmlDeviceGetCurrentClocksEventReasons is the new name of the deprecated
//   nvmlDeviceGetCurrentClocksThrottleReasons (same signature and bits).
//
// A missing optional symbol is not an error: the metric it provides becomes "unknown".
// Only init, shutdown, error strings, count and handle-by-index are required.
#include "nvml/library.h"

#include <dlfcn.h>

#include <cctype>

namespace gpuman::nvml {
namespace {

struct SymbolSpec {
  Sym sym;
  bool required;
  std::array<const char*, 3> names;  // newest first; nullptr-terminated when shorter
};

// clang-format off
constexpr SymbolSpec kSymbols[] = {
  {Sym::kInit, true, {"nvmlInit_v2", "nvmlInit", nullptr}},
  {Sym::kShutdown, true, {"nvmlShutdown", nullptr, nullptr}},
  {Sym::kErrorString, true, {"nvmlErrorString", nullptr, nullptr}},
  {Sym::kSystemGetDriverVersion, false, {"nvmlSystemGetDriverVersion", nullptr, nullptr}},
  {Sym::kSystemGetNvmlVersion, false, {"nvmlSystemGetNVMLVersion", nullptr, nullptr}},
  {Sym::kSystemGetCudaDriverVersion, false, {"nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion", nullptr}},
  // Count and handle are resolved as a pair below.
  {Sym::kDeviceGetCount, true, {"nvmlDeviceGetCount_v2", "nvmlDeviceGetCount", nullptr}},
  {Sym::kDeviceGetHandleByIndex, true, {"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex", nullptr}},
  {Sym::kDeviceGetUuid, false, {"nvmlDeviceGetUUID", nullptr, nullptr}},
  {Sym::kDeviceGetName, false, {"nvmlDeviceGetName", nullptr, nullptr}},
  {Sym::kDeviceGetSerial, false, {"nvmlDeviceGetSerial", nullptr, nullptr}},
  {Sym::kDeviceGetMinorNumber, false, {"nvmlDeviceGetMinorNumber", nullptr, nullptr}},
  {Sym::kDeviceGetPciInfo, false, {"nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2", "nvmlDeviceGetPciInfo"}},
  {Sym::kDeviceGetMemoryInfoV2, false, {"nvmlDeviceGetMemoryInfo_v2", nullptr, nullptr}},
  {Sym::kDeviceGetMemoryInfo, false, {"nvmlDeviceGetMemoryInfo", nullptr, nullptr}},
  {Sym::kDeviceGetUtilizationRates, false, {"nvmlDeviceGetUtilizationRates", nullptr, nullptr}},
  {Sym::kDeviceGetTemperature, false, {"nvmlDeviceGetTemperature", nullptr, nullptr}},
  {Sym::kDeviceGetPowerUsage, false, {"nvmlDeviceGetPowerUsage", nullptr, nullptr}},
  {Sym::kDeviceGetEnforcedPowerLimit, false, {"nvmlDeviceGetEnforcedPowerLimit", nullptr, nullptr}},
  {Sym::kDeviceGetPowerManagementLimit, false, {"nvmlDeviceGetPowerManagementLimit", nullptr, nullptr}},
  {Sym::kDeviceGetFanSpeed, false, {"nvmlDeviceGetFanSpeed", nullptr, nullptr}},
  {Sym::kDeviceGetClockInfo, false, {"nvmlDeviceGetClockInfo", nullptr, nullptr}},
  {Sym::kDeviceGetMaxClockInfo, false, {"nvmlDeviceGetMaxClockInfo", nullptr, nullptr}},
  {Sym::kDeviceGetPerformanceState, false, {"nvmlDeviceGetPerformanceState", nullptr, nullptr}},
  {Sym::kDeviceGetCudaComputeCapability, false, {"nvmlDeviceGetCudaComputeCapability", nullptr, nullptr}},
  {Sym::kDeviceGetComputeMode, false, {"nvmlDeviceGetComputeMode", nullptr, nullptr}},
  {Sym::kDeviceGetPersistenceMode, false, {"nvmlDeviceGetPersistenceMode", nullptr, nullptr}},
  {Sym::kDeviceGetMigMode, false, {"nvmlDeviceGetMigMode", nullptr, nullptr}},
  {Sym::kDeviceGetTotalEccErrors, false, {"nvmlDeviceGetTotalEccErrors", nullptr, nullptr}},
  {Sym::kDeviceGetRetiredPagesPendingStatus, false, {"nvmlDeviceGetRetiredPagesPendingStatus", nullptr, nullptr}},
  {Sym::kDeviceGetRemappedRows, false, {"nvmlDeviceGetRemappedRows", nullptr, nullptr}},
  {Sym::kDeviceGetClocksEventReasons, false, {"nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons", nullptr}},
  {Sym::kDeviceGetCpuAffinity, false, {"nvmlDeviceGetCpuAffinity", nullptr, nullptr}},
  {Sym::kDeviceGetMemoryAffinity, false, {"nvmlDeviceGetMemoryAffinity", nullptr, nullptr}},
  {Sym::kDeviceGetNumaNodeId, false, {"nvmlDeviceGetNumaNodeId", nullptr, nullptr}},
  {Sym::kDeviceGetComputeRunningProcesses, false, {"nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2", "nvmlDeviceGetComputeRunningProcesses"}},
  {Sym::kDeviceGetGraphicsRunningProcesses, false, {"nvmlDeviceGetGraphicsRunningProcesses_v3", "nvmlDeviceGetGraphicsRunningProcesses_v2", "nvmlDeviceGetGraphicsRunningProcesses"}},
  {Sym::kDeviceGetTopologyCommonAncestor, false, {"nvmlDeviceGetTopologyCommonAncestor", nullptr, nullptr}},
  {Sym::kDeviceGetNvLinkState, false, {"nvmlDeviceGetNvLinkState", nullptr, nullptr}},
  {Sym::kDeviceGetNvLinkRemotePciInfo, false, {"nvmlDeviceGetNvLinkRemotePciInfo_v2", "nvmlDeviceGetNvLinkRemotePciInfo", nullptr}},
  {Sym::kDeviceGetNvLinkRemoteDeviceType, false, {"nvmlDeviceGetNvLinkRemoteDeviceType", nullptr, nullptr}},
  {Sym::kDeviceGetProcessUtilization, false, {"nvmlDeviceGetProcessUtilization", nullptr, nullptr}},
  {Sym::kDeviceGetSupportedEventTypes, false, {"nvmlDeviceGetSupportedEventTypes", nullptr, nullptr}},
  {Sym::kEventSetCreate, false, {"nvmlEventSetCreate", nullptr, nullptr}},
  {Sym::kDeviceRegisterEvents, false, {"nvmlDeviceRegisterEvents", nullptr, nullptr}},
  {Sym::kEventSetWait, false, {"nvmlEventSetWait_v2", "nvmlEventSetWait", nullptr}},
  {Sym::kEventSetFree, false, {"nvmlEventSetFree", nullptr, nullptr}},
  {Sym::kDeviceGetNumGpuCores, false, {"nvmlDeviceGetNumGpuCores", nullptr, nullptr}},
  {Sym::kDeviceGetMemoryBusWidth, false, {"nvmlDeviceGetMemoryBusWidth", nullptr, nullptr}},
  {Sym::kDeviceGetGpuFabricInfo, false, {"nvmlDeviceGetGpuFabricInfo", nullptr, nullptr}},
  // MIG (R450+). Drivers without them list no MIG devices.
  {Sym::kDeviceGetMaxMigDeviceCount, false, {"nvmlDeviceGetMaxMigDeviceCount", nullptr, nullptr}},
  {Sym::kDeviceGetMigDeviceHandleByIndex, false, {"nvmlDeviceGetMigDeviceHandleByIndex", nullptr, nullptr}},
  {Sym::kDeviceIsMigDeviceHandle, false, {"nvmlDeviceIsMigDeviceHandle", nullptr, nullptr}},
  {Sym::kDeviceGetGpuInstanceId, false, {"nvmlDeviceGetGpuInstanceId", nullptr, nullptr}},
  {Sym::kDeviceGetComputeInstanceId, false, {"nvmlDeviceGetComputeInstanceId", nullptr, nullptr}},
  {Sym::kDeviceGetDeviceHandleFromMigDeviceHandle, false, {"nvmlDeviceGetDeviceHandleFromMigDeviceHandle", nullptr, nullptr}},
  {Sym::kDeviceGetAttributes, false, {"nvmlDeviceGetAttributes_v2", nullptr, nullptr}},
  // Per-cgroup memory limits (newer drivers): a memory slice's hard limit (docs/share.md).
  {Sym::kDeviceSetMemoryLimits, false, {"nvmlDeviceSetMemoryLimits_v1", nullptr, nullptr}},
};
// clang-format on
static_assert(std::size(kSymbols) == kSymCount, "every Sym has a row in kSymbols");

bool EndsWith(const char* name, const char* suffix) {
  std::string_view n(name), s(suffix);
  return n.size() >= s.size() && n.substr(n.size() - s.size()) == s;
}

std::string LowerFirst(std::string text) {
  // NVML's strings are capitalised ("GPU is lost", "Driver Not Loaded"); our messages are
  // lower case except for acronyms, so only lower "Word Word" style capitals.
  for (size_t i = 0; i < text.size(); ++i) {
    bool word_start = i == 0 || text[i - 1] == ' ';
    bool acronym = i + 1 < text.size() && std::isupper(static_cast<unsigned char>(text[i + 1]));
    if (word_start && !acronym) text[i] = static_cast<char>(std::tolower(static_cast<unsigned char>(text[i])));
  }
  return text;
}

}  // namespace

Result<std::unique_ptr<NvmlLibrary>> NvmlLibrary::Load(const std::string& path) {
  std::unique_ptr<NvmlLibrary> lib(new NvmlLibrary());
  lib->path_ = path;
  dlerror();
  lib->handle_ = dlopen(path.c_str(), RTLD_LAZY | RTLD_LOCAL);
  if (lib->handle_ == nullptr) {
    const char* why = dlerror();
    return MakeError(ErrorCode::kUnavailable,
                     "cannot load NVML library " + path + ": " + (why ? why : "unknown reason"));
  }

  for (const SymbolSpec& spec : kSymbols) {
    size_t i = static_cast<size_t>(spec.sym);
    for (const char* name : spec.names) {
      if (name == nullptr) break;
      if (void* fn = dlsym(lib->handle_, name)) {
        lib->fns_[i] = fn;
        lib->names_[i] = name;
        break;
      }
    }
    if (lib->fns_[i] == nullptr) {
      lib->names_[i] = "";
      if (spec.required) {
        return MakeError(ErrorCode::kUnavailable, "NVML library " + path +
                                                      " does not export " + spec.names[0] +
                                                      "; is it really libnvidia-ml?");
      }
    }
  }

  // Count and handle-by-index only as a matching pair (see the essay above).
  const size_t count = static_cast<size_t>(Sym::kDeviceGetCount);
  const size_t handle = static_cast<size_t>(Sym::kDeviceGetHandleByIndex);
  bool count_v2 = EndsWith(lib->names_[count], "_v2");
  bool handle_v2 = EndsWith(lib->names_[handle], "_v2");
  if (count_v2 != handle_v2) {
    for (size_t i : {count, handle}) {
      std::string v1(lib->names_[i]);
      if (EndsWith(v1.c_str(), "_v2")) v1.resize(v1.size() - 3);
      void* fn = dlsym(lib->handle_, v1.c_str());
      if (fn == nullptr) {
        return MakeError(ErrorCode::kUnavailable,
                         "NVML library " + path + " exports no matching " + v1 + " pair");
      }
      lib->fns_[i] = fn;
      lib->names_[i] = i == count ? "nvmlDeviceGetCount" : "nvmlDeviceGetHandleByIndex";
    }
  }

  // Process lists: 24-byte entries for _v3/_v2, 16 for v1; avoid the 32-byte _v3 era.
  bool cc_era_v3 = dlsym(lib->handle_, "nvmlDeviceGetConfComputeMemSizeInfo") != nullptr &&
                   dlsym(lib->handle_, "nvmlDeviceGetRunningProcessDetailList") == nullptr;
  for (Sym sym : {Sym::kDeviceGetComputeRunningProcesses, Sym::kDeviceGetGraphicsRunningProcesses}) {
    size_t i = static_cast<size_t>(sym);
    if (cc_era_v3 && lib->names_[i][0] != '\0' && EndsWith(lib->names_[i], "_v3")) {
      std::string v2(lib->names_[i]);
      v2.replace(v2.size() - 3, 3, "_v2");
      lib->fns_[i] = dlsym(lib->handle_, v2.c_str());
      lib->names_[i] = sym == Sym::kDeviceGetComputeRunningProcesses
                           ? "nvmlDeviceGetComputeRunningProcesses_v2"
                           : "nvmlDeviceGetGraphicsRunningProcesses_v2";
      if (lib->fns_[i] == nullptr) lib->names_[i] = "";
    }
  }
  const char* procs = lib->names_[static_cast<size_t>(Sym::kDeviceGetComputeRunningProcesses)];
  bool procs_v1 = procs[0] != '\0' && !EndsWith(procs, "_v2") && !EndsWith(procs, "_v3");
  lib->process_entry_size_ = procs_v1 ? sizeof(nvmlProcessInfo_v1_t) : sizeof(nvmlProcessInfo_t);
  // Graphics must use the same generation as compute; if it does not, drop to v1 for both.
  const char* gfx = lib->names_[static_cast<size_t>(Sym::kDeviceGetGraphicsRunningProcesses)];
  bool gfx_v1 = gfx[0] != '\0' && !EndsWith(gfx, "_v2") && !EndsWith(gfx, "_v3");
  if (gfx[0] != '\0' && procs[0] != '\0' && gfx_v1 != procs_v1) {
    lib->fns_[static_cast<size_t>(Sym::kDeviceGetComputeRunningProcesses)] =
        dlsym(lib->handle_, "nvmlDeviceGetComputeRunningProcesses");
    lib->names_[static_cast<size_t>(Sym::kDeviceGetComputeRunningProcesses)] =
        "nvmlDeviceGetComputeRunningProcesses";
    lib->fns_[static_cast<size_t>(Sym::kDeviceGetGraphicsRunningProcesses)] =
        dlsym(lib->handle_, "nvmlDeviceGetGraphicsRunningProcesses");
    lib->names_[static_cast<size_t>(Sym::kDeviceGetGraphicsRunningProcesses)] =
        "nvmlDeviceGetGraphicsRunningProcesses";
    lib->process_entry_size_ = sizeof(nvmlProcessInfo_v1_t);
  }

  // gpuman's stand-in (gpuman --simulate) exports hooks no real NVML has: it reports a
  // scenario it cannot load to us rather than on stderr, and hands over the scenario's
  // process table, which it has parsed already (src/sim/nvml_exports.cc).
  if (auto take = reinterpret_cast<void (*)()>(dlsym(lib->handle_, "gpumanSimTakeInitErrors"))) take();
  auto sim_init_error = reinterpret_cast<SimText_fn>(dlsym(lib->handle_, "gpumanSimInitError"));
  lib->sim_host_processes_ = reinterpret_cast<SimText_fn>(dlsym(lib->handle_, "gpumanSimHostProcesses"));

  nvmlReturn_t rc = lib->Get<nvmlInit_fn>(Sym::kInit)();
  if (rc != NVML_SUCCESS) {
    if (const char* scenario = sim_init_error ? sim_init_error() : nullptr; scenario && *scenario) {
      return MakeError(ErrorCode::kInvalidArgument, std::string("scenario ") + scenario);
    }
    std::string why = lib->ErrorString(rc);
    std::string hint;
    if (rc == NVML_ERROR_DRIVER_NOT_LOADED) hint = " (is the NVIDIA kernel driver installed and loaded?)";
    if (rc == NVML_ERROR_LIB_RM_VERSION_MISMATCH) hint = " (the driver was upgraded; reboot or reload the kernel module)";
    if (rc == NVML_ERROR_NO_PERMISSION) hint = " (no permission to open /dev/nvidia*)";
    return MakeError(ErrorCode::kUnavailable, std::string("NVML library ") + path + ": " +
                                                  lib->names_[static_cast<size_t>(Sym::kInit)] +
                                                  ": " + why + hint);
  }
  lib->initialized_ = true;
  return lib;
}

NvmlLibrary::~NvmlLibrary() {
  if (initialized_) Get<nvmlShutdown_fn>(Sym::kShutdown)();
  if (handle_ != nullptr) dlclose(handle_);
}

std::optional<std::string> NvmlLibrary::SimulatedHostProcesses() const {
  const char* text = sim_host_processes_ ? sim_host_processes_() : nullptr;
  if (text == nullptr) return std::nullopt;
  return std::string(text);
}

std::string NvmlLibrary::ErrorString(nvmlReturn_t code) const {
  auto fn = Get<nvmlErrorString_fn>(Sym::kErrorString);
  const char* text = fn ? fn(code) : nullptr;
  if (text == nullptr || *text == '\0') return "nvml error " + std::to_string(code);
  return LowerFirst(text);
}

}  // namespace gpuman::nvml
