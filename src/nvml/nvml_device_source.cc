#include "nvml/nvml_device_source.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <vector>

#include "base/strings.h"
#include "devices/health.h"

namespace gpuman::nvml {
namespace {

// How many times a process list is re-fetched when it grew between size probe and fetch.
constexpr int kMaxProcessListAttempts = 5;
constexpr unsigned kCpuSetWords = 64;  // 4096 CPUs

// Collects one device's fields, deciding per NVML return code what a failure means.
class DeviceReader {
 public:
  DeviceReader(const NvmlLibrary& lib, nvmlDevice_t dev, model::DeviceSnapshot& snap)
      : lib_(lib), dev_(dev), snap_(snap) {}

  bool lost() const { return lost_; }

  // Returns true on NVML_SUCCESS. On failure records what the code means and returns false.
  bool Check(Sym sym, nvmlReturn_t rc) {
    if (rc == NVML_SUCCESS) return true;
    switch (rc) {
      case NVML_ERROR_NOT_SUPPORTED:
      case NVML_ERROR_FUNCTION_NOT_FOUND:
      case NVML_ERROR_NO_DATA:
        return false;  // simply unknown
      case NVML_ERROR_NO_PERMISSION:
        AddOnce(snap_.warnings, std::string(lib_.SymbolName(sym)) + ": " + lib_.ErrorString(rc));
        return false;
      case NVML_ERROR_GPU_IS_LOST:
      case NVML_ERROR_RESET_REQUIRED:
      case NVML_ERROR_IRQ_ISSUE:
      case NVML_ERROR_CORRUPTED_INFOROM:
      case NVML_ERROR_UNINITIALIZED:
        if (rc == NVML_ERROR_GPU_IS_LOST) lost_ = true;
        snap_.is_healthy = false;
        AddOnce(snap_.health_problems,
                std::string(lib_.SymbolName(sym)) + ": " + lib_.ErrorString(rc));
        return false;
      default:
        AddOnce(snap_.warnings, std::string(lib_.SymbolName(sym)) + ": " + lib_.ErrorString(rc));
        return false;
    }
  }

  // Calls `fn(dev, args...)` when the symbol exists and the device is not lost.
  template <typename Fn, typename... Args>
  bool Call(Sym sym, Args... args) {
    if (lost_) return false;
    auto fn = lib_.Get<Fn>(sym);
    if (fn == nullptr) return false;
    return Check(sym, fn(dev_, args...));
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
  static void AddOnce(std::vector<std::string>& list, std::string text) {
    if (std::find(list.begin(), list.end(), text) == list.end()) list.push_back(std::move(text));
  }

  const NvmlLibrary& lib_;
  nvmlDevice_t dev_;
  model::DeviceSnapshot& snap_;
  bool lost_ = false;
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

// Reads one process list with NVML's protocol: probe with count 0 and no buffer (SUCCESS
// means none, INSUFFICIENT_SIZE gives the count), over-allocate, and grow and retry while
// the list keeps growing between calls.
void ReadProcesses(const NvmlLibrary& lib, nvmlDevice_t dev, DeviceReader& reader, Sym sym,
                   model::ProcessType type, std::map<uint32_t, model::GpuProcess>& out) {
  auto fn = lib.Get<nvmlDeviceGetRunningProcesses_fn>(sym);
  if (fn == nullptr || reader.lost()) return;
  const size_t entry = lib.process_entry_size();
  unsigned count = 0;
  nvmlReturn_t rc = fn(dev, &count, nullptr);
  std::vector<unsigned char> buf;
  for (int attempt = 0; rc == NVML_ERROR_INSUFFICIENT_SIZE && attempt < kMaxProcessListAttempts;
       ++attempt) {
    unsigned capacity = count * 2 + 5;
    buf.assign(static_cast<size_t>(capacity) * entry, 0);
    count = capacity;
    rc = fn(dev, &count, buf.data());
    if (rc == NVML_ERROR_INSUFFICIENT_SIZE && count <= capacity) count = capacity;  // grow anyway
  }
  if (!reader.Check(sym, rc)) return;
  if (buf.empty()) count = 0;
  count = std::min<unsigned>(count, static_cast<unsigned>(buf.size() / entry));
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
    for (int b = 0; b < kBits; ++b) {
      if (words[w] & (1UL << b)) cpus.push_back(static_cast<int>(w) * kBits + b);
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

void ReadProcessLists(const NvmlLibrary& lib, nvmlDevice_t dev, DeviceReader& r, model::DeviceSnapshot& s) {
  std::map<uint32_t, model::GpuProcess> procs;
  ReadProcesses(lib, dev, r, Sym::kDeviceGetComputeRunningProcesses, model::ProcessType::kCompute, procs);
  ReadProcesses(lib, dev, r, Sym::kDeviceGetGraphicsRunningProcesses, model::ProcessType::kGraphics, procs);
  for (auto& [pid, proc] : procs) s.processes.push_back(std::move(proc));
}

void ReadDevice(const NvmlLibrary& lib, nvmlDevice_t dev, const std::string& sysfs_root,
                bool processes_only, model::DeviceSnapshot& s) {
  DeviceReader r(lib, dev, s);
  s.uuid = r.String(Sym::kDeviceGetUuid, NVML_DEVICE_UUID_V2_BUFFER_SIZE);
  if (processes_only) {
    ReadProcessLists(lib, dev, r, s);
    return;
  }
  s.name = r.String(Sym::kDeviceGetName, NVML_DEVICE_NAME_V2_BUFFER_SIZE);
  s.serial = r.String(Sym::kDeviceGetSerial, NVML_DEVICE_SERIAL_BUFFER_SIZE);
  if (auto minor = r.UInt(Sym::kDeviceGetMinorNumber)) s.minor_number = static_cast<int>(*minor);

  nvmlPciInfo_t pci{};
  if (r.Call<nvmlDeviceGetPciInfo_fn>(Sym::kDeviceGetPciInfo, &pci)) {
    pci.busId[sizeof pci.busId - 1] = '\0';
    pci.busIdLegacy[sizeof pci.busIdLegacy - 1] = '\0';
    char canonical[32];
    std::snprintf(canonical, sizeof canonical, "%08X:%02X:%02X.0", pci.domain, pci.bus, pci.device);
    s.pci_bus_id = canonical;
  }

  // Memory: v2 first (reserved separate); v1 when v2 is missing or rejects our version.
  bool have_memory = false;
  if (auto v2fn = lib.Get<nvmlDeviceGetMemoryInfo_v2_fn>(Sym::kDeviceGetMemoryInfoV2); v2fn && !r.lost()) {
    nvmlMemory_v2_t mem{};
    mem.version = nvmlMemory_v2;
    nvmlReturn_t rc = v2fn(dev, &mem);
    if (rc == NVML_SUCCESS) {
      s.memory_total_bytes = static_cast<int64_t>(mem.total);
      s.memory_reserved_bytes = static_cast<int64_t>(mem.reserved);
      s.memory_used_bytes = static_cast<int64_t>(mem.used);
      s.memory_free_bytes = static_cast<int64_t>(mem.free);
      have_memory = true;
    } else if (rc != NVML_ERROR_ARGUMENT_VERSION_MISMATCH && rc != NVML_ERROR_FUNCTION_NOT_FOUND &&
               rc != NVML_ERROR_NOT_SUPPORTED) {
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
  if (r.Call<nvmlDeviceGetTemperature_fn>(Sym::kDeviceGetTemperature, NVML_TEMPERATURE_GPU, &temp)) {
    s.temperature_c = static_cast<int>(temp);
  }
  if (auto mw = r.UInt(Sym::kDeviceGetPowerUsage)) s.power_usage_w = *mw / 1000.0;
  auto limit = r.UInt(Sym::kDeviceGetEnforcedPowerLimit);
  if (!limit) limit = r.UInt(Sym::kDeviceGetPowerManagementLimit);
  if (limit) s.power_limit_w = *limit / 1000.0;
  if (auto fan = r.UInt(Sym::kDeviceGetFanSpeed)) s.fan_percent = static_cast<int>(*fan);

  auto clock = [&](Sym sym, nvmlClockType_t type) -> std::optional<int64_t> {
    unsigned mhz = 0;
    if (!r.Call<nvmlDeviceGetClock_fn>(sym, type, &mhz)) return std::nullopt;
    return mhz;
  };
  s.clocks.sm_mhz = clock(Sym::kDeviceGetClockInfo, NVML_CLOCK_SM);
  s.clocks.sm_max_mhz = clock(Sym::kDeviceGetMaxClockInfo, NVML_CLOCK_SM);
  s.clocks.memory_mhz = clock(Sym::kDeviceGetClockInfo, NVML_CLOCK_MEM);
  s.clocks.memory_max_mhz = clock(Sym::kDeviceGetMaxClockInfo, NVML_CLOCK_MEM);

  nvmlPstates_t pstate = NVML_PSTATE_UNKNOWN;
  if (r.Call<nvmlDeviceGetPerformanceState_fn>(Sym::kDeviceGetPerformanceState, &pstate) &&
      pstate >= 0 && pstate <= 15) {
    s.performance_state = pstate;
  }
  int major = 0, minor = 0;
  if (r.Call<nvmlDeviceGetCudaComputeCapability_fn>(Sym::kDeviceGetCudaComputeCapability, &major, &minor)) {
    s.compute_capability = std::to_string(major) + "." + std::to_string(minor);
  }
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
  unsigned long long ecc = 0;
  if (r.Call<nvmlDeviceGetTotalEccErrors_fn>(Sym::kDeviceGetTotalEccErrors,
                                              NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_VOLATILE_ECC, &ecc)) {
    s.ecc_volatile_corrected = static_cast<int64_t>(ecc);
  }
  if (r.Call<nvmlDeviceGetTotalEccErrors_fn>(Sym::kDeviceGetTotalEccErrors,
                                              NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, &ecc)) {
    s.ecc_volatile_uncorrected = static_cast<int64_t>(ecc);
  }
  if (r.Call<nvmlDeviceGetTotalEccErrors_fn>(Sym::kDeviceGetTotalEccErrors,
                                              NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_AGGREGATE_ECC, &ecc)) {
    s.ecc_aggregate_corrected = static_cast<int64_t>(ecc);
  }
  if (r.Call<nvmlDeviceGetTotalEccErrors_fn>(Sym::kDeviceGetTotalEccErrors,
                                              NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_AGGREGATE_ECC, &ecc)) {
    s.ecc_aggregate_uncorrected = static_cast<int64_t>(ecc);
  }
  if (r.Call<nvmlDeviceGetEnableState_fn>(Sym::kDeviceGetRetiredPagesPendingStatus, &state)) {
    s.retired_pages_pending = state == NVML_FEATURE_ENABLED;
  }
  unsigned corr = 0, unc = 0, pending = 0, failure = 0;
  if (r.Call<nvmlDeviceGetRemappedRows_fn>(Sym::kDeviceGetRemappedRows, &corr, &unc, &pending, &failure)) {
    s.remapped_rows_pending = pending != 0;
    s.remapped_rows_failure = failure != 0;
  }
  unsigned long long reasons = 0;
  if (r.Call<nvmlDeviceGetULongLong_fn>(Sym::kDeviceGetClocksEventReasons, &reasons)) {
    s.clock_event_reasons = reasons;
  }

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
  if (!s.numa_node && s.pci_bus_id) s.numa_node = ReadSysfsNumaNode(sysfs_root, *s.pci_bus_id);

  ReadProcessLists(lib, dev, r, s);
}

// Per-process SM %: one sample per process that was busy since `*last_seen_us` (NVML keeps
// a short buffer; 0 averages all of it). NOT_FOUND means no process was busy: every
// listed process gets 0. Samples above 100 % or for pids not in the list are dropped
// (nvtop#110). Unsupported (MIG, old GPUs): the field stays unknown.
void ReadProcessUtilization(const NvmlLibrary& lib, nvmlDevice_t dev, unsigned long long* last_seen_us,
                            model::DeviceSnapshot& s) {
  auto fn = lib.Get<nvmlDeviceGetProcessUtilization_fn>(Sym::kDeviceGetProcessUtilization);
  if (!fn || s.processes.empty() || s.mig_mode_current.value_or(false)) return;
  unsigned count = 0;
  nvmlReturn_t rc = fn(dev, nullptr, &count, *last_seen_us);
  std::vector<nvmlProcessUtilizationSample_t> samples;
  for (int attempt = 0; attempt < 3 && rc == NVML_ERROR_INSUFFICIENT_SIZE; ++attempt) {
    samples.assign(count + 4, nvmlProcessUtilizationSample_t{});
    count = static_cast<unsigned>(samples.size());
    rc = fn(dev, samples.data(), &count, *last_seen_us);
  }
  if (rc == NVML_ERROR_NOT_FOUND || (rc == NVML_SUCCESS && samples.empty())) {
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

// NVLink counts from each GPU's active links and the PCI address at their far end, and
// the common PCIe ancestor of every pair. Links to NVSwitches (no GPU at the far end)
// are not counted as GPU-to-GPU links.
model::Topology ReadTopology(const NvmlLibrary& lib, const std::vector<nvmlDevice_t>& handles,
                             const std::vector<model::DeviceSnapshot>& gpus) {
  const size_t n = handles.size();
  model::Topology topo;
  topo.nvlinks.assign(n, std::vector<int>(n, 0));
  topo.pcie.assign(n, std::vector<model::PcieLevel>(n, model::PcieLevel::kUnknown));
  auto ancestor = lib.Get<nvmlDeviceGetTopologyCommonAncestor_fn>(Sym::kDeviceGetTopologyCommonAncestor);
  auto link_state = lib.Get<nvmlDeviceGetNvLinkState_fn>(Sym::kDeviceGetNvLinkState);
  auto remote_pci = lib.Get<nvmlDeviceGetNvLinkRemotePciInfo_fn>(Sym::kDeviceGetNvLinkRemotePciInfo);
  for (size_t i = 0; i < n; ++i) {
    topo.pcie[i][i] = model::PcieLevel::kSelf;
    if (handles[i] == nullptr || !gpus[i].is_healthy) continue;
    for (size_t j = i + 1; j < n && ancestor; ++j) {
      if (handles[j] == nullptr) continue;
      nvmlGpuTopologyLevel_t level = 0;
      if (ancestor(handles[i], handles[j], &level) == NVML_SUCCESS) {
        topo.pcie[i][j] = topo.pcie[j][i] = PcieLevelFromNvml(level);
      }
    }
    if (!link_state || !remote_pci) continue;
    for (unsigned link = 0; link < NVML_NVLINK_MAX_LINKS; ++link) {
      nvmlEnableState_t active = NVML_FEATURE_DISABLED;
      nvmlReturn_t rc = link_state(handles[i], link, &active);
      if (rc == NVML_ERROR_NOT_SUPPORTED) break;  // no NVLink on this GPU
      if (rc != NVML_SUCCESS || active != NVML_FEATURE_ENABLED) continue;
      nvmlPciInfo_t pci{};
      if (remote_pci(handles[i], link, &pci) != NVML_SUCCESS) continue;
      char bus[32];
      std::snprintf(bus, sizeof bus, "%08X:%02X:%02X.0", pci.domain, pci.bus, pci.device);
      for (size_t j = 0; j < n; ++j) {
        if (j != i && gpus[j].pci_bus_id == std::string(bus)) ++topo.nvlinks[i][j];
      }
    }
  }
  return topo;
}

}  // namespace

NvmlDeviceSource::NvmlDeviceSource(const NvmlLibrary& lib, const Clock& clock, std::string sysfs_root)
    : lib_(lib), clock_(clock), sysfs_root_(std::move(sysfs_root)) {}

Result<model::MachineSnapshot> NvmlDeviceSource::Snapshot(const devices::SnapshotOptions& options) {
  model::MachineSnapshot snap;
  snap.taken_at_unix_ms = clock_.NowUnixMs();

  char text[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = {};
  if (auto fn = lib_.Get<nvmlSystemGetString_fn>(Sym::kSystemGetDriverVersion);
      fn && fn(text, sizeof text) == NVML_SUCCESS) {
    snap.system.driver_version = std::string(text);
  }
  if (auto fn = lib_.Get<nvmlSystemGetString_fn>(Sym::kSystemGetNvmlVersion);
      fn && fn(text, sizeof text) == NVML_SUCCESS) {
    snap.system.nvml_version = std::string(text);
  }
  int cuda = 0;
  if (auto fn = lib_.Get<nvmlSystemGetCudaDriverVersion_fn>(Sym::kSystemGetCudaDriverVersion);
      fn && fn(&cuda) == NVML_SUCCESS && cuda > 0) {
    snap.system.cuda_driver_version = FormatCudaVersion(cuda);
  }

  unsigned count = 0;
  nvmlReturn_t rc = lib_.Get<nvmlDeviceGetCount_fn>(Sym::kDeviceGetCount)(&count);
  if (rc != NVML_SUCCESS) {
    return MakeError(ErrorCode::kUnavailable, std::string(lib_.SymbolName(Sym::kDeviceGetCount)) +
                                                  ": " + lib_.ErrorString(rc));
  }
  auto get_handle = lib_.Get<nvmlDeviceGetHandleByIndex_fn>(Sym::kDeviceGetHandleByIndex);
  snap.gpus.resize(count);
  std::vector<nvmlDevice_t> handles(count, nullptr);
  for (unsigned i = 0; i < count; ++i) {
    model::DeviceSnapshot& dev = snap.gpus[i];
    dev.index = static_cast<int>(i);
    nvmlDevice_t handle = nullptr;
    rc = get_handle(i, &handle);
    if (rc != NVML_SUCCESS) {
      // v2 counts devices we may not open; keep them visible, with the reason.
      dev.is_healthy = false;
      dev.health_problems.push_back(std::string(lib_.SymbolName(Sym::kDeviceGetHandleByIndex)) +
                                    ": " + lib_.ErrorString(rc));
      continue;
    }
    handles[i] = handle;
    ReadDevice(lib_, handle, sysfs_root_, options.processes_only, dev);
    if (!options.processes_only) {
      if (dev.uuid) ReadProcessUtilization(lib_, handle, &last_seen_us_[*dev.uuid], dev);
      devices::AssessHealth(dev);
    }
  }
  if (options.topology) snap.topology = ReadTopology(lib_, handles, snap.gpus);
  return snap;
}

}  // namespace gpuman::nvml
