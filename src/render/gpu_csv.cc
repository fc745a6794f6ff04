// The field table of `status --format csv` and its rendering (render/gpu_csv.h).
//
// nvidia-smi's fields keep its names, header cells, units and value forms, so that a
// script written against `nvidia-smi --query-gpu=... --format=csv` reads gpuman's lines
// unchanged: memory in whole MiB, power with two decimals, "Enabled"/"Disabled", "P0",
// "[N/A]" for what the driver did not say. gpuman's fields (gpuman.*) say who holds a GPU
// the way `status` does: a lease (or a queue job through its lease), else the users of the
// processes on it (model::AttributeHolder, the rule the history records too).
#include "render/gpu_csv.h"

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "base/strings.h"
#include "model/history.h"
#include "render/format.h"

namespace gpuman::render {
namespace {

using Value = std::optional<std::string>;

constexpr std::string_view kNotAvailable = "[N/A]";
constexpr int64_t kMiB = int64_t{1} << 20;

Value Text(const std::optional<std::string>& v) { return v; }

template <typename T>
Value Number(const std::optional<T>& v) {
  if (!v) return std::nullopt;
  return std::to_string(*v);
}

// Whole MiB, rounded down, as nvidia-smi prints them.
Value Mib(const std::optional<int64_t>& bytes) {
  if (!bytes) return std::nullopt;
  return std::to_string(*bytes / kMiB);
}

Value Watts(const std::optional<double>& w) {
  if (!w) return std::nullopt;
  return fmt::format("{:.2f}", *w);
}

Value Enabled(const std::optional<bool>& v) {
  if (!v) return std::nullopt;
  return std::string(*v ? "Enabled" : "Disabled");
}

// "exclusive_process" -> "Exclusive_Process", nvidia-smi's spelling.
Value ComputeMode(const std::optional<std::string>& mode) {
  if (!mode) return std::nullopt;
  std::string out = *mode;
  bool word_start = true;
  for (char& c : out) {
    if (word_start && c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    word_start = c == '_';
  }
  return out;
}

// "2026/12/04 10:40:55.123": nvidia-smi's form, in UTC (nvidia-smi uses local time).
Value Timestamp(int64_t unix_ms) {
  std::string iso = FormatIsoUtcMillis(unix_ms);  // "2026-12-04T10:40:55.123Z"
  std::replace(iso.begin(), iso.end(), '-', '/');
  std::replace(iso.begin(), iso.end(), 'T', ' ');
  if (!iso.empty() && iso.back() == 'Z') iso.pop_back();
  return iso;
}

// What the gpuman.* fields say when the leases could not be read: unknown, not "free".
Value Holder(const GpuCsvRow& r) {
  if (!r.opts.leases) return std::nullopt;
  const model::HolderAttribution holder = model::AttributeHolder(r.gpu, *r.opts.leases, {});
  if (holder.kind == model::HolderKind::kFree && !r.opts.show_processes) return std::nullopt;
  if (holder.holders.empty()) return holder.user;
  std::vector<std::string> users;  // several users outside gpuman: every one, by name
  for (const model::HolderShare& share : holder.holders) users.push_back(share.user);
  return Join(users, ";");
}

Value LeaseId(const GpuCsvRow& r) {
  if (!r.opts.leases) return std::nullopt;
  return r.lease ? std::to_string(r.lease->id) : std::string();
}

Value JobId(const GpuCsvRow& r) {
  if (!r.opts.leases) return std::nullopt;
  return r.job_id ? model::FormatJobRef(*r.job_id) : std::string();
}

Value Drained(const GpuCsvRow& r) {
  const bool drained = r.gpu.uuid && std::any_of(r.opts.drains.begin(), r.opts.drains.end(),
                                                 [&](const model::GpuDrain& d) { return d.uuid == *r.gpu.uuid; });
  return std::string(drained ? "yes" : "no");
}

constexpr GpuCsvField kFields[] = {
    // name, aliases, header, unit, meaning, value
    {"index", "", "index", "", "NVML index (PCI order)",
     [](const GpuCsvRow& r) -> Value { return std::to_string(r.gpu.index); }},
    {"uuid", "gpu_uuid", "uuid", "", "the GPU's UUID", [](const GpuCsvRow& r) { return Text(r.gpu.uuid); }},
    {"name", "gpu_name", "name", "", "product name", [](const GpuCsvRow& r) { return Text(r.gpu.name); }},
    {"pci.bus_id", "gpu_bus_id", "pci.bus_id", "", "PCI address, NVML form (00000000:07:00.0)",
     [](const GpuCsvRow& r) { return Text(r.gpu.pci_bus_id); }},
    {"serial", "gpu_serial", "serial", "", "board serial number",
     [](const GpuCsvRow& r) { return Text(r.gpu.serial); }},
    {"memory.total", "", "memory.total", "MiB", "total GPU memory",
     [](const GpuCsvRow& r) { return Mib(r.gpu.memory_total_bytes); }},
    {"memory.used", "", "memory.used", "MiB", "memory in use",
     [](const GpuCsvRow& r) { return Mib(r.gpu.memory_used_bytes); }},
    {"memory.free", "", "memory.free", "MiB", "memory free",
     [](const GpuCsvRow& r) { return Mib(r.gpu.memory_free_bytes); }},
    {"memory.reserved", "", "memory.reserved", "MiB", "memory the driver reserves",
     [](const GpuCsvRow& r) { return Mib(r.gpu.memory_reserved_bytes); }},
    {"utilization.gpu", "", "utilization.gpu", "%", "time a kernel ran, last sample period",
     [](const GpuCsvRow& r) { return Number(r.gpu.gpu_utilization_percent); }},
    {"utilization.memory", "", "utilization.memory", "%", "time memory was read or written, last sample period",
     [](const GpuCsvRow& r) { return Number(r.gpu.memory_utilization_percent); }},
    {"temperature.gpu", "", "temperature.gpu", "", "core temperature, degrees C (no unit, as nvidia-smi)",
     [](const GpuCsvRow& r) { return Number(r.gpu.temperature_c); }},
    {"power.draw", "", "power.draw", "W", "power draw",
     [](const GpuCsvRow& r) { return Watts(r.gpu.power_usage_w); }},
    {"power.limit", "", "power.limit", "W", "enforced power limit",
     [](const GpuCsvRow& r) { return Watts(r.gpu.power_limit_w); }},
    {"fan.speed", "", "fan.speed", "%", "fan speed",
     [](const GpuCsvRow& r) { return Number(r.gpu.fan_percent); }},
    {"pstate", "", "pstate", "", "performance state, P0 (most) to P15",
     [](const GpuCsvRow& r) -> Value {
       if (!r.gpu.performance_state) return std::nullopt;
       return "P" + std::to_string(*r.gpu.performance_state);
     }},
    {"compute_cap", "", "compute_cap", "", "CUDA compute capability (8.0)",
     [](const GpuCsvRow& r) { return Text(r.gpu.compute_capability); }},
    {"driver_version", "", "driver_version", "", "driver version",
     [](const GpuCsvRow& r) { return Text(r.snap.system.driver_version); }},
    {"clocks.sm", "clocks.current.sm", "clocks.current.sm", "MHz", "SM clock now",
     [](const GpuCsvRow& r) { return Number(r.gpu.clocks.sm_mhz); }},
    {"clocks.max.sm", "", "clocks.max.sm", "MHz", "highest SM clock",
     [](const GpuCsvRow& r) { return Number(r.gpu.clocks.sm_max_mhz); }},
    {"clocks.mem", "clocks.current.memory", "clocks.current.memory", "MHz", "memory clock now",
     [](const GpuCsvRow& r) { return Number(r.gpu.clocks.memory_mhz); }},
    {"clocks.max.mem", "clocks.max.memory", "clocks.max.memory", "MHz", "highest memory clock",
     [](const GpuCsvRow& r) { return Number(r.gpu.clocks.memory_max_mhz); }},
    {"persistence_mode", "", "persistence_mode", "", "Enabled or Disabled",
     [](const GpuCsvRow& r) { return Enabled(r.gpu.persistence_mode); }},
    {"compute_mode", "", "compute_mode", "", "Default, Exclusive_Thread, Prohibited or Exclusive_Process",
     [](const GpuCsvRow& r) { return ComputeMode(r.gpu.compute_mode); }},
    {"mig.mode.current", "", "mig.mode.current", "", "MIG mode now: Enabled or Disabled",
     [](const GpuCsvRow& r) { return Enabled(r.gpu.mig_mode_current); }},
    {"mig.mode.pending", "", "mig.mode.pending", "", "MIG mode after the next reset",
     [](const GpuCsvRow& r) { return Enabled(r.gpu.mig_mode_pending); }},
    {"ecc.errors.corrected.volatile.total", "", "ecc.errors.corrected.volatile.total", "",
     "corrected ECC errors since boot", [](const GpuCsvRow& r) { return Number(r.gpu.ecc_volatile_corrected); }},
    {"ecc.errors.uncorrected.volatile.total", "", "ecc.errors.uncorrected.volatile.total", "",
     "uncorrected ECC errors since boot", [](const GpuCsvRow& r) { return Number(r.gpu.ecc_volatile_uncorrected); }},
    {"ecc.errors.corrected.aggregate.total", "", "ecc.errors.corrected.aggregate.total", "",
     "corrected ECC errors, lifetime", [](const GpuCsvRow& r) { return Number(r.gpu.ecc_aggregate_corrected); }},
    {"ecc.errors.uncorrected.aggregate.total", "", "ecc.errors.uncorrected.aggregate.total", "",
     "uncorrected ECC errors, lifetime", [](const GpuCsvRow& r) { return Number(r.gpu.ecc_aggregate_uncorrected); }},
    {"timestamp", "", "timestamp", "",
     "when the sample was taken, UTC: 2026/12/04 10:40:55.123 (nvidia-smi: local time)",
     [](const GpuCsvRow& r) { return Timestamp(r.snap.taken_at_unix_ms); }},
    {"gpuman.holder", "", "gpuman.holder", "",
     "who holds it: the lease's (or job's) user, else the users of its processes, separated by `;`; "
     "empty when free",
     Holder},
    {"gpuman.lease", "", "gpuman.lease", "", "id of the lease holding it; empty when none", LeaseId},
    {"gpuman.job", "", "gpuman.job", "", "id of the queue job holding it; empty when none", JobId},
    {"gpuman.health", "", "gpuman.health", "", "ok or unhealthy (lost included; `status` says why)",
     [](const GpuCsvRow& r) -> Value { return std::string(r.gpu.is_healthy ? "ok" : "unhealthy"); }},
    {"gpuman.processes", "", "gpuman.processes", "", "number of processes on it",
     [](const GpuCsvRow& r) -> Value {
       if (!r.opts.show_processes) return std::nullopt;
       return std::to_string(r.gpu.processes.size());
     }},
    {"gpuman.drained", "", "gpuman.drained", "", "yes when drained (no new work), else no", Drained},
};

// Every name a field answers to: its own, then its aliases.
std::vector<std::string_view> NamesOf(const GpuCsvField& field) {
  std::vector<std::string_view> names = {field.name};
  std::string_view rest = field.aliases;
  while (!rest.empty()) {
    const size_t space = rest.find(' ');
    if (space != 0) names.push_back(rest.substr(0, space));
    if (space == std::string_view::npos) break;
    rest.remove_prefix(space + 1);
  }
  return names;
}

// The field a mistyped name most likely meant: a small edit away, or a whole part of a
// dotted name ("holder" -> gpuman.holder, "temperature" -> temperature.gpu).
const GpuCsvField* Closest(const std::string& typed) {
  const GpuCsvField* best = nullptr;
  size_t best_distance = typed.size() >= 6 ? 3 : 2;  // what counts as close, plus one
  for (const GpuCsvField& field : kFields) {
    for (std::string_view name : NamesOf(field)) {
      size_t d = EditDistance(typed, name);
      if (name.starts_with(typed + ".") || name.ends_with("." + typed)) d = std::min<size_t>(d, 1);
      if (d < best_distance) {
        best_distance = d;
        best = &field;
      }
    }
  }
  return best;
}

const GpuCsvField* Find(const std::string& lowered) {
  for (const GpuCsvField& field : kFields) {
    for (std::string_view name : NamesOf(field)) {
      if (name == lowered) return &field;
    }
  }
  return nullptr;
}

// The lease naming this GPU, the newest when several do (model::AttributeHolder's choice).
const model::Lease* LeaseOf(const model::DeviceSnapshot& gpu, const StatusOptions& opts) {
  if (!opts.leases || !gpu.uuid) return nullptr;
  const model::Lease* found = nullptr;
  for (const model::Lease& lease : *opts.leases) {
    if (std::find(lease.gpu_uuids.begin(), lease.gpu_uuids.end(), *gpu.uuid) == lease.gpu_uuids.end()) continue;
    if (!found || lease.id > found->id) found = &lease;
  }
  return found;
}

}  // namespace

std::span<const GpuCsvField> GpuCsvFields() { return kFields; }

Result<std::vector<const GpuCsvField*>> ParseGpuCsvFields(std::string_view list) {
  std::vector<const GpuCsvField*> fields;
  if (Trim(list).empty()) return MakeError(ErrorCode::kInvalidArgument, "no GPU fields given (e.g. index,memory.used)");
  for (const std::string& item : Split(list, ',')) {
    const std::string name = ToLower(Trim(item));
    if (name.empty()) {
      return MakeError(ErrorCode::kInvalidArgument, "empty GPU field name in '" + EscapeControl(list) + "'");
    }
    if (const GpuCsvField* field = Find(name)) {
      fields.push_back(field);
      continue;
    }
    std::string message = "unknown GPU field '" + EscapeControl(Trim(item)) + "'";
    if (const GpuCsvField* close = Closest(name)) {
      message += " (did you mean '" + std::string(close->name) + "'?)";
    } else {
      std::vector<std::string> names;
      for (const GpuCsvField& field : kFields) names.emplace_back(field.name);
      message += " (fields: " + Join(names, ", ") + ")";
    }
    return MakeError(ErrorCode::kInvalidArgument, std::move(message));
  }
  return fields;
}

std::string RenderGpuCsvHeader(std::span<const GpuCsvField* const> fields, const GpuCsvOptions& csv) {
  if (!csv.header) return "";
  std::string line;
  for (const GpuCsvField* field : fields) {
    if (!line.empty()) line += ", ";
    line += field->header;
    if (csv.units && !field->unit.empty()) line += " [" + std::string(field->unit) + "]";
  }
  return line + "\n";
}

std::string RenderGpuCsvRows(const model::MachineSnapshot& snap, const StatusOptions& opts,
                             std::span<const GpuCsvField* const> fields, const GpuCsvOptions& csv) {
  std::string out;
  for (const model::DeviceSnapshot& gpu : snap.gpus) {
    GpuCsvRow row{snap, gpu, opts, LeaseOf(gpu, opts), std::nullopt};
    if (row.lease) {
      if (auto job = csv.lease_jobs.find(row.lease->id); job != csv.lease_jobs.end()) row.job_id = job->second;
    }
    bool first = true;
    for (const GpuCsvField* field : fields) {
      if (!first) out += ", ";
      first = false;
      const Value value = field->value(row);
      if (!value) {
        out += kNotAvailable;
        continue;
      }
      out += EscapeControl(*value);
      if (csv.units && !field->unit.empty()) out += " " + std::string(field->unit);
    }
    out += '\n';
  }
  return out;
}

}  // namespace gpuman::render
