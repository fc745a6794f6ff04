// `gpuman daemon`: the wiring of the machine's daemon. Turns the config, the command line
// and the environment into daemon::DaemonOptions, picks the device source (NVML, the
// stand-in, or NVML retried until the driver loads), starts the socket server and runs it until SIGTERM or SIGINT.
#include "cli/daemon_command.h"

#include <grp.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <memory>

#include "cli/slurm_accounting.h"
#include "cli/socket_trust.h"
#include "confine/cgroup.h"
#include "daemon/daemon.h"
#include "metrics/listen_address.h"
#include "nvml/late_source.h"
#include "nvml/nvml_event_source.h"
#include "sched/job_launcher.h"
#include "slurm/node_facts.h"

namespace gpuman::cli {
namespace {

volatile std::sig_atomic_t g_daemon_stop = 0;
volatile std::sig_atomic_t g_stop_signal = 0;
void OnStop(int sig) {
  g_stop_signal = sig;
  g_daemon_stop = 1;
}

}  // namespace

int RunDaemon(const QueueArgs& args, Context& ctx) {
  const bool system_mode = getuid() == 0;
  daemon::DaemonOptions options;
  options.system_mode = system_mode;
  options.socket_path = args.socket.value_or(ctx.env().Get("GPUMAN_SOCKET").value_or(
      daemon::DefaultSocketPath(system_mode, ctx.env().vars)));
  options.state_dir = args.state_dir.value_or(daemon::DefaultDaemonStateDir(system_mode, ctx.env().vars));
  if (options.state_dir.empty()) {
    return ctx.Fail(MakeError(ErrorCode::kInvalidArgument,
                              "a user daemon keeps its state under $XDG_STATE_HOME or $HOME, and neither is set: "
                              "set one, or give --state-dir"));
  }
  if (!system_mode) {
    // One authority per machine (issue 23): beside root's daemon, a user's own would be a
    // second lease table that cannot see root's leases. It yields, at start and later.
    const std::string machine_socket = daemon::DefaultSocketPath(/*system_mode=*/true, ctx.env().vars);
    if (RootDaemonServes(machine_socket)) {
      return ctx.Fail(MakeError(ErrorCode::kConflict, "the machine's daemon serves at " + machine_socket +
                                                          ": a daemon of yours would be a second authority beside it; "
                                                          "use that one (`gpuman submit`, `gpuman run`)"));
    }
    options.machine_daemon = [machine_socket]() -> std::optional<std::string> {
      if (!RootDaemonServes(machine_socket)) return std::nullopt;
      return "the machine's daemon serves at " + machine_socket;
    };
  }
  const DaemonConfig& dc = ctx.config().daemon;
  if (dc.admin_group) {
    group* g = getgrnam(dc.admin_group->c_str());
    if (!g) return ctx.Fail(MakeError(ErrorCode::kInvalidArgument, "config: admin group '" + *dc.admin_group + "' does not exist"));
    options.admin_gid = g->gr_gid;
  }
  if (dc.default_time_limit_ms) options.scheduler.default_time_limit_ms = *dc.default_time_limit_ms;
  const policy::MachineRules rules = MachineRulesFromConfig(ctx.config());
  options.scheduler.default_max_gpus_per_user = rules.default_max_gpus_per_user;
  options.scheduler.max_gpus_per_user = rules.max_gpus_per_user;
  options.launch_ports = rules.launch_ports;
  options.share = rules.share;
  // The MPS control program is looked up on the daemon's own PATH (or named in [share]).
  if (auto path = ctx.env().Get("PATH")) options.mps_search_path = *path;
  options.machine_lease_dir = ctx.lease_dir();
  if (ctx.simulation()) options.scenario = ctx.simulation()->scenario_name;
  if (ctx.simulation()) options.scenario_path = ctx.simulation()->scenario_path;
  options.max_connections = dc.max_connections;
  options.max_connections_per_user = dc.max_connections_per_user;
  options.admin_connection_reserve = std::min<size_t>(64, dc.max_connections / 4);
  std::unique_ptr<nvml::LateNvmlSource> late;
  devices::DeviceSource* source = nullptr;
  if (auto devices = ctx.Nvml()) {  // the daemon is the one that reads NVML
    source = *devices;
  } else if (devices.error().code == ErrorCode::kInvalidArgument) {
    // A mistake in the command (a scenario the stand-in cannot load), not a driver that
    // may come later: refused, as any bad argument.
    return ctx.Fail(devices.error());
  } else {
    // No driver yet: served anyway (leases, the queue, the driver finding `health` reports),
    // and NVML is tried again until it loads.
    ctx.err() << "gpuman: warning: serving without GPUs until the driver loads (retried at growing intervals up to "
              << nvml::LateNvmlSource::kMaxRetryMs / 1000 << " s): " << devices.error().message << "\n";
    late = std::make_unique<nvml::LateNvmlSource>(ctx.NvmlLibraryPath(), ctx.clock(), devices.error());
    source = late.get();
  }
  daemon::CollectorOptions& mon = options.monitor;
  mon.sample_interval_ms = dc.sample_interval_ms;
  mon.kernel_log = ctx.config().kernel_log;
  mon.health = ctx.config().health;
  mon.idle = ctx.config().idle;
  mon.intruders = ctx.config().enforce.intruders;
  mon.slices = ctx.config().slice_watch;
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
  options.devices = ctx.config().enforce.devices;
  options.notify.mail_program = ctx.config().notify.mail;
  options.notify.timeout_ms = ctx.config().notify.timeout_ms;
  // each job runs under `gpuman __supervise` of this very binary
  sched::SupervisorLauncher launcher(ctx.layout().exe);
  daemon::Daemon d(options, *source, ctx.clock(), launcher);
  if (auto started = d.Start(); !started) return ctx.Fail(started.error());
  ctx.err() << "gpuman: daemon serving " << options.socket_path << " (state " << options.state_dir << ")\n";
  // Device confinement (docs/enforce.md): one line either way for the machine's daemon, so
  // that an admin sees at start whether jobs are held to their GPUs.
  if (geteuid() == 0) {
    ctx.err() << "gpuman: device confinement " << d.confinement().Describe()
              << (d.confinement().on ? "" : " (jobs and runs are not confined)") << "\n";
  }
  if (auto addr = d.collector()->metrics_address()) ctx.err() << "gpuman: metrics at http://" << *addr << "/metrics\n";
  std::signal(SIGTERM, OnStop);
  std::signal(SIGINT, OnStop);
  std::signal(SIGPIPE, SIG_IGN);
  const int code = d.Run(&g_daemon_stop);
  confine::RemoveEmptyCgroups(d.confinement());
  // The last line of its log says why it stopped, and that nothing running went with it.
  const char* abbrev = g_stop_signal != 0 ? sigabbrev_np(g_stop_signal) : nullptr;
  ctx.err() << "gpuman: daemon stopped" << (abbrev ? std::string(" (SIG") + abbrev + ")" : std::string())
            << "; running jobs go on under their supervisors, queued ones wait for the next daemon\n";
  return code;
}

}  // namespace gpuman::cli
