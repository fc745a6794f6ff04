#include "cli/context.h"

#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/strings.h"
#include "cli/acquire.h"
#include "cli/daemon_client.h"
#include "cli/daemon_sample.h"
#include "cli/lease_broker.h"
#include "nvml/nvml_device_source.h"
#include "store/machine_lease_table.h"

#include <pwd.h>

#include <chrono>
#include <thread>

namespace gpuman::cli {

Context::Context(Environment env, Config config, std::optional<Simulation> sim, std::ostream& out,
                 std::ostream& err, InstalledLayout layout)
    : env_(std::move(env)),
      config_(std::move(config)),
      sim_(std::move(sim)),
      layout_(std::move(layout)),
      out_(out),
      err_(err) {
  stdout_is_tty_ = isatty(STDOUT_FILENO) == 1;
  procfs_ = std::make_unique<devices::ProcfsInspector>("/proc");
  if (auto d = env_.Get("GPUMAN_STATE_DIR"); d && !d->empty()) {
    state_dir_ = *d;
  } else if (auto x = env_.Get("XDG_STATE_HOME"); x && !x->empty()) {
    state_dir_ = *x + "/gpuman";
  } else {
    state_dir_ = env_.Get("HOME").value_or("/tmp") + "/.local/state/gpuman";
  }
  // The machine's file (only it may set lease_dir) wins over the environment: a variable
  // anyone may set must not move anyone to a table of their own (issue 23).
  const std::optional<std::string> env_lease_dir = env_.Get("GPUMAN_LEASE_DIR");
  if (config_.lease_dir) {
    lease_dir_ = *config_.lease_dir;
    for (const char* name : {"GPUMAN_LEASE_DIR", "GPUMAN_STATE_DIR"}) {
      if (auto d = env_.Get(name); d && !d->empty() && *d != lease_dir_) {
        err_ << "gpuman: warning: the machine's lease table is " << lease_dir_ << " (config lease_dir); " << name
             << " does not move it\n";
        break;
      }
    }
  } else if (env_lease_dir && !env_lease_dir->empty()) {
    lease_dir_ = *env_lease_dir;
  } else if (auto state = env_.Get("GPUMAN_STATE_DIR"); state && !state->empty()) {
    lease_dir_ = *state;
  } else {
    lease_dir_ = store::kDefaultMachineLeaseDir;
  }
  if (sim_) {
    // From the stand-in once it is loaded (it has parsed the scenario), else from the file.
    inspector_ = std::make_unique<devices::StaticProcessTable>(
        [this] {
          if (nvml_) {
            if (std::optional<std::string> table = nvml_->SimulatedHostProcesses()) return ParseHostProcesses(*table);
          }
          return ReadHostProcesses(sim_->scenario_path);
        },
        procfs_.get());
  }
}

Context::~Context() = default;

std::string Context::NvmlLibraryPath() const { return sim_ ? sim_->library_path : config_.nvml_library; }

Result<devices::DeviceSource*> Context::Devices() {
  if (daemon_sample_) return daemon_sample_.get();
  if (DaemonClient* daemon = Daemon()) {
    daemon_sample_ = std::make_unique<DaemonSampleSource>(*daemon, clock_);
    return daemon_sample_.get();
  }
  return Nvml();
}

Result<devices::DeviceSource*> Context::Nvml() {
  if (source_) return source_.get();
  std::string path = NvmlLibraryPath();
  auto lib = nvml::NvmlLibrary::Load(path);
  if (!lib) {
    if (sim_) return lib.error();
    // One line that says what failed and what to do next.
    return MakeError(lib.error().code,
                     lib.error().message + " (no NVIDIA driver? try: gpuman --simulate a100-4 status)");
  }
  nvml_ = std::move(*lib);
  source_ = std::make_unique<nvml::NvmlDeviceSource>(*nvml_, clock_);
  return source_.get();
}

const std::string& Context::DaemonSocketPath() {
  if (!daemon_socket_) {
    std::string skipped;
    daemon_socket_ = FindDaemonSocket(env_.vars, &skipped);
    if (!skipped.empty()) err_ << "gpuman: warning: " << skipped << "\n";
  }
  return *daemon_socket_;
}

DaemonClient* Context::Daemon() {
  if (!daemon_tried_) {
    daemon_tried_ = true;
    std::string socket = DaemonSocketPath();
    auto explicit_socket = env_.Get("GPUMAN_SOCKET");
    bool expected = access(socket.c_str(), F_OK) == 0 || (explicit_socket && !explicit_socket->empty());
    if (expected) {
      auto client = DaemonClient::Connect(socket);
      if (client) {
        daemon_ = std::move(*client);
        ConfigureReconnect(*daemon_);
      } else {
        daemon_error_ = client.error();
      }
    }
  }
  return daemon_.get();
}

void Context::ConfigureReconnect(DaemonClient& client) {
  ReconnectOptions options;
  options.timeout_ms = config_.client.reconnect_timeout_ms;
  client.SetReconnect(options, clock_, [this](const std::string& line) {
    err_ << line << "\n";
    err_.flush();
  });
}

Result<std::unique_ptr<DaemonClient>> Context::ConnectFollowing(const std::string& socket_path) {
  // A daemon that accepted the connection and then closed it (it was stopping, and a
  // stopped daemon removes its socket) went away like one lost later: ride it out too.
  bool lost_in_hello = false;
  auto client = DaemonClient::Connect(socket_path, &lost_in_hello);
  struct stat st;
  if (!client && client.error().code == ErrorCode::kUnavailable &&
      (lost_in_hello || (stat(socket_path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)))) {
    ReconnectOptions options;
    options.timeout_ms = config_.client.reconnect_timeout_ms;
    Reconnector reconnector(
        options, clock_, [](int64_t ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); },
        [this](const std::string& line) {
          err_ << line << "\n";
          err_.flush();
        });
    Status back = reconnector.Recover([&]() -> Status {
      client = DaemonClient::Connect(socket_path);
      if (!client) return client.error();
      return {};
    });
    if (!back) return back.error();
  }
  if (client) ConfigureReconnect(**client);
  return client;
}

Result<DaemonClient*> Context::ExpectedDaemon() {
  DaemonClient* d = Daemon();
  if (d) return d;
  if (daemon_error_) {
    // A socket we refused (someone else's) is not a daemon that went away: no advice to remove it.
    if (daemon_error_->code == ErrorCode::kPermissionDenied) return *daemon_error_;
    return MakeError(ErrorCode::kUnavailable,
                     daemon_error_->message +
                         "; its leases and jobs are the machine's, so gpuman will not use another lease table "
                         "(start the daemon again, or remove its stale socket)");
  }
  return static_cast<DaemonClient*>(nullptr);
}

Result<store::LeaseStore*> Context::Leases() {
  if (leases_) return leases_.get();
  // Writers hold the lock for milliseconds; a long timeout only matters when hundreds of
  // gpuman processes start at once, and then waiting beats failing.
  store::LeaseStoreOptions options;
  options.busy_timeout = std::chrono::milliseconds(60000);
  auto opened = store::OpenMachineLeaseTable(lease_dir_, getuid(), options);
  if (!opened) return opened.error();
  leases_ = std::move(opened->store);
  return leases_.get();
}

Result<LeaseBroker*> Context::Broker() {
  if (broker_) return broker_.get();
  auto daemon = ExpectedDaemon();
  if (!daemon) return daemon.error();
  DeviceGetter devices = [this] { return Devices(); };
  if (*daemon) {
    broker_ = MakeDaemonBroker(**daemon, devices, DaemonSocketPath());
    return broker_.get();
  }
  auto table = Leases();
  if (!table) return table.error();
  const policy::Caller caller = CurrentCaller();
  broker_ = MakeTableBroker(**table, devices, caller, MachineRulesFromConfig(config_), lease_dir_, clock_);
  return broker_.get();
}

devices::ProcessInspector& Context::Inspector() {
  return inspector_ ? *inspector_ : *procfs_;
}

render::TerminalInfo Context::Terminal(bool no_color) const {
  render::TerminalInfo term;
  term.width = 80;
  // A pipe or a file gets whole lines: what reads them (grep, a log, a chat paste) has no
  // width to fit. $COLUMNS there still chooses how wide a table is laid out.
  term.cut_to_width = stdout_is_tty_;
  winsize ws{};
  if (stdout_is_tty_ && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) {
    term.width = ws.ws_col;
  } else if (auto cols = env_.Get("COLUMNS")) {
    if (auto n = ParseInt(*cols); n && *n > 0 && *n < 10000) term.width = static_cast<int>(*n);
  }
  auto no_color_env = env_.Get("NO_COLOR");
  auto term_env = env_.Get("TERM");
  term.use_color = stdout_is_tty_ && !no_color && !(no_color_env && !no_color_env->empty()) &&
                   !(term_env && *term_env == "dumb");
  return term;
}

}  // namespace gpuman::cli
