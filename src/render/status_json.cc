// StatusToJson: the `gpuman status --json` contract. Field names are read by scripts
// and automated checks; rename nothing, add freely, and keep docs/json.md in step.
#include <optional>
#include <string>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "render/format.h"
#include "render/status_view.h"

#include <algorithm>

namespace gpuman::render {
namespace {

using json = nlohmann::ordered_json;

// An empty optional becomes null: unknown must never read as 0 or false.
template <typename T>
json OrNull(const std::optional<T>& value) {
  return value ? json(*value) : json(nullptr);
}

// An object built member by member in the order given: appended to the ordered map
// directly, without the initializer-list form (which builds a two-element array per
// member and then copies it) or a search for an existing key. Keys are literals here, so
// none repeats. That form was most of building the status document (docs/design.md,
// "Start-up").
class Members {
 public:
  explicit Members(size_t expected) { object_.reserve(expected); }
  Members& Add(const char* key, json value) {
    object_.emplace_back(key, std::move(value));
    return *this;
  }
  json Take() { return json(std::move(object_)); }

 private:
  json::object_t object_;
};

json ProcessToJson(const model::GpuProcess& p) {
  return Members(11)
      .Add("pid", p.pid)
      .Add("user", OrNull(p.user))
      .Add("uid", OrNull(p.uid))
      .Add("command", OrNull(p.command))
      .Add("start_time", p.start_time_unix ? json(FormatIsoUtcSeconds(*p.start_time_unix)) : json(nullptr))
      .Add("in_pid_namespace", p.is_visible)
      .Add("used_memory_bytes", OrNull(p.used_memory_bytes))
      .Add("type", model::ProcessTypeName(p.type))
      .Add("gpu_instance_id", OrNull(p.gpu_instance_id))
      .Add("compute_instance_id", OrNull(p.compute_instance_id))
      .Add("sm_util_percent", OrNull(p.sm_util_percent))
      .Take();
}

json Strings(const std::vector<std::string>& list) {
  json::array_t out;
  out.reserve(list.size());
  for (const std::string& s : list) out.emplace_back(s);
  return json(std::move(out));
}

json GpuToJson(const model::DeviceSnapshot& d, const StatusOptions& opts) {
  json clock_reasons = nullptr;
  if (d.clock_event_reasons) {
    clock_reasons = Members(2)
                        .Add("mask", *d.clock_event_reasons)
                        .Add("active", Strings(model::ClockEventReasonNames(*d.clock_event_reasons)))
                        .Take();
  }
  json drain = nullptr;
  if (d.uuid) {
    for (const model::GpuDrain& g : opts.drains) {
      if (g.uuid != *d.uuid) continue;
      drain = Members(4)
                  .Add("reason", g.reason)
                  .Add("by", g.by_user)
                  .Add("by_uid", g.by_uid)
                  .Add("since_unix_ms", g.since_unix_ms)
                  .Take();
    }
  }
  Members gpu(40);
  gpu.Add("index", d.index)
      .Add("uuid", OrNull(d.uuid))
      .Add("name", OrNull(d.name))
      .Add("pci_bus_id", OrNull(d.pci_bus_id))
      .Add("serial", OrNull(d.serial))
      .Add("minor_number", OrNull(d.minor_number))
      .Add("memory", Members(4)
                         .Add("total_bytes", OrNull(d.memory_total_bytes))
                         .Add("used_bytes", OrNull(d.memory_used_bytes))
                         .Add("free_bytes", OrNull(d.memory_free_bytes))
                         .Add("reserved_bytes", OrNull(d.memory_reserved_bytes))
                         .Take())
      .Add("utilization", Members(2)
                              .Add("gpu_percent", OrNull(d.gpu_utilization_percent))
                              .Add("memory_percent", OrNull(d.memory_utilization_percent))
                              .Take())
      .Add("temperature_c", OrNull(d.temperature_c))
      .Add("power_usage_w", OrNull(d.power_usage_w))
      .Add("power_limit_w", OrNull(d.power_limit_w))
      .Add("fan_percent", OrNull(d.fan_percent))
      .Add("clocks", Members(4)
                         .Add("sm_mhz", OrNull(d.clocks.sm_mhz))
                         .Add("sm_max_mhz", OrNull(d.clocks.sm_max_mhz))
                         .Add("memory_mhz", OrNull(d.clocks.memory_mhz))
                         .Add("memory_max_mhz", OrNull(d.clocks.memory_max_mhz))
                         .Take())
      .Add("performance_state",
           d.performance_state ? json(fmt::format("P{}", *d.performance_state)) : json(nullptr))
      .Add("compute_capability", OrNull(d.compute_capability))
      .Add("compute_mode", OrNull(d.compute_mode))
      .Add("persistence_mode", OrNull(d.persistence_mode))
      .Add("mig_mode",
           Members(2).Add("current", OrNull(d.mig_mode_current)).Add("pending", OrNull(d.mig_mode_pending)).Take())
      .Add("ecc", Members(4)
                      .Add("volatile_corrected", OrNull(d.ecc_volatile_corrected))
                      .Add("volatile_uncorrected", OrNull(d.ecc_volatile_uncorrected))
                      .Add("aggregate_corrected", OrNull(d.ecc_aggregate_corrected))
                      .Add("aggregate_uncorrected", OrNull(d.ecc_aggregate_uncorrected))
                      .Take())
      .Add("retired_pages_pending", OrNull(d.retired_pages_pending))
      .Add("remapped_rows", Members(2)
                                .Add("pending", OrNull(d.remapped_rows_pending))
                                .Add("failure", OrNull(d.remapped_rows_failure))
                                .Take())
      .Add("clock_event_reasons", std::move(clock_reasons))
      .Add("cpu_affinity", d.cpu_affinity.empty() ? json(nullptr) : json(model::FormatCpuList(d.cpu_affinity)))
      .Add("numa_node", OrNull(d.numa_node))
      .Add("healthy", d.is_healthy)
      .Add("health_problems", Strings(d.health_problems))
      .Add("warnings", Strings(d.warnings))
      .Add("drain", std::move(drain));
  if (opts.allocation) {
    const auto& uuids = opts.allocation->uuids;
    gpu.Add("in_allocation", d.uuid && std::find(uuids.begin(), uuids.end(), *d.uuid) != uuids.end());
  }
  if (opts.leases) {
    json lease = nullptr;
    for (const model::Lease& l : *opts.leases) {
      if (!d.uuid || std::find(l.gpu_uuids.begin(), l.gpu_uuids.end(), *d.uuid) == l.gpu_uuids.end()) continue;
      lease = Members(6)
                  .Add("id", l.id)
                  .Add("user", l.user)
                  .Add("kind", l.kind)
                  .Add("command", l.command)
                  .Add("since_unix_ms", l.created_unix_ms)
                  .Add("idle_since_unix_ms", OrNull(l.idle_since_unix_ms))
                  .Take();
    }
    gpu.Add("lease", std::move(lease));
  }
  if (opts.show_processes) {
    json::array_t processes;
    processes.reserve(d.processes.size());
    for (const model::GpuProcess& p : d.processes) processes.push_back(ProcessToJson(p));
    gpu.Add("processes", json(std::move(processes)));
  }
  return gpu.Take();
}

}  // namespace

nlohmann::ordered_json StatusToJson(const model::MachineSnapshot& snap, const StatusOptions& opts) {
  json::array_t gpus;
  gpus.reserve(snap.gpus.size());
  for (const model::DeviceSnapshot& d : snap.gpus) gpus.push_back(GpuToJson(d, opts));
  Members out(13);  // the caller adds source, sampled_at_unix_ms and source_note
  out.Add("schema_version", 1)
      .Add("simulated", opts.simulated)
      .Add("driver_version", OrNull(snap.system.driver_version))
      .Add("nvml_version", OrNull(snap.system.nvml_version))
      .Add("cuda_driver_version", OrNull(snap.system.cuda_driver_version))
      .Add("timestamp", FormatIsoUtcMillis(snap.taken_at_unix_ms))
      .Add("timestamp_unix_ms", snap.taken_at_unix_ms)
      .Add("gpus", json(std::move(gpus)));
  if (opts.simulated) out.Add("scenario", opts.scenario);
  if (opts.allocation) {
    out.Add("allocation",
            Members(2).Add("source", opts.allocation->source).Add("uuids", Strings(opts.allocation->uuids)).Take());
  }
  return out.Take();
}

}  // namespace gpuman::render
