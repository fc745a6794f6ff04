#include "slurm/sbatch.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>

#include "base/strings.h"
#include "slurm/gres_conf_gen.h"

namespace gpuman::slurm {
namespace {

// sacct's field separator: ASCII unit separator, which names and paths do not hold.
constexpr char kSacctDelimiter = '\x1f';

std::string FirstLine(std::string_view text) {
  text = Trim(text);
  const size_t nl = text.find('\n');
  return std::string(nl == std::string_view::npos ? text : text.substr(0, nl));
}

// What a failing Slurm command said, for one line of ours.
std::string Said(const ToolOutput& o) {
  std::string s = FirstLine(o.err.empty() ? o.out : o.err);
  if (s.empty()) s = "exit status " + std::to_string(o.exit_code);
  return s;
}

bool Contains(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }

// A refused Slurm request as one of our error codes.
Error SlurmError(const std::string& context, const ToolOutput& o) {
  const std::string said = Said(o);
  ErrorCode code = ErrorCode::kInvalidArgument;
  if (Contains(said, "Access/permission denied") || Contains(said, "Permission denied")) code = ErrorCode::kPermissionDenied;
  else if (Contains(said, "Invalid job id")) code = ErrorCode::kNotFound;
  else if (Contains(said, "Unable to contact") || Contains(said, "Socket timed out") || Contains(said, "Connection refused"))
    code = ErrorCode::kUnavailable;
  return MakeError(code, context + ": " + said);
}

bool IsKeyStart(std::string_view word) {
  const size_t eq = word.find('=');
  if (eq == std::string_view::npos || eq == 0 || !std::isupper(static_cast<unsigned char>(word[0]))) return false;
  for (size_t i = 0; i < eq; ++i) {
    const unsigned char c = static_cast<unsigned char>(word[i]);
    if (!std::isalnum(c) && c != '_' && c != ':' && c != '/') return false;
  }
  return true;
}

// "N:S" of ExitCode.
void ParseExitCode(std::string_view text, SlurmJob& job) {
  const auto parts = Split(Trim(text), ':');
  if (parts.empty() || parts[0].empty()) return;
  try {
    job.exit_code = std::stoi(parts[0]);
    if (parts.size() > 1 && !parts[1].empty() && std::stoi(parts[1]) != 0) job.signal = std::stoi(parts[1]);
  } catch (const std::exception&) {
    job.exit_code.reset();
  }
}

std::string Known(const std::string& value) {
  return value == "Unknown" || value == "None" || value == "(null)" || value == "N/A" ? std::string() : value;
}

std::string LocalTime(int64_t unix_s) {
  if (unix_s <= 0) return "";
  const time_t t = static_cast<time_t>(unix_s);
  tm local{};
  localtime_r(&t, &local);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &local);
  return buf;
}

// A number of squeue's JSON: a plain number (22.05), or {"set":..,"infinite":..,"number":..} (23.x).
std::optional<int64_t> Number(const nlohmann::json& v) {
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number()) return static_cast<int64_t>(v.get<double>());
  if (v.is_object()) {
    if (v.contains("set") && v["set"].is_boolean() && !v["set"].get<bool>()) return std::nullopt;
    if (v.contains("infinite") && v["infinite"].is_boolean() && v["infinite"].get<bool>()) return std::nullopt;
    if (v.contains("number")) return Number(v["number"]);
  }
  return std::nullopt;
}

std::string Text(const nlohmann::json& j, const char* key) {
  if (!j.contains(key)) return "";
  const auto& v = j[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_array() && !v.empty() && v[0].is_string()) return v[0].get<std::string>();  // 23.x job_state: ["PENDING"]
  if (auto n = Number(v)) return std::to_string(*n);
  return "";
}

}  // namespace

std::string ShellQuote(std::string_view text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

std::string SlurmTimeLimit(int64_t ms) {
  const int64_t s = std::max<int64_t>(1, (ms + 999) / 1000);
  char buf[48];
  std::snprintf(buf, sizeof buf, "%lld-%02lld:%02lld:%02lld", static_cast<long long>(s / 86400),
                static_cast<long long>(s / 3600 % 24), static_cast<long long>(s / 60 % 60), static_cast<long long>(s % 60));
  return buf;
}

std::vector<std::string> SbatchArgv(const SbatchSpec& spec) {
  std::string name = spec.name;
  if (name.empty() && !spec.argv.empty()) {
    name = spec.argv[0];
    if (const size_t slash = name.rfind('/'); slash != std::string::npos) name = name.substr(slash + 1);
  }
  // One node: the job runs under one `gpuman run`, which sees that node's GPUs only.
  std::vector<std::string> argv = {"sbatch", "--parsable", "--nodes=1", "--job-name=" + name, "--chdir=" + spec.cwd,
                                   "--output=" + (spec.output ? *spec.output
                                                              : std::string(spec.array ? "gpuman-%A_%a.log" : "gpuman-%j.log"))};
  if (spec.array) argv.push_back("--array=" + *spec.array);
  if (spec.gpus > 0) {
    if (spec.gres_type) argv.push_back("--gres=gpu:" + *spec.gres_type + ":" + std::to_string(spec.gpus));
    else argv.push_back("--gpus=" + std::to_string(spec.gpus));
  }
  if (spec.time_limit_ms) argv.push_back("--time=" + SlurmTimeLimit(*spec.time_limit_ms));
  if (!spec.after.empty()) {
    // gpuman cancels a job whose dependency failed; Slurm would keep it pending forever.
    argv.push_back("--dependency=afterok:" + Join(spec.after, ":"));
    argv.push_back("--kill-on-invalid-dep=yes");
  }
  argv.push_back(spec.requeue ? "--requeue" : "--no-requeue");
  if (spec.mail_user) {
    argv.push_back("--mail-type=END,FAIL");
    argv.push_back("--mail-user=" + *spec.mail_user);
  }
  return argv;
}

std::string BatchScript(const SbatchSpec& spec) {
  std::vector<std::string> words = {spec.gpuman_exe, "run", "-q", "-n", std::to_string(spec.gpus)};
  if (spec.allow_shared) words.push_back("--allow-shared");
  if (spec.mig_profile) words.insert(words.end(), {"--mig", *spec.mig_profile});
  words.push_back("--");
  for (const auto& a : spec.argv) words.push_back(a);
  std::string line = "exec";
  for (const auto& w : words) line += " " + ShellQuote(w);
  return "#!/bin/sh\n" + line + "\n";
}

Result<std::string> ParseSbatchJobId(std::string_view out) {
  std::string last;
  for (const auto& l : Split(out, '\n')) {
    if (!Trim(l).empty()) last = std::string(Trim(l));
  }
  const std::string id = last.substr(0, last.find(';'));
  if (id.empty() || !std::all_of(id.begin(), id.end(), [](unsigned char c) { return std::isdigit(c); })) {
    return MakeError(ErrorCode::kInternal, "sbatch printed no job id ('" + last + "')");
  }
  return id;
}

std::vector<std::string> ParseSinfoGpuTypes(std::string_view text) {
  std::string flat;
  int depth = 0;
  for (char c : text) {  // drop "(S:0-1)" socket notes
    if (c == '(') ++depth;
    else if (c == ')') depth = std::max(0, depth - 1);
    else if (depth == 0) flat += c == '\n' ? ',' : c;
  }
  std::vector<std::string> types;
  for (const auto& item : Split(flat, ',')) {
    const auto parts = Split(Trim(item), ':');
    if (parts.size() >= 3 && parts[0] == "gpu" && !parts[1].empty()) types.push_back(parts[1]);
  }
  std::sort(types.begin(), types.end());
  types.erase(std::unique(types.begin(), types.end()), types.end());
  return types;
}

Result<std::string> ResolveGresType(std::string_view model, const std::vector<std::string>& types) {
  const std::string spelled = GresType(Trim(model));
  if (spelled.empty()) return MakeError(ErrorCode::kInvalidArgument, "--model: empty");
  if (types.empty()) return spelled;
  if (std::find(types.begin(), types.end(), spelled) != types.end()) return spelled;
  std::vector<std::string> matches;
  for (const auto& t : types) {
    if (Contains(t, spelled)) matches.push_back(t);
  }
  if (matches.size() == 1) return matches[0];
  if (matches.empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "--model " + std::string(model) + ": no Slurm GPU type contains '" +
                                                      spelled + "' (types: " + Join(types, ", ") + ")");
  }
  return MakeError(ErrorCode::kInvalidArgument, "--model " + std::string(model) + ": Slurm requests one GPU type, and '" +
                                                    spelled + "' matches several (" + Join(matches, ", ") + "): name one");
}

model::JobState GpumanState(const SlurmJob& job) {
  const std::string& s = job.state;
  if (s == "PENDING") {
    return Contains(job.reason, "JobHeld") ? model::JobState::kHeld : model::JobState::kQueued;
  }
  if (s == "REQUEUE_HOLD" || s == "RESV_DEL_HOLD" || s == "SUSPENDED" || s == "STOPPED") return model::JobState::kHeld;
  if (s == "REQUEUED" || s == "REQUEUE_FED") return model::JobState::kQueued;
  if (s == "CONFIGURING") return model::JobState::kStarting;
  if (s == "RUNNING" || s == "COMPLETING" || s == "SIGNALING" || s == "STAGE_OUT" || s == "RESIZING") {
    return model::JobState::kRunning;
  }
  if (s == "COMPLETED") return model::JobState::kSucceeded;
  if (s == "CANCELLED" || s == "PREEMPTED" || s == "DEADLINE" || s == "REVOKED") return model::JobState::kCancelled;
  if (s == "TIMEOUT") return model::JobState::kTimedOut;
  return model::JobState::kFailed;  // FAILED, NODE_FAIL, BOOT_FAIL, OUT_OF_MEMORY, SPECIAL_EXIT
}

bool IsFinalSlurmState(std::string_view s) {
  for (std::string_view f : {"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "PREEMPTED", "NODE_FAIL", "BOOT_FAIL",
                             "DEADLINE", "OUT_OF_MEMORY", "REVOKED", "SPECIAL_EXIT"}) {
    if (s == f) return true;
  }
  return false;
}

std::map<std::string, std::string> ParseScontrolFields(std::string_view line) {
  std::map<std::string, std::string> fields;
  std::string* value = nullptr;
  for (const auto& word : Split(FirstLine(line), ' ')) {
    if (IsKeyStart(word)) {
      const size_t eq = word.find('=');
      value = &fields[word.substr(0, eq)];
      *value = word.substr(eq + 1);
    } else if (value) {
      *value += " " + word;  // a value with spaces (a path, a name)
    }
  }
  for (auto& [k, v] : fields) {
    while (!v.empty() && v.back() == ' ') v.pop_back();
  }
  return fields;
}

int GpusInTres(std::string_view tres) {
  for (const auto& item : Split(tres, ',')) {
    const std::string_view it = Trim(item);
    std::string_view count;
    if (it.rfind("gres/gpu", 0) == 0 && it.find('=') != std::string_view::npos) {
      if (it.substr(0, it.find('=')).find(':') != std::string_view::npos) continue;  // per-type entry beside the total
      count = it.substr(it.find('=') + 1);
    } else if (it.rfind("gres:gpu:", 0) == 0 || it.rfind("gres/gpu:", 0) == 0 || it.rfind("gpu:", 0) == 0) {
      count = it.substr(it.rfind(':') + 1);
    } else {
      continue;
    }
    try {
      return std::stoi(std::string(count));
    } catch (const std::exception&) {
      return 0;
    }
  }
  return 0;
}

Result<SlurmJob> JobFromScontrol(std::string_view text) {
  auto f = ParseScontrolFields(text);
  if (f["JobId"].empty()) return MakeError(ErrorCode::kNotFound, "scontrol printed no job");
  SlurmJob job;
  job.source = "scontrol";
  job.id = f["JobId"];
  job.name = f["JobName"];
  job.user = f["UserId"].substr(0, f["UserId"].find('('));
  job.state = f["JobState"];
  job.reason = Known(f["Reason"]);
  ParseExitCode(f["ExitCode"], job);
  job.gpus = GpusInTres(f["TRES"]);
  if (job.gpus == 0) job.gpus = GpusInTres(f["TresPerJob"]);
  if (job.gpus == 0) job.gpus = GpusInTres(f["TresPerNode"]);
  job.nodes = Known(f["NodeList"]);
  job.time_limit = f["TimeLimit"];
  job.submitted = Known(f["SubmitTime"]);
  job.started = Known(f["StartTime"]);
  job.ended = Known(f["EndTime"]);
  job.output_path = Known(f["StdOut"]);
  job.cwd = Known(f["WorkDir"]);
  job.dependency = Known(f["Dependency"]);
  return job;
}

Result<std::vector<SlurmJob>> JobsFromSqueueJson(std::string_view text) {
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("jobs") || !doc["jobs"].is_array()) {
    return MakeError(ErrorCode::kInternal, "squeue --json printed no job list");
  }
  std::vector<SlurmJob> jobs;
  for (const auto& j : doc["jobs"]) {
    if (!j.is_object()) continue;
    SlurmJob job;
    job.source = "squeue";
    job.id = Text(j, "job_id");
    job.name = Text(j, "name");
    job.user = Text(j, "user_name");
    job.state = Text(j, "job_state");
    job.reason = Known(Text(j, "state_reason"));
    job.gpus = GpusInTres(Text(j, "tres_alloc_str"));
    if (job.gpus == 0) job.gpus = GpusInTres(Text(j, "tres_req_str"));
    if (job.gpus == 0) job.gpus = GpusInTres(Text(j, "tres_per_job"));
    if (job.gpus == 0) job.gpus = GpusInTres(Text(j, "tres_per_node"));
    job.nodes = Text(j, "nodes");
    auto time = [&](const char* key) { return j.contains(key) ? LocalTime(Number(j[key]).value_or(0)) : std::string(); };
    job.submitted = time("submit_time");
    job.started = time("start_time");
    job.ended = time("end_time");
    if (j.contains("time_limit")) {
      if (auto m = Number(j["time_limit"])) job.time_limit = SlurmTimeLimit(*m * 60000);
      else job.time_limit = "UNLIMITED";
    }
    job.cwd = Text(j, "current_working_directory");
    job.dependency = Text(j, "dependency");
    if (job.id.empty()) continue;
    jobs.push_back(std::move(job));
  }
  return jobs;
}

std::vector<std::string> SacctArgv(const std::string& id) {
  return {"sacct", "--noheader", "--parsable2", "--allocations", std::string("--delimiter=") + kSacctDelimiter,
          "--jobs=" + id, "--format=JobID,State,ExitCode,User,NodeList,AllocTRES,Timelimit,Submit,Start,End,WorkDir,JobName"};
}

Result<SlurmJob> JobFromSacct(std::string_view text, const std::string& id) {
  for (const auto& line : Split(text, '\n')) {
    auto f = Split(line, kSacctDelimiter);
    if (f.size() < 12 || f[0] != id) continue;
    // The name is last: it may hold the delimiter itself.
    std::vector<std::string> name_parts(f.begin() + 11, f.end());
    SlurmJob job;
    job.source = "sacct";
    job.id = f[0];
    job.state = Split(f[1], ' ')[0];  // "CANCELLED by 1001"
    ParseExitCode(f[2], job);
    job.user = f[3];
    job.nodes = Known(f[4]);
    job.gpus = GpusInTres(f[5]);
    job.time_limit = f[6];
    job.submitted = Known(f[7]);
    job.started = Known(f[8]);
    job.ended = Known(f[9]);
    job.cwd = f[10];
    job.name = Join(name_parts, std::string(1, kSacctDelimiter));
    return job;
  }
  return MakeError(ErrorCode::kNotFound, "sacct knows no job " + id);
}

std::vector<std::string> ConfiguredGpuTypes(SlurmTools& tools) {
  auto r = tools.Run({"sinfo", "--noheader", "--format=%G"});
  if (!r || r->exit_code != 0) return {};
  return ParseSinfoGpuTypes(r->out);
}

Result<std::string> Submit(SlurmTools& tools, const SbatchSpec& spec) {
  auto r = tools.Run(SbatchArgv(spec), BatchScript(spec));
  if (!r) return r.error();
  if (r->exit_code != 0) return SlurmError("sbatch refused the job", *r);
  return ParseSbatchJobId(r->out);
}

Result<SlurmJob> FindJob(SlurmTools& tools, const std::string& id) {
  auto shown = tools.Run({"scontrol", "--oneliner", "show", "job", id});
  if (!shown) return shown.error();
  if (shown->exit_code == 0 && !Trim(shown->out).empty()) return JobFromScontrol(shown->out);
  if (shown->exit_code != 0 && !Contains(Said(*shown), "Invalid job id")) return SlurmError("scontrol show job " + id, *shown);
  // slurmctld has forgotten it (MinJobAge): accounting may still know it.
  auto acct = tools.Run(SacctArgv(id));
  if (acct && acct->exit_code == 0) {
    if (auto job = JobFromSacct(acct->out, id)) return job;
  }
  return MakeError(ErrorCode::kNotFound, "no Slurm job " + id +
                                             (acct && acct->exit_code == 0 ? std::string()
                                                                           : " (slurmctld does not know it, and sacct could not be asked: " +
                                                                                 (acct ? Said(*acct) : acct.error().message) + ")"));
}

Result<std::string> JobState(SlurmTools& tools, const std::string& id) {
  auto r = tools.Run({"squeue", "--noheader", "--jobs=" + id, "--format=%T"});
  if (!r) return r.error();
  if (r->exit_code == 0 && !Trim(r->out).empty()) return FirstLine(r->out);
  auto job = FindJob(tools, id);
  if (!job) return job.error();
  return job->state;
}

Result<std::vector<SlurmJob>> ListJobs(SlurmTools& tools, bool all) {
  auto r = tools.Run({"squeue", "--all", "--json"});
  if (!r) return r.error();
  if (r->exit_code != 0) return SlurmError("squeue", *r);
  auto jobs = JobsFromSqueueJson(r->out);
  if (!jobs) return jobs.error();
  if (!all) {
    std::erase_if(*jobs, [](const SlurmJob& j) { return IsFinalSlurmState(j.state); });
  }
  std::sort(jobs->begin(), jobs->end(), [](const SlurmJob& a, const SlurmJob& b) {
    return a.id.size() != b.id.size() ? a.id.size() < b.id.size() : a.id < b.id;
  });
  return jobs;
}

Status Cancel(SlurmTools& tools, const std::string& id) {
  // scancel says nothing about an unknown id (Slurm 22.05): look first.
  auto job = FindJob(tools, id);
  if (!job) return job.error();
  if (IsFinalSlurmState(job->state)) {
    return MakeError(ErrorCode::kConflict, "Slurm job " + id + " already ended (" + job->state + ")");
  }
  auto r = tools.Run({"scancel", id});
  if (!r) return r.error();
  if (r->exit_code != 0 || Contains(r->err, "error")) return SlurmError("scancel " + id, *r);
  return {};
}

Status Hold(SlurmTools& tools, const std::string& id, bool hold) {
  auto r = tools.Run({"scontrol", hold ? "hold" : "release", id});
  if (!r) return r.error();
  if (r->exit_code != 0) return SlurmError(std::string("scontrol ") + (hold ? "hold " : "release ") + id, *r);
  return {};
}

}  // namespace gpuman::slurm
