#include "protocol/model_json.h"

#include <cmath>

#include <string>

#include "protocol/json_io.h"

namespace gpuman::protocol {

using nlohmann::json;

namespace {

template <typename T>
json OrNull(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

}  // namespace

json GpuRequestToJson(const model::GpuRequest& r) {
  json j{
      {"count", r.count},
      {"gpus", OrNull(r.gpus)},
      {"min_free_memory_bytes", OrNull(r.min_free_memory_bytes)},
      {"max_utilization_percent", OrNull(r.max_utilization_percent)},
      {"model", OrNull(r.model)},
      {"min_compute_capability", OrNull(r.min_compute_capability)},
      {"exclude", r.exclude},
      {"allow_shared", r.allow_shared},
      {"gpu_memory_bytes", OrNull(r.gpu_memory_bytes)},
      {"mps", r.mps},
      {"gpu_share_percent", OrNull(r.gpu_share_percent)},
      {"mig_profile", OrNull(r.mig_profile)},
  };
  if (r.prefer_fastest) j["prefer"] = "fastest";  // only when asked: older daemons ignore it
  if (!r.measured_fp32_tflops.empty()) j["measured_fp32_tflops"] = r.measured_fp32_tflops;
  return j;
}

Result<model::GpuRequest> GpuRequestFromJson(const json& j, std::string_view path) {
  model::GpuRequest r;
  FieldReader f(j, std::string(path));
  f.Optional("count", r.count);
  f.Check(r.count >= 1, "count", "integer >= 1");
  f.Optional("gpus", r.gpus);
  f.Check(!r.gpus || !r.gpus->empty(), "gpus", "non-empty array of strings or null");
  f.Optional("min_free_memory_bytes", r.min_free_memory_bytes);
  f.Check(!r.min_free_memory_bytes || *r.min_free_memory_bytes >= 0, "min_free_memory_bytes", "integer >= 0 or null");
  f.Optional("max_utilization_percent", r.max_utilization_percent);
  f.Check(!r.max_utilization_percent || (*r.max_utilization_percent >= 0 && *r.max_utilization_percent <= 100),
          "max_utilization_percent", "integer in [0, 100] or null");
  f.Optional("model", r.model);
  f.Optional("min_compute_capability", r.min_compute_capability);
  f.Optional("exclude", r.exclude);
  f.Optional("allow_shared", r.allow_shared);
  f.Optional("gpu_memory_bytes", r.gpu_memory_bytes);
  f.Check(!r.gpu_memory_bytes || *r.gpu_memory_bytes > 0, "gpu_memory_bytes", "integer > 0 or null");
  std::optional<std::string> prefer;
  f.Optional("prefer", prefer);
  f.Check(!prefer || *prefer == "fastest", "prefer", "\"fastest\" or absent");
  r.prefer_fastest = prefer.has_value();
  if (auto m = j.find("measured_fp32_tflops"); m != j.end() && !m->is_null()) {
    bool ok = m->is_object();
    if (ok) {
      for (const auto& [uuid, tflops] : m->items()) {
        if (!tflops.is_number() || tflops.get<double>() <= 0 || !std::isfinite(tflops.get<double>())) {
          ok = false;
          break;
        }
        r.measured_fp32_tflops[uuid] = tflops.get<double>();
      }
    }
    f.Check(ok, "measured_fp32_tflops", "object of GPU UUID -> number > 0, or absent");
  }
  f.Optional("mps", r.mps);
  f.Optional("gpu_share_percent", r.gpu_share_percent);
  f.Check(!r.gpu_share_percent || (*r.gpu_share_percent >= 1 && *r.gpu_share_percent <= 100), "gpu_share_percent",
          "integer 1..100 or null");
  f.Optional("mig_profile", r.mig_profile);
  f.Check(!r.mig_profile || !r.mig_profile->empty(), "mig_profile", "non-empty string or null");
  if (!f.ok()) return f.error();
  return r;
}

json JobToJson(const model::Job& job, bool include_private) {
  json j = {
      {"id", job.id}, {"name", job.name}, {"uid", job.uid}, {"gid", job.gid}, {"user", job.user},
  };
  if (include_private) {
    j["argv"] = job.argv;
    j["env"] = job.env;
    j["cwd"] = job.cwd;
    j["output_path"] = job.output_path;
  }
  j["request"] = GpuRequestToJson(job.request);
  j["priority"] = job.priority;
  j["time_limit_ms"] = OrNull(job.time_limit_ms);
  j["requeue"] = job.requeue;
  j["after"] = job.after;
  j["state"] = model::JobStateName(job.state);
  j["submitted_unix_ms"] = job.submitted_unix_ms;
  j["started_unix_ms"] = OrNull(job.started_unix_ms);
  j["ended_unix_ms"] = OrNull(job.ended_unix_ms);
  j["exit_code"] = OrNull(job.exit_code);
  j["gpu_uuids"] = job.gpu_uuids;
  j["lease_id"] = OrNull(job.lease_id);
  j["supervisor_pid"] = OrNull(job.supervisor_pid);
  j["supervisor_start_ticks"] = OrNull(job.supervisor_start_ticks);
  j["reason"] = job.reason;
  j["failure"] = job.failure == model::JobFailure::kNone ? json(nullptr) : json(model::JobFailureName(job.failure));
  if (job.idle_since_unix_ms) j["idle_since_unix_ms"] = *job.idle_since_unix_ms;
  if (job.array_id) {
    j["array_id"] = *job.array_id;
    j["array_task"] = OrNull(job.array_task);
    j["array_limit"] = OrNull(job.array_limit);
  }
  if (job.notify) {
    json n{{"kind", job.notify->mail ? "mail" : "program"}};
    if (include_private && !job.notify->mail) n["argv"] = job.notify->argv;
    n["sent"] = job.notified_unix_ms.has_value();
    n["sent_unix_ms"] = OrNull(job.notified_unix_ms);
    n["outcome"] = job.notify_outcome;
    j["notify"] = std::move(n);
  }
  return j;
}

namespace {

// A job's "notify" member: {"kind": "program"|"mail", "argv": [...] (private), "sent",
// "sent_unix_ms", "outcome"}.
void ReadNotify(FieldReader& f, const json& n, model::Job& job) {
  FieldReader g(n, f.PathOf("notify"));
  std::string kind;
  g.Required("kind", kind);
  g.Check(kind == "program" || kind == "mail", "kind", "\"program\" or \"mail\"");
  model::JobNotify notify;
  notify.mail = kind == "mail";
  g.Optional("argv", notify.argv);
  g.Optional("sent_unix_ms", job.notified_unix_ms);
  g.Optional("outcome", job.notify_outcome);
  if (g.ok()) {
    job.notify = std::move(notify);
  } else {
    f.Adopt(g.error());
  }
}

}  // namespace

Result<model::Job> JobFromJson(const json& j, std::string_view path) {
  model::Job job;
  FieldReader f(j, std::string(path));
  f.Required("id", job.id);
  f.Optional("name", job.name);
  f.Optional("uid", job.uid);
  f.Optional("gid", job.gid);
  f.Optional("user", job.user);
  f.Optional("argv", job.argv);
  f.Optional("env", job.env);
  f.Optional("cwd", job.cwd);
  f.Optional("output_path", job.output_path);
  if (const json* r = f.Find("request")) {
    Result<model::GpuRequest> request = GpuRequestFromJson(*r, f.PathOf("request"));
    if (request) {
      job.request = std::move(request).value();
    } else {
      f.Adopt(request.error());
    }
  }
  f.Optional("priority", job.priority);
  f.Optional("time_limit_ms", job.time_limit_ms);
  f.Optional("requeue", job.requeue);
  f.Optional("after", job.after);
  std::string state;
  f.Required("state", state);
  if (f.ok()) {
    std::optional<model::JobState> parsed = model::ParseJobState(state);
    if (parsed) {
      job.state = *parsed;
    } else {
      f.Fail("state", "unknown job state '" + state + "'");
    }
  }
  f.Optional("submitted_unix_ms", job.submitted_unix_ms);
  f.Optional("started_unix_ms", job.started_unix_ms);
  f.Optional("ended_unix_ms", job.ended_unix_ms);
  f.Optional("exit_code", job.exit_code);
  f.Optional("gpu_uuids", job.gpu_uuids);
  f.Optional("lease_id", job.lease_id);
  f.Optional("supervisor_pid", job.supervisor_pid);
  f.Optional("supervisor_start_ticks", job.supervisor_start_ticks);
  f.Optional("reason", job.reason);
  std::optional<std::string> failure;
  f.Optional("failure", failure);
  if (f.ok() && failure) {
    // An unknown kind from a newer daemon still means the command never ran.
    job.failure = model::ParseJobFailure(*failure).value_or(model::JobFailure::kCannotStart);
    if (failure->empty()) job.failure = model::JobFailure::kNone;
  }
  f.Optional("idle_since_unix_ms", job.idle_since_unix_ms);
  f.Optional("array_id", job.array_id);
  f.Optional("array_task", job.array_task);
  f.Optional("array_limit", job.array_limit);
  if (const json* n = f.Find("notify"); f.ok() && n != nullptr && !n->is_null()) {
    ReadNotify(f, *n, job);
  }
  if (!f.ok()) return f.error();
  return job;
}

json LeaseProcessToJson(const model::LeaseProcess& p) {
  return json{{"pid", p.pid}, {"start_time_ticks", p.start_time_ticks}};
}

Result<model::LeaseProcess> LeaseProcessFromJson(const json& j, std::string_view path) {
  model::LeaseProcess p;
  FieldReader f(j, std::string(path));
  f.Required("pid", p.pid);
  f.Check(p.pid >= 1, "pid", "integer >= 1");
  f.Required("start_time_ticks", p.start_time_ticks);
  f.Check(p.start_time_ticks >= 0, "start_time_ticks", "integer >= 0");
  if (!f.ok()) return f.error();
  return p;
}

json LeaseToJson(const model::Lease& lease) {
  json processes = json::array();
  for (const auto& p : lease.processes) processes.push_back(LeaseProcessToJson(p));
  json j{
      {"id", lease.id},
      {"gpu_uuids", lease.gpu_uuids},
      {"uid", lease.uid},
      {"user", lease.user},
      {"command", lease.command},
      {"kind", lease.kind},
      {"created_unix_ms", lease.created_unix_ms},
      {"host", lease.host},
      {"processes", processes},
  };
  if (!lease.gpu_indices.empty()) j["gpu_indices"] = lease.gpu_indices;
  if (lease.idle_since_unix_ms) j["idle_since_unix_ms"] = *lease.idle_since_unix_ms;
  if (lease.master_port) j["master_port"] = *lease.master_port;
  if (lease.gpu_memory_bytes) j["gpu_memory_bytes"] = *lease.gpu_memory_bytes;
  if (lease.mps) j["mps"] = true;
  if (lease.gpu_share_percent) j["gpu_share_percent"] = *lease.gpu_share_percent;
  return j;
}

Result<model::Lease> LeaseFromJson(const json& j, std::string_view path) {
  model::Lease lease;
  FieldReader f(j, std::string(path));
  f.Required("id", lease.id);
  f.Optional("gpu_uuids", lease.gpu_uuids);
  f.Optional("gpu_indices", lease.gpu_indices);
  if (!lease.gpu_indices.empty() && lease.gpu_indices.size() != lease.gpu_uuids.size()) lease.gpu_indices.clear();
  f.Optional("uid", lease.uid);
  f.Optional("user", lease.user);
  f.Optional("command", lease.command);
  f.Optional("kind", lease.kind);
  f.Optional("created_unix_ms", lease.created_unix_ms);
  f.Optional("host", lease.host);
  f.Optional("idle_since_unix_ms", lease.idle_since_unix_ms);
  f.Optional("master_port", lease.master_port);
  f.Optional("gpu_memory_bytes", lease.gpu_memory_bytes);
  f.Optional("mps", lease.mps);
  f.Optional("gpu_share_percent", lease.gpu_share_percent);
  if (const json* procs = f.Find("processes")) {
    if (!procs->is_array()) {
      f.Fail("processes", "expected array of objects");
    } else {
      for (std::size_t i = 0; i < procs->size() && f.ok(); ++i) {
        Result<model::LeaseProcess> p =
            LeaseProcessFromJson((*procs)[i], f.PathOf("processes") + "[" + std::to_string(i) + "]");
        if (p) {
          lease.processes.push_back(*p);
        } else {
          f.Adopt(p.error());
        }
      }
    }
  }
  if (!f.ok()) return f.error();
  return lease;
}

json FindingToJson(const model::Finding& f) {
  return json{
      {"code", f.code},
      {"severity", model::SeverityName(f.severity)},
      {"gpu_uuid", f.gpu_uuid.empty() ? json(nullptr) : json(f.gpu_uuid)},
      {"gpu_index", OrNull(f.gpu_index)},
      {"message", f.message},
      {"xid", OrNull(f.xid)},
      {"count", f.count},
      {"first_seen_unix_ms", OrNull(f.first_seen_unix_ms)},
      {"last_seen_unix_ms", OrNull(f.last_seen_unix_ms)},
      {"source", f.source},
  };
}

json HealthReportToJson(const model::HealthReport& report) {
  json findings = json::array();
  for (const auto& f : report.findings) findings.push_back(FindingToJson(f));
  int fatal = 0, warning = 0;
  for (const auto& f : report.findings) (f.severity == model::Severity::kFatal ? fatal : warning)++;
  return json{
      {"taken_at_unix_ms", report.taken_at_unix_ms},
      {"healthy", fatal == 0},
      {"fatal", fatal},
      {"warnings", warning},
      {"findings", findings},
      {"quarantined", report.quarantined},
      {"xid_sources", report.xid_sources},
      {"notes", report.notes},
  };
}

Result<model::HealthReport> HealthReportFromJson(const json& j, std::string_view path) {
  model::HealthReport report;
  FieldReader f(j, std::string(path));
  f.Optional("taken_at_unix_ms", report.taken_at_unix_ms);
  f.Optional("quarantined", report.quarantined);
  f.Optional("xid_sources", report.xid_sources);
  f.Optional("notes", report.notes);
  if (const json* list = f.Find("findings")) {
    if (!list->is_array()) {
      f.Fail("findings", "expected array of objects");
    } else {
      for (std::size_t i = 0; i < list->size() && f.ok(); ++i) {
        FieldReader g((*list)[i], f.PathOf("findings") + "[" + std::to_string(i) + "]");
        model::Finding finding;
        std::string severity, uuid;
        std::optional<std::string> maybe_uuid;
        g.Required("code", finding.code);
        g.Required("severity", severity);
        g.Optional("gpu_uuid", maybe_uuid);
        g.Optional("gpu_index", finding.gpu_index);
        g.Optional("message", finding.message);
        g.Optional("xid", finding.xid);
        g.Optional("count", finding.count);
        g.Optional("first_seen_unix_ms", finding.first_seen_unix_ms);
        g.Optional("last_seen_unix_ms", finding.last_seen_unix_ms);
        g.Optional("source", finding.source);
        if (g.ok() && severity != "fatal" && severity != "warning") g.Fail("severity", "expected fatal or warning");
        if (!g.ok()) {
          f.Adopt(g.error());
          break;
        }
        finding.severity = severity == "fatal" ? model::Severity::kFatal : model::Severity::kWarning;
        finding.gpu_uuid = maybe_uuid.value_or("");
        report.findings.push_back(std::move(finding));
      }
    }
  }
  if (!f.ok()) return f.error();
  return report;
}

namespace {

const char* ProcessTypeWire(model::ProcessType t) { return model::ProcessTypeName(t); }

std::optional<model::ProcessType> ParseProcessType(const std::string& s) {
  for (auto t : {model::ProcessType::kCompute, model::ProcessType::kGraphics, model::ProcessType::kComputeAndGraphics}) {
    if (s == model::ProcessTypeName(t)) return t;
  }
  return std::nullopt;
}

json GpuProcessToJson(const model::GpuProcess& p) {
  json::object_t o;  // emplaced: the initializer-list form copied every member (docs/design.md, "Start-up")
  o.emplace("pid", p.pid);
  o.emplace("type", ProcessTypeWire(p.type));
  o.emplace("used_memory_bytes", OrNull(p.used_memory_bytes));
  o.emplace("gpu_instance_id", OrNull(p.gpu_instance_id));
  o.emplace("compute_instance_id", OrNull(p.compute_instance_id));
  o.emplace("is_visible", p.is_visible);
  o.emplace("uid", OrNull(p.uid));
  o.emplace("user", OrNull(p.user));
  o.emplace("command", OrNull(p.command));
  o.emplace("start_time_unix", OrNull(p.start_time_unix));
  o.emplace("sm_util_percent", OrNull(p.sm_util_percent));
  return json(std::move(o));
}

Result<model::GpuProcess> GpuProcessFromJson(const json& j, const std::string& path) {
  model::GpuProcess p;
  FieldReader f(j, path);
  f.Required("pid", p.pid);
  std::string type = model::ProcessTypeName(p.type);
  f.Optional("type", type);
  if (f.ok()) {
    if (auto t = ParseProcessType(type)) {
      p.type = *t;
    } else {
      f.Fail("type", "unknown process type '" + type + "'");
    }
  }
  f.Optional("used_memory_bytes", p.used_memory_bytes);
  f.Optional("gpu_instance_id", p.gpu_instance_id);
  f.Optional("compute_instance_id", p.compute_instance_id);
  f.Optional("is_visible", p.is_visible);
  f.Optional("uid", p.uid);
  f.Optional("user", p.user);
  f.Optional("command", p.command);
  f.Optional("start_time_unix", p.start_time_unix);
  f.Optional("sm_util_percent", p.sm_util_percent);
  if (!f.ok()) return f.error();
  return p;
}

}  // namespace

json TopologyToJson(const model::Topology& t) {
  json pcie = json::array();
  for (const auto& row : t.pcie) {
    json r = json::array();
    for (model::PcieLevel level : row) r.push_back(static_cast<int>(level));
    pcie.push_back(std::move(r));
  }
  return json{{"nvlinks", t.nvlinks}, {"pcie", std::move(pcie)}};
}

Result<model::Topology> TopologyFromJson(const json& j, const std::string& path) {
  model::Topology t;
  FieldReader f(j, path);
  auto matrix = [&](std::string_view key, auto&& each) {
    const json* m = f.Find(key);
    if (m == nullptr) return;
    if (!m->is_array()) return f.Fail(key, "expected array of arrays of integers");
    for (std::size_t i = 0; i < m->size() && f.ok(); ++i) {
      std::vector<int> row;
      std::optional<Error> error;
      ReadValue((*m)[i], f.PathOf(key) + "[" + std::to_string(i) + "]", row, error);
      if (error) return f.Adopt(*error);
      each(row);
    }
  };
  matrix("nvlinks", [&](const std::vector<int>& row) { t.nvlinks.push_back(row); });
  matrix("pcie", [&](const std::vector<int>& row) {
    std::vector<model::PcieLevel> levels;
    for (int v : row) {
      const bool known = v >= static_cast<int>(model::PcieLevel::kSelf) && v <= static_cast<int>(model::PcieLevel::kUnknown);
      levels.push_back(known ? static_cast<model::PcieLevel>(v) : model::PcieLevel::kUnknown);
    }
    t.pcie.push_back(std::move(levels));
  });
  if (!f.ok()) return f.error();
  return t;
}

static json MigDeviceToJson(const model::MigDevice& m) {
  json processes = json::array();
  for (const auto& p : m.processes) processes.push_back(GpuProcessToJson(p));
  json::object_t o;
  o.emplace("index", m.index);
  o.emplace("uuid", OrNull(m.uuid));
  o.emplace("parent_uuid", m.parent_uuid);
  o.emplace("parent_index", m.parent_index);
  o.emplace("gpu_instance_id", OrNull(m.gpu_instance_id));
  o.emplace("compute_instance_id", OrNull(m.compute_instance_id));
  o.emplace("gpu_slices", OrNull(m.gpu_slices));
  o.emplace("compute_slices", OrNull(m.compute_slices));
  o.emplace("multiprocessors", OrNull(m.multiprocessors));
  o.emplace("profile", OrNull(m.profile));
  o.emplace("memory_total_bytes", OrNull(m.memory_total_bytes));
  o.emplace("memory_used_bytes", OrNull(m.memory_used_bytes));
  o.emplace("processes", std::move(processes));
  return json(std::move(o));
}

static Result<model::MigDevice> MigDeviceFromJson(const json& j, const std::string& path) {
  model::MigDevice m;
  FieldReader f(j, path);
  f.Required("index", m.index);
  f.Optional("uuid", m.uuid);
  f.Optional("parent_uuid", m.parent_uuid);
  f.Optional("parent_index", m.parent_index);
  f.Optional("gpu_instance_id", m.gpu_instance_id);
  f.Optional("compute_instance_id", m.compute_instance_id);
  f.Optional("gpu_slices", m.gpu_slices);
  f.Optional("compute_slices", m.compute_slices);
  f.Optional("multiprocessors", m.multiprocessors);
  f.Optional("profile", m.profile);
  f.Optional("memory_total_bytes", m.memory_total_bytes);
  f.Optional("memory_used_bytes", m.memory_used_bytes);
  if (const json* list = f.Find("processes")) {
    if (!list->is_array()) {
      f.Fail("processes", "expected array of objects");
    } else {
      for (std::size_t i = 0; i < list->size() && f.ok(); ++i) {
        auto p = GpuProcessFromJson((*list)[i], f.PathOf("processes") + "[" + std::to_string(i) + "]");
        if (p) {
          m.processes.push_back(std::move(*p));
        } else {
          f.Adopt(p.error());
        }
      }
    }
  }
  if (!f.ok()) return f.error();
  return m;
}

json DeviceSnapshotToJson(const model::DeviceSnapshot& d) {
  json processes = json::array();
  for (const auto& p : d.processes) processes.push_back(GpuProcessToJson(p));
  json::object_t o;  // emplaced: the initializer-list form copied every member
  o.emplace("index", d.index);
  o.emplace("uuid", OrNull(d.uuid));
  o.emplace("name", OrNull(d.name));
  o.emplace("pci_bus_id", OrNull(d.pci_bus_id));
  o.emplace("serial", OrNull(d.serial));
  o.emplace("minor_number", OrNull(d.minor_number));
  o.emplace("memory_total_bytes", OrNull(d.memory_total_bytes));
  o.emplace("memory_used_bytes", OrNull(d.memory_used_bytes));
  o.emplace("memory_free_bytes", OrNull(d.memory_free_bytes));
  o.emplace("memory_reserved_bytes", OrNull(d.memory_reserved_bytes));
  o.emplace("gpu_utilization_percent", OrNull(d.gpu_utilization_percent));
  o.emplace("memory_utilization_percent", OrNull(d.memory_utilization_percent));
  o.emplace("temperature_c", OrNull(d.temperature_c));
  o.emplace("power_usage_w", OrNull(d.power_usage_w));
  o.emplace("power_limit_w", OrNull(d.power_limit_w));
  o.emplace("fan_percent", OrNull(d.fan_percent));
  {
    json::object_t clocks;
    clocks.emplace("sm_mhz", OrNull(d.clocks.sm_mhz));
    clocks.emplace("sm_max_mhz", OrNull(d.clocks.sm_max_mhz));
    clocks.emplace("memory_mhz", OrNull(d.clocks.memory_mhz));
    clocks.emplace("memory_max_mhz", OrNull(d.clocks.memory_max_mhz));
    o.emplace("clocks", json(std::move(clocks)));
  }
  o.emplace("performance_state", OrNull(d.performance_state));
  o.emplace("compute_capability", OrNull(d.compute_capability));
  o.emplace("cuda_cores", OrNull(d.cuda_cores));
  o.emplace("memory_bus_width_bits", OrNull(d.memory_bus_width_bits));
  o.emplace("compute_mode", OrNull(d.compute_mode));
  o.emplace("persistence_mode", OrNull(d.persistence_mode));
  o.emplace("fabric_state", OrNull(d.fabric_state));
  o.emplace("mig_mode_current", OrNull(d.mig_mode_current));
  o.emplace("mig_mode_pending", OrNull(d.mig_mode_pending));
  o.emplace("ecc_volatile_corrected", OrNull(d.ecc_volatile_corrected));
  o.emplace("ecc_volatile_uncorrected", OrNull(d.ecc_volatile_uncorrected));
  o.emplace("ecc_aggregate_corrected", OrNull(d.ecc_aggregate_corrected));
  o.emplace("ecc_aggregate_uncorrected", OrNull(d.ecc_aggregate_uncorrected));
  o.emplace("retired_pages_pending", OrNull(d.retired_pages_pending));
  o.emplace("remapped_rows_pending", OrNull(d.remapped_rows_pending));
  o.emplace("remapped_rows_failure", OrNull(d.remapped_rows_failure));
  o.emplace("clock_event_reasons", OrNull(d.clock_event_reasons));
  o.emplace("cpu_affinity", d.cpu_affinity);
  o.emplace("numa_node", OrNull(d.numa_node));
  o.emplace("processes", std::move(processes));
  if (!d.mig_devices.empty()) {
    json migs = json::array();
    for (const auto& m : d.mig_devices) migs.push_back(MigDeviceToJson(m));
    o.emplace("mig_devices", std::move(migs));
  }
  o.emplace("is_healthy", d.is_healthy);
  o.emplace("health_problems", d.health_problems);
  o.emplace("warnings", d.warnings);
  return json(std::move(o));
}

Result<model::DeviceSnapshot> DeviceSnapshotFromJson(const json& j, std::string_view path) {
  model::DeviceSnapshot d;
  FieldReader f(j, std::string(path));
  f.Required("index", d.index);
  f.Optional("uuid", d.uuid);
  f.Optional("name", d.name);
  f.Optional("pci_bus_id", d.pci_bus_id);
  f.Optional("serial", d.serial);
  f.Optional("minor_number", d.minor_number);
  f.Optional("memory_total_bytes", d.memory_total_bytes);
  f.Optional("memory_used_bytes", d.memory_used_bytes);
  f.Optional("memory_free_bytes", d.memory_free_bytes);
  f.Optional("memory_reserved_bytes", d.memory_reserved_bytes);
  f.Optional("gpu_utilization_percent", d.gpu_utilization_percent);
  f.Optional("memory_utilization_percent", d.memory_utilization_percent);
  f.Optional("temperature_c", d.temperature_c);
  f.Optional("power_usage_w", d.power_usage_w);
  f.Optional("power_limit_w", d.power_limit_w);
  f.Optional("fan_percent", d.fan_percent);
  if (const json* c = f.Find("clocks")) {
    FieldReader g(*c, f.PathOf("clocks"));
    g.Optional("sm_mhz", d.clocks.sm_mhz);
    g.Optional("sm_max_mhz", d.clocks.sm_max_mhz);
    g.Optional("memory_mhz", d.clocks.memory_mhz);
    g.Optional("memory_max_mhz", d.clocks.memory_max_mhz);
    if (!g.ok()) f.Adopt(g.error());
  }
  f.Optional("performance_state", d.performance_state);
  f.Optional("compute_capability", d.compute_capability);
  f.Optional("cuda_cores", d.cuda_cores);
  f.Optional("memory_bus_width_bits", d.memory_bus_width_bits);
  f.Optional("compute_mode", d.compute_mode);
  f.Optional("persistence_mode", d.persistence_mode);
  f.Optional("fabric_state", d.fabric_state);
  f.Optional("mig_mode_current", d.mig_mode_current);
  f.Optional("mig_mode_pending", d.mig_mode_pending);
  f.Optional("ecc_volatile_corrected", d.ecc_volatile_corrected);
  f.Optional("ecc_volatile_uncorrected", d.ecc_volatile_uncorrected);
  f.Optional("ecc_aggregate_corrected", d.ecc_aggregate_corrected);
  f.Optional("ecc_aggregate_uncorrected", d.ecc_aggregate_uncorrected);
  f.Optional("retired_pages_pending", d.retired_pages_pending);
  f.Optional("remapped_rows_pending", d.remapped_rows_pending);
  f.Optional("remapped_rows_failure", d.remapped_rows_failure);
  f.Optional("clock_event_reasons", d.clock_event_reasons);
  f.Optional("cpu_affinity", d.cpu_affinity);
  f.Optional("numa_node", d.numa_node);
  if (const json* list = f.Find("processes")) {
    if (!list->is_array()) {
      f.Fail("processes", "expected array of objects");
    } else {
      for (std::size_t i = 0; i < list->size() && f.ok(); ++i) {
        auto p = GpuProcessFromJson((*list)[i], f.PathOf("processes") + "[" + std::to_string(i) + "]");
        if (p) {
          d.processes.push_back(std::move(*p));
        } else {
          f.Adopt(p.error());
        }
      }
    }
  }
  if (const json* list = f.Find("mig_devices")) {
    if (!list->is_array()) {
      f.Fail("mig_devices", "expected array of objects");
    } else {
      for (std::size_t i = 0; i < list->size() && f.ok(); ++i) {
        auto m = MigDeviceFromJson((*list)[i], f.PathOf("mig_devices") + "[" + std::to_string(i) + "]");
        if (m) {
          d.mig_devices.push_back(std::move(*m));
        } else {
          f.Adopt(m.error());
        }
      }
    }
  }
  f.Optional("is_healthy", d.is_healthy);
  f.Optional("health_problems", d.health_problems);
  f.Optional("warnings", d.warnings);
  if (!f.ok()) return f.error();
  return d;
}

json MachineSnapshotToJson(const model::MachineSnapshot& snap) {
  json gpus = json::array();
  for (const auto& g : snap.gpus) gpus.push_back(DeviceSnapshotToJson(g));
  json j{
      {"system",
       {{"driver_version", OrNull(snap.system.driver_version)},
        {"nvml_version", OrNull(snap.system.nvml_version)},
        {"cuda_driver_version", OrNull(snap.system.cuda_driver_version)}}},
      {"taken_at_unix_ms", snap.taken_at_unix_ms},
      {"gpus", std::move(gpus)},
  };
  if (snap.topology) j["topology"] = TopologyToJson(*snap.topology);
  return j;
}

Result<model::MachineSnapshot> MachineSnapshotFromJson(const json& j, std::string_view path) {
  model::MachineSnapshot snap;
  FieldReader f(j, std::string(path));
  if (const json* s = f.Find("system")) {
    FieldReader g(*s, f.PathOf("system"));
    g.Optional("driver_version", snap.system.driver_version);
    g.Optional("nvml_version", snap.system.nvml_version);
    g.Optional("cuda_driver_version", snap.system.cuda_driver_version);
    if (!g.ok()) f.Adopt(g.error());
  }
  f.Optional("taken_at_unix_ms", snap.taken_at_unix_ms);
  if (const json* list = f.Find("gpus")) {
    if (!list->is_array()) {
      f.Fail("gpus", "expected array of objects");
    } else {
      for (std::size_t i = 0; i < list->size() && f.ok(); ++i) {
        auto g = DeviceSnapshotFromJson((*list)[i], f.PathOf("gpus") + "[" + std::to_string(i) + "]");
        if (g) {
          snap.gpus.push_back(std::move(*g));
        } else {
          f.Adopt(g.error());
        }
      }
    }
  }
  if (const json* t = f.Find("topology"); t != nullptr && !t->is_null()) {
    auto topology = TopologyFromJson(*t, f.PathOf("topology"));
    if (topology) {
      snap.topology = std::move(*topology);
    } else {
      f.Adopt(topology.error());
    }
  }
  if (!f.ok()) return f.error();
  return snap;
}

}  // namespace gpuman::protocol
