#include "nvml/nvml_device_source.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/strings.h"
#include "model/health_judge.h"

namespace gpuman::nvml {
namespace {

// How many times a process list is re-fetched when it grew between size probe and fetch.
constexpr int kMaxProcessListAttempts = 5;
constexpr unsigned kCpuSetWords = 64;  // 4096 CPUs

using devices::FieldSet;
using Cached = NvmlDeviceSource::Cached;
using Note = NvmlDeviceSource::Note;

// Where a call stands in the order ReadDevice makes them (for ordering warnings).
int OrderOf(Sym sym, unsigned variant) {
  int base = static_cast<int>(sym) * static_cast<int>(Cached::kVariants);
  if (sym == Sym::kDeviceGetMaxClockInfo) {  // SM current, SM max, memory current, memory max
    return static_cast<int>(Sym::kDeviceGetClockInfo) * static_cast<int>(Cached::kVariants) + 2 * variant + 1;
  }
  if (sym == Sym::kDeviceGetClockInfo) return base + 2 * variant;
  if (sym == Sym::kDeviceGetMemoryAffinity) {  // the NUMA fallback comes after the NUMA node id
    return static_cast<int>(Sym::kDeviceGetNumaNodeId) * static_cast<int>(Cached::kVariants) + 1;
  }
  return base + static_cast<int>(variant);
}

// Collects one device's fields, deciding per NVML return code what a failure means, and
// not asking again what the device said it does not support.
class DeviceReader {
 public:
  DeviceReader(const NvmlLibrary& lib, nvmlDevice_t dev, model::DeviceSnapshot& snap, Cached& cache)
      : lib_(lib), dev_(dev), snap_(snap), cache_(&cache) {}

  // Where "not supported" is remembered from now on (once the UUID says which GPU it is).
  void use_cache(Cached& cache) { cache_ = &cache; }

  bool lost() const { return lost_; }
  // A code that made the device unhealthy (lost, reset required, ...): nothing it said
  // this time is kept for later.
  bool failed() const { return failed_; }
  std::vector<Note>& notes() { return notes_; }
  void set_group(FieldSet group) { group_ = group; }

  bool Unsupported(Sym sym, unsigned variant = 0) const { return cache_->unsupported.test(Key(sym, variant)); }

  // Returns true on NVML_SUCCESS. On failure records what the code means and returns false.
  bool Check(Sym sym, nvmlReturn_t rc, unsigned variant = 0) {
    if (rc == NVML_SUCCESS) return true;
    switch (rc) {
      case NVML_ERROR_NOT_SUPPORTED:
      case NVML_ERROR_FUNCTION_NOT_FOUND:
        cache_->unsupported.set(Key(sym, variant));
        return false;  // simply unknown, and not asked again
      case NVML_ERROR_NO_DATA:
        return false;  // simply unknown
      case NVML_ERROR_NO_PERMISSION:
        Warn(sym, variant, std::string(lib_.SymbolName(sym)) + ": " + lib_.ErrorString(rc));
        return false;
      case NVML_ERROR_GPU_IS_LOST:
      case NVML_ERROR_RESET_REQUIRED:
      case NVML_ERROR_IRQ_ISSUE:
      case NVML_ERROR_CORRUPTED_INFOROM:
      case NVML_ERROR_UNINITIALIZED:
        if (rc == NVML_ERROR_GPU_IS_LOST) lost_ = true;
        failed_ = true;
        snap_.is_healthy = false;
        AddOnce(snap_.health_problems, std::string(lib_.SymbolName(sym)) + ": " + lib_.ErrorString(rc));
        return false;
      default:
        Warn(sym, variant, std::string(lib_.SymbolName(sym)) + ": " + lib_.ErrorString(rc));
        return false;
    }
  }

  // Calls `fn(dev, args...)` when the symbol exists, the device is not lost and has not
  // said it does not support this call (`variant`: which of a symbol's argument choices).
  template <typename Fn, typename... Args>
  bool CallV(Sym sym, unsigned variant, Args... args) {
    if (lost_ || Unsupported(sym, variant)) return false;
    auto fn = lib_.Get<Fn>(sym);
    if (fn == nullptr) return false;
    return Check(sym, fn(dev_, args...), variant);
  }
  template <typename Fn, typename... Args>
  bool Call(Sym sym, Args... args) {
    return CallV<Fn>(sym, 0, args...);
  }

  std::optional<std::string> String(Sym sym, unsigned size) {
    std::vector<char> buf(size, '\0');
    if (!Call<nvmlDeviceGetString_fn>(sym, buf.data(), size)) return std::nullopt;
    buf.back() = '\0';
    return std::string(buf.data());
  }

  std::optional<unsigned> UInt(Sym sym) {
    unsigned value = 0;
    if (!Call<nvmlDeviceGetUInt_fn>(sym, &value)) return std::nullopt;
    return value;
  }

 private:
  static size_t Key(Sym sym, unsigned variant) {
    return static_cast<size_t>(sym) * Cached::kVariants + std::min<size_t>(variant, Cached::kVariants - 1);
  }
  static void AddOnce(std::vector<std::string>& list, std::string text) {
    if (std::find(list.begin(), list.end(), text) == list.end()) list.push_back(std::move(text));
  }
  void Warn(Sym sym, unsigned variant, std::string text) {
    for (const Note& n : notes_) {
      if (n.text == text) return;
    }
    notes_.push_back(Note{OrderOf(sym, variant), group_, std::move(text)});
  }

  const NvmlLibrary& lib_;
  nvmlDevice_t dev_;
  model::DeviceSnapshot& snap_;
  Cached* cache_;
  FieldSet group_ = 0;
  std::vector<Note> notes_;
  bool lost_ = false;
  bool failed_ = false;
};

std::string FormatCudaVersion(int v) {
  // NVML encodes 12.4 as 12040.
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

std::optional<int> ReadSysfsNumaNode(const std::string& sysfs_root, const std::string& bus_id) {
  // NVML: "00000000:3B:00.0"; sysfs: "0000:3b:00.0".
  std::string bdf = ToLower(bus_id);
  if (bdf.size() == 16) bdf = bdf.substr(4);
  std::ifstream in(sysfs_root + "/bus/pci/devices/" + bdf + "/numa_node");
  int node = -1;
  if (!(in >> node) || node < 0) return std::nullopt;
  return node;
}

// Reads one process list with NVML's protocol: a buffer sized from the last list (so one
// call usually does it), and on INSUFFICIENT_SIZE (the list grew) a bigger one, retried
// while the list keeps growing between calls. `hint` is the last size; it is updated.
void ReadProcesses(const NvmlLibrary& lib, nvmlDevice_t dev, DeviceReader& reader, Sym sym,
                   model::ProcessType type, unsigned& hint, std::map<uint32_t, model::GpuProcess>& out) {
  auto fn = lib.Get<nvmlDeviceGetRunningProcesses_fn>(sym);
  if (fn == nullptr || reader.lost() || reader.Unsupported(sym)) return;
  const size_t entry = lib.process_entry_size();
  unsigned capacity = std::min<unsigned>(hint, 4096) * 2 + 8;
  std::vector<unsigned char> buf(static_cast<size_t>(capacity) * entry, 0);
  unsigned count = capacity;
  nvmlReturn_t rc = fn(dev, &count, buf.data());
  for (int attempt = 0; rc == NVML_ERROR_INSUFFICIENT_SIZE && attempt < kMaxProcessListAttempts;
       ++attempt) {
    capacity = std::max(count * 2 + 5, capacity * 2);
    buf.assign(static_cast<size_t>(capacity) * entry, 0);
    count = capacity;
    rc = fn(dev, &count, buf.data());
  }
  if (!reader.Check(sym, rc)) return;
  count = std::min<unsigned>(count, static_cast<unsigned>(buf.size() / entry));
  hint = count;
  for (unsigned i = 0; i < count; ++i) {
    const unsigned char* p = buf.data() + static_cast<size_t>(i) * entry;
    nvmlProcessInfo_t info{};
    info.gpuInstanceId = NVML_VALUE_NOT_AVAILABLE_U32;
    info.computeInstanceId = NVML_VALUE_NOT_AVAILABLE_U32;
    if (entry == sizeof(nvmlProcessInfo_v1_t)) {
      nvmlProcessInfo_v1_t v1;
      std::memcpy(&v1, p, sizeof v1);
      info.pid = v1.pid;
      info.usedGpuMemory = v1.usedGpuMemory;
    } else {
      std::memcpy(&info, p, sizeof info);
    }
    auto [it, inserted] = out.try_emplace(info.pid);
    model::GpuProcess& proc = it->second;
    if (inserted) {
      proc.pid = info.pid;
      proc.type = type;
    } else if (proc.type != type) {
      proc.type = model::ProcessType::kComputeAndGraphics;
    }
    if (info.usedGpuMemory != NVML_VALUE_NOT_AVAILABLE_ULL) {
      // Listed twice (compute and graphics): the same memory, not twice the memory.
      int64_t used = static_cast<int64_t>(info.usedGpuMemory);
      proc.used_memory_bytes = std::max(proc.used_memory_bytes.value_or(0), used);
    }
    if (info.gpuInstanceId != NVML_VALUE_NOT_AVAILABLE_U32) proc.gpu_instance_id = info.gpuInstanceId;
    if (info.computeInstanceId != NVML_VALUE_NOT_AVAILABLE_U32) {
      proc.compute_instance_id = info.computeInstanceId;
    }
  }
}

std::vector<int> CpuSetToList(const unsigned long* words, unsigned n) {
  std::vector<int> cpus;
  constexpr int kBits = static_cast<int>(sizeof(unsigned long) * 8);
  for (unsigned w = 0; w < n; ++w) {
    for (unsigned long bits = words[w]; bits != 0; bits &= bits - 1) {
      cpus.push_back(static_cast<int>(w) * kBits + std::countr_zero(bits));
    }
  }
  return cpus;
}

const char* ComputeModeName(nvmlComputeMode_t mode) {
  switch (mode) {
    case NVML_COMPUTEMODE_DEFAULT: return "default";
    case NVML_COMPUTEMODE_EXCLUSIVE_THREAD: return "exclusive_thread";
    case NVML_COMPUTEMODE_PROHIBITED: return "prohibited";
    case NVML_COMPUTEMODE_EXCLUSIVE_PROCESS: return "exclusive_process";
    default: return "unknown";
  }
}

void ReadProcessLists(const NvmlLibrary& lib, nvmlDevice_t dev, DeviceReader& r, Cached& c,
                      model::DeviceSnapshot& s) {
  std::map<uint32_t, model::GpuProcess> procs;
  ReadProcesses(lib, dev, r, Sym::kDeviceGetComputeRunningProcesses, model::ProcessType::kCompute,
                c.process_counts[0], procs);
  ReadProcesses(lib, dev, r, Sym::kDeviceGetGraphicsRunningProcesses, model::ProcessType::kGraphics,
                c.process_counts[1], procs);
  for (auto& [pid, proc] : procs) s.processes.push_back(std::move(proc));
}

void ReadMigDevices(const NvmlLibrary& lib, nvmlDevice_t dev, DeviceReader& r, model::DeviceSnapshot& s);

// Reads the groups in `fresh` (and only those) from the device, in one fixed call order
// (the order warnings are listed in). The UUID is the caller's.
void ReadDevice(const NvmlLibrary& lib, nvmlDevice_t dev, const std::string& sysfs_root, FieldSet fresh,
                DeviceReader& r, Cached& c, model::DeviceSnapshot& s) {
  using namespace devices;
  auto want = [&](FieldSet group) {
    r.set_group(group);
    return (fresh & group) != 0;
  };
  if (want(kFieldIdentity)) s.name = r.String(Sym::kDeviceGetName, NVML_DEVICE_NAME_V2_BUFFER_SIZE);
  if (want(kFieldDetails)) {
    s.serial = r.String(Sym::kDeviceGetSerial, NVML_DEVICE_SERIAL_BUFFER_SIZE);
    if (auto minor = r.UInt(Sym::kDeviceGetMinorNumber)) s.minor_number = static_cast<int>(*minor);
  }

  nvmlPciInfo_t pci{};
  if (want(kFieldIdentity) && r.Call<nvmlDeviceGetPciInfo_fn>(Sym::kDeviceGetPciInfo, &pci)) {
    pci.busId[sizeof pci.busId - 1] = '\0';
    pci.busIdLegacy[sizeof pci.busIdLegacy - 1] = '\0';
    char canonical[32];
    std::snprintf(canonical, sizeof canonical, "%08X:%02X:%02X.0", pci.domain, pci.bus, pci.device);
    s.pci_bus_id = canonical;
  }

  if (want(kFieldCore)) {
    // Memory: v2 first (reserved separate); v1 when v2 is missing or rejects our version.
    bool have_memory = false;
    if (auto v2fn = lib.Get<nvmlDeviceGetMemoryInfo_v2_fn>(Sym::kDeviceGetMemoryInfoV2);
        v2fn && !r.lost() && !r.Unsupported(Sym::kDeviceGetMemoryInfoV2)) {
      nvmlMemory_v2_t mem{};
      mem.version = nvmlMemory_v2;
      nvmlReturn_t rc = v2fn(dev, &mem);
      if (rc == NVML_SUCCESS) {
        s.memory_total_bytes = static_cast<int64_t>(mem.total);
        s.memory_reserved_bytes = static_cast<int64_t>(mem.reserved);
        s.memory_used_bytes = static_cast<int64_t>(mem.used);
        s.memory_free_bytes = static_cast<int64_t>(mem.free);
        have_memory = true;
      } else if (rc == NVML_ERROR_ARGUMENT_VERSION_MISMATCH) {
        r.Check(Sym::kDeviceGetMemoryInfoV2, NVML_ERROR_NOT_SUPPORTED);  // v1 from now on
      } else {
        r.Check(Sym::kDeviceGetMemoryInfoV2, rc);
      }
    }
    if (!have_memory) {
      nvmlMemory_t mem{};
      if (r.Call<nvmlDeviceGetMemoryInfo_fn>(Sym::kDeviceGetMemoryInfo, &mem)) {
        s.memory_total_bytes = static_cast<int64_t>(mem.total);
        s.memory_used_bytes = static_cast<int64_t>(mem.used);  // includes reserved (v1)
        s.memory_free_bytes = static_cast<int64_t>(mem.free);
      }
    }

    nvmlUtilization_t util{};
    if (r.Call<nvmlDeviceGetUtilizationRates_fn>(Sym::kDeviceGetUtilizationRates, &util)) {
      s.gpu_utilization_percent = static_cast<int>(util.gpu);
      s.memory_utilization_percent = static_cast<int>(util.memory);
    }
    unsigned temp = 0;
    if (r.CallV<nvmlDeviceGetTemperature_fn>(Sym::kDeviceGetTemperature, NVML_TEMPERATURE_GPU, NVML_TEMPERATURE_GPU,
                                             &temp)) {
      s.temperature_c = static_cast<int>(temp);
    }
    if (auto mw = r.UInt(Sym::kDeviceGetPowerUsage)) s.power_usage_w = *mw / 1000.0;
  }
  if (want(kFieldPowerLimit)) {
    auto limit = r.UInt(Sym::kDeviceGetEnforcedPowerLimit);
    if (!limit) limit = r.UInt(Sym::kDeviceGetPowerManagementLimit);
    if (limit) s.power_limit_w = *limit / 1000.0;
  }
  if (want(kFieldCore)) {
    if (auto fan = r.UInt(Sym::kDeviceGetFanSpeed)) s.fan_percent = static_cast<int>(*fan);
  }

  auto clock = [&](Sym sym, nvmlClockType_t type) -> std::optional<int64_t> {
    unsigned mhz = 0;
    if (!r.CallV<nvmlDeviceGetClock_fn>(sym, static_cast<unsigned>(type), type, &mhz)) return std::nullopt;
    return mhz;
  };
  if (want(kFieldClocks)) s.clocks.sm_mhz = clock(Sym::kDeviceGetClockInfo, NVML_CLOCK_SM);
  if (want(kFieldDetails)) s.clocks.sm_max_mhz = clock(Sym::kDeviceGetMaxClockInfo, NVML_CLOCK_SM);
  if (want(kFieldClocks)) s.clocks.memory_mhz = clock(Sym::kDeviceGetClockInfo, NVML_CLOCK_MEM);
  if (want(kFieldDetails)) s.clocks.memory_max_mhz = clock(Sym::kDeviceGetMaxClockInfo, NVML_CLOCK_MEM);

  nvmlPstates_t pstate = NVML_PSTATE_UNKNOWN;
  if (want(kFieldCore) && r.Call<nvmlDeviceGetPerformanceState_fn>(Sym::kDeviceGetPerformanceState, &pstate) &&
      pstate >= 0 && pstate <= 15) {
    s.performance_state = pstate;
  }
  int major = 0, minor = 0;
  if (want(kFieldDetails) &&
      r.Call<nvmlDeviceGetCudaComputeCapability_fn>(Sym::kDeviceGetCudaComputeCapability, &major, &minor)) {
    s.compute_capability = std::to_string(major) + "." + std::to_string(minor);
  }
  if (want(kFieldDetails)) {  // the peak figures' inputs (model/peak.h): static facts
    if (auto cores = r.UInt(Sym::kDeviceGetNumGpuCores)) s.cuda_cores = *cores;
    if (auto bits = r.UInt(Sym::kDeviceGetMemoryBusWidth)) s.memory_bus_width_bits = *bits;
  }
  if (want(kFieldSettings)) {
    nvmlComputeMode_t mode = 0;
    if (r.Call<nvmlDeviceGetComputeMode_fn>(Sym::kDeviceGetComputeMode, &mode)) {
      s.compute_mode = ComputeModeName(mode);
    }
    nvmlEnableState_t state = 0;
    if (r.Call<nvmlDeviceGetEnableState_fn>(Sym::kDeviceGetPersistenceMode, &state)) {
      s.persistence_mode = state == NVML_FEATURE_ENABLED;
    }
    unsigned mig_current = 0, mig_pending = 0;
    if (r.Call<nvmlDeviceGetMigMode_fn>(Sym::kDeviceGetMigMode, &mig_current, &mig_pending)) {
      s.mig_mode_current = mig_current == NVML_FEATURE_ENABLED;
      s.mig_mode_pending = mig_pending == NVML_FEATURE_ENABLED;
    }
    // NVSwitch fabric (Fabric Manager) registration; GPUs outside a fabric say not_supported.
    nvmlGpuFabricInfo_t fabric{};
    if (r.Call<nvmlDeviceGetGpuFabricInfo_fn>(Sym::kDeviceGetGpuFabricInfo, &fabric)) {
      static constexpr const char* kStates[] = {"not_supported", "not_started", "in_progress", "completed"};
      if (fabric.state < std::size(kStates)) s.fabric_state = kStates[fabric.state];
      if (fabric.state == NVML_GPU_FABRIC_STATE_COMPLETED && fabric.status != NVML_SUCCESS) s.fabric_state = "failed";
    }
  }
  auto ecc = [&](nvmlMemoryErrorType_t type, nvmlEccCounterType_t counter) -> std::optional<int64_t> {
    unsigned long long n = 0;
    if (!r.CallV<nvmlDeviceGetTotalEccErrors_fn>(Sym::kDeviceGetTotalEccErrors, 2 * type + counter, type, counter, &n)) {
      return std::nullopt;
    }
    return static_cast<int64_t>(n);
  };
  if (want(kFieldHealth)) {
    s.ecc_volatile_corrected = ecc(NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_VOLATILE_ECC);
    s.ecc_volatile_uncorrected = ecc(NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC);
  }
  if (want(kFieldEccAggregate)) {
    s.ecc_aggregate_corrected = ecc(NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_AGGREGATE_ECC);
    s.ecc_aggregate_uncorrected = ecc(NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_AGGREGATE_ECC);
  }
  if (want(kFieldHealth)) {
    nvmlEnableState_t state = 0;
    if (r.Call<nvmlDeviceGetEnableState_fn>(Sym::kDeviceGetRetiredPagesPendingStatus, &state)) {
      s.retired_pages_pending = state == NVML_FEATURE_ENABLED;
    }
    unsigned corr = 0, unc = 0, pending = 0, failure = 0;
    if (r.Call<nvmlDeviceGetRemappedRows_fn>(Sym::kDeviceGetRemappedRows, &corr, &unc, &pending, &failure)) {
      s.remapped_rows_pending = pending != 0;
      s.remapped_rows_failure = failure != 0;
    }
  }
  unsigned long long reasons = 0;
  if (want(kFieldThrottle) && r.Call<nvmlDeviceGetULongLong_fn>(Sym::kDeviceGetClocksEventReasons, &reasons)) {
    s.clock_event_reasons = reasons;
  }

  if (want(kFieldDetails)) {
    unsigned long cpuset[kCpuSetWords] = {};
    if (r.Call<nvmlDeviceGetCpuAffinity_fn>(Sym::kDeviceGetCpuAffinity, kCpuSetWords, cpuset)) {
      s.cpu_affinity = CpuSetToList(cpuset, kCpuSetWords);
    }
    if (auto node = r.UInt(Sym::kDeviceGetNumaNodeId)) {
      s.numa_node = static_cast<int>(*node);
    } else {
      unsigned long nodeset[kCpuSetWords] = {};
      if (r.Call<nvmlDeviceGetMemoryAffinity_fn>(Sym::kDeviceGetMemoryAffinity, kCpuSetWords, nodeset,
                                                 NVML_AFFINITY_SCOPE_NODE)) {
        auto nodes = CpuSetToList(nodeset, kCpuSetWords);
        if (nodes.size() == 1) s.numa_node = nodes[0];
      }
    }
    // The PCI address may come from the cache (identity read in an earlier snapshot).
    std::optional<std::string> bus = s.pci_bus_id ? s.pci_bus_id : c.values.pci_bus_id;
    if (!s.numa_node && bus) s.numa_node = ReadSysfsNumaNode(sysfs_root, *bus);
  }

  if (want(kFieldProcesses)) ReadProcessLists(lib, dev, r, c, s);
  // Dynamic (instances come and go with nvidia-smi mig -cgi/-dci): asked with memory or processes.
  if ((fresh & (kFieldCore | kFieldProcesses)) != 0) {
    r.set_group(kFieldCore);
    ReadMigDevices(lib, dev, r, s);
  }
}

// Copies the fields of the groups in `groups` from `from` to `to`.
void CopyGroups(FieldSet groups, const model::DeviceSnapshot& from, model::DeviceSnapshot& to) {
  using namespace devices;
  if (groups & kFieldIdentity) {
    to.name = from.name;
    to.pci_bus_id = from.pci_bus_id;
  }
  if (groups & kFieldDetails) {
    to.serial = from.serial;
    to.minor_number = from.minor_number;
    to.compute_capability = from.compute_capability;
    to.cuda_cores = from.cuda_cores;
    to.memory_bus_width_bits = from.memory_bus_width_bits;
    to.clocks.sm_max_mhz = from.clocks.sm_max_mhz;
    to.clocks.memory_max_mhz = from.clocks.memory_max_mhz;
    to.cpu_affinity = from.cpu_affinity;
    to.numa_node = from.numa_node;
  }
  if (groups & kFieldPowerLimit) to.power_limit_w = from.power_limit_w;
  if (groups & kFieldSettings) {
    to.compute_mode = from.compute_mode;
    to.persistence_mode = from.persistence_mode;
    to.mig_mode_current = from.mig_mode_current;
    to.mig_mode_pending = from.mig_mode_pending;
    to.fabric_state = from.fabric_state;
  }
  if (groups & kFieldHealth) {
    to.ecc_volatile_corrected = from.ecc_volatile_corrected;
    to.ecc_volatile_uncorrected = from.ecc_volatile_uncorrected;
    to.retired_pages_pending = from.retired_pages_pending;
    to.remapped_rows_pending = from.remapped_rows_pending;
    to.remapped_rows_failure = from.remapped_rows_failure;
  }
  if (groups & kFieldEccAggregate) {
    to.ecc_aggregate_corrected = from.ecc_aggregate_corrected;
    to.ecc_aggregate_uncorrected = from.ecc_aggregate_uncorrected;
  }
}

// Per-process SM %: one sample per process that was busy since `*last_seen_us` (NVML keeps
// a short buffer; 0 averages all of it). NOT_FOUND means no process was busy: every
// listed process gets 0. Samples above 100 % or for pids not in the list are dropped
// (nvtop#110). Unsupported (MIG, old GPUs): the field stays unknown.
void ReadProcessUtilization(const NvmlLibrary& lib, nvmlDevice_t dev, DeviceReader& r, unsigned long long* last_seen_us,
                            model::DeviceSnapshot& s) {
  auto fn = lib.Get<nvmlDeviceGetProcessUtilization_fn>(Sym::kDeviceGetProcessUtilization);
  if (!fn || r.lost() || s.processes.empty() || s.mig_mode_current.value_or(false) ||
      r.Unsupported(Sym::kDeviceGetProcessUtilization)) {
    return;
  }
  // A buffer that fits every listed process (and some that just ended): usually one call.
  std::vector<nvmlProcessUtilizationSample_t> samples(s.processes.size() * 2 + 8);
  unsigned count = static_cast<unsigned>(samples.size());
  nvmlReturn_t rc = fn(dev, samples.data(), &count, *last_seen_us);
  for (int attempt = 0; attempt < 3 && rc == NVML_ERROR_INSUFFICIENT_SIZE; ++attempt) {
    samples.assign(std::max<size_t>(count + 4, samples.size() * 2), nvmlProcessUtilizationSample_t{});
    count = static_cast<unsigned>(samples.size());
    rc = fn(dev, samples.data(), &count, *last_seen_us);
  }
  if (rc == NVML_ERROR_NOT_SUPPORTED) {
    r.Check(Sym::kDeviceGetProcessUtilization, rc);  // not asked again
    return;
  }
  if (rc == NVML_ERROR_NOT_FOUND || (rc == NVML_SUCCESS && count == 0)) {
    for (auto& p : s.processes) p.sm_util_percent = 0;
    return;
  }
  if (rc != NVML_SUCCESS) return;
  for (auto& p : s.processes) p.sm_util_percent = 0;
  samples.resize(std::min<size_t>(count, samples.size()));
  for (const auto& sample : samples) {
    *last_seen_us = std::max(*last_seen_us, sample.timeStamp);
    if (sample.smUtil > 100) continue;
    for (auto& p : s.processes) {
      if (p.pid == sample.pid) p.sm_util_percent = std::max(*p.sm_util_percent, static_cast<int>(sample.smUtil));
    }
  }
}

// MIG devices of a GPU in MIG mode: nvmlDeviceGetMaxMigDeviceCount slots, each asked with
// nvmlDeviceGetMigDeviceHandleByIndex (NOT_FOUND: an empty slot). Per device its UUID,
// instance ids, attributes (slices, memory size: the profile name) and memory use; its
// processes are the parent's with the same instance ids (no extra calls). A driver without
// these calls, or a GPU that does not support MIG (NOT_SUPPORTED, not asked again), lists none.
void ReadMigDevices(const NvmlLibrary& lib, nvmlDevice_t dev, DeviceReader& r, model::DeviceSnapshot& s) {
  auto by_index = lib.Get<nvmlDeviceGetMigDeviceHandleByIndex_fn>(Sym::kDeviceGetMigDeviceHandleByIndex);
  if (by_index == nullptr) return;
  auto max_count = r.UInt(Sym::kDeviceGetMaxMigDeviceCount);
  if (!max_count || *max_count == 0) return;
  auto uint_of = [&](Sym sym, nvmlDevice_t mig) -> std::optional<unsigned> {
    auto fn = lib.Get<nvmlDeviceGetUInt_fn>(sym);
    unsigned v = 0;
    if (fn == nullptr || fn(mig, &v) != NVML_SUCCESS) return std::nullopt;
    return v;
  };
  for (unsigned i = 0; i < std::min(*max_count, 64u); ++i) {
    nvmlDevice_t mig = nullptr;
    nvmlReturn_t rc = by_index(dev, i, &mig);
    if (rc == NVML_ERROR_NOT_FOUND) continue;  // no MIG device in this slot
    if (rc != NVML_SUCCESS) {
      if (!r.Check(Sym::kDeviceGetMigDeviceHandleByIndex, rc)) {
        if (r.lost() || rc == NVML_ERROR_NOT_SUPPORTED) return;
      }
      continue;
    }
    model::MigDevice m;
    m.index = static_cast<int>(i);
    m.parent_uuid = s.uuid.value_or("");
    m.parent_index = s.index;
    if (auto fn = lib.Get<nvmlDeviceGetString_fn>(Sym::kDeviceGetUuid)) {
      char text[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
      if (fn(mig, text, sizeof text) == NVML_SUCCESS) {
        text[sizeof text - 1] = '\0';
        m.uuid = std::string(text);
      }
    }
    m.gpu_instance_id = uint_of(Sym::kDeviceGetGpuInstanceId, mig);
    m.compute_instance_id = uint_of(Sym::kDeviceGetComputeInstanceId, mig);
    if (auto fn = lib.Get<nvmlDeviceGetAttributes_fn>(Sym::kDeviceGetAttributes)) {
      nvmlDeviceAttributes_t attr{};
      if (fn(mig, &attr) == NVML_SUCCESS) {
        m.gpu_slices = static_cast<int>(attr.gpuInstanceSliceCount);
        m.compute_slices = static_cast<int>(attr.computeInstanceSliceCount);
        m.multiprocessors = static_cast<int>(attr.multiprocessorCount);
        m.profile = model::MigProfileName(*m.gpu_slices, *m.compute_slices,
                                          static_cast<int64_t>(attr.memorySizeMB), s.memory_total_bytes.value_or(0));
      }
    }
    if (auto fn = lib.Get<nvmlDeviceGetMemoryInfo_fn>(Sym::kDeviceGetMemoryInfo)) {
      nvmlMemory_t mem{};
      if (fn(mig, &mem) == NVML_SUCCESS) {
        m.memory_total_bytes = static_cast<int64_t>(mem.total);
        m.memory_used_bytes = static_cast<int64_t>(mem.used);
      }
    }
    for (const auto& p : s.processes) {
      if (p.gpu_instance_id && p.gpu_instance_id == m.gpu_instance_id &&
          (!p.compute_instance_id || !m.compute_instance_id || p.compute_instance_id == m.compute_instance_id)) {
        m.processes.push_back(p);
      }
    }
    s.mig_devices.push_back(std::move(m));
  }
}

model::PcieLevel PcieLevelFromNvml(nvmlGpuTopologyLevel_t level) {
  switch (level) {
    case NVML_TOPOLOGY_INTERNAL: return model::PcieLevel::kSelf;
    case NVML_TOPOLOGY_SINGLE: return model::PcieLevel::kSingleSwitch;
    case NVML_TOPOLOGY_MULTIPLE: return model::PcieLevel::kMultipleSwitch;
    case NVML_TOPOLOGY_HOSTBRIDGE: return model::PcieLevel::kHostBridge;
    case NVML_TOPOLOGY_NODE: return model::PcieLevel::kNumaNode;
    case NVML_TOPOLOGY_SYSTEM: return model::PcieLevel::kSystem;
    default: return model::PcieLevel::kUnknown;
  }
}

// A return code that says the GPU itself cannot answer now (lost, needs a reset, ...):
// what was read without it is not kept.
bool Unreachable(nvmlReturn_t rc) {
  return rc == NVML_ERROR_GPU_IS_LOST || rc == NVML_ERROR_RESET_REQUIRED || rc == NVML_ERROR_IRQ_ISSUE ||
         rc == NVML_ERROR_CORRUPTED_INFOROM || rc == NVML_ERROR_UNINITIALIZED;
}

struct TopologyRead {
  model::Topology topology;
  bool complete = true;  // every GPU answered: fit to keep for later snapshots
};

// NVLink counts from each GPU's active links and what is at their far end, and the common
// PCIe ancestor of every pair. A link to another GPU (its PCI address) counts for that pair.
// Links to NVSwitches (nvmlDeviceGetNvLinkRemoteDeviceType says SWITCH) join every two GPUs
// that reach a common switch (same switch PCI address; an unknown address counts as one
// shared switch) with NV<n>, n = the smaller of the two GPUs' switch link counts, as
// `nvidia-smi topo -m` shows NV18 on HGX H100. Without that entry point (old drivers)
// switch links are not counted. Health plays no part (a GPU with ECC errors keeps its
// links); only GPUs that cannot answer (`reachable` false: no handle, lost, reset
// required) are left out, and the result is then marked incomplete.
TopologyRead ReadTopology(const NvmlLibrary& lib, const std::vector<nvmlDevice_t>& handles,
                          const std::vector<model::DeviceSnapshot>& gpus, const std::vector<bool>& reachable) {
  const size_t n = handles.size();
  TopologyRead out;
  model::Topology& topo = out.topology;
  topo.nvlinks.assign(n, std::vector<int>(n, 0));
  topo.pcie.assign(n, std::vector<model::PcieLevel>(n, model::PcieLevel::kUnknown));
  auto ancestor = lib.Get<nvmlDeviceGetTopologyCommonAncestor_fn>(Sym::kDeviceGetTopologyCommonAncestor);
  auto link_state = lib.Get<nvmlDeviceGetNvLinkState_fn>(Sym::kDeviceGetNvLinkState);
  auto remote_pci = lib.Get<nvmlDeviceGetNvLinkRemotePciInfo_fn>(Sym::kDeviceGetNvLinkRemotePciInfo);
  auto remote_type = lib.Get<nvmlDeviceGetNvLinkRemoteDeviceType_fn>(Sym::kDeviceGetNvLinkRemoteDeviceType);
  auto answers = [&](size_t i) { return handles[i] != nullptr && i < reachable.size() && reachable[i]; };
  std::vector<int> switch_links(n, 0);
  std::vector<std::set<std::string>> switches(n);  // PCI addresses of the switches each GPU reaches
  for (size_t i = 0; i < n; ++i) {
    topo.pcie[i][i] = model::PcieLevel::kSelf;
    if (!answers(i)) {
      out.complete = false;
      continue;
    }
    for (size_t j = i + 1; j < n && ancestor; ++j) {
      if (!answers(j)) continue;
      nvmlGpuTopologyLevel_t level = 0;
      nvmlReturn_t rc = ancestor(handles[i], handles[j], &level);
      if (rc == NVML_SUCCESS) {
        topo.pcie[i][j] = topo.pcie[j][i] = PcieLevelFromNvml(level);
      } else if (Unreachable(rc)) {
        out.complete = false;
      }
    }
    if (!link_state) continue;
    for (unsigned link = 0; link < NVML_NVLINK_MAX_LINKS; ++link) {
      nvmlEnableState_t active = NVML_FEATURE_DISABLED;
      nvmlReturn_t rc = link_state(handles[i], link, &active);
      if (rc == NVML_ERROR_NOT_SUPPORTED) break;  // no NVLink on this GPU
      if (Unreachable(rc)) {
        out.complete = false;
        break;
      }
      if (rc != NVML_SUCCESS || active != NVML_FEATURE_ENABLED) continue;
      nvmlIntNvLinkDeviceType_t type = NVML_NVLINK_DEVICE_TYPE_UNKNOWN;
      const bool type_known = remote_type && remote_type(handles[i], link, &type) == NVML_SUCCESS;
      nvmlPciInfo_t pci{};
      std::string bus;
      if (remote_pci && remote_pci(handles[i], link, &pci) == NVML_SUCCESS) {
        char text[32];
        std::snprintf(text, sizeof text, "%08X:%02X:%02X.0", pci.domain, pci.bus, pci.device);
        bus = text;
      }
      if (type_known && type == NVML_NVLINK_DEVICE_TYPE_SWITCH) {
        ++switch_links[i];
        switches[i].insert(bus);  // "" when the address is unknown
        continue;
      }
      if (bus.empty() || (type_known && type != NVML_NVLINK_DEVICE_TYPE_GPU)) continue;
      for (size_t j = 0; j < n; ++j) {
        if (j != i && gpus[j].pci_bus_id == bus) ++topo.nvlinks[i][j];
      }
    }
  }
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = i + 1; j < n && switch_links[i] > 0; ++j) {
      if (switch_links[j] == 0) continue;
      const bool shared = std::any_of(switches[i].begin(), switches[i].end(),
                                      [&](const std::string& sw) { return switches[j].count(sw) > 0; });
      if (!shared) continue;
      const int links = std::min(switch_links[i], switch_links[j]);
      topo.nvlinks[i][j] += links;
      topo.nvlinks[j][i] += links;
    }
  }
  return out;
}

}  // namespace

NvmlDeviceSource::NvmlDeviceSource(const NvmlLibrary& lib, const Clock& clock, std::string sysfs_root)
    : lib_(lib), clock_(clock), sysfs_root_(std::move(sysfs_root)) {}

Result<model::MachineSnapshot> NvmlDeviceSource::Snapshot(const devices::SnapshotOptions& options) {
  using namespace devices;
  model::MachineSnapshot snap;
  const int64_t now = clock_.NowUnixMs();
  snap.taken_at_unix_ms = now;
  FieldSet fields = options.processes_only ? FieldSet{kFieldProcesses} : options.fields & kAllFields;
  if (options.topology) fields |= kFieldIdentity;  // NVLink ends are matched by PCI address
  const int64_t max_age = options.slow_max_age.count();
  auto due = [&](int64_t read_at) { return max_age <= 0 || now - read_at >= max_age || now < read_at; };

  unsigned count = 0;
  nvmlReturn_t rc = lib_.Get<nvmlDeviceGetCount_fn>(Sym::kDeviceGetCount)(&count);
  if (rc != NVML_SUCCESS) {
    return MakeError(ErrorCode::kUnavailable, std::string(lib_.SymbolName(Sym::kDeviceGetCount)) +
                                                  ": " + lib_.ErrorString(rc));
  }
  if (count != slots_.size()) {  // the device set changed: nothing kept is trusted
    slots_.assign(count, Slot{});
    cache_.clear();
    system_.reset();
    topology_.reset();
  }

  if (!system_) {  // once per device set: the driver cannot change under a loaded NVML
    model::SystemInfo sys;
    char text[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = {};
    if (auto fn = lib_.Get<nvmlSystemGetString_fn>(Sym::kSystemGetDriverVersion);
        fn && fn(text, sizeof text) == NVML_SUCCESS) {
      sys.driver_version = std::string(text);
    }
    if (auto fn = lib_.Get<nvmlSystemGetString_fn>(Sym::kSystemGetNvmlVersion);
        fn && fn(text, sizeof text) == NVML_SUCCESS) {
      sys.nvml_version = std::string(text);
    }
    int cuda = 0;
    if (auto fn = lib_.Get<nvmlSystemGetCudaDriverVersion_fn>(Sym::kSystemGetCudaDriverVersion);
        fn && fn(&cuda) == NVML_SUCCESS && cuda > 0) {
      sys.cuda_driver_version = FormatCudaVersion(cuda);
    }
    system_ = sys;
  }
  snap.system = *system_;

  auto get_handle = lib_.Get<nvmlDeviceGetHandleByIndex_fn>(Sym::kDeviceGetHandleByIndex);
  snap.gpus.resize(count);
  std::vector<nvmlDevice_t> handles(count, nullptr);
  std::vector<bool> reachable(count, false);  // answered this time (for the topology)
  bool set_changed = false;
  for (unsigned i = 0; i < count; ++i) {
    model::DeviceSnapshot& dev = snap.gpus[i];
    dev.index = static_cast<int>(i);
    Slot& slot = slots_[i];
    if (slot.handle == nullptr) {
      nvmlDevice_t handle = nullptr;
      rc = get_handle(i, &handle);
      if (rc != NVML_SUCCESS) {
        // v2 counts devices we may not open; keep them visible, with the reason.
        dev.is_healthy = false;
        dev.health_problems.push_back(std::string(lib_.SymbolName(Sym::kDeviceGetHandleByIndex)) +
                                      ": " + lib_.ErrorString(rc));
        continue;
      }
      slot.handle = handle;
      slot.uuid.clear();
    }
    handles[i] = slot.handle;

    // Is index i still the GPU we saw? Asked when not known, and as often as the slow groups.
    Cached scratch;  // for a GPU without a UUID: nothing is kept
    Cached* c = &scratch;
    DeviceReader r(lib_, slot.handle, dev, *c);
    if (slot.uuid.empty() || due(slot.verified_at_ms)) {
      dev.uuid = r.String(Sym::kDeviceGetUuid, NVML_DEVICE_UUID_V2_BUFFER_SIZE);
      if (dev.uuid && !slot.uuid.empty() && *dev.uuid != slot.uuid) set_changed = true;
      slot.uuid = dev.uuid.value_or("");
      slot.verified_at_ms = now;
    } else {
      dev.uuid = slot.uuid;
    }
    if (!slot.uuid.empty()) {
      c = &cache_[slot.uuid];
      r.use_cache(*c);
    }

    // Which groups to read now; the rest of `fields` comes from the cache.
    FieldSet cached = 0;
    for (FieldSet bit = 1; bit <= kFieldProcessUtilization; bit <<= 1) {
      if (!(fields & bit) || !(c->have & bit) || !((kStaticFields | kSlowFields) & bit)) continue;
      if ((kSlowFields & bit) && due(c->read_at_ms[std::countr_zero(bit)])) continue;
      cached |= bit;
    }
    const FieldSet fresh = fields & ~cached;
    if (!r.lost()) ReadDevice(lib_, slot.handle, sysfs_root_, fresh, r, *c, dev);
    reachable[i] = !r.failed();

    if (r.failed()) {
      // Lost, reset required, ...: report what it said now, keep nothing, and ask it all
      // again (UUID first) once it answers.
      if (!slot.uuid.empty()) cache_.erase(slot.uuid);
      slot.uuid.clear();
      c = &scratch;
      cached = 0;
    } else {
      // Keep what was read of the static and slow groups, with its warnings.
      const FieldSet keep = fresh & (kStaticFields | kSlowFields);
      if (keep && c != &scratch) {
        CopyGroups(keep, dev, c->values);
        std::erase_if(c->notes, [&](const Note& n) { return (n.group & keep) != 0; });
        for (const Note& n : r.notes()) {
          if (n.group & keep) c->notes.push_back(n);
        }
        for (FieldSet bit = 1; bit <= kFieldProcessUtilization; bit <<= 1) {
          if (keep & bit) c->read_at_ms[std::countr_zero(bit)] = now;
        }
        c->have |= keep;
      }
      CopyGroups(cached, c->values, dev);
    }
    // Warnings in call order, whichever snapshot made the call.
    std::vector<Note> notes = r.notes();
    if (cached) {
      for (const Note& n : c->notes) {
        if (n.group & cached) notes.push_back(n);
      }
      std::stable_sort(notes.begin(), notes.end(), [](const Note& a, const Note& b) { return a.order < b.order; });
    }
    for (Note& n : notes) {
      if (std::find(dev.warnings.begin(), dev.warnings.end(), n.text) == dev.warnings.end()) {
        dev.warnings.push_back(std::move(n.text));
      }
    }

    if (!options.processes_only) {
      if ((fields & kFieldProcessUtilization) && dev.uuid) {
        ReadProcessUtilization(lib_, slot.handle, r, &c->last_seen_us, dev);
      }
      model::ApplyHealthVerdict(dev);
    }
  }
  if (set_changed) {  // same count, another GPU at some index: topology and versions again
    topology_.reset();
    system_.reset();
  }
  if (options.topology) {
    if (!topology_) {
      TopologyRead read = ReadTopology(lib_, handles, snap.gpus, reachable);
      // Kept only when every GPU took part (a lost one may come back with its links).
      if (read.complete) topology_ = read.topology;
      snap.topology = std::move(read.topology);
    } else {
      snap.topology = topology_;
    }
  }
  return snap;
}

}  // namespace gpuman::nvml

namespace gpuman::nvml {

Status NvmlDeviceSource::LimitCgroupMemory(const std::string& uuid, const std::string& cgroup, int64_t bytes) {
  auto set = lib_.Get<nvmlDeviceSetMemoryLimits_v1_fn>(Sym::kDeviceSetMemoryLimits);
  if (!set) return MakeError(ErrorCode::kUnavailable, "this driver has no nvmlDeviceSetMemoryLimits_v1");
  if (bytes <= 0) return MakeError(ErrorCode::kInvalidArgument, "a memory limit must be more than 0 bytes");
  // The handle of the GPU with this UUID: the one a snapshot found, or looked up now.
  nvmlDevice_t handle = nullptr;
  for (const Slot& slot : slots_) {
    if (slot.uuid == uuid && slot.handle != nullptr) handle = slot.handle;
  }
  auto get_uuid = lib_.Get<nvmlDeviceGetString_fn>(Sym::kDeviceGetUuid);
  unsigned count = 0;
  if (handle == nullptr && get_uuid && lib_.Get<nvmlDeviceGetCount_fn>(Sym::kDeviceGetCount)(&count) == NVML_SUCCESS) {
    auto get_handle = lib_.Get<nvmlDeviceGetHandleByIndex_fn>(Sym::kDeviceGetHandleByIndex);
    for (unsigned i = 0; i < count && handle == nullptr; ++i) {
      nvmlDevice_t h = nullptr;
      char text[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
      if (get_handle(i, &h) == NVML_SUCCESS && get_uuid(h, text, sizeof text) == NVML_SUCCESS && uuid == text) handle = h;
    }
  }
  if (handle == nullptr) return MakeError(ErrorCode::kNotFound, "no GPU " + uuid);
  nvmlSetMemoryLimits_v1_t limits{};
  limits.nameSpace = cgroup.c_str();
  limits.softLimit = 0;
  limits.hardLimit = static_cast<unsigned long long>(bytes);
  if (nvmlReturn_t rc = set(handle, &limits); rc != NVML_SUCCESS) {
    return MakeError(ErrorCode::kUnavailable, "nvmlDeviceSetMemoryLimits_v1 on " + uuid + ": " + lib_.ErrorString(rc));
  }
  return {};
}

}  // namespace gpuman::nvml
