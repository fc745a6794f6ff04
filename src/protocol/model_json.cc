#include "protocol/model_json.h"

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
  return json{
      {"count", r.count},
      {"gpus", OrNull(r.gpus)},
      {"min_free_memory_bytes", OrNull(r.min_free_memory_bytes)},
      {"max_utilization_percent", OrNull(r.max_utilization_percent)},
      {"model", OrNull(r.model)},
      {"min_compute_capability", OrNull(r.min_compute_capability)},
      {"exclude", r.exclude},
      {"allow_shared", r.allow_shared},
  };
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
  return j;
}

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
      {"processes", processes},
  };
  if (lease.idle_since_unix_ms) j["idle_since_unix_ms"] = *lease.idle_since_unix_ms;
  return j;
}

Result<model::Lease> LeaseFromJson(const json& j, std::string_view path) {
  model::Lease lease;
  FieldReader f(j, std::string(path));
  f.Required("id", lease.id);
  f.Optional("gpu_uuids", lease.gpu_uuids);
  f.Optional("uid", lease.uid);
  f.Optional("user", lease.user);
  f.Optional("command", lease.command);
  f.Optional("kind", lease.kind);
  f.Optional("created_unix_ms", lease.created_unix_ms);
  f.Optional("idle_since_unix_ms", lease.idle_since_unix_ms);
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

}  // namespace gpuman::protocol
