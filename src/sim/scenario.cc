// Reading a scenario file (format: docs/scenarios.md).
#include "sim/scenario.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string_view>
#include <type_traits>

#include "base/posix_error.h"  // header-only use: this library links nothing of gpuman

namespace gpuman::sim {
namespace {

using json = nlohmann::json;

constexpr unsigned kMaxCpus = 4096;

// ---------------------------------------------------------------------------------------
// Parsing. Unknown keys are ignored; a wrong type or bad value throws std::exception with
// a message naming the field, which becomes "fake-nvml: <path>: <reason>".

// The member `key` of `obj`, or nullptr when absent or null.
const json* Member(const json& obj, const char* key) {
  auto it = obj.find(key);
  return (it == obj.end() || it->is_null()) ? nullptr : &*it;
}

// `v` as T. An integer field takes only a whole number within T's range (JSON numbers
// such as 1e50 or 2.0 arrive as floating point); anything else would be undefined or
// wrap when converted.
template <typename T>
T Convert(const json& v) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    if (v.is_number()) {
      constexpr bool kSigned = std::numeric_limits<T>::is_signed;
      const std::string range = "a whole number from " +
                                std::to_string(std::numeric_limits<T>::min()) + " to " +
                                std::to_string(std::numeric_limits<T>::max());
      if (v.is_number_float()) {
        double d = v.get<double>();
        // [lo, hi) in doubles: both bounds are powers of two, so exact.
        double hi = std::ldexp(1.0, std::numeric_limits<T>::digits);
        double lo = kSigned ? -hi : 0.0;
        if (!std::isfinite(d) || d != std::trunc(d) || d < lo || d >= hi)
          throw std::runtime_error(v.dump() + " is not " + range);
        return static_cast<T>(d);
      }
      if (v.is_number_unsigned()) {
        uint64_t u = v.get<uint64_t>();
        if (u > static_cast<uint64_t>(std::numeric_limits<T>::max()))
          throw std::runtime_error(v.dump() + " is not " + range);
        return static_cast<T>(u);
      }
      int64_t i = v.get<int64_t>();
      if (i < 0 ? !kSigned || i < static_cast<int64_t>(std::numeric_limits<T>::min())
                : static_cast<uint64_t>(i) > static_cast<uint64_t>(std::numeric_limits<T>::max()))
        throw std::runtime_error(v.dump() + " is not " + range);
      return static_cast<T>(i);
    }
  } else if constexpr (requires { typename T::value_type; } &&
                       !std::is_same_v<T, std::string>) {
    if (v.is_array()) {  // std::vector<integer>: each element checked
      T out;
      for (size_t i = 0; i < v.size(); ++i) {
        try {
          out.push_back(Convert<typename T::value_type>(v[i]));
        } catch (const std::exception& e) {
          throw std::runtime_error("[" + std::to_string(i) + "]: " + e.what());
        }
      }
      return out;
    }
  }
  return v.get<T>();  // wrong JSON type: nlohmann's type_error
}

template <typename T>
std::optional<T> Opt(const json& obj, const char* key) {
  const json* v = Member(obj, key);
  if (!v) return std::nullopt;
  try {
    return Convert<T>(*v);
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string(key) + ": " + e.what());
  }
}

// Runs `parse` on a section, prefixing its errors with the section's name ("pci.bus: ...").
template <typename F>
auto In(const std::string& section, F&& parse) {
  try {
    return parse();
  } catch (const std::exception& e) {
    throw std::runtime_error(section + "." + e.what());
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
  if (code->is_number()) {
    rule.code = Convert<int>(*code);
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
  if (const json* p = Section(g, "pci")) In("pci", [&] {
    Pci pci;
    pci.domain = Opt<unsigned>(*p, "domain").value_or(0);
    pci.bus = Required<unsigned>(*p, "bus");
    pci.device = Opt<unsigned>(*p, "device").value_or(0);
    pci.device_id = Required<unsigned>(*p, "device_id");
    pci.subsystem_id = Opt<unsigned>(*p, "subsystem_id").value_or(0);
    pci.subsystem_vendor_id = Opt<unsigned>(*p, "subsystem_vendor_id").value_or(0x10DE);
    gpu.pci = pci;
  });
  if (const json* m = Section(g, "memory")) {
    Memory mem = In("memory", [&] {
      return Memory{Required<uint64_t>(*m, "total"), Opt<uint64_t>(*m, "reserved").value_or(0),
                    Required<uint64_t>(*m, "used")};
    });
    if (mem.reserved > mem.total || mem.used > mem.total - mem.reserved)
      throw std::runtime_error("memory: reserved + used > total");
    gpu.memory = mem;
  }
  if (const json* u = Section(g, "utilization")) In("utilization", [&] {
    gpu.utilization =
        nvmlUtilization_t{Required<unsigned>(*u, "gpu"), Required<unsigned>(*u, "memory")};
  });
  gpu.temperature = Opt<unsigned>(g, "temperature");
  gpu.power_usage_mw = Opt<unsigned>(g, "power_usage_mw");
  gpu.power_limit_mw = Opt<unsigned>(g, "power_limit_mw");
  gpu.fan = Opt<unsigned>(g, "fan");
  if (const json* c = Section(g, "clocks")) In("clocks", [&] {
    gpu.clock_sm = Opt<unsigned>(*c, "sm");
    gpu.clock_sm_max = Opt<unsigned>(*c, "sm_max");
    gpu.clock_mem = Opt<unsigned>(*c, "mem");
    gpu.clock_mem_max = Opt<unsigned>(*c, "mem_max");
  });
  gpu.pstate = Opt<int>(g, "pstate");
  if (auto cc = Opt<std::vector<int>>(g, "compute_capability")) {
    if (cc->size() != 2) throw std::runtime_error("compute_capability: expected [major, minor]");
    gpu.compute_capability = std::pair((*cc)[0], (*cc)[1]);
  }
  gpu.cuda_cores = Opt<unsigned>(g, "cuda_cores");
  if (const json* fb = Section(g, "fabric")) In("fabric", [&] {
    gpu.fabric = std::pair(Required<unsigned>(*fb, "state"), Opt<int>(*fb, "status").value_or(0));
  });
  gpu.memory_bus_width = Opt<unsigned>(g, "memory_bus_width");
  gpu.compute_mode = Opt<int>(g, "compute_mode");
  gpu.persistence_mode = Opt<int>(g, "persistence_mode");
  if (const json* m = Section(g, "mig_mode")) In("mig_mode", [&] {
    gpu.mig_mode =
        std::pair(Required<unsigned>(*m, "current"), Opt<unsigned>(*m, "pending").value_or(0));
  });
  if (const json* e = Section(g, "ecc")) In("ecc", [&] {
    gpu.ecc[NVML_MEMORY_ERROR_TYPE_CORRECTED][NVML_VOLATILE_ECC] =
        Opt<unsigned long long>(*e, "volatile_corrected");
    gpu.ecc[NVML_MEMORY_ERROR_TYPE_UNCORRECTED][NVML_VOLATILE_ECC] =
        Opt<unsigned long long>(*e, "volatile_uncorrected");
    gpu.ecc[NVML_MEMORY_ERROR_TYPE_CORRECTED][NVML_AGGREGATE_ECC] =
        Opt<unsigned long long>(*e, "aggregate_corrected");
    gpu.ecc[NVML_MEMORY_ERROR_TYPE_UNCORRECTED][NVML_AGGREGATE_ECC] =
        Opt<unsigned long long>(*e, "aggregate_uncorrected");
  });
  gpu.retired_pages_pending = Opt<int>(g, "retired_pages_pending");
  if (const json* r = Section(g, "remapped_rows")) In("remapped_rows", [&] {
    gpu.remapped_rows = RemappedRows{
        Opt<unsigned>(*r, "corrected").value_or(0), Opt<unsigned>(*r, "uncorrected").value_or(0),
        Opt<unsigned>(*r, "pending").value_or(0), Opt<unsigned>(*r, "failure").value_or(0)};
  });
  gpu.clock_event_reasons = Opt<unsigned long long>(g, "clock_event_reasons");
  if (auto cpus = Opt<std::string>(g, "cpu_affinity")) gpu.cpu_affinity = ParseCpuList(*cpus);
  gpu.numa_node = Opt<unsigned>(g, "numa_node");
  if (const json* t = Section(g, "topology")) {
    gpu.pci_switch = Opt<std::string>(*t, "pci_switch");
    gpu.host_bridge = Opt<std::string>(*t, "host_bridge");
  }
  if (const json* links = Section(g, "nvlinks", /*array=*/true)) {
    gpu.nvlinks.emplace();
    for (size_t i = 0; i < links->size(); ++i) {
      const json& l = (*links)[i];
      const std::string where = "nvlinks[" + std::to_string(i) + "]";
      const bool to_switch = l.is_object() && l.contains("switch");
      if (l.is_object() && to_switch == l.contains("peer")) {
        throw std::runtime_error(where + ": expected one of peer or switch");
      }
      NvLink nvlink = In(where, [&] {
        return NvLink{Required<unsigned>(l, "link"),
                      to_switch ? Required<unsigned>(l, "switch") : Required<unsigned>(l, "peer"), to_switch};
      });
      if (nvlink.link >= NVML_NVLINK_MAX_LINKS) throw std::runtime_error("nvlinks: link index >= 18");
      if (!nvlink.to_switch && nvlink.target >= gpu_count) throw std::runtime_error("nvlinks: peer is not a GPU index");
      if (nvlink.to_switch && nvlink.target >= kMaxNvSwitches) {
        throw std::runtime_error("nvlinks: switch number >= " + std::to_string(kMaxNvSwitches));
      }
      for (const NvLink& other : *gpu.nvlinks) {
        if (other.link == nvlink.link) {
          throw std::runtime_error("nvlinks: link " + std::to_string(nvlink.link) + " twice");
        }
      }
      gpu.nvlinks->push_back(nvlink);
    }
  }
  if (const json* procs = Section(g, "processes", /*array=*/true)) {
    for (size_t i = 0; i < procs->size(); ++i) {
      gpu.processes.push_back(
          In("processes[" + std::to_string(i) + "]", [&] { return ParseProcess((*procs)[i]); }));
    }
  }
  gpu.max_mig_devices = Opt<unsigned>(g, "max_mig_devices");
  if (gpu.max_mig_devices && *gpu.max_mig_devices > kMaxMigDevices) {
    throw std::runtime_error("max_mig_devices: more than " + std::to_string(kMaxMigDevices));
  }
  if (const json* migs = Section(g, "mig_devices", /*array=*/true)) {
    if (!gpu.mig_mode || gpu.mig_mode->first != 1) throw std::runtime_error("mig_devices: needs mig_mode.current 1");
    const unsigned slots = gpu.max_mig_devices.value_or(7);
    for (size_t i = 0; i < migs->size(); ++i) {
      const json& m = (*migs)[i];
      gpu.mig_devices.push_back(In("mig_devices[" + std::to_string(i) + "]", [&] {
        if (!m.is_object()) throw std::runtime_error("expected an object");
        MigDevice mig;
        mig.index = Opt<unsigned>(m, "index").value_or(static_cast<unsigned>(i));
        mig.uuid = Required<std::string>(m, "uuid");
        mig.gpu_instance_id = Required<unsigned>(m, "gpu_instance_id");
        mig.compute_instance_id = Opt<unsigned>(m, "compute_instance_id").value_or(0);
        mig.attributes.gpuInstanceSliceCount = Required<unsigned>(m, "gpu_slices");
        mig.attributes.computeInstanceSliceCount =
            Opt<unsigned>(m, "compute_slices").value_or(mig.attributes.gpuInstanceSliceCount);
        mig.attributes.multiprocessorCount = Opt<unsigned>(m, "multiprocessors").value_or(0);
        mig.attributes.sharedCopyEngineCount = Opt<unsigned>(m, "copy_engines").value_or(0);
        mig.attributes.sharedDecoderCount = Opt<unsigned>(m, "decoders").value_or(0);
        mig.attributes.sharedJpegCount = Opt<unsigned>(m, "jpeg").value_or(0);
        mig.attributes.sharedOfaCount = Opt<unsigned>(m, "ofa").value_or(0);
        mig.attributes.memorySizeMB = Required<unsigned long long>(m, "memory_mib");
        mig.memory.total = mig.attributes.memorySizeMB << 20;
        mig.memory.used = Opt<uint64_t>(m, "memory_used").value_or(0);
        if (mig.memory.used > mig.memory.total) throw std::runtime_error("memory_used: more than memory_mib");
        if (mig.index >= slots) throw std::runtime_error("index: not below max_mig_devices (" + std::to_string(slots) + ")");
        if (!mig.uuid.starts_with("MIG-")) throw std::runtime_error("uuid: expected \"MIG-...\"");
        return mig;
      }));
      for (size_t j = 0; j + 1 < gpu.mig_devices.size(); ++j) {
        if (gpu.mig_devices[j].index == gpu.mig_devices.back().index) {
          throw std::runtime_error("mig_devices[" + std::to_string(i) + "]: index twice");
        }
      }
    }
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
  if (const json* d = Section(root, "driver")) In("driver", [&] {
    s.driver_version = Opt<std::string>(*d, "driver_version");
    s.nvml_version = Opt<std::string>(*d, "nvml_version");
    s.cuda_driver_version = Opt<int>(*d, "cuda_driver_version");
  });
  s.errors = ParseErrorRules(root);
  if (auto hp = root.find("host_processes"); hp != root.end()) s.host_processes_json = hp->dump();
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


}  // namespace

std::optional<FileId> StatFile(const std::string& path, std::string* error) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    *error = gpuman::ErrnoDescription(errno);
    return std::nullopt;
  }
  return FileId{st.st_dev, st.st_ino, st.st_size,
                int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec};
}

std::optional<Scenario> LoadScenario(const std::string& path, std::string* error) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) {
    *error = gpuman::ErrnoDescription(errno);
    return std::nullopt;
  }
  std::string text;
  char buf[8192];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, n);
  std::fclose(f);
  return ParseScenarioText(text, error);
}

std::optional<Scenario> ParseScenarioText(std::string_view text, std::string* error) {
  try {
    return ParseScenario(json::parse(text));
  } catch (const std::exception& e) {
    *error = e.what();
    return std::nullopt;
  }
}

}  // namespace gpuman::sim
