// The stand-in libnvidia-ml.so.1: exports real NVML entry points (names, struct layouts,
// enum values and return codes from src/nvml/nvml_abi.h) and answers them from a JSON
// scenario file named by $GPUMAN_FAKE_NVML_SCENARIO (format: docs/scenarios.md).
// Built twice from this file: sim/ (current versioned symbols) and sim-legacy/
// (FAKE_NVML_LEGACY=1: only the oldest unsuffixed names, to exercise loader fallbacks).
// Thread-safe: every exported call runs under the one mutex of the one State below.
#include <sys/stat.h>

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

#include "nvml/nvml_abi.h"

#ifndef FAKE_NVML_LEGACY
#define FAKE_NVML_LEGACY 0
#endif

// Everything is hidden by default (CMake); only NVML names and the two test hooks export.
#define FAKE_NVML_EXPORT extern "C" __attribute__((visibility("default")))

// NVML keeps this opaque. Here a handle points at one of the fixed slots below, so
// handles stay valid across scenario reloads (and across init/shutdown, like NVML's).
struct nvmlDevice_st {
  unsigned int index;
};

namespace {

using json = nlohmann::json;

constexpr const char* kScenarioEnv = "GPUMAN_FAKE_NVML_SCENARIO";
constexpr unsigned kMaxGpus = 64;
constexpr unsigned kMaxCpus = 4096;

constexpr std::array<nvmlDevice_st, kMaxGpus> MakeSlots() {
  std::array<nvmlDevice_st, kMaxGpus> slots{};
  for (unsigned i = 0; i < kMaxGpus; ++i) slots[i].index = i;
  return slots;
}
// Read-only: callers treat handles as opaque and never write through them.
constexpr std::array<nvmlDevice_st, kMaxGpus> kSlots = MakeSlots();

nvmlDevice_t HandleOf(unsigned index) { return const_cast<nvmlDevice_st*>(&kSlots[index]); }

// ---------------------------------------------------------------------------------------
// Return codes: scenario names (the NVML_ERROR_ suffix) and nvmlErrorString texts.

struct CodeInfo {
  nvmlReturn_t code;
  const char* name;
  const char* text;  // as the real nvmlErrorString prints it
};
constexpr CodeInfo kCodes[] = {
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
  std::optional<std::pair<unsigned, unsigned>> mig_mode;  // current, pending
  std::optional<unsigned long long> ecc[2][2];  // [nvmlMemoryErrorType_t][nvmlEccCounterType_t]
  std::optional<RemappedRows> remapped_rows;
  std::optional<unsigned long long> clock_event_reasons;
  std::optional<std::vector<unsigned>> cpu_affinity;  // CPU numbers
  std::optional<unsigned> numa_node;
  std::optional<std::string> pci_switch, host_bridge;
  std::optional<std::vector<std::pair<unsigned, unsigned>>> nvlinks;  // (link, peer index)
  std::vector<Process> processes;
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
};

// ---------------------------------------------------------------------------------------
// Parsing. Unknown keys are ignored; a wrong type or bad value throws std::exception with
// a message naming the field, which becomes "fake-nvml: <path>: <reason>".

// The member `key` of `obj`, or nullptr when absent or null.
const json* Member(const json& obj, const char* key) {
  auto it = obj.find(key);
  return (it == obj.end() || it->is_null()) ? nullptr : &*it;
}

template <typename T>
std::optional<T> Opt(const json& obj, const char* key) {
  const json* v = Member(obj, key);
  if (!v) return std::nullopt;
  try {
    return v->get<T>();
  } catch (const json::exception& e) {
    throw std::runtime_error(std::string(key) + ": " + e.what());
  }
}

// Like Member, but the value must be an object (or array, when `array` is set).
const json* Section(const json& obj, const char* key, bool array = false) {
  const json* v = Member(obj, key);
  if (v && (array ? !v->is_array() : !v->is_object())) {
    throw std::runtime_error(std::string(key) + ": expected " + (array ? "an array" : "an object"));
  }
  return v;
}

template <typename T>
T Required(const json& obj, const char* key) {
  std::optional<T> v = Opt<T>(obj, key);
  if (!v) throw std::runtime_error(std::string(key) + ": required");
  return *v;
}

ErrorRule ParseErrorRule(const json& value) {
  ErrorRule rule;
  const json* code = &value;
  if (value.is_object()) {
    code = Member(value, "error");
    if (!code) throw std::runtime_error("error: required");
    rule.times = Opt<long>(value, "times").value_or(-1);
  }
  if (code->is_number_integer()) {
    rule.code = code->get<int>();
  } else if (code->is_string()) {
    std::string_view name = code->get_ref<const std::string&>();
    if (name.starts_with("NVML_ERROR_")) name.remove_prefix(11);
    auto it = std::find_if(std::begin(kCodes), std::end(kCodes),
                           [&](const CodeInfo& c) { return name == c.name; });
    if (it == std::end(kCodes))
      throw std::runtime_error("unknown NVML error \"" + std::string(name) + "\"");
    rule.code = it->code;
  } else {
    throw std::runtime_error("expected an error name, a number or {\"error\": ..., \"times\": N}");
  }
  return rule;
}

ErrorRules ParseErrorRules(const json& obj) {
  ErrorRules rules;
  const json* errors = Section(obj, "errors");
  if (!errors) return rules;
  for (const auto& [function, value] : errors->items()) {
    try {
      rules[function] = ParseErrorRule(value);
    } catch (const std::exception& e) {
      throw std::runtime_error("errors." + function + ": " + e.what());
    }
  }
  return rules;
}

// "0-31,64-95" -> {0, ..., 31, 64, ..., 95} (the kernel's cpulist format).
std::vector<unsigned> ParseCpuList(std::string_view list) {
  std::vector<unsigned> cpus;
  auto number = [&](std::string_view s) {
    unsigned n = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
    if (ec != std::errc() || end != s.data() + s.size() || n >= kMaxCpus) {
      throw std::runtime_error("cpu_affinity: bad CPU list \"" + std::string(list) + "\"");
    }
    return n;
  };
  while (!list.empty()) {
    size_t comma = list.find(',');
    std::string_view range = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    size_t dash = range.find('-');
    unsigned lo = number(range.substr(0, dash));
    unsigned hi = dash == std::string_view::npos ? lo : number(range.substr(dash + 1));
    for (unsigned cpu = lo; cpu <= hi; ++cpu) cpus.push_back(cpu);
  }
  return cpus;
}

Process ParseProcess(const json& p) {
  Process proc;
  proc.pid = Required<unsigned>(p, "pid");
  proc.used_memory = Opt<uint64_t>(p, "used_memory").value_or(NVML_VALUE_NOT_AVAILABLE_ULL);
  std::string type = Opt<std::string>(p, "type").value_or("compute");
  if (type != "compute" && type != "graphics" && type != "both") {
    throw std::runtime_error("type: expected compute, graphics or both");
  }
  proc.is_compute = type != "graphics";
  proc.is_graphics = type != "compute";
  proc.gpu_instance_id = Opt<unsigned>(p, "gpu_instance_id").value_or(NVML_VALUE_NOT_AVAILABLE_U32);
  proc.compute_instance_id =
      Opt<unsigned>(p, "compute_instance_id").value_or(NVML_VALUE_NOT_AVAILABLE_U32);
  proc.sm_util = Opt<unsigned>(p, "sm_util");
  proc.mem_util = Opt<unsigned>(p, "mem_util");
  return proc;
}

Gpu ParseGpu(const json& g, size_t gpu_count) {
  if (!g.is_object()) throw std::runtime_error("expected an object");
  Gpu gpu;
  gpu.uuid = Required<std::string>(g, "uuid");
  gpu.name = Opt<std::string>(g, "name");
  gpu.serial = Opt<std::string>(g, "serial");
  gpu.minor_number = Opt<unsigned>(g, "minor_number");
  if (const json* p = Section(g, "pci")) {
    Pci pci;
    pci.domain = Opt<unsigned>(*p, "domain").value_or(0);
    pci.bus = Required<unsigned>(*p, "bus");
    pci.device = Opt<unsigned>(*p, "device").value_or(0);
    pci.device_id = Required<unsigned>(*p, "device_id");
    pci.subsystem_id = Opt<unsigned>(*p, "subsystem_id").value_or(0);
    pci.subsystem_vendor_id = Opt<unsigned>(*p, "subsystem_vendor_id").value_or(0x10DE);
    gpu.pci = pci;
  }
  if (const json* m = Section(g, "memory")) {
    Memory mem{Required<uint64_t>(*m, "total"), Opt<uint64_t>(*m, "reserved").value_or(0),
               Required<uint64_t>(*m, "used")};
    if (mem.reserved + mem.used > mem.total)
      throw std::runtime_error("memory: reserved + used > total");
    gpu.memory = mem;
  }
  if (const json* u = Section(g, "utilization")) {
    gpu.utilization =
        nvmlUtilization_t{Required<unsigned>(*u, "gpu"), Required<unsigned>(*u, "memory")};
  }
  gpu.temperature = Opt<unsigned>(g, "temperature");
  gpu.power_usage_mw = Opt<unsigned>(g, "power_usage_mw");
  gpu.power_limit_mw = Opt<unsigned>(g, "power_limit_mw");
  gpu.fan = Opt<unsigned>(g, "fan");
  if (const json* c = Section(g, "clocks")) {
    gpu.clock_sm = Opt<unsigned>(*c, "sm");
    gpu.clock_sm_max = Opt<unsigned>(*c, "sm_max");
    gpu.clock_mem = Opt<unsigned>(*c, "mem");
    gpu.clock_mem_max = Opt<unsigned>(*c, "mem_max");
  }
  gpu.pstate = Opt<int>(g, "pstate");
  if (auto cc = Opt<std::vector<int>>(g, "compute_capability")) {
    if (cc->size() != 2) throw std::runtime_error("compute_capability: expected [major, minor]");
    gpu.compute_capability = std::pair((*cc)[0], (*cc)[1]);
  }
  gpu.compute_mode = Opt<int>(g, "compute_mode");
  gpu.persistence_mode = Opt<int>(g, "persistence_mode");
  if (const json* m = Section(g, "mig_mode")) {
    gpu.mig_mode =
        std::pair(Required<unsigned>(*m, "current"), Opt<unsigned>(*m, "pending").value_or(0));
  }
  if (const json* e = Section(g, "ecc")) {
    gpu.ecc[NVML_MEMORY_ERROR_TYPE_CORRECTED][NVML_VOLATILE_ECC] =
        Opt<unsigned long long>(*e, "volatile_corrected");
    gpu.ecc[NVML_MEMORY_ERROR_TYPE_UNCORRECTED][NVML_VOLATILE_ECC] =
        Opt<unsigned long long>(*e, "volatile_uncorrected");
    gpu.ecc[NVML_MEMORY_ERROR_TYPE_CORRECTED][NVML_AGGREGATE_ECC] =
        Opt<unsigned long long>(*e, "aggregate_corrected");
    gpu.ecc[NVML_MEMORY_ERROR_TYPE_UNCORRECTED][NVML_AGGREGATE_ECC] =
        Opt<unsigned long long>(*e, "aggregate_uncorrected");
  }
  gpu.retired_pages_pending = Opt<int>(g, "retired_pages_pending");
  if (const json* r = Section(g, "remapped_rows")) {
    gpu.remapped_rows = RemappedRows{
        Opt<unsigned>(*r, "corrected").value_or(0), Opt<unsigned>(*r, "uncorrected").value_or(0),
        Opt<unsigned>(*r, "pending").value_or(0), Opt<unsigned>(*r, "failure").value_or(0)};
  }
  gpu.clock_event_reasons = Opt<unsigned long long>(g, "clock_event_reasons");
  if (auto cpus = Opt<std::string>(g, "cpu_affinity")) gpu.cpu_affinity = ParseCpuList(*cpus);
  gpu.numa_node = Opt<unsigned>(g, "numa_node");
  if (const json* t = Section(g, "topology")) {
    gpu.pci_switch = Opt<std::string>(*t, "pci_switch");
    gpu.host_bridge = Opt<std::string>(*t, "host_bridge");
  }
  if (const json* links = Section(g, "nvlinks", /*array=*/true)) {
    gpu.nvlinks.emplace();
    for (const json& l : *links) {
      unsigned link = Required<unsigned>(l, "link"), peer = Required<unsigned>(l, "peer");
      if (link >= NVML_NVLINK_MAX_LINKS) throw std::runtime_error("nvlinks: link index >= 18");
      if (peer >= gpu_count) throw std::runtime_error("nvlinks: peer is not a GPU index");
      gpu.nvlinks->emplace_back(link, peer);
    }
  }
  if (const json* procs = Section(g, "processes", /*array=*/true)) {
    for (const json& p : *procs) gpu.processes.push_back(ParseProcess(p));
  }
  if (const json* xids = Section(g, "xid_events", /*array=*/true)) {
    for (const json& x : *xids) {
      if (!x.is_number_unsigned()) throw std::runtime_error("xid_events: expected Xid numbers");
      gpu.xid_events.push_back(x.get<unsigned long long>());
    }
  }
  gpu.events_supported = Opt<bool>(g, "events_supported").value_or(true);
  gpu.is_lost = Opt<bool>(g, "lost").value_or(false);
  gpu.errors = ParseErrorRules(g);
  return gpu;
}

Scenario ParseScenario(const json& root) {
  if (!root.is_object()) throw std::runtime_error("expected a JSON object at top level");
  Scenario s;
  if (const json* d = Section(root, "driver")) {
    s.driver_version = Opt<std::string>(*d, "driver_version");
    s.nvml_version = Opt<std::string>(*d, "nvml_version");
    s.cuda_driver_version = Opt<int>(*d, "cuda_driver_version");
  }
  s.errors = ParseErrorRules(root);
  const json* gpus = Section(root, "gpus", /*array=*/true);
  if (gpus && gpus->size() > kMaxGpus) throw std::runtime_error("gpus: more than 64");
  for (size_t i = 0; gpus && i < gpus->size(); ++i) {
    try {
      s.gpus.push_back(ParseGpu((*gpus)[i], gpus->size()));
    } catch (const std::exception& e) {
      throw std::runtime_error("gpus[" + std::to_string(i) + "]: " + e.what());
    }
  }
  return s;
}

// Identity of the scenario file as last seen; any difference triggers a reload.
struct FileId {
  dev_t dev = 0;
  ino_t ino = 0;
  off_t size = -1;
  int64_t mtime_ns = -1;
  bool operator==(const FileId&) const = default;
};

std::optional<FileId> StatFile(const std::string& path, std::string* error) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    *error = std::strerror(errno);
    return std::nullopt;
  }
  return FileId{st.st_dev, st.st_ino, st.st_size,
                int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec};
}

std::optional<Scenario> LoadScenario(const std::string& path, std::string* error) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) {
    *error = std::strerror(errno);
    return std::nullopt;
  }
  std::string text;
  char buf[8192];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, n);
  std::fclose(f);
  try {
    return ParseScenario(json::parse(text));
  } catch (const std::exception& e) {
    *error = e.what();
    return std::nullopt;
  }
}

// The GPU behind a handle, or nullptr for a handle that is not one of ours or whose
// index the scenario does not have.
const Gpu* LookupIn(const Scenario& scenario, nvmlDevice_t device) {
  std::less<const nvmlDevice_st*> before;
  if (!device || before(device, kSlots.data()) || !before(device, kSlots.data() + kMaxGpus)) {
    return nullptr;
  }
  auto index = static_cast<size_t>(device - kSlots.data());
  return index < scenario.gpus.size() ? &scenario.gpus[index] : nullptr;
}

// ---------------------------------------------------------------------------------------
// Process-wide state. NVML is a C API with process-wide state (init count, handles), so a
// stub needs exactly one instance of this; every field is guarded by `mu`.

class State {
 public:
  std::mutex mu;
  int init_count = 0;
  std::string path;   // scenario file, read from the environment when init_count was 0
  FileId file_id;     // of `path` when last (re)loaded or tried
  Scenario scenario;  // valid while init_count > 0
  std::map<std::string, unsigned long, std::less<>> call_counts;

  // Starts an exported call: counts it and picks up a changed scenario file. The file is
  // stat()ed on every enumeration call (count, handle, system queries), with which every
  // snapshot starts, and otherwise at most every 5 ms: a full snapshot of 8 GPUs makes
  // hundreds of calls, and one stat each made the simulator slower than the code under test.
  void Begin(const char* function) {
    ++call_counts[function];
    if (init_count == 0) return;
    std::string_view name(function);
    bool enumeration = name.find("GetCount") != std::string_view::npos ||
                       name.find("GetHandleBy") != std::string_view::npos ||
                       name.rfind("nvmlSystem", 0) == 0;
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
    int64_t now_ms = static_cast<int64_t>(now.tv_sec) * 1000 + now.tv_nsec / 1000000;
    if (enumeration || now_ms - last_check_ms_ >= 5) {
      last_check_ms_ = now_ms;
      ReloadIfChanged();
    }
  }

  // First nvmlInit*: reads the environment and loads the scenario.
  nvmlReturn_t LoadForInit() {
    const char* env = std::getenv(kScenarioEnv);
    if (!env || !*env) return NVML_ERROR_DRIVER_NOT_LOADED;
    path = env;
    std::string error;
    std::optional<FileId> id = StatFile(path, &error);
    std::optional<Scenario> loaded;
    if (id) loaded = LoadScenario(path, &error);
    if (!loaded) {
      Complain(error);
      return NVML_ERROR_UNKNOWN;
    }
    file_id = *id;
    scenario = std::move(*loaded);
    return NVML_SUCCESS;
  }

  const Gpu* Lookup(nvmlDevice_t device) const { return LookupIn(scenario, device); }

  // An injected error for `function`: the GPU's own rule first, then the top-level one.
  std::optional<nvmlReturn_t> Injected(std::string_view function, const Gpu* gpu) {
    if (gpu) {
      auto index = static_cast<long>(gpu - scenario.gpus.data());
      if (auto code = Fire(gpu->errors, function, index)) return code;
    }
    return Fire(scenario.errors, function, -1);
  }

  void ResetCounts() {
    call_counts.clear();
    fired_.clear();
  }

 private:
  struct Firing {
    ErrorRule rule;
    long count = 0;
  };
  // How often each `times`-limited rule fired, by (GPU index or -1, function). A rule
  // that changes on reload starts again from zero; an unchanged one keeps its count.
  std::map<std::pair<long, std::string>, Firing, std::less<>> fired_;
  int64_t last_check_ms_ = 0;  // when the scenario file was last stat()ed

  std::optional<nvmlReturn_t> Fire(const ErrorRules& rules, std::string_view function, long scope) {
    auto rule = rules.find(function);
    if (rule == rules.end()) return std::nullopt;
    Firing& f = fired_[{scope, std::string(function)}];
    if (!(f.rule == rule->second)) f = Firing{rule->second, 0};
    if (f.rule.times >= 0 && f.count >= f.rule.times) return std::nullopt;
    ++f.count;
    return f.rule.code;
  }

  void ReloadIfChanged() {
    std::string error;
    std::optional<FileId> id = StatFile(path, &error);
    if (!id || *id == file_id) return;  // a vanished file keeps the last state
    file_id = *id;
    if (std::optional<Scenario> loaded = LoadScenario(path, &error)) {
      scenario = std::move(*loaded);
    } else {
      Complain(error + " (keeping the previous scenario)");
    }
  }

  void Complain(const std::string& reason) const {
    std::fprintf(stderr, "fake-nvml: %s: %s\n", path.c_str(), reason.c_str());
  }
};

State& TheState() {
  // Leaked on purpose: other libraries' static destructors may still call nvmlShutdown.
  static State* const state = new State;
  return *state;
}

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

nvmlReturn_t NvLinkRemotePci(const char* function, nvmlDevice_t device, unsigned link,
                             nvmlPciInfo_t* pci) {
  return DeviceCall(function, device, [&](const Gpu& gpu, const Scenario& s) -> nvmlReturn_t {
    if (!pci || link >= NVML_NVLINK_MAX_LINKS) return NVML_ERROR_INVALID_ARGUMENT;
    if (!gpu.nvlinks) return NVML_ERROR_NOT_SUPPORTED;
    for (const auto& [l, peer] : *gpu.nvlinks) {
      if (l == link) return PutPci(s.gpus[peer], pci);
    }
    return NVML_ERROR_NOT_SUPPORTED;  // an inactive link has no remote end
  });
}

// Memory and clock-event bodies shared by versioned names.
nvmlReturn_t MemoryV1(const char* function, nvmlDevice_t device, nvmlMemory_t* out) {
  return DeviceCall(function, device, [&](const Gpu& gpu) -> nvmlReturn_t {
    if (!out) return NVML_ERROR_INVALID_ARGUMENT;
    if (!gpu.memory) return NVML_ERROR_NOT_SUPPORTED;
    const Memory& m = *gpu.memory;
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
  return DeviceCall(__func__, device, [&](const Gpu& g) {
    return PutString(std::optional<std::string>(g.uuid), uuid, length);
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
  return DeviceCall(__func__, device, [&](const Gpu& gpu) -> nvmlReturn_t {
    if (!memory) return NVML_ERROR_INVALID_ARGUMENT;
    if (memory->version != nvmlMemory_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    if (!gpu.memory) return NVML_ERROR_NOT_SUPPORTED;
    const Memory& m = *gpu.memory;
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
    bool active = std::any_of(g.nvlinks->begin(), g.nvlinks->end(),
                              [&](const auto& l) { return l.first == link; });
    *is_active = active ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    return NVML_SUCCESS;
  });
}
FAKE_NVML_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo(nvmlDevice_t device,
                                                               unsigned int link,
                                                               nvmlPciInfo_t* pci) {
  return NvLinkRemotePci(__func__, device, link, pci);
}
#if !FAKE_NVML_LEGACY
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
  while (true) {
    {
      std::lock_guard<std::mutex> lock(s.mu);
      s.Begin(function);
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
    timespec step{0, 10 * 1000 * 1000};
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
