#include "base/strings.h"
#include "cli/queue_commands.h"

#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <thread>

#include "base/duration.h"
#include "base/posix_error.h"
#include "base/spawn.h"
#include "cli/daemon_client.h"
#include "cli/daemon_pages.h"
#include "cli/exit_codes.h"
#include "cli/slurm_submit.h"
#include "cli/slurm_accounting.h"
#include "metrics/listen_address.h"
#include "nvml/nvml_event_source.h"
#include "daemon/daemon.h"
#include "policy/byte_size.h"
#include "protocol/model_json.h"
#include "render/format.h"
#include "sched/child_process.h"

namespace gpuman::cli {
namespace {

volatile std::sig_atomic_t g_queue_stop = 0;
void OnStop(int) { g_queue_stop = 1; }

// A device source for a machine without NVML: the daemon still serves, with no GPUs.
class NoGpus final : public devices::DeviceSource {
 public:
  Result<model::MachineSnapshot> Snapshot(const devices::SnapshotOptions&) override { return model::MachineSnapshot{}; }
};

int FailQueue(Context& ctx, const Error& e) {
  ctx.err() << "gpuman: error: " << e.message << "\n";
  return ExitCodeFor(e.code);
}

int RunDaemon(const QueueArgs& args, Context& ctx) {
  const bool system_mode = getuid() == 0;
  daemon::DaemonOptions options;
  options.system_mode = system_mode;
  options.socket_path = args.socket.value_or(ctx.env().Get("GPUMAN_SOCKET").value_or(
      daemon::DefaultSocketPath(system_mode, ctx.env().vars)));
  options.state_dir = args.state_dir.value_or(daemon::DefaultDaemonStateDir(system_mode, ctx.env().vars));
  const DaemonConfig& dc = ctx.config().daemon;
  if (dc.admin_group) {
    group* g = getgrnam(dc.admin_group->c_str());
    if (!g) return FailQueue(ctx, MakeError(ErrorCode::kInvalidArgument, "config: admin group '" + *dc.admin_group + "' does not exist"));
    options.admin_gid = g->gr_gid;
  }
  if (dc.default_time_limit_ms) options.scheduler.default_time_limit_ms = *dc.default_time_limit_ms;
  const policy::MachineRules rules = MachineRulesFromConfig(ctx.config());
  options.scheduler.default_max_gpus_per_user = rules.default_max_gpus_per_user;
  options.scheduler.max_gpus_per_user = rules.max_gpus_per_user;
  options.machine_lease_dir = ctx.lease_dir();
  if (ctx.simulation()) options.scenario = ctx.simulation()->scenario_name;
  if (ctx.simulation()) options.scenario_path = ctx.simulation()->scenario_path;
  options.max_connections = dc.max_connections;
  options.max_connections_per_user = dc.max_connections_per_user;
  options.admin_connection_reserve = std::min<size_t>(64, dc.max_connections / 4);
  NoGpus no_gpus;
  devices::DeviceSource* source = &no_gpus;
  if (auto devices = ctx.Devices()) {
    source = *devices;
  } else if (devices.error().code == ErrorCode::kInvalidArgument) {
    // A mistake in the command (a scenario the stand-in cannot load), not a driver that
    // may come later: refused, as any bad argument.
    return FailQueue(ctx, devices.error());
  } else {
    ctx.err() << "gpuman: warning: serving without GPUs: " << devices.error().message << "\n";
  }
  daemon::CollectorOptions& mon = options.monitor;
  mon.sample_interval_ms = dc.sample_interval_ms;
  mon.kernel_log = ctx.config().kernel_log;
  mon.health = ctx.config().health;
  mon.idle = ctx.config().idle;
  mon.alerts = ctx.config().alerts;
  mon.metrics_address = dc.metrics;
  mon.layout = ctx.layout();
  if (args.metrics) mon.metrics_address = args.metrics->empty() ? std::string(metrics::kDefaultMetricsAddress) : *args.metrics;
  mon.history_path = options.state_dir + "/history.db";
  mon.slurm_state_dir = SlurmStateDirOf(ctx);
  mon.retention.fine_keep_ms = dc.history_fine_keep_ms;
  mon.retention.coarse_keep_ms = dc.history_coarse_keep_ms;
  mon.inspector = &ctx.Inspector();
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) mon.hostname = host;
  // Simulated GPUs are none that slurmd hands out: `auto` says no under --simulate.
  mon.slurm_node = [mode = ctx.config().slurm.node, env = ctx.env().vars, host = mon.hostname,
                    simulated = ctx.simulation().has_value()]() -> std::optional<std::string> {
    if (simulated && mode == slurm::SlurmNodeMode::kAuto) return std::nullopt;
    const slurm::SlurmNodeVerdict v = slurm::DetectSlurmNode(mode, env, host);
    return v.is_node ? std::optional<std::string>(v.reason) : std::nullopt;
  };
  if (const nvml::NvmlLibrary* lib = ctx.nvml_library()) {
    const Clock& clock = ctx.clock();
    mon.xid_source_factory = [lib, &clock]() -> Result<std::unique_ptr<devices::XidEventSource>> {
      auto src = nvml::NvmlXidEventSource::Create(*lib, clock);
      if (!src) return src.error();
      return std::unique_ptr<devices::XidEventSource>(std::move(*src));
    };
  }
  // each job runs under `gpuman __supervise` of this very binary
  sched::SupervisorLauncher launcher(ctx.layout().exe);
  daemon::Daemon d(options, *source, ctx.clock(), launcher);
  if (auto started = d.Start(); !started) return FailQueue(ctx, started.error());
  ctx.err() << "gpuman: daemon serving " << options.socket_path << " (state " << options.state_dir << ")\n";
  if (auto addr = d.collector()->metrics_address()) ctx.err() << "gpuman: metrics at http://" << *addr << "/metrics\n";
  std::signal(SIGTERM, OnStop);
  std::signal(SIGINT, OnStop);
  std::signal(SIGPIPE, SIG_IGN);
  return d.Run(&g_queue_stop);
}

// The selection options a job was submitted with, as `submit` flags.
std::string DescribeRequest(const model::GpuRequest& r) {
  std::vector<std::string> parts{"-n " + std::to_string(r.count)};
  if (r.gpus) parts.push_back("--gpus " + (r.gpus->empty() ? std::string("none") : Join(*r.gpus, ",")));
  if (!r.exclude.empty()) parts.push_back("--exclude " + Join(r.exclude, ","));
  if (r.model) parts.push_back("--model " + *r.model);
  if (r.min_free_memory_bytes) parts.push_back("--min-free-memory " + render::FormatBytes(*r.min_free_memory_bytes));
  if (r.max_utilization_percent) parts.push_back("--max-utilization " + std::to_string(*r.max_utilization_percent));
  if (r.min_compute_capability) parts.push_back("--min-compute-capability " + *r.min_compute_capability);
  if (r.allow_shared) parts.push_back("--allow-shared");
  return Join(parts, " ");
}

void PrintJob(Context& ctx, const model::Job& j, bool json) {
  if (json) {
    ctx.out() << protocol::JobToJson(j, !j.argv.empty()).dump(2) << "\n";
    return;
  }
  // Names, commands and reasons are other users' text: control characters and terminal
  // escapes are shown, never sent (EscapeControl). JSON escapes them by itself.
  std::vector<std::string> argv;
  for (const auto& a : j.argv) argv.push_back(EscapeControl(a));
  const std::string failure = j.failure == model::JobFailure::kNone ? "" : std::string(" [") + model::JobFailureName(j.failure) + "]";
  ctx.out() << "job " << j.id << " (" << EscapeControl(j.name) << ")\n"
            << "  state:     " << model::JobStateName(j.state) << (j.reason.empty() ? "" : " — " + EscapeControl(j.reason)) << failure << "\n"
            << "  user:      " << EscapeControl(j.user) << "\n"
            << "  gpus:      " << (j.gpu_uuids.empty() ? "-" : EscapeControl(Join(j.gpu_uuids, ","))) << " (wants " << j.request.count << ")\n"
            << "  asks for:  " << EscapeControl(DescribeRequest(j.request)) << "\n"
            << "  priority:  " << j.priority << "\n"
            << "  submitted: " << render::FormatIsoUtcMillis(j.submitted_unix_ms) << "\n";
  if (j.started_unix_ms) ctx.out() << "  started:   " << render::FormatIsoUtcMillis(*j.started_unix_ms) << "\n";
  if (j.ended_unix_ms) ctx.out() << "  ended:     " << render::FormatIsoUtcMillis(*j.ended_unix_ms) << "\n";
  if (j.exit_code) ctx.out() << "  exit code: " << *j.exit_code << "\n";
  if (j.idle_since_unix_ms) {
    ctx.out() << "  idle:      since " << render::FormatIsoUtcMillis(*j.idle_since_unix_ms) << " (its GPUs stay below the idle threshold)\n";
  }
  if (!j.argv.empty()) ctx.out() << "  command:   " << Join(argv, " ") << "\n  cwd:       " << EscapeControl(j.cwd) << "\n";
  if (!j.output_path.empty()) ctx.out() << "  output:    " << EscapeControl(j.output_path) << "\n";
}

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
  return nlohmann::json{{"schema_version", 1},
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
}

// The queue as `gpuman queue` prints it: JSON (pretty, or one line per refresh with
// --watch), or the table.
std::string RenderQueue(Context& ctx, const std::vector<model::Job>& jobs, bool json, bool compact_json) {
  if (json) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& j : jobs) list.push_back(protocol::JobToJson(j, false));
    const nlohmann::json doc{{"schema_version", 1}, {"jobs", list}};
    return (compact_json ? doc.dump() : doc.dump(2)) + "\n";
  }
  if (jobs.empty()) return "no jobs\n";
  std::string out = render::PadLeft("ID", 6) + "  " + render::PadRight("STATE", 10) + "  " + render::PadRight("USER", 10) +
                    "  " + render::PadRight("GPUS", 5) + "  " + render::PadRight("NAME", 16) + "  WHY / WHEN\n";
  const int64_t now = ctx.clock().NowUnixMs();
  for (const auto& j : jobs) {
    std::string when = EscapeControl(j.reason);
    if (j.state == model::JobState::kRunning && j.started_unix_ms) when = "running " + FormatDurationMs(now - *j.started_unix_ms);
    if (j.state == model::JobState::kRunning && j.idle_since_unix_ms) {
      when += ", IDLE " + FormatDurationMs(now - *j.idle_since_unix_ms);
    }
    if (when.empty() && model::IsFinal(j.state) && j.ended_unix_ms) {
      when = "ended " + FormatDurationMs(now - *j.ended_unix_ms) + " ago";
    }
    if (when.empty()) when = "queued " + FormatDurationMs(now - j.submitted_unix_ms) + " ago";
    std::string line = render::PadLeft(std::to_string(j.id), 6) + "  " + render::PadRight(model::JobStateName(j.state), 10) +
                       "  " + render::PadRight(render::TruncateToWidth(EscapeControl(j.user), 10), 10) + "  " +
                       render::PadRight(std::to_string(j.request.count), 5) + "  " +
                       render::PadRight(render::TruncateToWidth(EscapeControl(j.name), 16), 16) + "  " + when;
    out += render::TruncateToWidth(line, std::max(80, ctx.Terminal(true).width)) + "\n";
  }
  return out;
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
int WatchQueue(const QueueArgs& args, double seconds, DaemonClient& c, Context& ctx) {
  g_queue_stop = 0;
  std::signal(SIGINT, OnStop);
  std::signal(SIGTERM, OnStop);
  const bool clear_screen = !args.json && ctx.stdout_is_tty();
  const auto period = std::chrono::duration<double>(seconds);
  for (int n = 0; !g_queue_stop && (args.iterations == 0 || n < args.iterations); ++n) {
    const auto started = std::chrono::steady_clock::now();
    auto r = FetchAllJobs(c, args.all, /*resuming=*/true);
    if (!r) return FailQueue(ctx, r.error());
    if (clear_screen) ctx.out() << "\x1b[H\x1b[2J";
    else if (n > 0 && !args.json) ctx.out() << "\n";
    ctx.out() << RenderQueue(ctx, *r, args.json, /*compact_json=*/true);
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

std::vector<CLI::App*> AddQueueCommands(CLI::App& app, QueueArgs& args) {
  std::vector<CLI::App*> cmds;
  CLI::App* d = app.add_subcommand("daemon", "Serve the machine's job queue and lease table");
  d->add_option("--socket", args.socket, "Socket path (default /run/gpuman/gpuman.sock as root, else $XDG_RUNTIME_DIR/gpuman/gpuman.sock)");
  d->add_option("--state-dir", args.state_dir, "State directory (default /var/lib/gpuman as root, else $XDG_STATE_HOME/gpuman/daemon)");
  d->add_option("--metrics", args.metrics, "Serve Prometheus metrics at ADDRESS (default 127.0.0.1:9400)")
      ->expected(0, 1);
  cmds.push_back(d);

  CLI::App* submit = app.add_subcommand("submit", "Queue a job: gpuman submit -n 2 -- CMD ARGS...");
  AddSelectionOptions(*submit, args.selection);
  submit->add_option("--name", args.name, "A name for the job");
  submit->add_option("--priority", args.priority, "Higher runs first (default 0; above 0 only root and the admin group)");
  submit->add_option("--time-limit", args.time_limit, "SIGTERM after this long, e.g. 2h (default from the daemon, 24h)");
  submit->add_option("--output", args.output, "Log file for stdout and stderr (default gpuman-ID.log in the current directory)");
  submit->add_flag("--requeue", args.requeue, "Queue the job again if its GPU is lost");
  submit->add_option("--after", args.after, "Start only after these jobs succeeded")->delimiter(',');
  submit->add_flag("--json", args.json, "Print {\"id\": N}");
  submit->add_option("command", args.command, "The command and its arguments (after --)")->required();
  submit->positionals_at_end();
  cmds.push_back(submit);

  CLI::App* queue = app.add_subcommand("queue", "List queued and running jobs");
  queue->add_flag("--all", args.all, "Include finished jobs");
  queue->add_flag("--json", args.json, "Print JSON (with --watch: one object per line)");
  queue->add_option("--watch", args.watch, "Redraw every SECONDS (default 2) until interrupted, across daemon restarts")
      ->expected(0, 1);
  queue->add_option("--iterations", args.iterations, "With --watch: stop after N refreshes")
      ->check(CLI::Range(1, 1000000000));
  cmds.push_back(queue);

  CLI::App* show = app.add_subcommand("show", "Show one job");
  show->add_option("ID", args.ids, "Job id")->required()->expected(1);
  show->add_flag("--json", args.json, "Print JSON");
  cmds.push_back(show);

  for (const char* name : {"cancel", "hold", "resume"}) {
    CLI::App* c = app.add_subcommand(name, std::string(name) == "cancel" ? "Cancel jobs (running ones get SIGTERM)"
                                           : std::string(name) == "hold" ? "Keep queued jobs from starting"
                                                                          : "Let held jobs start again");
    c->add_option("ID", args.ids, "Job ids")->required();
    cmds.push_back(c);
  }
  CLI::App* logs = app.add_subcommand("logs", "Print a job's output");
  logs->add_option("ID", args.ids, "Job id")->required()->expected(1);
  logs->add_flag("-f,--follow", args.follow, "Keep printing until the job ends");
  cmds.push_back(logs);
  CLI::App* wait = app.add_subcommand("wait", "Wait for a job; exit with its exit code, or 124 timed out, 125 gpuman failed, 193 cancelled");
  wait->add_option("ID", args.ids, "Job id")->required()->expected(1);
  wait->add_flag("--json", args.json, "Print the outcome (state, exit code, signal, reason, times) as one JSON object");
  cmds.push_back(wait);
  for (const char* name : {"drain", "undrain"}) {
    CLI::App* c = app.add_subcommand(name, std::string(name) == "drain" ? "Stop giving a GPU to jobs (admins)"
                                                                         : "Give a drained GPU to jobs again (admins)");
    c->add_option("GPU", args.gpu, "GPU index or UUID")->required();
    if (std::string(name) == "drain") c->add_option("--reason", args.reason, "Why");
    cmds.push_back(c);
  }
  AddSlurmBackendOptions(cmds, args);
  return cmds;
}

int RunQueueCommand(const std::string& name, const QueueArgs& args, Context& ctx) {
  if (name == "daemon") return RunDaemon(args, ctx);
  if (auto slurm = UsesSlurm(name, args, ctx.config()); !slurm) return FailQueue(ctx, slurm.error());
  else if (*slurm) return RunSlurmQueueCommand(name, args, ctx);
  // Checked before connecting: a bad period is an argument error whether or not a daemon runs.
  double watch_seconds = 0;
  if (name == "queue" && args.watch) {
    auto s = QueueWatchSeconds(*args.watch);
    if (!s) return FailQueue(ctx, s.error());
    watch_seconds = *s;
  }
  // Commands that follow a job ride out a daemon that is restarting as they start, too.
  const bool follows = name == "wait" || (name == "logs" && args.follow) || (name == "queue" && args.watch);
  const std::string socket_path = FindDaemonSocket(ctx.env().vars);
  auto client = follows ? ctx.ConnectFollowing(socket_path) : DaemonClient::Connect(socket_path);
  if (!client) {
    if (name == "wait") {
      ctx.err() << "gpuman: error: " << client.error().message << "\n";
      return kJobGpumanFailed;
    }
    return FailQueue(ctx, client.error());
  }
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
    if (sel.gpus || !sel.exclude.empty()) {
      auto source = ctx.Devices();
      if (!source) return FailQueue(ctx, source.error());
      devices::SnapshotOptions who;
      who.processes_only = true;
      auto snap = (*source)->Snapshot(who);
      if (!snap) return FailQueue(ctx, snap.error());
      auto req = BuildSelectionRequest(sel, *snap, {});
      if (!req) return FailQueue(ctx, req.error());
      req->allowed.reset();
      s.request = std::move(*req);
    } else {
      auto req = BuildSelectionRequest(sel, model::MachineSnapshot{}, {});
      if (!req) return FailQueue(ctx, req.error());
      req->allowed.reset();
      s.request = std::move(*req);
    }
    s.priority = args.priority;
    if (args.time_limit) {
      auto ms = ParseDurationMs(*args.time_limit);
      if (!ms) return FailQueue(ctx, ms.error().WithContext("--time-limit"));
      s.time_limit_ms = *ms;
    }
    s.requeue = args.requeue;
    s.after = args.after;
    if (ec) return FailQueue(ctx, MakeError(ErrorCode::kInvalidArgument, "cannot read the current directory: " + ToLower(ec.message())));
    if (auto refused = CheckSubmitLocally(s)) return FailQueue(ctx, MakeError(ErrorCode::kInvalidArgument, *refused));
    auto r = c.Call<protocol::SubmitResult>(s);
    if (!r) return FailQueue(ctx, r.error());
    if (args.json) ctx.out() << "{\"id\": " << r->id << "}\n";
    else ctx.out() << r->id << "\n";
    return kExitOk;
  }
  if (name == "queue") {
    if (args.watch) return WatchQueue(args, watch_seconds, c, ctx);
    if (args.iterations != 0) return FailQueue(ctx, MakeError(ErrorCode::kInvalidArgument, "--iterations needs --watch"));
    auto r = FetchAllJobs(c, args.all);
    if (!r) return FailQueue(ctx, r.error());
    ctx.out() << RenderQueue(ctx, *r, args.json, /*compact_json=*/false);
    return kExitOk;
  }
  if (name == "show") {
    auto r = c.Call<protocol::ShowResult>(protocol::ShowArgs{args.ids.front()});
    if (!r) return FailQueue(ctx, r.error());
    PrintJob(ctx, r->job, args.json);
    return kExitOk;
  }
  if (name == "cancel" || name == "hold" || name == "resume") {
    Result<protocol::IdsResult> r = name == "cancel" ? c.Call<protocol::IdsResult>(protocol::CancelArgs{args.ids})
                                    : name == "hold" ? c.Call<protocol::IdsResult>(protocol::HoldArgs{args.ids})
                                                     : c.Call<protocol::IdsResult>(protocol::ResumeArgs{args.ids});
    if (!r) return FailQueue(ctx, r.error());
    int rc = kExitOk;
    for (const auto& o : r->results) {
      if (o.error) {
        ctx.err() << "gpuman: error: job " << o.id << ": " << EscapeControl(o.error->message) << "\n";
        rc = ExitCodeFor(protocol::ToError(*o.error).code);
      }
    }
    return rc;
  }
  if (name == "logs") {
    // With -f, a daemon restart is ridden out (docs/cli.md, "When the daemon restarts"):
    // the next request asks for the byte it had reached, so nothing is printed twice.
    int64_t offset = 0;
    while (true) {
      const protocol::LogsArgs ask{args.ids.front(), offset};
      auto r = args.follow ? c.CallResuming<protocol::LogsResult>(ask) : c.Call<protocol::LogsResult>(ask);
      if (!r) return FailQueue(ctx, r.error());
      ctx.out() << r->data;
      ctx.out().flush();
      offset = r->next_offset;
      if (!r->data.empty()) continue;
      if (!args.follow || r->eof) return kExitOk;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
  if (name == "wait") {
    // Every failure of gpuman's own is 125, never a code the job could have returned by
    // itself (docs/cli.md, "Exit codes of wait"); a daemon restart is ridden out.
    const int64_t id = args.ids.front();
    auto fail = [&](const Error& e) {
      ctx.err() << "gpuman: error: " << e.message << "\n";
      return int{kJobGpumanFailed};
    };
    while (true) {
      auto r = c.CallResuming<protocol::WaitResult>(protocol::WaitArgs{id});
      if (!r) return fail(r.error());
      if (model::IsFinal(r->state)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    auto shown = c.CallResuming<protocol::ShowResult>(protocol::ShowArgs{id});
    if (!shown) return fail(shown.error());
    const model::Job& job = shown->job;
    const int code = WaitExitCode(job);
    if (args.json) {
      ctx.out() << WaitOutcomeJson(job, code).dump() << "\n";
    } else if (job.state != model::JobState::kSucceeded) {
      ctx.err() << "gpuman: job " << job.id << " " << model::JobStateName(job.state)
                << (job.reason.empty() ? "" : ": " + EscapeControl(job.reason)) << " (exit " << code << ")\n";
    }
    return code;
  }
  if (name == "drain" || name == "undrain") {
    Result<protocol::DrainResult> r = name == "drain" ? c.Call<protocol::DrainResult>(protocol::DrainArgs{args.gpu, args.reason})
                                                      : c.Call<protocol::DrainResult>(protocol::UndrainArgs{args.gpu, ""});
    if (!r) return FailQueue(ctx, r.error());
    ctx.err() << "gpuman: " << name << "ed " << r->gpu_uuid << "\n";
    return kExitOk;
  }
  return kExitUsage;
}

}  // namespace gpuman::cli
