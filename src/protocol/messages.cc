#include "protocol/messages.h"

#include <utility>

#include "protocol/json_io.h"
#include "protocol/model_json.h"

namespace gpuman::protocol {

using nlohmann::json;

namespace {

constexpr std::pair<Op, const char*> kOpNames[] = {
    {Op::kHello, "hello"},     {Op::kSubmit, "submit"},
    {Op::kQueue, "queue"},     {Op::kShow, "show"},
    {Op::kCancel, "cancel"},   {Op::kHold, "hold"},
    {Op::kResume, "resume"},   {Op::kWait, "wait"},
    {Op::kLogs, "logs"},       {Op::kDrain, "drain"},
    {Op::kUndrain, "undrain"}, {Op::kLeases, "leases"},
    {Op::kAcquire, "acquire"}, {Op::kAddProcesses, "add_processes"},
    {Op::kRelease, "release"}, {Op::kStatus, "status"}, {Op::kHealth, "health"},
    {Op::kDrains, "drains"},   {Op::kSnapshot, "snapshot"}, {Op::kPreview, "preview"},
    {Op::kUpdate, "update"},
};

template <typename T>
json OrNull(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

// A job or lease id: an integer >= 1.
void ReadId(FieldReader& f, std::string_view key, int64_t& out) {
  f.Required(key, out);
  f.Check(out >= 1, key, "integer >= 1");
}

// A job reference: an integer >= 1, or a string "12" / "12_7" (model::ParseJobRef).
std::optional<model::JobRef> JobRefFromJson(const json& v) {
  if (v.is_number_integer()) {
    const int64_t id = v.get<int64_t>();
    if (id < 1) return std::nullopt;
    return model::JobRef{id, std::nullopt};
  }
  if (!v.is_string()) return std::nullopt;
  auto ref = model::ParseJobRef(v.get<std::string>());
  if (!ref) return std::nullopt;
  return *ref;
}

constexpr const char* kJobRefExpected = "job id (integer >= 1) or task (\"12_7\")";

void ReadJobRef(FieldReader& f, std::string_view key, model::JobRef& out) {
  const json* v = f.Find(key);
  if (!f.ok()) return;
  if (v == nullptr) return f.Fail(key, "missing");
  if (auto ref = JobRefFromJson(*v)) {
    out = *ref;
  } else {
    f.Fail(key, std::string("expected ") + kJobRefExpected);
  }
}

// A non-empty array of job references.
void ReadIds(FieldReader& f, std::vector<model::JobRef>& out) {
  const json* v = f.Find("ids");
  if (!f.ok()) return;
  if (v == nullptr) return f.Fail("ids", "missing");
  if (!v->is_array() || v->empty()) return f.Fail("ids", std::string("expected non-empty array of ") + kJobRefExpected);
  for (std::size_t i = 0; i < v->size(); ++i) {
    auto ref = JobRefFromJson((*v)[i]);
    if (!ref) return f.Fail("ids[" + std::to_string(i) + "]", std::string("expected ") + kJobRefExpected);
    out.push_back(*ref);
  }
}

void ReadRequest(FieldReader& f, model::GpuRequest& out) {
  const json* r = f.Find("request");
  if (r == nullptr) return;  // defaults
  Result<model::GpuRequest> request = GpuRequestFromJson(*r, f.PathOf("request"));
  if (request) {
    out = std::move(request).value();
  } else {
    f.Adopt(request.error());
  }
}

template <typename T, typename Parse>
void ReadObjects(FieldReader& f, std::string_view key, std::vector<T>& out, Parse parse) {
  const json* a = f.Find(key);
  if (a == nullptr) return;
  if (!a->is_array()) {
    f.Fail(key, "expected array of objects");
    return;
  }
  for (std::size_t i = 0; i < a->size() && f.ok(); ++i) {
    Result<T> item = parse((*a)[i], f.PathOf(key) + "[" + std::to_string(i) + "]");
    if (item) {
      out.push_back(std::move(item).value());
    } else {
      f.Adopt(item.error());
    }
  }
}

template <typename T>
Result<T> Done(const FieldReader& f, T value) {
  if (!f.ok()) return f.error();
  return value;
}

json JobRefToJson(const model::JobRef& ref) { return ref.task ? json(model::FormatJobRef(ref)) : json(ref.id); }

json IdsArgsToJson(const std::vector<model::JobRef>& ids) {
  json list = json::array();
  for (const auto& ref : ids) list.push_back(JobRefToJson(ref));
  return json{{"ids", std::move(list)}};
}

Result<WireError> WireErrorFromJson(const json& j, const std::string& path) {
  FieldReader f(j, path);
  std::string code;
  WireError e;
  f.Required("code", code);
  f.Optional("message", e.message);
  if (!f.ok()) return f.error();
  if (std::optional<WireCode> c = ParseWireCode(code)) {
    e.code = *c;
  } else {
    // A newer daemon's code: keep its name visible rather than fail the whole reply.
    e.code = WireCode::kInternal;
    e.message = code + ": " + e.message;
  }
  return e;
}

}  // namespace

const char* OpName(Op op) {
  for (const auto& [o, name] : kOpNames) {
    if (o == op) return name;
  }
  return "status";
}

std::optional<Op> ParseOp(std::string_view name) {
  for (const auto& [o, n] : kOpNames) {
    if (name == n) return o;
  }
  return std::nullopt;
}

std::optional<WireError> CheckHello(const HelloArgs& hello) {
  if (hello.protocol == kProtocolVersion) return std::nullopt;
  return WireError{WireCode::kUnsupportedVersion, "protocol " + std::to_string(hello.protocol) +
                                                      " is not supported; this daemon speaks " +
                                                      std::to_string(kProtocolVersion)};
}

// ---- ToJson

json ToJson(const HelloArgs& v) { return json{{"client", v.client}, {"protocol", v.protocol}}; }
json ToJson(const HelloResult& v) {
  return json{{"protocol", v.protocol}, {"uid", v.uid}, {"user", v.user}, {"daemon", v.daemon}};
}
json ToJson(const SubmitArgs& v) {
  return json{
      {"name", v.name},
      {"argv", v.argv},
      {"env", v.env},
      {"cwd", v.cwd},
      {"output", OrNull(v.output)},
      {"request", GpuRequestToJson(v.request)},
      {"priority", v.priority},
      {"time_limit_ms", OrNull(v.time_limit_ms)},
      {"requeue", v.requeue},
      {"after", v.after},
      {"array", OrNull(v.array)},
      {"notify", v.notify ? json{{"mail", v.notify->mail}, {"argv", v.notify->argv}} : json(nullptr)},
  };
}
json ToJson(const SubmitResult& v) {
  json j{{"id", v.id}};
  if (v.tasks) j["tasks"] = *v.tasks;
  return j;
}
json ToJson(const QueueArgs& v) { return json{{"all", v.all}, {"after_id", v.after_id}, {"limit", OrNull(v.limit)}}; }
json ToJson(const QueueResult& v) {
  json jobs = json::array();
  for (const auto& job : v.jobs) jobs.push_back(JobToJson(job, /*include_private=*/false));
  return json{{"jobs", std::move(jobs)}, {"next", OrNull(v.next)}};
}
json ToJson(const ShowArgs& v) { return json{{"id", JobRefToJson(v.id)}}; }
json ToJson(const ShowResult& v) {
  json j{{"job", JobToJson(v.job, v.include_private)}};
  if (v.array) {
    j["array"] = json{{"id", v.array->id}, {"limit", OrNull(v.array->limit)}, {"tasks", v.array->tasks},
                      {"by_state", v.array->by_state}};
  }
  return j;
}
json ToJson(const CancelArgs& v) { return IdsArgsToJson(v.ids); }
json ToJson(const HoldArgs& v) { return IdsArgsToJson(v.ids); }
json ToJson(const ResumeArgs& v) { return IdsArgsToJson(v.ids); }
json ToJson(const IdsResult& v) {
  json results = json::array();
  for (const auto& r : v.results) {
    json item = {{"id", JobRefToJson(r.id)}, {"ok", !r.error.has_value()}};
    if (r.error) item["error"] = ToJson(*r.error);
    results.push_back(std::move(item));
  }
  return json{{"results", std::move(results)}};
}
json ToJson(const WaitArgs& v) { return json{{"id", JobRefToJson(v.id)}}; }
json ToJson(const WaitResult& v) {
  json j{{"state", model::JobStateName(v.state)}, {"exit_code", OrNull(v.exit_code)}};
  if (v.of) j["of"] = JobRefToJson(*v.of);
  return j;
}
json ToJson(const LogsArgs& v) { return json{{"id", JobRefToJson(v.id)}, {"offset", v.offset}}; }
json ToJson(const LogsResult& v) { return json{{"data", v.data}, {"next_offset", v.next_offset}, {"eof", v.eof}}; }
json ToJson(const DrainArgs& v) { return json{{"gpu", v.gpu}, {"reason", v.reason}}; }
json ToJson(const UndrainArgs& v) { return json{{"gpu", v.gpu}, {"reason", v.reason}}; }
json ToJson(const DrainResult& v) { return json{{"gpu_uuid", v.gpu_uuid}}; }
json ToJson(const LeasesArgs& v) {
  json j = json::object();
  // Only what is set: a request for everything stays `{}`, as a daemon from before paging knows it.
  if (v.after_id) j["after_id"] = *v.after_id;
  if (v.limit) j["limit"] = *v.limit;
  return j;
}
json ToJson(const LeasesResult& v) {
  json leases = json::array();
  for (const auto& l : v.leases) leases.push_back(LeaseToJson(l));
  return json{{"leases", std::move(leases)}, {"next", OrNull(v.next)}};
}
json ToJson(const AcquireArgs& v) {
  json j{
      {"request", GpuRequestToJson(v.request)}, {"command", v.command},         {"pid", v.pid},
      {"start_time_ticks", v.start_time_ticks}, {"wait_ms", OrNull(v.wait_ms)},
      {"within_lease_id", OrNull(v.within_lease_id)}, {"kind", v.kind},
  };
  if (!v.processes.empty()) {
    json processes = json::array();
    for (const auto& p : v.processes) processes.push_back(LeaseProcessToJson(p));
    j["processes"] = std::move(processes);
  }
  if (v.describe) j["describe"] = true;
  return j;
}
json ToJson(const AcquireResult& v) {
  json j{{"lease_id", v.lease_id}, {"gpu_uuids", v.gpu_uuids}, {"nested", v.nested}};
  if (v.processes_added) j["processes_added"] = true;
  if (v.cgroup) j["cgroup"] = *v.cgroup;
  if (v.master_port) j["master_port"] = *v.master_port;
  if (v.mps_pipe_directory) j["mps_pipe_directory"] = *v.mps_pipe_directory;
  if (v.mps_log_directory) j["mps_log_directory"] = *v.mps_log_directory;
  if (!v.gpus.empty()) {
    json gpus = json::array();
    for (const auto& g : v.gpus) gpus.push_back({{"index", g.index}, {"uuid", g.uuid}, {"name", OrNull(g.name)}});
    j["gpus"] = std::move(gpus);
    json env = json::object();
    for (const auto& [name, value] : v.env) env[name] = value;
    j["env"] = std::move(env);
  }
  return j;
}
json ToJson(const AddProcessesArgs& v) {
  json processes = json::array();
  for (const auto& p : v.processes) processes.push_back(LeaseProcessToJson(p));
  return json{{"lease_id", v.lease_id}, {"processes", std::move(processes)}};
}
json ToJson(const ReleaseArgs& v) {
  json j{{"lease_id", v.lease_id}};
  if (v.force) j["force"] = true;
  return j;
}
json ToJson(const ReleaseResult& v) {
  if (v.ending == 0) return json::object();
  return json{{"ending", v.ending}};
}
json ToJson(const EmptyResult&) { return json::object(); }
json ToJson(const AddProcessesResult& v) {
  json j = json::object();
  if (v.cgroup) j["cgroup"] = *v.cgroup;
  return j;
}
json ToJson(const StatusArgs& v) { return v.options.is_object() ? v.options : json::object(); }
json ToJson(const StatusResult& v) { return v.status.is_object() ? v.status : json::object(); }
json ToJson(const HealthArgs&) { return json::object(); }
json ToJson(const HealthResult& v) { return v.report.is_object() ? v.report : json::object(); }
json ToJson(const DrainsArgs&) { return json::object(); }
json ToJson(const DrainsResult& v) {
  json drains = json::array();
  for (const auto& d : v.drains) {
    drains.push_back(json{{"uuid", d.uuid},
                          {"reason", d.reason},
                          {"by_uid", d.by_uid},
                          {"by_user", d.by_user},
                          {"since_unix_ms", d.since_unix_ms}});
  }
  return json{{"drains", std::move(drains)}};
}
json ToJson(const SnapshotArgs& v) {
  json j{{"processes", v.processes}};
  if (v.topology) j["topology"] = true;
  if (v.gpus_only) j["gpus_only"] = true;
  return j;
}
json ToJson(const SnapshotResult& v) {
  json leases = json::array();
  for (const auto& l : v.leases) leases.push_back(LeaseToJson(l));
  json jobs = json::array();
  for (const auto& j : v.jobs) jobs.push_back(JobToJson(j, false));
  return json{
      {"snapshot", v.snapshot ? MachineSnapshotToJson(*v.snapshot) : json(nullptr)},
      {"error", v.error},
      {"sample_interval_ms", v.sample_interval_ms},
      {"scenario", OrNull(v.scenario)},
      {"leases", std::move(leases)},
      {"jobs", std::move(jobs)},
      {"drains", ToJson(DrainsResult{v.drains})["drains"]},
  };
}
json ToJson(const UpdateArgs& v) {
  json j = IdsArgsToJson(v.ids);
  if (v.priority) j["priority"] = *v.priority;
  if (v.time_limit_ms) j["time_limit_ms"] = *v.time_limit_ms;
  if (v.name) j["name"] = *v.name;
  return j;
}
json ToJson(const PreviewArgs& v) {
  return json{{"request", GpuRequestToJson(v.request)}, {"within_lease_id", OrNull(v.within_lease_id)}};
}
json ToJson(const PreviewResult& v) {
  return json{{"gpu_uuids", v.gpu_uuids},
              {"placement", v.placement},
              {"lease_id", OrNull(v.lease_id)},
              {"nested", v.nested}};
}
std::string EncodeSnapshotResult(const SnapshotResult& v, std::string_view snapshot_json) {
  json j = ToJson(v);
  j.erase("snapshot");  // null: v has none
  // Members are written in key order and "snapshot" sorts last: the text up to the closing
  // brace (there are always other members: error, jobs, ...), then that member.
  std::string text = DumpJson(j);
  text.pop_back();
  text.append(",\"snapshot\":").append(snapshot_json).append("}");
  return text;
}
json ToJson(const WireError& v) { return json{{"code", WireCodeName(v.code)}, {"message", v.message}}; }

// ---- FromJson

template <>
Result<HelloArgs> FromJson<HelloArgs>(const json& j) {
  HelloArgs v;
  FieldReader f(j, "args");
  f.Required("client", v.client);
  f.Required("protocol", v.protocol);
  f.Check(v.protocol >= 1, "protocol", "integer >= 1");
  return Done(f, std::move(v));
}

template <>
Result<HelloResult> FromJson<HelloResult>(const json& j) {
  HelloResult v;
  FieldReader f(j, "result");
  f.Required("protocol", v.protocol);
  f.Required("uid", v.uid);
  f.Optional("user", v.user);
  f.Optional("daemon", v.daemon);
  return Done(f, std::move(v));
}

template <>
Result<SubmitArgs> FromJson<SubmitArgs>(const json& j) {
  SubmitArgs v;
  FieldReader f(j, "args");
  f.Optional("name", v.name);
  f.Required("argv", v.argv);
  f.Check(!v.argv.empty(), "argv", "non-empty array of strings");
  for (std::size_t i = 0; i < v.argv.size() && f.ok(); ++i) {
    f.Check(HasNoNul(v.argv[i]), "argv[" + std::to_string(i) + "]", "string without NUL bytes");
  }
  f.Optional("env", v.env);
  for (const auto& [key, value] : v.env) {
    if (!f.ok()) break;
    f.Check(!key.empty() && key.find('=') == std::string::npos && HasNoNul(key), "env",
            "variable names that are non-empty, without '=' or NUL");
    f.Check(HasNoNul(value), "env." + key, "string without NUL bytes");
  }
  f.Required("cwd", v.cwd);
  f.Check(!v.cwd.empty() && v.cwd[0] == '/' && HasNoNul(v.cwd), "cwd", "absolute path");
  f.Optional("output", v.output);
  f.Check(!v.output || (!v.output->empty() && HasNoNul(*v.output)), "output", "non-empty path or null");
  ReadRequest(f, v.request);
  f.Optional("priority", v.priority);
  f.Optional("time_limit_ms", v.time_limit_ms);
  f.Check(!v.time_limit_ms || *v.time_limit_ms >= 1, "time_limit_ms", "integer >= 1 or null");
  f.Optional("requeue", v.requeue);
  f.Optional("after", v.after);
  for (std::size_t i = 0; i < v.after.size() && f.ok(); ++i) {
    f.Check(v.after[i] >= 1, "after[" + std::to_string(i) + "]", "integer >= 1");
  }
  f.Optional("array", v.array);
  f.Check(!v.array || !v.array->empty(), "array", "non-empty task list (\"0-99%8\") or null");
  if (const json* n = f.Find("notify"); f.ok() && n != nullptr && !n->is_null()) {
    FieldReader g(*n, f.PathOf("notify"));
    model::JobNotify notify;
    g.Optional("mail", notify.mail);
    g.Optional("argv", notify.argv);
    if (g.ok()) {
      v.notify = std::move(notify);
    } else {
      f.Adopt(g.error());
    }
  }
  return Done(f, std::move(v));
}

template <>
Result<SubmitResult> FromJson<SubmitResult>(const json& j) {
  SubmitResult v;
  FieldReader f(j, "result");
  ReadId(f, "id", v.id);
  f.Optional("tasks", v.tasks);
  return Done(f, v);
}

template <>
Result<QueueArgs> FromJson<QueueArgs>(const json& j) {
  QueueArgs v;
  FieldReader f(j, "args");
  f.Optional("all", v.all);
  f.Optional("after_id", v.after_id);
  f.Check(v.after_id >= 0, "after_id", "integer >= 0");
  f.Optional("limit", v.limit);
  f.Check(!v.limit || *v.limit >= 1, "limit", "integer >= 1 or null");
  return Done(f, v);
}

template <>
Result<QueueResult> FromJson<QueueResult>(const json& j) {
  QueueResult v;
  FieldReader f(j, "result");
  if (f.ok() && f.Find("jobs") == nullptr) f.Fail("jobs", "missing");
  ReadObjects(f, "jobs", v.jobs, [](const json& item, const std::string& path) { return JobFromJson(item, path); });
  f.Optional("next", v.next);
  f.Check(!v.next || *v.next >= 1, "next", "job id >= 1 or null");
  return Done(f, std::move(v));
}

template <>
Result<ShowArgs> FromJson<ShowArgs>(const json& j) {
  ShowArgs v;
  FieldReader f(j, "args");
  ReadJobRef(f, "id", v.id);
  return Done(f, v);
}

template <>
Result<ShowResult> FromJson<ShowResult>(const json& j) {
  ShowResult v;
  FieldReader f(j, "result");
  const json* job = f.Find("job");
  if (f.ok() && job == nullptr) f.Fail("job", "missing");
  if (job != nullptr) {
    Result<model::Job> parsed = JobFromJson(*job, f.PathOf("job"));
    if (parsed) {
      v.job = std::move(parsed).value();
      v.include_private = job->contains("argv");
    } else {
      f.Adopt(parsed.error());
    }
  }
  if (const json* array = f.Find("array"); f.ok() && array != nullptr && !array->is_null()) {
    ArrayInfo info;
    FieldReader g(*array, f.PathOf("array"));
    g.Required("id", info.id);
    g.Optional("limit", info.limit);
    g.Optional("tasks", info.tasks);
    g.Optional("by_state", info.by_state);
    if (g.ok()) {
      v.array = std::move(info);
    } else {
      f.Adopt(g.error());
    }
  }
  return Done(f, std::move(v));
}

template <>
Result<CancelArgs> FromJson<CancelArgs>(const json& j) {
  CancelArgs v;
  FieldReader f(j, "args");
  ReadIds(f, v.ids);
  return Done(f, std::move(v));
}

template <>
Result<HoldArgs> FromJson<HoldArgs>(const json& j) {
  HoldArgs v;
  FieldReader f(j, "args");
  ReadIds(f, v.ids);
  return Done(f, std::move(v));
}

template <>
Result<ResumeArgs> FromJson<ResumeArgs>(const json& j) {
  ResumeArgs v;
  FieldReader f(j, "args");
  ReadIds(f, v.ids);
  return Done(f, std::move(v));
}

template <>
Result<IdsResult> FromJson<IdsResult>(const json& j) {
  IdsResult v;
  FieldReader f(j, "result");
  if (f.ok() && f.Find("results") == nullptr) f.Fail("results", "missing");
  ReadObjects(f, "results", v.results, [](const json& item, const std::string& path) -> Result<IdOutcome> {
    IdOutcome o;
    FieldReader g(item, path);
    bool ok = false;
    ReadJobRef(g, "id", o.id);
    g.Required("ok", ok);
    if (g.ok() && !ok) {
      const json* e = g.Find("error");
      if (e == nullptr) {
        g.Fail("error", "missing");
      } else {
        Result<WireError> error = WireErrorFromJson(*e, g.PathOf("error"));
        if (error) {
          o.error = std::move(error).value();
        } else {
          g.Adopt(error.error());
        }
      }
    }
    return Done(g, std::move(o));
  });
  return Done(f, std::move(v));
}

template <>
Result<WaitArgs> FromJson<WaitArgs>(const json& j) {
  WaitArgs v;
  FieldReader f(j, "args");
  ReadJobRef(f, "id", v.id);
  return Done(f, v);
}

template <>
Result<WaitResult> FromJson<WaitResult>(const json& j) {
  WaitResult v;
  FieldReader f(j, "result");
  std::string state;
  f.Required("state", state);
  if (f.ok()) {
    if (std::optional<model::JobState> s = model::ParseJobState(state)) {
      v.state = *s;
    } else {
      f.Fail("state", "unknown job state '" + state + "'");
    }
  }
  f.Optional("exit_code", v.exit_code);
  if (const json* of = f.Find("of"); f.ok() && of != nullptr && !of->is_null()) {
    model::JobRef ref;
    ReadJobRef(f, "of", ref);
    if (f.ok()) v.of = ref;
  }
  return Done(f, v);
}

template <>
Result<LogsArgs> FromJson<LogsArgs>(const json& j) {
  LogsArgs v;
  FieldReader f(j, "args");
  ReadJobRef(f, "id", v.id);
  f.Optional("offset", v.offset);
  f.Check(v.offset >= 0, "offset", "integer >= 0");
  return Done(f, v);
}

template <>
Result<LogsResult> FromJson<LogsResult>(const json& j) {
  LogsResult v;
  FieldReader f(j, "result");
  f.Required("data", v.data);
  f.Required("next_offset", v.next_offset);
  f.Check(v.next_offset >= 0, "next_offset", "integer >= 0");
  f.Required("eof", v.eof);
  return Done(f, std::move(v));
}

template <>
Result<DrainArgs> FromJson<DrainArgs>(const json& j) {
  DrainArgs v;
  FieldReader f(j, "args");
  f.Required("gpu", v.gpu);
  f.Check(!v.gpu.empty(), "gpu", "non-empty string (UUID or index)");
  f.Optional("reason", v.reason);
  return Done(f, std::move(v));
}

template <>
Result<UndrainArgs> FromJson<UndrainArgs>(const json& j) {
  UndrainArgs v;
  FieldReader f(j, "args");
  f.Required("gpu", v.gpu);
  f.Check(!v.gpu.empty(), "gpu", "non-empty string (UUID or index)");
  f.Optional("reason", v.reason);
  return Done(f, std::move(v));
}

template <>
Result<DrainResult> FromJson<DrainResult>(const json& j) {
  DrainResult v;
  FieldReader f(j, "result");
  f.Required("gpu_uuid", v.gpu_uuid);
  return Done(f, std::move(v));
}

template <>
Result<LeasesArgs> FromJson<LeasesArgs>(const json& j) {
  LeasesArgs v;
  FieldReader f(j, "args");
  f.Optional("after_id", v.after_id);
  f.Optional("limit", v.limit);
  f.Check(!v.limit || *v.limit >= 1, "limit", "integer >= 1 or null");
  return Done(f, v);
}

template <>
Result<LeasesResult> FromJson<LeasesResult>(const json& j) {
  LeasesResult v;
  FieldReader f(j, "result");
  if (f.ok() && f.Find("leases") == nullptr) f.Fail("leases", "missing");
  ReadObjects(f, "leases", v.leases,
              [](const json& item, const std::string& path) { return LeaseFromJson(item, path); });
  f.Optional("next", v.next);
  return Done(f, std::move(v));
}

template <>
Result<AcquireArgs> FromJson<AcquireArgs>(const json& j) {
  AcquireArgs v;
  FieldReader f(j, "args");
  ReadRequest(f, v.request);
  f.Optional("command", v.command);
  f.Required("pid", v.pid);
  f.Check(v.pid >= 1, "pid", "integer >= 1");
  f.Required("start_time_ticks", v.start_time_ticks);
  f.Check(v.start_time_ticks >= 0, "start_time_ticks", "integer >= 0");
  f.Optional("wait_ms", v.wait_ms);
  f.Check(!v.wait_ms || *v.wait_ms >= 0, "wait_ms", "integer >= 0 or null");
  f.Optional("within_lease_id", v.within_lease_id);
  f.Check(!v.within_lease_id || *v.within_lease_id >= 1, "within_lease_id", "integer >= 1 or null");
  f.Optional("kind", v.kind);
  f.Check(v.kind == "run" || v.kind == "select", "kind", "\"run\" or \"select\"");
  if (f.ok() && f.Find("processes") != nullptr) {
    ReadObjects(f, "processes", v.processes,
                [](const json& item, const std::string& path) { return LeaseProcessFromJson(item, path); });
  }
  f.Optional("describe", v.describe);
  return Done(f, std::move(v));
}

template <>
Result<AcquireResult> FromJson<AcquireResult>(const json& j) {
  AcquireResult v;
  FieldReader f(j, "result");
  ReadId(f, "lease_id", v.lease_id);
  f.Required("gpu_uuids", v.gpu_uuids);
  f.Optional("nested", v.nested);
  f.Optional("processes_added", v.processes_added);
  std::string cgroup;
  f.Optional("cgroup", cgroup);
  if (!cgroup.empty()) v.cgroup = std::move(cgroup);
  f.Optional("master_port", v.master_port);
  f.Optional("mps_pipe_directory", v.mps_pipe_directory);
  f.Optional("mps_log_directory", v.mps_log_directory);
  if (f.ok() && f.Find("gpus") != nullptr) {
    ReadObjects(f, "gpus", v.gpus, [](const json& item, const std::string& path) -> Result<AcquiredGpu> {
      FieldReader g(item, path);
      AcquiredGpu gpu;
      g.Required("index", gpu.index);
      g.Required("uuid", gpu.uuid);
      g.Optional("name", gpu.name);
      return Done(g, std::move(gpu));
    });
  }
  if (f.ok()) {
    if (const json* env = f.Find("env"); env != nullptr && env->is_object()) {
      for (const auto& [name, value] : env->items()) {
        if (value.is_string()) v.env.emplace_back(name, value.get<std::string>());
      }
    }
  }
  return Done(f, std::move(v));
}

template <>
Result<AddProcessesArgs> FromJson<AddProcessesArgs>(const json& j) {
  AddProcessesArgs v;
  FieldReader f(j, "args");
  ReadId(f, "lease_id", v.lease_id);
  if (f.ok() && f.Find("processes") == nullptr) f.Fail("processes", "missing");
  ReadObjects(f, "processes", v.processes,
              [](const json& item, const std::string& path) { return LeaseProcessFromJson(item, path); });
  f.Check(!v.processes.empty(), "processes", "non-empty array of {pid, start_time_ticks}");
  return Done(f, std::move(v));
}

template <>
Result<ReleaseArgs> FromJson<ReleaseArgs>(const json& j) {
  ReleaseArgs v;
  FieldReader f(j, "args");
  ReadId(f, "lease_id", v.lease_id);
  f.Optional("force", v.force);
  return Done(f, v);
}

template <>
Result<ReleaseResult> FromJson<ReleaseResult>(const json& j) {
  ReleaseResult v;
  FieldReader f(j, "result");
  f.Optional("ending", v.ending);
  return Done(f, v);
}

template <>
Result<EmptyResult> FromJson<EmptyResult>(const json& j) {
  FieldReader f(j, "result");
  return Done(f, EmptyResult{});
}

template <>
Result<AddProcessesResult> FromJson<AddProcessesResult>(const json& j) {
  AddProcessesResult v;
  FieldReader f(j, "result");
  std::string cgroup;
  f.Optional("cgroup", cgroup);
  if (!cgroup.empty()) v.cgroup = std::move(cgroup);
  return Done(f, std::move(v));
}

template <>
Result<StatusArgs> FromJson<StatusArgs>(const json& j) {
  FieldReader f(j, "args");
  return Done(f, StatusArgs{j});
}

template <>
Result<StatusResult> FromJson<StatusResult>(const json& j) {
  FieldReader f(j, "result");
  return Done(f, StatusResult{j});
}

template <>
Result<HealthArgs> FromJson<HealthArgs>(const json& j) {
  FieldReader f(j, "args");
  return Done(f, HealthArgs{});
}

template <>
Result<HealthResult> FromJson<HealthResult>(const json& j) {
  FieldReader f(j, "result");
  return Done(f, HealthResult{j});
}

template <>
Result<DrainsArgs> FromJson<DrainsArgs>(const json& j) {
  FieldReader f(j, "args");
  return Done(f, DrainsArgs{});
}

template <>
Result<DrainsResult> FromJson<DrainsResult>(const json& j) {
  DrainsResult v;
  FieldReader f(j, "result");
  if (f.ok() && f.Find("drains") == nullptr) f.Fail("drains", "missing");
  ReadObjects(f, "drains", v.drains, [](const json& item, const std::string& path) -> Result<model::GpuDrain> {
    model::GpuDrain d;
    FieldReader g(item, path);
    g.Required("uuid", d.uuid);
    g.Check(!d.uuid.empty(), "uuid", "non-empty string");
    g.Optional("reason", d.reason);
    g.Optional("by_uid", d.by_uid);
    g.Optional("by_user", d.by_user);
    g.Optional("since_unix_ms", d.since_unix_ms);
    return Done(g, std::move(d));
  });
  return Done(f, std::move(v));
}

template <>
Result<SnapshotArgs> FromJson<SnapshotArgs>(const json& j) {
  SnapshotArgs v;
  FieldReader f(j, "args");
  f.Optional("processes", v.processes);
  f.Optional("topology", v.topology);
  f.Optional("gpus_only", v.gpus_only);
  return Done(f, v);
}

template <>
Result<SnapshotResult> FromJson<SnapshotResult>(const json& j) {
  SnapshotResult v;
  FieldReader f(j, "result");
  if (const json* s = f.Find("snapshot"); s != nullptr && !s->is_null()) {
    auto snap = MachineSnapshotFromJson(*s, f.PathOf("snapshot"));
    if (snap) {
      v.snapshot = std::move(*snap);
    } else {
      f.Adopt(snap.error());
    }
  }
  f.Optional("error", v.error);
  f.Optional("sample_interval_ms", v.sample_interval_ms);
  f.Optional("scenario", v.scenario);
  ReadObjects(f, "leases", v.leases, [](const json& item, const std::string& path) { return LeaseFromJson(item, path); });
  ReadObjects(f, "jobs", v.jobs, [](const json& item, const std::string& path) { return JobFromJson(item, path); });
  if (const json* d = f.Find("drains")) {
    auto drains = FromJson<DrainsResult>(json{{"drains", *d}});
    if (drains) {
      v.drains = std::move(drains->drains);
    } else {
      f.Fail("drains", drains.error().message);
    }
  }
  return Done(f, std::move(v));
}

template <>
Result<UpdateArgs> FromJson<UpdateArgs>(const json& j) {
  UpdateArgs v;
  FieldReader f(j, "args");
  ReadIds(f, v.ids);
  f.Optional("priority", v.priority);
  f.Optional("time_limit_ms", v.time_limit_ms);
  f.Check(!v.time_limit_ms || *v.time_limit_ms >= 1, "time_limit_ms", "integer >= 1");
  f.Optional("name", v.name);
  f.Check(!v.name || (!v.name->empty() && HasNoNul(*v.name)), "name", "non-empty string without NUL bytes");
  f.Check(v.priority || v.time_limit_ms || v.name, "priority", "at least one of priority, time_limit_ms, name");
  return Done(f, std::move(v));
}

template <>
Result<PreviewArgs> FromJson<PreviewArgs>(const json& j) {
  PreviewArgs v;
  FieldReader f(j, "args");
  ReadRequest(f, v.request);
  f.Optional("within_lease_id", v.within_lease_id);
  f.Check(!v.within_lease_id || *v.within_lease_id >= 1, "within_lease_id", "integer >= 1 or null");
  return Done(f, std::move(v));
}

template <>
Result<PreviewResult> FromJson<PreviewResult>(const json& j) {
  PreviewResult v;
  FieldReader f(j, "result");
  f.Required("gpu_uuids", v.gpu_uuids);
  f.Optional("placement", v.placement);
  f.Optional("lease_id", v.lease_id);
  f.Optional("nested", v.nested);
  return Done(f, std::move(v));
}

template <>
Result<WireError> FromJson<WireError>(const json& j) {
  return WireErrorFromJson(j, "error");
}

}  // namespace gpuman::protocol
