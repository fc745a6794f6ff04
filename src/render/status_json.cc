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

json ProcessToJson(const model::GpuProcess& p) {
  return json{
      {"pid", p.pid},
      {"user", OrNull(p.user)},
      {"uid", OrNull(p.uid)},
      {"command", OrNull(p.command)},
      {"start_time",
       p.start_time_unix ? json(FormatIsoUtcSeconds(*p.start_time_unix)) : json(nullptr)},
      {"in_pid_namespace", p.is_visible},
      {"used_memory_bytes", OrNull(p.used_memory_bytes)},
      {"type", model::ProcessTypeName(p.type)},
      {"gpu_instance_id", OrNull(p.gpu_instance_id)},
      {"compute_instance_id", OrNull(p.compute_instance_id)},
      {"sm_util_percent", OrNull(p.sm_util_percent)},
  };
}

json GpuToJson(const model::DeviceSnapshot& d, const StatusOptions& opts) {
  json clock_reasons = nullptr;
  if (d.clock_event_reasons) {
    clock_reasons = json{{"mask", *d.clock_event_reasons},
                         {"active", model::ClockEventReasonNames(*d.clock_event_reasons)}};
  }
  json gpu = {
      {"index", d.index},
      {"uuid", OrNull(d.uuid)},
      {"name", OrNull(d.name)},
      {"pci_bus_id", OrNull(d.pci_bus_id)},
      {"serial", OrNull(d.serial)},
      {"minor_number", OrNull(d.minor_number)},
      {"memory",
       {{"total_bytes", OrNull(d.memory_total_bytes)},
        {"used_bytes", OrNull(d.memory_used_bytes)},
        {"free_bytes", OrNull(d.memory_free_bytes)},
        {"reserved_bytes", OrNull(d.memory_reserved_bytes)}}},
      {"utilization",
       {{"gpu_percent", OrNull(d.gpu_utilization_percent)},
        {"memory_percent", OrNull(d.memory_utilization_percent)}}},
      {"temperature_c", OrNull(d.temperature_c)},
      {"power_usage_w", OrNull(d.power_usage_w)},
      {"power_limit_w", OrNull(d.power_limit_w)},
      {"fan_percent", OrNull(d.fan_percent)},
      {"clocks",
       {{"sm_mhz", OrNull(d.clocks.sm_mhz)},
        {"sm_max_mhz", OrNull(d.clocks.sm_max_mhz)},
        {"memory_mhz", OrNull(d.clocks.memory_mhz)},
        {"memory_max_mhz", OrNull(d.clocks.memory_max_mhz)}}},
      {"performance_state", d.performance_state
                                ? json(fmt::format("P{}", *d.performance_state))
                                : json(nullptr)},
      {"compute_capability", OrNull(d.compute_capability)},
      {"compute_mode", OrNull(d.compute_mode)},
      {"persistence_mode", OrNull(d.persistence_mode)},
      {"mig_mode",
       {{"current", OrNull(d.mig_mode_current)}, {"pending", OrNull(d.mig_mode_pending)}}},
      {"ecc",
       {{"volatile_corrected", OrNull(d.ecc_volatile_corrected)},
        {"volatile_uncorrected", OrNull(d.ecc_volatile_uncorrected)},
        {"aggregate_corrected", OrNull(d.ecc_aggregate_corrected)},
        {"aggregate_uncorrected", OrNull(d.ecc_aggregate_uncorrected)}}},
      {"retired_pages_pending", OrNull(d.retired_pages_pending)},
      {"remapped_rows",
       {{"pending", OrNull(d.remapped_rows_pending)},
        {"failure", OrNull(d.remapped_rows_failure)}}},
      {"clock_event_reasons", std::move(clock_reasons)},
      {"cpu_affinity",
       d.cpu_affinity.empty() ? json(nullptr) : json(model::FormatCpuList(d.cpu_affinity))},
      {"numa_node", OrNull(d.numa_node)},
      {"healthy", d.is_healthy},
      {"health_problems", d.health_problems},
      {"warnings", d.warnings},
      {"drain", nullptr},
  };
  if (d.uuid) {
    for (const model::GpuDrain& drain : opts.drains) {
      if (drain.uuid != *d.uuid) continue;
      gpu["drain"] = {{"reason", drain.reason},
                      {"by", drain.by_user},
                      {"by_uid", drain.by_uid},
                      {"since_unix_ms", drain.since_unix_ms}};
    }
  }
  if (opts.allocation) {
    const auto& uuids = opts.allocation->uuids;
    gpu["in_allocation"] = d.uuid && std::find(uuids.begin(), uuids.end(), *d.uuid) != uuids.end();
  }
  if (opts.leases) {
    json lease = nullptr;
    for (const model::Lease& l : *opts.leases) {
      if (!d.uuid || std::find(l.gpu_uuids.begin(), l.gpu_uuids.end(), *d.uuid) == l.gpu_uuids.end()) continue;
      lease = {{"id", l.id},
               {"user", l.user},
               {"kind", l.kind},
               {"command", l.command},
               {"since_unix_ms", l.created_unix_ms},
               {"idle_since_unix_ms", OrNull(l.idle_since_unix_ms)}};
    }
    gpu["lease"] = std::move(lease);
  }
  if (opts.show_processes) {
    json processes = json::array();
    for (const model::GpuProcess& p : d.processes) processes.push_back(ProcessToJson(p));
    gpu["processes"] = std::move(processes);
  }
  return gpu;
}

}  // namespace

nlohmann::ordered_json StatusToJson(const model::MachineSnapshot& snap, const StatusOptions& opts) {
  json gpus = json::array();
  for (const model::DeviceSnapshot& d : snap.gpus) gpus.push_back(GpuToJson(d, opts));
  json out = {
      {"schema_version", 1},
      {"simulated", opts.simulated},
      {"driver_version", OrNull(snap.system.driver_version)},
      {"nvml_version", OrNull(snap.system.nvml_version)},
      {"cuda_driver_version", OrNull(snap.system.cuda_driver_version)},
      {"timestamp", FormatIsoUtcMillis(snap.taken_at_unix_ms)},
      {"timestamp_unix_ms", snap.taken_at_unix_ms},
      {"gpus", std::move(gpus)},
  };
  if (opts.simulated) out["scenario"] = opts.scenario;
  if (opts.allocation) out["allocation"] = {{"source", opts.allocation->source}, {"uuids", opts.allocation->uuids}};
  return out;
}

}  // namespace gpuman::render
