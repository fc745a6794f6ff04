#include "cli/queue_commands.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <map>
#include <thread>

#include "base/duration.h"
#include "base/posix_error.h"
#include "base/spawn.h"
#include "base/strings.h"
#include "cli/daemon_client.h"
#include "cli/daemon_pages.h"
#include "cli/exit_codes.h"
#include "cli/slurm_submit.h"
#include "model/job_notify.h"
#include "protocol/model_json.h"
#include "render/job_view.h"
#include "sched/child_process.h"

namespace gpuman::cli {
namespace {

volatile std::sig_atomic_t g_queue_stop = 0;
void OnStop(int) { g_queue_stop = 1; }

// What `submit` can check up front, as the submitting user (this process), so that a job
// that could never start is refused now rather than failing later: the directory it
// will run in can be entered, its log can be written, its command is on its own PATH.
// The supervisor checks all of it again as the job's owner when it starts (the world may
// change in between). Returns the reason for refusing.
std::optional<std::string> CheckSubmitLocally(const protocol::SubmitArgs& s) {
  auto why = [](int err) { return PosixErrorText(err); };
  if (access(s.cwd.c_str(), X_OK) != 0) return "cannot enter the working directory " + s.cwd + ": " + why(errno);
  const std::string advice = " (pass --output FILE in a directory you can write)";
  if (s.output) {
    const std::filesystem::path log = (*s.output)[0] == '/' ? std::filesystem::path(*s.output)
                                                             : std::filesystem::path(s.cwd) / *s.output;
    const std::string dir = log.parent_path().empty() ? std::string("/") : log.parent_path().string();
    struct stat st{};
    if (stat(dir.c_str(), &st) != 0) return "--output: directory " + dir + ": " + why(errno);
    if (!S_ISDIR(st.st_mode)) return "--output: " + dir + " is not a directory";
    if (stat(log.c_str(), &st) == 0) {
      if (S_ISDIR(st.st_mode)) return "--output: " + log.string() + " is a directory";
      if (access(log.c_str(), W_OK) != 0) return "--output: cannot write " + log.string() + ": " + why(errno);
    } else if (access(dir.c_str(), W_OK | X_OK) != 0) {
      return "--output: cannot create a file in " + dir + ": " + why(errno);
    }
  } else if (access(s.cwd.c_str(), W_OK) != 0) {
    return "cannot write the job's log gpuman-ID.log in " + s.cwd + ": " + why(errno) + advice;
  }
  std::optional<std::string> path;
  if (auto it = s.env.find("PATH"); it != s.env.end()) path = it->second;
  if (auto program = FindProgram(s.argv.at(0), path); !program) return program.error().message;
  return std::nullopt;
}

// `--notify 'PROGRAM ARGS...'` as the job stores it: the words split without a shell
// (SplitCommandLine), PROGRAM found now on the submitter's PATH (as the job's command is)
// and made absolute; `--notify mail` is the machine's mail hook (the daemon checks it is
// configured). Errors: kInvalidArgument (a quote left open, nothing given), kNotFound,
// kPermissionDenied (FindProgram's), each one line starting "--notify: ".
Result<model::JobNotify> NotifyFromOption(const std::string& text, const std::string& cwd,
                                          const std::optional<std::string>& search_path) {
  if (Trim(text) == "mail") return model::JobNotify{true, {}};
  auto words = SplitCommandLine(text);
  if (!words) return MakeError(ErrorCode::kInvalidArgument, "--notify: " + words.error().message);
  if (words->empty()) return MakeError(ErrorCode::kInvalidArgument, "--notify: no program given (--notify 'PROGRAM ARGS...' or --notify mail)");
  auto program = FindProgram(words->front(), search_path);
  // An argument error like the rest, whatever FindProgram's code (exit 2, docs/cli.md).
  if (!program) return MakeError(ErrorCode::kInvalidArgument, "--notify: " + program.error().message);
  std::filesystem::path path(*program);
  if (path.is_relative()) path = std::filesystem::path(cwd) / path;
  words->front() = path.lexically_normal().string();
  model::JobNotify notify{false, std::move(*words)};
  if (auto bad = model::CheckNotify(notify)) return MakeError(ErrorCode::kInvalidArgument, *bad);
  return notify;
}

// cancel, hold, resume, update: one line per job the daemon refused; the exit code of the
// last refusal, 0 when none. A message that names its job itself ("job 5 is already
// cancelled", "no job 9") is printed as it is, the others get the job's name in front
// ("job 12_3: no task of the array is queued"). Refusals that differ only in the job
// (`cancel --user bob` of bob's 10,000 tasks) take kSameRefusalLines lines, then one that
// counts the rest.
int ReportOutcomes(const Result<protocol::IdsResult>& r, Context& ctx) {
  constexpr int kSameRefusalLines = 5;
  if (!r) return ctx.Fail(r.error());
  int rc = kExitOk;
  struct Kind {
    int count = 0;
    ErrorCode code = ErrorCode::kInternal;
    std::string last;  // the job refused last
  };
  std::map<std::string, Kind> kinds;  // by the line with its job's name taken out
  std::vector<std::string> order;
  for (const auto& o : r->results) {
    if (!o.error) continue;
    const Error e = protocol::ToError(*o.error);
    const std::string ref = model::FormatJobRef(o.id);
    const std::string message = EscapeControl(e.message);
    const bool named = message.starts_with("job ") || message.starts_with("no job ");
    const std::string line = named ? message : "job " + ref + ": " + message;
    std::string key = line;
    if (const size_t at = key.find(ref); at != std::string::npos) key.replace(at, ref.size(), "#");
    auto [it, fresh] = kinds.try_emplace(key);
    if (fresh) order.push_back(key);
    Kind& kind = it->second;
    kind.code = e.code;
    kind.last = ref;
    if (++kind.count <= kSameRefusalLines) rc = ctx.Fail(MakeError(e.code, line));
  }
  for (const std::string& key : order) {
    const Kind& kind = kinds[key];
    if (kind.count <= kSameRefusalLines) continue;
    const int rest = kind.count - kSameRefusalLines;
    rc = ctx.Fail(MakeError(kind.code, "and " + std::to_string(rest) + (rest == 1 ? " more job" : " more jobs") +
                                           " refused the same way (the last: job " + kind.last + ")"));
  }
  return rc;
}

void PrintJob(Context& ctx, const model::Job& j, bool json) {
  if (json) ctx.out() << protocol::JobToJson(j, !j.argv.empty()).dump(2) << "\n";
  else ctx.out() << render::JobDetailText(j);
}

// `wait --json`: the whole outcome (docs/json.md, "gpuman wait --json").
nlohmann::json WaitOutcomeJson(const model::Job& j, int wait_exit_code) {
  auto opt = [](const auto& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  auto iso = [](const std::optional<int64_t>& ms) {
    return ms ? nlohmann::json(render::FormatIsoUtcMillis(*ms)) : nlohmann::json(nullptr);
  };
  std::optional<int> signal;
  if (j.exit_code && *j.exit_code > kJobSignalBase && *j.exit_code <= kJobSignalBase + 64 &&
      j.state != model::JobState::kSucceeded) {
    signal = *j.exit_code - kJobSignalBase;  // the supervisor records signal N as 128+N
  }
  nlohmann::json doc{{"schema_version", 1},
                        {"id", j.id},
                        {"name", j.name},
                        {"state", model::JobStateName(j.state)},
                        {"exit_code", opt(j.exit_code)},
                        {"signal", opt(signal)},
                        {"reason", j.reason},
                        {"ended_by_itself", EndedByItself(j)},
                        {"wait_exit_code", wait_exit_code},
                        {"started", iso(j.started_unix_ms)},
                        {"started_unix_ms", opt(j.started_unix_ms)},
                        {"ended", iso(j.ended_unix_ms)},
                        {"ended_unix_ms", opt(j.ended_unix_ms)}};
  if (j.array_id) {  // a task of an array (the one a whole array's wait ends on)
    doc["array_id"] = *j.array_id;
    doc["array_task"] = opt(j.array_task);
  }
  return doc;
}

// The queue as `gpuman queue` prints it: JSON (pretty, or one line per refresh with
// --watch), or the table (render/job_view.h).
std::string RenderQueue(Context& ctx, const std::vector<model::Job>& jobs, bool json, bool compact_json, bool expand) {
  if (json) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& j : jobs) list.push_back(protocol::JobToJson(j, false));
    const nlohmann::json doc{{"schema_version", 1}, {"jobs", list}};
    return (compact_json ? doc.dump() : doc.dump(2)) + "\n";
  }
  const render::TerminalInfo term = ctx.Terminal(true);
  return render::QueueTable(jobs, ctx.clock().NowUnixMs(), std::max(80, term.width), term.cut_to_width, expand);
}

// `queue --watch[=SECONDS]`: the period, as `status --watch` checks it (finite, 0.1 to
// 86400 s); "" (no value) is 2 s, as watch(1). Errors: kInvalidArgument, the one line.
constexpr double kDefaultQueueWatchSeconds = 2.0;
Result<double> QueueWatchSeconds(const std::string& value) {
  if (value.empty()) return kDefaultQueueWatchSeconds;
  const std::optional<double> s = ParseFiniteDouble(value);
  if (!s) return MakeError(ErrorCode::kInvalidArgument, "--watch: '" + value + "' is not a number of seconds");
  if (*s < 0.1 || *s > 86400.0) return MakeError(ErrorCode::kInvalidArgument, "--watch: " + value + " is not in 0.1..86400 seconds");
  return *s;
}

// `queue --watch`: redraws the queue every period until interrupted (Ctrl-C, SIGTERM: exit
// 0) or --iterations; rides out a daemon restart (CallResuming: one line on stderr when
// lost, one when back) and gives up after [client] reconnect_timeout with exit 3
// (docs/cli.md, "When the daemon restarts").
int WatchQueue(const QueueArgs& args, const JobFilter& filter, double seconds, DaemonClient& c, Context& ctx) {
  g_queue_stop = 0;
  std::signal(SIGINT, OnStop);
  std::signal(SIGTERM, OnStop);
  const bool clear_screen = !args.json && ctx.stdout_is_tty();
  const auto period = std::chrono::duration<double>(seconds);
  for (int n = 0; !g_queue_stop && (args.iterations == 0 || n < args.iterations); ++n) {
    const auto started = std::chrono::steady_clock::now();
    auto r = FetchAllJobs(c, args.all || WantsFinished(filter), /*resuming=*/true);
    if (!r) return ctx.Fail(r.error());
    if (!filter.Empty()) std::erase_if(*r, [&](const model::Job& j) { return !Matches(filter, j); });
    if (clear_screen) ctx.out() << "\x1b[H\x1b[2J";
    else if (n > 0 && !args.json) ctx.out() << "\n";
    ctx.out() << RenderQueue(ctx, *r, args.json, /*compact_json=*/true, args.expand);
    ctx.out().flush();
    if (!ctx.out().good()) return kExitError;  // the reader of a pipe went away
    if (args.iterations != 0 && n + 1 >= args.iterations) break;
    while (!g_queue_stop && std::chrono::steady_clock::now() < started + period) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  return kExitOk;
}

}  // namespace

int RunQueueCommand(const std::string& name, const QueueArgs& args, Context& ctx) {
  const bool acts_on_ids = name == "cancel" || name == "hold" || name == "resume";
  auto filter = MakeJobFilter(args.filter, static_cast<uint32_t>(getuid()), acts_on_ids);
  if (!filter) return ctx.Fail(filter.error());
  const bool by_filter = args.filter.all || !filter->Empty();
  if (acts_on_ids) {
    if (args.ids.empty() && !by_filter) {
      return ctx.Fail(MakeError(ErrorCode::kInvalidArgument,
                                name + ": name the jobs by ID, or choose them with --all, --user, --state or --name"));
    }
    if (!args.ids.empty() && args.filter.all) {
      return ctx.Fail(MakeError(ErrorCode::kInvalidArgument, name + ": give job IDs or --all, not both"));
    }
  }
  if (name == "submit" && args.per_gpu) {
    // The job's supervisor starts one process; ranks are `run`'s (docs/cli.md, `--per-gpu`).
    return ctx.Fail(MakeError(ErrorCode::kInvalidArgument,
                              "--per-gpu is for run only (for now); a queued job can start its ranks itself: gpuman "
                              "submit -n 4 -- gpuman run -n 4 --per-gpu -- CMD"));
  }
  if (auto slurm = UsesSlurm(name, args, ctx.config()); !slurm) return ctx.Fail(slurm.error());
  else if (*slurm) {
    if (by_filter && (acts_on_ids || name == "queue")) {
      return ctx.Fail(MakeError(ErrorCode::kInvalidArgument,
                                "--all, --user, --me, --state and --name choose jobs of gpuman's queue; for Slurm's, use "
                                "squeue and scancel"));
    }
    if (name == "wait" && args.ids.size() > 1) {
      return ctx.Fail(MakeError(ErrorCode::kInvalidArgument, "wait: one Slurm job at a time"));
    }
    return RunSlurmQueueCommand(name, args, ctx);
  }
  std::vector<model::JobRef> refs;
  for (const std::string& text : args.ids) {
    auto ref = model::ParseJobRef(text);
    if (!ref) return ctx.Fail(ref.error());
    refs.push_back(*ref);
  }
  // Checked before connecting: a bad period is an argument error whether or not a daemon runs.
  double watch_seconds = 0;
  if (name == "queue" && args.watch) {
    auto s = QueueWatchSeconds(*args.watch);
    if (!s) return ctx.Fail(s.error());
    watch_seconds = *s;
  }
  // Commands that follow a job ride out a daemon that is restarting as they start, too.
  // --notify is checked before connecting too: a typo is the same error with or without a daemon.
  std::optional<model::JobNotify> notify;
  if (name == "submit" && args.notify) {
    std::error_code cwd_ec;
    const std::string cwd = std::filesystem::current_path(cwd_ec).string();
    auto parsed = NotifyFromOption(*args.notify, cwd, ctx.env().Get("PATH"));
    if (!parsed) return ctx.Fail(parsed.error());
    notify = std::move(*parsed);
  }
  const bool follows = name == "wait" || (name == "logs" && args.follow) || (name == "queue" && args.watch);
  const std::string socket_path = ctx.DaemonSocketPath();
  auto client = follows ? ctx.ConnectFollowing(socket_path) : DaemonClient::Connect(socket_path);
  if (!client) return ctx.Fail(client.error());
  DaemonClient& c = **client;
  if (!follows) ctx.ConfigureReconnect(c);

  if (name == "submit") {
    protocol::SubmitArgs s;
    s.name = args.name;
    s.argv = args.command;
    s.env = ctx.env().vars;
    std::error_code ec;
    s.cwd = std::filesystem::current_path(ec).string();
    s.output = args.output;
    // The same selection options and the same conversion as `run`: ids are resolved
    // here, against this machine's GPUs, and travel as UUIDs. The submitting shell's own
    // CUDA_VISIBLE_DEVICES does not confine a queued job (it runs later, elsewhere).
    const auto& sel = args.selection;
    if (sel.prefer) {
      // The queue places a job when it starts, by topology and fairness; a preference
      // would make the pass wait for particular GPUs. Said rather than ignored.
      return ctx.Fail(MakeError(ErrorCode::kInvalidArgument,
                                "--prefer: not with submit: the queue places jobs when they start (ask for a GPU "
                                "type with --model or --require instead)"));
    }
    if (sel.gpus || !sel.exclude.empty()) {
      auto source = ctx.Devices();
      if (!source) return ctx.Fail(source.error());
      devices::SnapshotOptions who;
      who.processes_only = true;
      auto snap = (*source)->Snapshot(who);
      if (!snap) return ctx.Fail(snap.error());
      auto req = BuildSelectionRequest(sel, *snap, {});
      if (!req) return ctx.Fail(req.error());
      req->allowed.reset();
      s.request = std::move(*req);
    } else {
      auto req = BuildSelectionRequest(sel, model::MachineSnapshot{}, {});
      if (!req) return ctx.Fail(req.error());
      req->allowed.reset();
      s.request = std::move(*req);
    }
    s.priority = args.priority;
    if (args.time_limit) {
      auto ms = ParseDurationMs(*args.time_limit);
      if (!ms) return ctx.Fail(ms.error().WithContext("--time-limit"));
      s.time_limit_ms = *ms;
    }
    s.requeue = args.requeue;
    s.after = args.after;
    s.array = args.array;
    s.notify = notify;
    if (ec) return ctx.Fail(MakeError(ErrorCode::kInvalidArgument, "cannot read the current directory: " + ToLower(ec.message())));
    if (auto refused = CheckSubmitLocally(s)) return ctx.Fail(MakeError(ErrorCode::kInvalidArgument, *refused));
    auto r = c.Call<protocol::SubmitResult>(s);
    if (!r) return ctx.Fail(r.error());
    if (args.json) {
      ctx.out() << "{\"id\": " << r->id << (r->tasks ? ", \"tasks\": " + std::to_string(*r->tasks) : std::string()) << "}\n";
    } else {
      ctx.out() << r->id << "\n";
    }
    return kExitOk;
  }
  if (name == "queue") {
    if (args.watch) return WatchQueue(args, *filter, watch_seconds, c, ctx);
    if (args.iterations != 0) return ctx.Fail(MakeError(ErrorCode::kInvalidArgument, "--iterations needs --watch"));
    auto r = FetchAllJobs(c, args.all || WantsFinished(*filter));
    if (!r) return ctx.Fail(r.error());
    if (!filter->Empty()) std::erase_if(*r, [&](const model::Job& j) { return !Matches(*filter, j); });
    ctx.out() << RenderQueue(ctx, *r, args.json, /*compact_json=*/false, args.expand);
    return kExitOk;
  }
  if (name == "show") {
    auto r = c.Call<protocol::ShowResult>(protocol::ShowArgs{refs.front()});
    if (!r) return ctx.Fail(r.error());
    if (r->array) {
      if (args.json) {
        nlohmann::json doc = protocol::JobToJson(r->job, !r->job.argv.empty());
        doc["array"] = nlohmann::json{{"id", r->array->id}, {"tasks", r->array->tasks},
                                      {"limit", r->array->limit ? nlohmann::json(*r->array->limit) : nlohmann::json(nullptr)},
                                      {"by_state", r->array->by_state}};
        ctx.out() << doc.dump(2) << "\n";
      } else {
        ctx.out() << render::ArrayDetailText(r->job, r->array->tasks, r->array->limit, r->array->by_state);
      }
      return kExitOk;
    }
    PrintJob(ctx, r->job, args.json);
    return kExitOk;
  }
  if (acts_on_ids) {
    std::vector<model::JobRef> ids = refs;
    if (by_filter) {
      // The jobs the filter picks (among the ids given, when there are some). Only those
      // the command can change: hold takes queued jobs, resume held ones, cancel any
      // unfinished one.
      auto listed = FetchAllJobs(c, WantsFinished(*filter));
      if (!listed) return ctx.Fail(listed.error());
      std::vector<model::JobRef> picked;
      for (const model::Job& j : *listed) {
        if (!Matches(*filter, j) || model::IsFinal(j.state)) continue;
        if (name == "hold" && j.state != model::JobState::kQueued) continue;
        if (name == "resume" && j.state != model::JobState::kHeld) continue;
        if (!ids.empty() && std::none_of(ids.begin(), ids.end(), [&](const model::JobRef& r) { return model::RefNames(r, j); })) {
          continue;
        }
        picked.push_back(model::RefOf(j));  // a task by its task reference: its plain id would name the whole array
      }
      if (picked.empty()) {
        ctx.err() << "gpuman: " << name << ": no job matches\n";
        return kExitOk;
      }
      ids = std::move(picked);
    }
    Result<protocol::IdsResult> r = name == "cancel" ? c.Call<protocol::IdsResult>(protocol::CancelArgs{ids})
                                    : name == "hold" ? c.Call<protocol::IdsResult>(protocol::HoldArgs{ids})
                                                     : c.Call<protocol::IdsResult>(protocol::ResumeArgs{ids});
    return ReportOutcomes(r, ctx);
  }
  if (name == "update") {
    protocol::UpdateArgs u;
    u.ids = refs;
    u.priority = args.new_priority;
    u.name = args.new_name;
    if (args.time_limit) {
      auto ms = ParseDurationMs(*args.time_limit);
      if (!ms) return ctx.Fail(ms.error().WithContext("--time-limit"));
      if (*ms <= 0) return ctx.Fail(MakeError(ErrorCode::kInvalidArgument, "--time-limit: must be more than 0"));
      u.time_limit_ms = *ms;
    }
    if (!u.priority && !u.time_limit_ms && !u.name) {
      return ctx.Fail(MakeError(ErrorCode::kInvalidArgument, "update: give --priority, --time-limit or --name"));
    }
    if (u.name && u.name->empty()) return ctx.Fail(MakeError(ErrorCode::kInvalidArgument, "--name: must not be empty"));
    auto r = c.Call<protocol::IdsResult>(u);
    return ReportOutcomes(r, ctx);
  }
  if (name == "logs") {
    // With -f, a daemon restart is ridden out (docs/cli.md, "When the daemon restarts"):
    // the next request asks for the byte it had reached, so nothing is printed twice.
    int64_t offset = 0;
    while (true) {
      const protocol::LogsArgs ask{refs.front(), offset};
      auto r = args.follow ? c.CallResuming<protocol::LogsResult>(ask) : c.Call<protocol::LogsResult>(ask);
      if (!r) return ctx.Fail(r.error());
      ctx.out() << r->data;
      ctx.out().flush();
      if (!ctx.out().good()) return kExitError;  // a full disk, a reader gone: said at the edge
      offset = r->next_offset;
      if (!r->data.empty()) continue;
      if (!args.follow || r->eof) return kExitOk;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
  if (name == "wait") {
    // Every failure of gpuman's own is 125 (ExitPolicy::kJobCode), never a code the job
    // could have returned by itself (docs/cli.md, "Exit codes of wait"); a daemon restart
    // is ridden out.
    // Several ids: every one is waited for, in the order given; the exit code is that of
    // the first that did not succeed (0 when all did), and each outcome is printed as the
    // job ends (with --json, one object per line).
    auto fail = [&](const Error& e) { return ctx.Fail(e); };
    int result = kExitOk;
    // A whole array is waited for as one: its outcome is its first task that did not succeed.
    for (const model::JobRef& ref : refs) {
      model::JobRef of = ref;
      while (true) {
        auto r = c.CallResuming<protocol::WaitResult>(protocol::WaitArgs{ref});
        if (!r) return fail(r.error());
        if (model::IsFinal(r->state)) {
          of = r->of.value_or(ref);
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      auto shown = c.CallResuming<protocol::ShowResult>(protocol::ShowArgs{of});
      if (!shown) return fail(shown.error());
      const model::Job& job = shown->job;
      const int code = WaitExitCode(job);
      if (args.json) {
        ctx.out() << WaitOutcomeJson(job, code).dump() << "\n";
        ctx.out().flush();
      } else if (job.state != model::JobState::kSucceeded) {
        ctx.err() << "gpuman: job " << model::JobName(job) << " " << model::JobStateName(job.state)
                  << (job.reason.empty() ? "" : ": " + EscapeControl(job.reason)) << " (exit " << code << ")\n";
      }
      if (result == kExitOk) result = code;
    }
    return result;
  }
  if (name == "drain" || name == "undrain") {
    Result<protocol::DrainResult> r = name == "drain" ? c.Call<protocol::DrainResult>(protocol::DrainArgs{args.gpu, args.reason})
                                                      : c.Call<protocol::DrainResult>(protocol::UndrainArgs{args.gpu, ""});
    if (!r) return ctx.Fail(r.error());
    ctx.err() << "gpuman: " << name << "ed " << r->gpu_uuid << "\n";
    return kExitOk;
  }
  return kExitUsage;
}

}  // namespace gpuman::cli
