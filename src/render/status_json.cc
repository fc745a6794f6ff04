// The `gpuman status --json` contract, written as text straight from the snapshot (no
// document in between: docs/design.md, "Start-up"). Field names are read by scripts and
// automated checks; rename nothing, add freely, and keep docs/json.md in step.
#include <algorithm>
#include <optional>
#include <string>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <cmath>

#include "model/capabilities.h"
#include "model/peak.h"
#include "model/intruders.h"
#include "render/format.h"
#include "render/json_text.h"
#include "render/status_view.h"

namespace gpuman::render {
namespace {

// An empty optional is written as null: unknown must never read as 0 or false.
void Put(JsonWriter& w, const std::optional<std::string>& v) { v ? w.String(*v) : w.Null(); }
void Put(JsonWriter& w, const std::optional<bool>& v) { v ? w.Bool(*v) : w.Null(); }
void Put(JsonWriter& w, const std::optional<double>& v) { v ? w.Double(*v) : w.Null(); }
void Put(JsonWriter& w, const std::optional<int>& v) { v ? w.Int(*v) : w.Null(); }
void Put(JsonWriter& w, const std::optional<int64_t>& v) { v ? w.Int(*v) : w.Null(); }
void Put(JsonWriter& w, const std::optional<uint32_t>& v) { v ? w.UInt(*v) : w.Null(); }

void Strings(JsonWriter& w, const std::vector<std::string>& list) {
  w.BeginArray();
  for (const std::string& s : list) w.String(s);
  w.EndArray();
}

// An MPS lease (docs/share.md "MPS"): "mps" and its --gpu-share ("gpu_share_percent",
// null without one) on every lease and slice object.
void WriteMps(JsonWriter& w, const model::Lease& l) {
  w.Key("mps").Bool(l.mps);
  Put(w.Key("gpu_share_percent"), l.gpu_share_percent);
}

// `intruded`: the lease it intrudes on (model/intruders.h); null when none or the leases
// are unknown.
void WriteProcess(JsonWriter& w, const model::GpuProcess& p, const model::Lease* intruded) {
  w.BeginObject();
  w.Key("pid").UInt(p.pid);
  Put(w.Key("user"), p.user);
  Put(w.Key("uid"), p.uid);
  Put(w.Key("command"), p.command);
  w.Key("start_time");
  p.start_time_unix ? w.String(FormatIsoUtcSeconds(*p.start_time_unix)) : w.Null();
  w.Key("in_pid_namespace").Bool(p.is_visible);
  Put(w.Key("used_memory_bytes"), p.used_memory_bytes);
  w.Key("type").String(model::ProcessTypeName(p.type));
  Put(w.Key("gpu_instance_id"), p.gpu_instance_id);
  Put(w.Key("compute_instance_id"), p.compute_instance_id);
  Put(w.Key("sm_util_percent"), p.sm_util_percent);
  w.Key("intrudes_on_lease");
  if (intruded) {
    w.BeginObject();
    w.Key("id").Int(intruded->id);
    w.Key("user").String(intruded->user);
    w.EndObject();
  } else {
    w.Null();
  }
  w.EndObject();
}

void WriteGpu(JsonWriter& w, const model::DeviceSnapshot& d, const StatusOptions& opts) {
  w.BeginObject();
  w.Key("index").Int(d.index);
  Put(w.Key("uuid"), d.uuid);
  Put(w.Key("name"), d.name);
  Put(w.Key("pci_bus_id"), d.pci_bus_id);
  Put(w.Key("serial"), d.serial);
  Put(w.Key("minor_number"), d.minor_number);
  w.Key("memory").BeginObject();
  Put(w.Key("total_bytes"), d.memory_total_bytes);
  Put(w.Key("used_bytes"), d.memory_used_bytes);
  Put(w.Key("free_bytes"), d.memory_free_bytes);
  Put(w.Key("reserved_bytes"), d.memory_reserved_bytes);
  w.EndObject();
  w.Key("utilization").BeginObject();
  Put(w.Key("gpu_percent"), d.gpu_utilization_percent);
  Put(w.Key("memory_percent"), d.memory_utilization_percent);
  w.EndObject();
  Put(w.Key("temperature_c"), d.temperature_c);
  Put(w.Key("power_usage_w"), d.power_usage_w);
  Put(w.Key("power_limit_w"), d.power_limit_w);
  Put(w.Key("fan_percent"), d.fan_percent);
  w.Key("clocks").BeginObject();
  Put(w.Key("sm_mhz"), d.clocks.sm_mhz);
  Put(w.Key("sm_max_mhz"), d.clocks.sm_max_mhz);
  Put(w.Key("memory_mhz"), d.clocks.memory_mhz);
  Put(w.Key("memory_max_mhz"), d.clocks.memory_max_mhz);
  w.EndObject();
  w.Key("performance_state");
  d.performance_state ? w.String(fmt::format("P{}", *d.performance_state)) : w.Null();
  Put(w.Key("compute_capability"), d.compute_capability);
  w.Key("capabilities");  // derived from the compute capability (model/capabilities.h)
  if (auto caps = d.compute_capability ? model::CapabilitiesOf(*d.compute_capability) : std::nullopt) {
    w.BeginObject();
    w.Key("tf32").Bool(caps->tf32);
    w.Key("bf16").Bool(caps->bf16);
    w.Key("fp8").Bool(caps->fp8);
    w.Key("fp4").Bool(caps->fp4);
    w.EndObject();
  } else {
    w.Null();
  }
  // Peak figures (model/peak.h; docs/selection.md "The fastest GPU"), to 0.1.
  w.Key("peak");
  if (const model::PeakFigures peak = model::PeakOf(d); peak.fp32_tflops || peak.memory_gbps) {
    auto tenth = [](const std::optional<double>& v) -> std::optional<double> {
      if (!v) return std::nullopt;
      return std::round(*v * 10) / 10;
    };
    w.BeginObject();
    Put(w.Key("sms"), peak.sms);
    Put(w.Key("fp32_tflops"), tenth(peak.fp32_tflops));
    Put(w.Key("tensor_tflops"), tenth(peak.tensor_tflops));
    Put(w.Key("memory_gbps"), tenth(peak.memory_gbps));
    w.EndObject();
  } else {
    w.Null();
  }
  Put(w.Key("compute_mode"), d.compute_mode);
  Put(w.Key("persistence_mode"), d.persistence_mode);
  w.Key("mig_mode").BeginObject();
  Put(w.Key("current"), d.mig_mode_current);
  Put(w.Key("pending"), d.mig_mode_pending);
  w.EndObject();
  w.Key("ecc").BeginObject();
  Put(w.Key("volatile_corrected"), d.ecc_volatile_corrected);
  Put(w.Key("volatile_uncorrected"), d.ecc_volatile_uncorrected);
  Put(w.Key("aggregate_corrected"), d.ecc_aggregate_corrected);
  Put(w.Key("aggregate_uncorrected"), d.ecc_aggregate_uncorrected);
  w.EndObject();
  Put(w.Key("retired_pages_pending"), d.retired_pages_pending);
  w.Key("remapped_rows").BeginObject();
  Put(w.Key("pending"), d.remapped_rows_pending);
  Put(w.Key("failure"), d.remapped_rows_failure);
  w.EndObject();
  w.Key("clock_event_reasons");
  if (d.clock_event_reasons) {
    w.BeginObject();
    w.Key("mask").UInt(*d.clock_event_reasons);
    Strings(w.Key("active"), model::ClockEventReasonNames(*d.clock_event_reasons));
    w.EndObject();
  } else {
    w.Null();
  }
  w.Key("cpu_affinity");
  d.cpu_affinity.empty() ? w.Null() : w.String(model::FormatCpuList(d.cpu_affinity));
  Put(w.Key("numa_node"), d.numa_node);
  w.Key("healthy").Bool(d.is_healthy);
  Strings(w.Key("health_problems"), d.health_problems);
  Strings(w.Key("warnings"), d.warnings);
  // The last drain and the last lease naming this GPU win (there is at most one of each).
  const model::GpuDrain* drain = nullptr;
  if (d.uuid) {
    for (const model::GpuDrain& g : opts.drains) {
      if (g.uuid == *d.uuid) drain = &g;
    }
  }
  w.Key("drain");
  if (drain) {
    w.BeginObject();
    w.Key("reason").String(drain->reason);
    w.Key("by").String(drain->by_user);
    w.Key("by_uid").UInt(drain->by_uid);
    w.Key("since_unix_ms").Int(drain->since_unix_ms);
    w.EndObject();
  } else {
    w.Null();
  }
  if (opts.allocation) {
    const auto& uuids = opts.allocation->uuids;
    w.Key("in_allocation").Bool(d.uuid && std::find(uuids.begin(), uuids.end(), *d.uuid) != uuids.end());
  }
  if (opts.leases) {
    // A whole-GPU lease is "lease"; memory slices (docs/share.md) are "slices", with the
    // memory they declare in all.
    const model::Lease* lease = nullptr;
    std::vector<const model::Lease*> slices;
    for (const model::Lease& l : *opts.leases) {
      if (!d.uuid || std::find(l.gpu_uuids.begin(), l.gpu_uuids.end(), *d.uuid) == l.gpu_uuids.end()) continue;
      if (l.gpu_memory_bytes) slices.push_back(&l);
      else lease = &l;
    }
    w.Key("slices").BeginArray();
    int64_t declared = 0;
    const std::vector<model::SliceOverrun> over = model::SliceOverruns(d, *opts.leases);
    for (const model::Lease* l : slices) {
      declared += *l->gpu_memory_bytes;
      const auto o = std::find_if(over.begin(), over.end(), [&](const model::SliceOverrun& x) { return x.lease_id == l->id; });
      w.BeginObject();
      w.Key("lease_id").Int(l->id);
      w.Key("user").String(l->user);
      w.Key("kind").String(l->kind);
      w.Key("command").String(l->command);
      w.Key("memory_bytes").Int(*l->gpu_memory_bytes);
      w.Key("since_unix_ms").Int(l->created_unix_ms);
      WriteMps(w, *l);
      // Its holder's processes on this GPU use more than their slices declare.
      w.Key("over_limit").Bool(o != over.end());
      w.Key("holder_used_bytes");
      if (o != over.end()) w.Int(o->used_bytes);
      else w.Null();
      w.EndObject();
    }
    w.EndArray();
    w.Key("declared_memory_bytes").Int(declared);
    w.Key("lease");
    if (lease) {
      w.BeginObject();
      w.Key("id").Int(lease->id);
      w.Key("user").String(lease->user);
      w.Key("kind").String(lease->kind);
      w.Key("command").String(lease->command);
      w.Key("since_unix_ms").Int(lease->created_unix_ms);
      Put(w.Key("idle_since_unix_ms"), lease->idle_since_unix_ms);
      WriteMps(w, *lease);
      w.EndObject();
    } else {
      w.Null();
    }
  }
  if (opts.show_processes) {
    w.Key("processes").BeginArray();
    for (const model::GpuProcess& p : d.processes) {
      WriteProcess(w, p, opts.leases ? model::IntrudedLease(d, p, *opts.leases) : nullptr);
    }
    w.EndArray();
  }
  // MIG devices (docs/share.md, "MIG"): each a leasable unit of its own.
  w.Key("mig_devices").BeginArray();
  for (const model::MigDevice& m : d.mig_devices) {
    w.BeginObject();
    w.Key("index").Int(m.index);
    Put(w.Key("uuid"), m.uuid);
    Put(w.Key("profile"), m.profile);
    Put(w.Key("gpu_instance_id"), m.gpu_instance_id);
    Put(w.Key("compute_instance_id"), m.compute_instance_id);
    Put(w.Key("gpu_slices"), m.gpu_slices);
    Put(w.Key("compute_slices"), m.compute_slices);
    Put(w.Key("multiprocessors"), m.multiprocessors);
    w.Key("memory").BeginObject();
    Put(w.Key("total_bytes"), m.memory_total_bytes);
    Put(w.Key("used_bytes"), m.memory_used_bytes);
    w.EndObject();
    if (opts.leases) {
      const model::Lease* lease = nullptr;
      for (const model::Lease& l : *opts.leases) {
        if (m.uuid && std::find(l.gpu_uuids.begin(), l.gpu_uuids.end(), *m.uuid) != l.gpu_uuids.end()) lease = &l;
      }
      w.Key("lease");
      if (lease) {
        w.BeginObject();
        w.Key("id").Int(lease->id);
        w.Key("user").String(lease->user);
        w.Key("kind").String(lease->kind);
        w.Key("command").String(lease->command);
        w.Key("since_unix_ms").Int(lease->created_unix_ms);
        WriteMps(w, *lease);
        w.EndObject();
      } else {
        w.Null();
      }
    }
    if (opts.show_processes) {
      w.Key("processes").BeginArray();
      for (const model::GpuProcess& p : m.processes) {
        // The parent's entry carries what /proc said about the process (user, command).
        auto full = std::find_if(d.processes.begin(), d.processes.end(),
                                 [&](const model::GpuProcess& q) { return q.pid == p.pid; });
        WriteProcess(w, full != d.processes.end() ? *full : p, nullptr);
      }
      w.EndArray();
    }
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
}

}  // namespace

std::string StatusJsonText(const model::MachineSnapshot& snap, const StatusOptions& opts, JsonWriter::Style style,
                           const StatusJsonSource* source) {
  std::string out;
  out.reserve(2048 + 2048 * snap.gpus.size());
  JsonWriter w(out, style);
  w.BeginObject();
  w.Key("schema_version").Int(1);
  w.Key("simulated").Bool(opts.simulated);
  Put(w.Key("driver_version"), snap.system.driver_version);
  Put(w.Key("nvml_version"), snap.system.nvml_version);
  Put(w.Key("cuda_driver_version"), snap.system.cuda_driver_version);
  w.Key("timestamp").String(FormatIsoUtcMillis(snap.taken_at_unix_ms));
  w.Key("timestamp_unix_ms").Int(snap.taken_at_unix_ms);
  w.Key("gpus").BeginArray();
  for (const model::DeviceSnapshot& d : snap.gpus) WriteGpu(w, d, opts);
  w.EndArray();
  if (opts.simulated) w.Key("scenario").String(opts.scenario);
  if (opts.allocation) {
    w.Key("allocation").BeginObject();
    w.Key("source").String(opts.allocation->source);
    Strings(w.Key("uuids"), opts.allocation->uuids);
    w.EndObject();
  }
  if (source) {
    w.Key("source").String(source->source);
    w.Key("sampled_at_unix_ms").Int(source->sampled_at_unix_ms);
    w.Key("source_note");
    source->note.empty() ? w.Null() : w.String(source->note);
  }
  w.EndObject();
  return out;
}

nlohmann::ordered_json StatusToJson(const model::MachineSnapshot& snap, const StatusOptions& opts) {
  return nlohmann::ordered_json::parse(StatusJsonText(snap, opts, JsonWriter::Style::kCompact));
}

}  // namespace gpuman::render
