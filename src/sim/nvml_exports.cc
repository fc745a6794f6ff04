// The stand-in libnvidia-ml.so.1: exports real NVML entry points (names, struct layouts,
// enum values and return codes from src/nvml/nvml_abi.h) and answers them from a JSON
// scenario file named by $GPUMAN_FAKE_NVML_SCENARIO (format: docs/scenarios.md; read by
// sim/scenario.cc, held by sim/state.cc). Built twice: sim/ (current versioned symbols,
// shipped for `gpuman --simulate`) and sim-legacy/ (FAKE_NVML_LEGACY=1: only the oldest
// unsuffixed names, to exercise loader fallbacks in tests).
// Thread-safe: every exported call runs under the one mutex of the one State.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <time.h>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/unique_fd.h"  // header-only: this library links nothing of gpuman
#include "nvml/nvml_abi.h"
#include "sim/scenario.h"
#include "sim/state.h"

#ifndef FAKE_NVML_LEGACY
#define FAKE_NVML_LEGACY 0
#endif

// Everything is hidden by default (CMake); only NVML names and the two test hooks export.
#define FAKE_NVML_EXPORT extern "C" __attribute__((visibility("default")))

using namespace gpuman::sim;

namespace {

// ---------------------------------------------------------------------------------------
// Call skeletons. Each exported function is one of these plus a body that reads the
// scenario. Order of checks: init, handle, injected error, lost GPU, then the body.

template <typename Body>
nvmlReturn_t SystemCall(const char* function, Body&& body) {
  State& s = TheState();
  std::lock_guard<std::mutex> lock(s.mu);
  s.Begin(function);
  if (s.init_count == 0) return NVML_ERROR_UNINITIALIZED;
  if (auto injected = s.Injected(function, nullptr)) return *injected;
  return body(s.scenario);
}

template <typename Body>
nvmlReturn_t DeviceCall(const char* function, nvmlDevice_t device, Body&& body) {
  State& s = TheState();
  std::lock_guard<std::mutex> lock(s.mu);
  s.Begin(function);
  if (s.init_count == 0) return NVML_ERROR_UNINITIALIZED;
  const Gpu* gpu = s.Lookup(device);
  if (!gpu) return NVML_ERROR_INVALID_ARGUMENT;
  if (auto injected = s.Injected(function, gpu)) return *injected;
  if (gpu->is_lost) return NVML_ERROR_GPU_IS_LOST;
  if constexpr (std::is_invocable_v<Body, const Gpu&, const Scenario&>) {
    return body(*gpu, s.scenario);
  } else {
    return body(*gpu);
  }
}

// For the calls NVML accepts a MIG device handle in (UUID, memory, MIG queries): `body`
// gets the GPU (the parent, for a MIG handle) and the MIG device or nullptr. Injected errors
// and a lost GPU are the parent's.
template <typename Body>
nvmlReturn_t AnyDeviceCall(const char* function, nvmlDevice_t device, Body&& body) {
  State& s = TheState();
  std::lock_guard<std::mutex> lock(s.mu);
  s.Begin(function);
  if (s.init_count == 0) return NVML_ERROR_UNINITIALIZED;
  const Gpu* gpu = s.Lookup(device);
  const MigDevice* mig = nullptr;
  if (!gpu) mig = LookupMigIn(s.scenario, device, &gpu);
  if (!gpu) return NVML_ERROR_INVALID_ARGUMENT;
  if (auto injected = s.Injected(function, gpu)) return *injected;
  if (gpu->is_lost) return NVML_ERROR_GPU_IS_LOST;
  return body(*gpu, mig);
}

template <typename T, typename Out>
nvmlReturn_t Put(const std::optional<T>& value, Out* out) {
  if (!out) return NVML_ERROR_INVALID_ARGUMENT;
  if (!value) return NVML_ERROR_NOT_SUPPORTED;
  *out = static_cast<Out>(*value);
  return NVML_SUCCESS;
}

nvmlReturn_t PutString(const std::optional<std::string>& value, char* out, unsigned length) {
  if (!out) return NVML_ERROR_INVALID_ARGUMENT;
  if (!value) return NVML_ERROR_NOT_SUPPORTED;
  if (value->size() + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(out, value->c_str(), value->size() + 1);
  return NVML_SUCCESS;
}

nvmlReturn_t PutPci(const Gpu& gpu, nvmlPciInfo_t* out) {
  if (!out) return NVML_ERROR_INVALID_ARGUMENT;
  if (!gpu.pci) return NVML_ERROR_NOT_SUPPORTED;
  const Pci& p = *gpu.pci;
  *out = nvmlPciInfo_t{};
  std::snprintf(out->busIdLegacy, sizeof out->busIdLegacy, "%04X:%02X:%02X.0", p.domain & 0xFFFF,
                p.bus & 0xFF, p.device & 0xFF);
  std::snprintf(out->busId, sizeof out->busId, "%08X:%02X:%02X.0", p.domain, p.bus & 0xFF,
                p.device & 0xFF);
  out->domain = p.domain;
  out->bus = p.bus;
  out->device = p.device;
  out->pciDeviceId = (p.device_id << 16) | 0x10DE;
  out->pciSubSystemId = (p.subsystem_id << 16) | (p.subsystem_vendor_id & 0xFFFF);
  return NVML_SUCCESS;
}

nvmlReturn_t Init(const char* function) {
  State& s = TheState();
  std::lock_guard<std::mutex> lock(s.mu);
  s.Begin(function);
  if (s.init_count == 0) {
    if (nvmlReturn_t r = s.LoadForInit(); r != NVML_SUCCESS) return r;
  }
  if (auto injected = s.Injected(function, nullptr)) return *injected;
  ++s.init_count;
  return NVML_SUCCESS;
}

nvmlReturn_t GetHandleByIndex(const char* function, unsigned index, nvmlDevice_t* device) {
  State& s = TheState();
  std::lock_guard<std::mutex> lock(s.mu);
  s.Begin(function);
  if (s.init_count == 0) return NVML_ERROR_UNINITIALIZED;
  if (!device || index >= s.scenario.gpus.size()) return NVML_ERROR_INVALID_ARGUMENT;
  // A lost GPU still gets a handle; every call on it then fails with GPU_IS_LOST.
  if (auto injected = s.Injected(function, &s.scenario.gpus[index])) return *injected;
  *device = HandleOf(index);
  return NVML_SUCCESS;
}

// Finds a GPU by a predicate (UUID, bus id): NOT_FOUND, or GPU_IS_LOST for a lost match.
template <typename Match>
nvmlReturn_t FindHandle(const char* function, nvmlDevice_t* device, Match&& match) {
  return SystemCall(function, [&](const Scenario& s) -> nvmlReturn_t {
    for (size_t i = 0; i < s.gpus.size(); ++i) {
      if (!match(s.gpus[i])) continue;
      if (s.gpus[i].is_lost) return NVML_ERROR_GPU_IS_LOST;
      *device = HandleOf(static_cast<unsigned>(i));
      return NVML_SUCCESS;
    }
    return NVML_ERROR_NOT_FOUND;
  });
}

nvmlReturn_t GetHandleByPciBusId(const char* function, const char* bus_id, nvmlDevice_t* device) {
  // NVML accepts "domain:bus:device.function" or "bus:device.function", in hex.
  unsigned domain = 0, bus = 0, dev = 0, fn = 0;
  bool parsed = bus_id && (std::sscanf(bus_id, "%x:%x:%x.%x", &domain, &bus, &dev, &fn) == 4 ||
                           (domain = 0, std::sscanf(bus_id, "%x:%x.%x", &bus, &dev, &fn) == 3));
  if (!device || !parsed) {
    return SystemCall(function, [](const Scenario&) { return NVML_ERROR_INVALID_ARGUMENT; });
  }
  return FindHandle(function, device, [&](const Gpu& g) {
    return g.pci && g.pci->domain == domain && g.pci->bus == bus && g.pci->device == dev && fn == 0;
  });
}

// *RunningProcesses in every version: Entry is nvmlProcessInfo_v1_t (16 B) or
// nvmlProcessInfo_t (24 B). Implements NVML's size-probe protocol.
template <typename Entry>
nvmlReturn_t ListProcesses(const char* function, nvmlDevice_t device, bool graphics,
                           unsigned* count, Entry* infos) {
  State& s = TheState();
  std::lock_guard<std::mutex> lock(s.mu);
  s.Begin(function);
  if (s.init_count == 0) return NVML_ERROR_UNINITIALIZED;
  const Gpu* gpu = s.Lookup(device);
  if (!gpu || !count) return NVML_ERROR_INVALID_ARGUMENT;
  std::vector<const Process*> procs;
  for (const Process& p : gpu->processes) {
    if (graphics ? p.is_graphics : p.is_compute) procs.push_back(&p);
  }
  const auto n = static_cast<unsigned>(procs.size());
  if (auto injected = s.Injected(function, gpu)) {
    // NVML reports the needed count with INSUFFICIENT_SIZE; an injected one asks for one
    // more than now, as if a process started between the probe and the real call.
    if (*injected == NVML_ERROR_INSUFFICIENT_SIZE) *count = n + 1;
    return *injected;
  }
  if (gpu->is_lost) return NVML_ERROR_GPU_IS_LOST;
  if (n == 0) {
    *count = 0;
    return NVML_SUCCESS;
  }
  if (!infos || *count < n) {
    *count = n;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  for (unsigned i = 0; i < n; ++i) {
    infos[i] = Entry{};
    infos[i].pid = procs[i]->pid;
    infos[i].usedGpuMemory = procs[i]->used_memory;
    if constexpr (std::is_same_v<Entry, nvmlProcessInfo_t>) {
      infos[i].gpuInstanceId = procs[i]->gpu_instance_id;
      infos[i].computeInstanceId = procs[i]->compute_instance_id;
    }
  }
  *count = n;
  return NVML_SUCCESS;
}

// The PCI address NVML reports for the far end of a link to NVSwitch `number`.
Pci SwitchPci(unsigned number) {
  Pci pci;
  pci.domain = 0xFFFF;
  pci.bus = number;
  pci.device = 0;
  pci.device_id = 0x22A3;  // an NVSwitch (third generation, HGX H100)
  return pci;
}

// The active link `link` of `gpu`, or nullptr (inactive, or no such link).
const NvLink* FindNvLink(const Gpu& gpu, unsigned link) {
  if (!gpu.nvlinks) return nullptr;
  for (const NvLink& l : *gpu.nvlinks) {
    if (l.link == link) return &l;
  }
  return nullptr;
}

nvmlReturn_t NvLinkRemotePci(const char* function, nvmlDevice_t device, unsigned link,
                             nvmlPciInfo_t* pci) {
  return DeviceCall(function, device, [&](const Gpu& gpu, const Scenario& s) -> nvmlReturn_t {
    if (!pci || link >= NVML_NVLINK_MAX_LINKS) return NVML_ERROR_INVALID_ARGUMENT;
    if (!gpu.nvlinks) return NVML_ERROR_NOT_SUPPORTED;
    const NvLink* l = FindNvLink(gpu, link);
    if (!l) return NVML_ERROR_NOT_SUPPORTED;  // an inactive link has no remote end
    if (l->to_switch) {
      Gpu nvswitch;
      nvswitch.pci = SwitchPci(l->target);
      return PutPci(nvswitch, pci);
    }
    return PutPci(s.gpus[l->target], pci);
  });
}

// Memory and clock-event bodies shared by versioned names.
nvmlReturn_t MemoryV1(const char* function, nvmlDevice_t device, nvmlMemory_t* out) {
  return AnyDeviceCall(function, device, [&](const Gpu& gpu, const MigDevice* mig) -> nvmlReturn_t {
    if (!out) return NVML_ERROR_INVALID_ARGUMENT;
    if (!mig && !gpu.memory) return NVML_ERROR_NOT_SUPPORTED;
    const Memory& m = mig ? mig->memory : *gpu.memory;
    // v1 semantics: reserved memory counts as used.
    *out = nvmlMemory_t{m.total, m.total - m.reserved - m.used, m.reserved + m.used};
    return NVML_SUCCESS;
  });
}

nvmlReturn_t ClockEventReasons(const char* function, nvmlDevice_t device, unsigned long long* out) {
  return DeviceCall(function, device,
                    [&](const Gpu& gpu) { return Put(gpu.clock_event_reasons, out); });
}

}  // namespace

// =======================================================================================
// Exported NVML entry points. [new] names are left out of the legacy variant.

FAKE_NVML_EXPORT nvmlReturn_t nvmlInit(void) { return Init(__func__); }
#if !FAKE_NVML_LEGACY
FAKE_NVML_EXPORT nvmlReturn_t nvmlInit_v2(void) { return Init(__func__); }
// Flags (NO_GPUS, NO_ATTACH) are accepted and ignored.
FAKE_NVML_EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int /*flags*/) { return Init(__func__); }
#endif

FAKE_NVML_EXPORT nvmlReturn_t nvmlShutdown(void) {
  State& s = TheState();
  std::lock_guard<std::mutex> lock(s.mu);
  s.Begin(__func__);
  if (s.init_count == 0) return NVML_ERROR_UNINITIALIZED;
  if (auto injected = s.Injected(__func__, nullptr)) return *injected;
  if (--s.init_count == 0) s.scenario = Scenario{};
  return NVML_SUCCESS;
}

FAKE_NVML_EXPORT const char* nvmlErrorString(nvmlReturn_t result) {
  {
    State& s = TheState();
    std::lock_guard<std::mutex> lock(s.mu);
    ++s.call_counts[__func__];
  }
  for (const CodeInfo& c : kCodes) {
    if (c.code == result) return c.text;
  }
  return "Unknown Error";
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  return SystemCall(
      __func__, [&](const Scenario& s) { return PutString(s.driver_version, version, length); });
}
FAKE_NVML_EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char* version, unsigned int length) {
  return SystemCall(__func__,
                    [&](const Scenario& s) { return PutString(s.nvml_version, version, length); });
}
FAKE_NVML_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int* version) {
  return SystemCall(__func__,
                    [&](const Scenario& s) { return Put(s.cuda_driver_version, version); });
}
#if !FAKE_NVML_LEGACY
FAKE_NVML_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int* version) {
  return SystemCall(__func__,
                    [&](const Scenario& s) { return Put(s.cuda_driver_version, version); });
}
#endif

// --- enumeration and handles -----------------------------------------------------------

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int* count) {
  return SystemCall(__func__, [&](const Scenario& s) {
    return Put(std::optional<size_t>(s.gpus.size()), count);
  });
}
#if !FAKE_NVML_LEGACY
FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  return SystemCall(__func__, [&](const Scenario& s) {
    return Put(std::optional<size_t>(s.gpus.size()), count);
  });
}
#endif

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t* device) {
  return GetHandleByIndex(__func__, index, device);
}
#if !FAKE_NVML_LEGACY
FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index,
                                                            nvmlDevice_t* device) {
  return GetHandleByIndex(__func__, index, device);
}
#endif

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* device) {
  if (!uuid || !device) {
    return SystemCall(__func__, [](const Scenario&) { return NVML_ERROR_INVALID_ARGUMENT; });
  }
  return FindHandle(__func__, device, [&](const Gpu& g) { return g.uuid == uuid; });
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char* bus_id,
                                                            nvmlDevice_t* device) {
  return GetHandleByPciBusId(__func__, bus_id, device);
}
#if !FAKE_NVML_LEGACY
FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char* bus_id,
                                                               nvmlDevice_t* device) {
  return GetHandleByPciBusId(__func__, bus_id, device);
}
#endif

// --- identity --------------------------------------------------------------------------

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid,
                                                unsigned int length) {
  return AnyDeviceCall(__func__, device, [&](const Gpu& g, const MigDevice* mig) {
    return PutString(std::optional<std::string>(mig ? mig->uuid : g.uuid), uuid, length);
  });
}
FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name,
                                                unsigned int length) {
  return DeviceCall(__func__, device,
                    [&](const Gpu& g) { return PutString(g.name, name, length); });
}
FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t device, char* serial,
                                                  unsigned int length) {
  return DeviceCall(__func__, device,
                    [&](const Gpu& g) { return PutString(g.serial, serial, length); });
}
FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int* index) {
  return DeviceCall(__func__, device,
                    [&](const Gpu&) { return Put(std::optional(device->index), index); });
}
FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int* minor) {
  return DeviceCall(__func__, device, [&](const Gpu& g) { return Put(g.minor_number, minor); });
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  return DeviceCall(__func__, device, [&](const Gpu& g) { return PutPci(g, pci); });
}
#if !FAKE_NVML_LEGACY
FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  return DeviceCall(__func__, device, [&](const Gpu& g) { return PutPci(g, pci); });
}
FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  return DeviceCall(__func__, device, [&](const Gpu& g) { return PutPci(g, pci); });
}
#endif

// --- memory and utilization ------------------------------------------------------------

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  return MemoryV1(__func__, device, memory);
}
#if !FAKE_NVML_LEGACY
FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device,
                                                         nvmlMemory_v2_t* memory) {
  return AnyDeviceCall(__func__, device, [&](const Gpu& gpu, const MigDevice* mig) -> nvmlReturn_t {
    if (!memory) return NVML_ERROR_INVALID_ARGUMENT;
    if (memory->version != nvmlMemory_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    if (!mig && !gpu.memory) return NVML_ERROR_NOT_SUPPORTED;
    const Memory& m = mig ? mig->memory : *gpu.memory;
    memory->total = m.total;
    memory->reserved = m.reserved;
    memory->free = m.total - m.reserved - m.used;
    memory->used = m.used;
    return NVML_SUCCESS;
  });
}
#endif

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device,
                                                            nvmlUtilization_t* utilization) {
  return DeviceCall(__func__, device,
                    [&](const Gpu& g) { return Put(g.utilization, utilization); });
}

// --- thermals, power, clocks -----------------------------------------------------------

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device,
                                                       nvmlTemperatureSensors_t sensor,
                                                       unsigned int* temp) {
  return DeviceCall(__func__, device, [&](const Gpu& g) -> nvmlReturn_t {
    if (sensor != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
    return Put(g.temperature, temp);
  });
}
FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int* power_mw) {
  return DeviceCall(__func__, device,
                    [&](const Gpu& g) { return Put(g.power_usage_mw, power_mw); });
}
FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device,
                                                              unsigned int* limit_mw) {
  return DeviceCall(__func__, device,
                    [&](const Gpu& g) { return Put(g.power_limit_mw, limit_mw); });
}
FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t device,
                                                                unsigned int* limit_mw) {
  return DeviceCall(__func__, device,
                    [&](const Gpu& g) { return Put(g.power_limit_mw, limit_mw); });
}
FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t device, unsigned int* speed) {
  return DeviceCall(__func__, device, [&](const Gpu& g) { return Put(g.fan, speed); });
}

// GRAPHICS and SM report the same domain here; VIDEO is not modelled.
FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type,
                                                     unsigned int* clock_mhz) {
  return DeviceCall(__func__, device, [&](const Gpu& g) -> nvmlReturn_t {
    switch (type) {
      case NVML_CLOCK_GRAPHICS:
      case NVML_CLOCK_SM:
        return Put(g.clock_sm, clock_mhz);
      case NVML_CLOCK_MEM:
        return Put(g.clock_mem, clock_mhz);
      case NVML_CLOCK_VIDEO:
        return NVML_ERROR_NOT_SUPPORTED;
      default:
        return NVML_ERROR_INVALID_ARGUMENT;
    }
  });
}
FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, nvmlClockType_t type,
                                                        unsigned int* clock_mhz) {
  return DeviceCall(__func__, device, [&](const Gpu& g) -> nvmlReturn_t {
    switch (type) {
      case NVML_CLOCK_GRAPHICS:
      case NVML_CLOCK_SM:
        return Put(g.clock_sm_max, clock_mhz);
      case NVML_CLOCK_MEM:
        return Put(g.clock_mem_max, clock_mhz);
      case NVML_CLOCK_VIDEO:
        return NVML_ERROR_NOT_SUPPORTED;
      default:
        return NVML_ERROR_INVALID_ARGUMENT;
    }
  });
}
FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t device,
                                                            nvmlPstates_t* pstate) {
  return DeviceCall(__func__, device, [&](const Gpu& g) { return Put(g.pstate, pstate); });
}

// --- capabilities and modes ------------------------------------------------------------

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int* major,
                                                                 int* minor) {
  return DeviceCall(__func__, device, [&](const Gpu& g) -> nvmlReturn_t {
    if (!major || !minor) return NVML_ERROR_INVALID_ARGUMENT;
    if (!g.compute_capability) return NVML_ERROR_NOT_SUPPORTED;
    std::tie(*major, *minor) = *g.compute_capability;
    return NVML_SUCCESS;
  });
}
FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetNumGpuCores(nvmlDevice_t device, unsigned int* cores) {
  return DeviceCall(__func__, device, [&](const Gpu& g) { return Put(g.cuda_cores, cores); });
}
FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMemoryBusWidth(nvmlDevice_t device, unsigned int* bits) {
  return DeviceCall(__func__, device, [&](const Gpu& g) { return Put(g.memory_bus_width, bits); });
}
FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetGpuFabricInfo(nvmlDevice_t device, nvmlGpuFabricInfo_t* info) {
  return DeviceCall(__func__, device, [&](const Gpu& g) -> nvmlReturn_t {
    if (!info) return NVML_ERROR_INVALID_ARGUMENT;
    if (!g.fabric) return NVML_ERROR_NOT_SUPPORTED;
    *info = nvmlGpuFabricInfo_t{};
    info->state = static_cast<unsigned char>(g.fabric->first);
    info->status = g.fabric->second;
    return NVML_SUCCESS;
  });
}
// A cgroup's memory limit: accepted for whole GPUs (MIG handles are not, as NVML's), and
// written as "UUID CGROUP SOFT HARD" to $GPUMAN_FAKE_NVML_LIMITS_LOG when set, for tests.
FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceSetMemoryLimits_v1(nvmlDevice_t device, nvmlSetMemoryLimits_v1_t* limits) {
  return DeviceCall(__func__, device, [&](const Gpu& g) -> nvmlReturn_t {
    if (!limits || !limits->nameSpace || limits->nameSpace[0] != '/') return NVML_ERROR_INVALID_ARGUMENT;
    if (const char* log = std::getenv("GPUMAN_FAKE_NVML_LIMITS_LOG"); log && *log) {
      if (FILE* f = std::fopen(log, "a")) {
        std::fprintf(f, "%s %s %llu %llu\n", g.uuid.c_str(), limits->nameSpace, limits->softLimit, limits->hardLimit);
        std::fclose(f);
      }
    }
    return NVML_SUCCESS;
  });
}
FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t device,
                                                       nvmlComputeMode_t* mode) {
  return DeviceCall(__func__, device, [&](const Gpu& g) { return Put(g.compute_mode, mode); });
}
FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t device,
                                                           nvmlEnableState_t* mode) {
  return DeviceCall(__func__, device, [&](const Gpu& g) { return Put(g.persistence_mode, mode); });
}
FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int* current,
                                                   unsigned int* pending) {
  return DeviceCall(__func__, device, [&](const Gpu& g) -> nvmlReturn_t {
    if (!current || !pending) return NVML_ERROR_INVALID_ARGUMENT;
    if (!g.mig_mode) return NVML_ERROR_NOT_SUPPORTED;
    std::tie(*current, *pending) = *g.mig_mode;
    return NVML_SUCCESS;
  });
}

// --- MIG (NVML API Reference, "Multi Instance GPU Management") ------------------------

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int* count) {
  return DeviceCall(__func__, device, [&](const Gpu& g) -> nvmlReturn_t {
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    if (!g.mig_mode) return NVML_ERROR_NOT_SUPPORTED;
    *count = g.mig_mode->first == NVML_DEVICE_MIG_ENABLE ? g.max_mig_devices.value_or(7) : 0;  // 0: MIG off
    return NVML_SUCCESS;
  });
}
FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index,
                                                                  nvmlDevice_t* mig_device) {
  return DeviceCall(__func__, device, [&](const Gpu& g, const Scenario& s) -> nvmlReturn_t {
    if (!mig_device) return NVML_ERROR_INVALID_ARGUMENT;
    if (!g.mig_mode) return NVML_ERROR_NOT_SUPPORTED;
    if (g.mig_mode->first != NVML_DEVICE_MIG_ENABLE) return NVML_ERROR_NOT_FOUND;
    if (index >= g.max_mig_devices.value_or(7)) return NVML_ERROR_INVALID_ARGUMENT;
    for (const MigDevice& m : g.mig_devices) {
      if (m.index == index) {
        *mig_device = MigHandleOf(static_cast<unsigned>(&g - s.gpus.data()), index);
        return NVML_SUCCESS;
      }
    }
    return NVML_ERROR_NOT_FOUND;  // no MIG device in this slot
  });
}
FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int* is_mig) {
  return AnyDeviceCall(__func__, device, [&](const Gpu&, const MigDevice* mig) -> nvmlReturn_t {
    if (!is_mig) return NVML_ERROR_INVALID_ARGUMENT;
    *is_mig = mig ? 1 : 0;
    return NVML_SUCCESS;
  });
}
FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int* id) {
  return AnyDeviceCall(__func__, device, [&](const Gpu&, const MigDevice* mig) -> nvmlReturn_t {
    if (!id) return NVML_ERROR_INVALID_ARGUMENT;
    if (!mig) return NVML_ERROR_NOT_SUPPORTED;
    *id = mig->gpu_instance_id;
    return NVML_SUCCESS;
  });
}
FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int* id) {
  return AnyDeviceCall(__func__, device, [&](const Gpu&, const MigDevice* mig) -> nvmlReturn_t {
    if (!id) return NVML_ERROR_INVALID_ARGUMENT;
    if (!mig) return NVML_ERROR_NOT_SUPPORTED;
    *id = mig->compute_instance_id;
    return NVML_SUCCESS;
  });
}
FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t mig_device,
                                                                           nvmlDevice_t* device) {
  State& st = TheState();
  std::lock_guard<std::mutex> lock(st.mu);
  st.Begin(__func__);
  if (st.init_count == 0) return NVML_ERROR_UNINITIALIZED;
  const Gpu* parent = nullptr;
  if (!device || !LookupMigIn(st.scenario, mig_device, &parent)) return NVML_ERROR_INVALID_ARGUMENT;
  if (auto injected = st.Injected(__func__, parent)) return *injected;
  *device = HandleOf(static_cast<unsigned>(parent - st.scenario.gpus.data()));
  return NVML_SUCCESS;
}
#if !FAKE_NVML_LEGACY
FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t device, nvmlDeviceAttributes_t* attributes) {
  return AnyDeviceCall(__func__, device, [&](const Gpu&, const MigDevice* mig) -> nvmlReturn_t {
    if (!attributes) return NVML_ERROR_INVALID_ARGUMENT;
    if (!mig) return NVML_ERROR_NOT_SUPPORTED;  // "currently only supports MIG device handles"
    *attributes = mig->attributes;
    return NVML_SUCCESS;
  });
}
#endif

// --- health ----------------------------------------------------------------------------

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device,
                                                          nvmlMemoryErrorType_t error_type,
                                                          nvmlEccCounterType_t counter_type,
                                                          unsigned long long* count) {
  return DeviceCall(__func__, device, [&](const Gpu& g) -> nvmlReturn_t {
    if (error_type < 0 || error_type > 1 || counter_type < 0 || counter_type > 1) {
      return NVML_ERROR_INVALID_ARGUMENT;
    }
    return Put(g.ecc[error_type][counter_type], count);
  });
}
FAKE_NVML_EXPORT nvmlReturn_t
nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t device, nvmlEnableState_t* is_pending) {
  return DeviceCall(__func__, device,
                    [&](const Gpu& g) { return Put(g.retired_pages_pending, is_pending); });
}
FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device,
                                                        unsigned int* corrected,
                                                        unsigned int* uncorrected,
                                                        unsigned int* is_pending,
                                                        unsigned int* failure_occurred) {
  return DeviceCall(__func__, device, [&](const Gpu& g) -> nvmlReturn_t {
    if (!corrected || !uncorrected || !is_pending || !failure_occurred)
      return NVML_ERROR_INVALID_ARGUMENT;
    if (!g.remapped_rows) return NVML_ERROR_NOT_SUPPORTED;
    *corrected = g.remapped_rows->corrected;
    *uncorrected = g.remapped_rows->uncorrected;
    *is_pending = g.remapped_rows->pending;
    *failure_occurred = g.remapped_rows->failure;
    return NVML_SUCCESS;
  });
}
#if !FAKE_NVML_LEGACY
FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device,
                                                                     unsigned long long* reasons) {
  return ClockEventReasons(__func__, device, reasons);
}
#endif
FAKE_NVML_EXPORT nvmlReturn_t
nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device, unsigned long long* reasons) {
  return ClockEventReasons(__func__, device, reasons);
}

// --- affinity and topology -------------------------------------------------------------

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetCpuAffinity(nvmlDevice_t device,
                                                       unsigned int cpu_set_size,
                                                       unsigned long* cpu_set) {
  return DeviceCall(__func__, device, [&](const Gpu& g) -> nvmlReturn_t {
    if (!cpu_set || cpu_set_size == 0) return NVML_ERROR_INVALID_ARGUMENT;
    if (!g.cpu_affinity) return NVML_ERROR_NOT_SUPPORTED;
    constexpr unsigned kBits = sizeof(unsigned long) * 8;
    std::fill(cpu_set, cpu_set + cpu_set_size, 0UL);
    for (unsigned cpu : *g.cpu_affinity) {
      if (cpu / kBits < cpu_set_size) cpu_set[cpu / kBits] |= 1UL << (cpu % kBits);
    }
    return NVML_SUCCESS;
  });
}
// One socket per NUMA node is assumed, so SOCKET scope answers like NODE scope.
FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetMemoryAffinity(nvmlDevice_t device,
                                                          unsigned int node_set_size,
                                                          unsigned long* node_set,
                                                          nvmlAffinityScope_t scope) {
  return DeviceCall(__func__, device, [&](const Gpu& g) -> nvmlReturn_t {
    if (!node_set || node_set_size == 0) return NVML_ERROR_INVALID_ARGUMENT;
    if (scope != NVML_AFFINITY_SCOPE_NODE && scope != NVML_AFFINITY_SCOPE_SOCKET) {
      return NVML_ERROR_INVALID_ARGUMENT;
    }
    if (!g.numa_node) return NVML_ERROR_NOT_SUPPORTED;
    constexpr unsigned kBits = sizeof(unsigned long) * 8;
    std::fill(node_set, node_set + node_set_size, 0UL);
    if (*g.numa_node / kBits < node_set_size)
      node_set[*g.numa_node / kBits] |= 1UL << (*g.numa_node % kBits);
    return NVML_SUCCESS;
  });
}
#if !FAKE_NVML_LEGACY
FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetNumaNodeId(nvmlDevice_t device, unsigned int* node) {
  return DeviceCall(__func__, device, [&](const Gpu& g) { return Put(g.numa_node, node); });
}
#endif

// Derived from the scenario's topology labels, nearest first (nvidia-smi topo -m:
// X, PIX, PHB, NODE, SYS). MULTIPLE (PXB) is never produced.
FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t device1,
                                                                  nvmlDevice_t device2,
                                                                  nvmlGpuTopologyLevel_t* level) {
  return DeviceCall(__func__, device1, [&](const Gpu& a, const Scenario& s) -> nvmlReturn_t {
    const Gpu* b = LookupIn(s, device2);
    if (!b || !level) return NVML_ERROR_INVALID_ARGUMENT;
    if (b->is_lost) return NVML_ERROR_GPU_IS_LOST;
    auto same = [](const auto& x, const auto& y) { return x && y && *x == *y; };
    if (&a == b) {
      *level = NVML_TOPOLOGY_INTERNAL;
    } else if (same(a.pci_switch, b->pci_switch)) {
      *level = NVML_TOPOLOGY_SINGLE;
    } else if (same(a.host_bridge, b->host_bridge)) {
      *level = NVML_TOPOLOGY_HOSTBRIDGE;
    } else if (same(a.numa_node, b->numa_node)) {
      *level = NVML_TOPOLOGY_NODE;
    } else {
      *level = NVML_TOPOLOGY_SYSTEM;
    }
    return NVML_SUCCESS;
  });
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link,
                                                       nvmlEnableState_t* is_active) {
  return DeviceCall(__func__, device, [&](const Gpu& g) -> nvmlReturn_t {
    if (!is_active || link >= NVML_NVLINK_MAX_LINKS) return NVML_ERROR_INVALID_ARGUMENT;
    if (!g.nvlinks) return NVML_ERROR_NOT_SUPPORTED;
    *is_active = FindNvLink(g, link) ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    return NVML_SUCCESS;
  });
}
FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo(nvmlDevice_t device,
                                                               unsigned int link,
                                                               nvmlPciInfo_t* pci) {
  return NvLinkRemotePci(__func__, device, link, pci);
}
#if !FAKE_NVML_LEGACY
// Not in the legacy build: it stands for a driver too old to tell GPUs from NVSwitches.
FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t device,
                                                                  unsigned int link,
                                                                  nvmlIntNvLinkDeviceType_t* type) {
  return DeviceCall(__func__, device, [&](const Gpu& g) -> nvmlReturn_t {
    if (!type || link >= NVML_NVLINK_MAX_LINKS) return NVML_ERROR_INVALID_ARGUMENT;
    if (!g.nvlinks) return NVML_ERROR_NOT_SUPPORTED;
    const NvLink* l = FindNvLink(g, link);
    if (!l) return NVML_ERROR_NOT_SUPPORTED;  // an inactive link has no remote end
    *type = l->to_switch ? NVML_NVLINK_DEVICE_TYPE_SWITCH : NVML_NVLINK_DEVICE_TYPE_GPU;
    return NVML_SUCCESS;
  });
}
FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device,
                                                                  unsigned int link,
                                                                  nvmlPciInfo_t* pci) {
  return NvLinkRemotePci(__func__, device, link, pci);
}
#endif

// --- running processes -----------------------------------------------------------------

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device,
                                                                   unsigned int* count,
                                                                   nvmlProcessInfo_v1_t* infos) {
  return ListProcesses(__func__, device, /*graphics=*/false, count, infos);
}
FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses(nvmlDevice_t device,
                                                                    unsigned int* count,
                                                                    nvmlProcessInfo_v1_t* infos) {
  return ListProcesses(__func__, device, /*graphics=*/true, count, infos);
}
#if !FAKE_NVML_LEGACY
FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device,
                                                                      unsigned int* count,
                                                                      nvmlProcessInfo_t* infos) {
  return ListProcesses(__func__, device, /*graphics=*/false, count, infos);
}
FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device,
                                                                      unsigned int* count,
                                                                      nvmlProcessInfo_t* infos) {
  return ListProcesses(__func__, device, /*graphics=*/false, count, infos);
}
FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v2(nvmlDevice_t device,
                                                                       unsigned int* count,
                                                                       nvmlProcessInfo_t* infos) {
  return ListProcesses(__func__, device, /*graphics=*/true, count, infos);
}
FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t device,
                                                                       unsigned int* count,
                                                                       nvmlProcessInfo_t* infos) {
  return ListProcesses(__func__, device, /*graphics=*/true, count, infos);
}
#endif

// --- per-process utilization -----------------------------------------------------------

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
                                                              nvmlProcessUtilizationSample_t* samples,
                                                              unsigned int* count,
                                                              unsigned long long /*last_seen*/) {
  return DeviceCall(__func__, device, [&](const Gpu& g) -> nvmlReturn_t {
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    std::vector<const Process*> busy;
    for (const Process& p : g.processes) {
      if (p.sm_util) busy.push_back(&p);
    }
    if (busy.empty()) return NVML_ERROR_NOT_FOUND;  // no samples since last_seen
    if (!samples || *count < busy.size()) {
      *count = static_cast<unsigned>(busy.size());
      return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    timespec now{};
    clock_gettime(CLOCK_REALTIME, &now);
    unsigned long long now_us = static_cast<unsigned long long>(now.tv_sec) * 1000000ULL + now.tv_nsec / 1000;
    for (size_t i = 0; i < busy.size(); ++i) {
      samples[i] = nvmlProcessUtilizationSample_t{};
      samples[i].pid = busy[i]->pid;
      samples[i].timeStamp = now_us;
      samples[i].smUtil = *busy[i]->sm_util;
      samples[i].memUtil = busy[i]->mem_util.value_or(0);
    }
    *count = static_cast<unsigned>(busy.size());
    return NVML_SUCCESS;
  });
}

// --- events ------------------------------------------------------------------------------
// An event set delivers the scenario's `xid_events` entries that were appended after the
// GPU was registered ("events that occurred before this call are not recorded"). A test
// appends an Xid to the file; a waiting daemon receives it within one poll step.

constexpr unsigned long long kFakeSupportedEvents =
    nvmlEventTypeSingleBitEccError | nvmlEventTypeDoubleBitEccError | nvmlEventTypeXidCriticalError;

struct nvmlEventSet_st {
  struct Registration {
    unsigned long long mask = 0;
    size_t delivered = 0;  // xid_events consumed so far
  };
  std::map<unsigned, Registration> gpus;  // by index
};

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device,
                                                               unsigned long long* types) {
  return DeviceCall(__func__, device, [&](const Gpu& g) -> nvmlReturn_t {
    if (!types) return NVML_ERROR_INVALID_ARGUMENT;
    if (!g.events_supported) return NVML_ERROR_NOT_SUPPORTED;
    *types = kFakeSupportedEvents;
    return NVML_SUCCESS;
  });
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) {
  return SystemCall(__func__, [&](const Scenario&) -> nvmlReturn_t {
    if (!set) return NVML_ERROR_INVALID_ARGUMENT;
    *set = new nvmlEventSet_st;
    return NVML_SUCCESS;
  });
}

FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long types,
                                                       nvmlEventSet_t set) {
  return DeviceCall(__func__, device, [&](const Gpu& g, const Scenario& sc) -> nvmlReturn_t {
    if (!set) return NVML_ERROR_INVALID_ARGUMENT;
    if (!g.events_supported || (types & ~kFakeSupportedEvents) != 0) return NVML_ERROR_NOT_SUPPORTED;
    auto index = static_cast<unsigned>(&g - sc.gpus.data());
    auto& reg = set->gpus[index];
    reg.mask |= types;
    reg.delivered = g.xid_events.size();
    return NVML_SUCCESS;
  });
}

namespace {
nvmlReturn_t EventWait(const char* function, nvmlEventSet_t set, nvmlEventData_t* data,
                       unsigned timeout_ms, bool v2) {
  State& s = TheState();
  timespec start{};
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (bool first = true;; first = false) {
    {
      std::lock_guard<std::mutex> lock(s.mu);
      s.Begin(function, first);  // one call, however often it looks while it waits
      if (s.init_count == 0) return NVML_ERROR_UNINITIALIZED;
      if (!set || !data) return NVML_ERROR_INVALID_ARGUMENT;
      if (auto injected = s.Injected(function, nullptr)) return *injected;
      for (auto& [index, reg] : set->gpus) {
        if (index >= s.scenario.gpus.size() || !(reg.mask & nvmlEventTypeXidCriticalError)) continue;
        const Gpu& g = s.scenario.gpus[index];
        reg.delivered = std::min(reg.delivered, g.xid_events.size());
        if (reg.delivered < g.xid_events.size()) {
          data->device = HandleOf(index);
          data->eventType = nvmlEventTypeXidCriticalError;
          data->eventData = g.xid_events[reg.delivered++];
          if (v2) {
            data->gpuInstanceId = NVML_VALUE_NOT_AVAILABLE_U32;
            data->computeInstanceId = NVML_VALUE_NOT_AVAILABLE_U32;
          }
          return NVML_SUCCESS;
        }
      }
    }
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    int64_t waited_ms = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
    if (waited_ms >= timeout_ms) return NVML_ERROR_TIMEOUT;
    // A real driver blocks in the kernel; the stand-in looks again (and stats the scenario
    // file, which tests rewrite to inject an Xid) 20 times a second: a daemon's idle CPU
    // figure (bench/sweep_bench) should not be mostly the stand-in's polling.
    timespec step{0, 50 * 1000 * 1000};
    nanosleep(&step, nullptr);
  }
}
}  // namespace

FAKE_NVML_EXPORT nvmlReturn_t nvmlEventSetWait(nvmlEventSet_t set, nvmlEventData_t* data,
                                               unsigned int timeout_ms) {
  return EventWait(__func__, set, data, timeout_ms, /*v2=*/false);
}
#if !FAKE_NVML_LEGACY
FAKE_NVML_EXPORT nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t* data,
                                                  unsigned int timeout_ms) {
  return EventWait(__func__, set, data, timeout_ms, /*v2=*/true);
}
#endif

FAKE_NVML_EXPORT nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
  return SystemCall(__func__, [&](const Scenario&) -> nvmlReturn_t {
    if (!set) return NVML_ERROR_INVALID_ARGUMENT;
    delete set;
    return NVML_SUCCESS;
  });
}

// =======================================================================================
// Test hooks (not NVML): per-function call counts since load or the last reset. The reset
// also re-arms `times`-limited injected errors.

FAKE_NVML_EXPORT unsigned long fake_nvml_call_count(const char* function_name) {
  State& s = TheState();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!function_name) return 0;
  auto it = s.call_counts.find(std::string_view(function_name));
  return it == s.call_counts.end() ? 0 : it->second;
}

FAKE_NVML_EXPORT void fake_nvml_reset_call_counts(void) {
  State& s = TheState();
  std::lock_guard<std::mutex> lock(s.mu);
  s.ResetCounts();
}

FAKE_NVML_EXPORT unsigned long fake_nvml_total_call_count(void) {
  State& s = TheState();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.TotalCalls();
}

// =======================================================================================
// gpuman --simulate's hooks (not NVML, not counted as calls). The stand-in has parsed the
// scenario already, so gpuman takes from it what only gpuman needs instead of reading and
// lexing the file a second time (docs/design.md, "Start-up"); real NVML exports none of
// these, and gpuman looks them up only in the stand-in it loaded itself.

// The scenario's "host_processes" member as JSON text, or NULL before a successful
// nvmlInit. Valid until the next call.
FAKE_NVML_EXPORT const char* gpumanSimHostProcesses(void) {
  State& s = TheState();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.init_count == 0) return nullptr;
  s.host_processes_out = s.scenario.host_processes_json;
  return s.host_processes_out.c_str();
}

// From now on a scenario that cannot be loaded at the first nvmlInit* is not printed on
// stderr: the caller reads it with gpumanSimInitError and reports it in its own words
// (a reload that fails later is still printed: no caller asks then).
FAKE_NVML_EXPORT void gpumanSimTakeInitErrors(void) {
  State& s = TheState();
  std::lock_guard<std::mutex> lock(s.mu);
  s.caller_reports_init_errors = true;
}

// "PATH: reason" for the last first nvmlInit* that failed to load the scenario; "" when it
// did not fail that way. Valid until the next nvmlInit*.
FAKE_NVML_EXPORT const char* gpumanSimInitError(void) {
  State& s = TheState();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.init_error.c_str();
}

namespace {

// $GPUMAN_FAKE_NVML_CALL_LOG: when the library is unloaded (process exit or dlclose),
// append one line "pid=P total=N name=count ..." for a bench that counts the calls of a
// whole process (gpuman status, top, the daemon) from outside.
__attribute__((destructor)) void AppendCallLog() {
  const char* path = std::getenv("GPUMAN_FAKE_NVML_CALL_LOG");
  if (!path || !*path) return;
  State& s = TheState();
  std::lock_guard<std::mutex> lock(s.mu);
  std::string line = "pid=" + std::to_string(getpid()) + " total=" + std::to_string(s.TotalCalls());
  for (const auto& [name, count] : s.call_counts) line += " " + name + "=" + std::to_string(count);
  line += "\n";
  gpuman::UniqueFd fd(open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644));
  if (!fd) return;
  [[maybe_unused]] ssize_t n = write(fd.get(), line.data(), line.size());  // one write: lines do not interleave
}

}  // namespace

