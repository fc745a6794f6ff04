// Context: what every subcommand gets from main - configuration, environment, terminal
// facts, output streams, and the real implementations behind the seams (device source,
// process inspector), created lazily so commands that need no GPU never load NVML.
// One per process; single-threaded.
#pragma once

#include <iostream>
#include <memory>
#include <optional>

#include "base/clock.h"
#include "base/installed_layout.h"
#include "cli/config.h"
#include "cli/exit_codes.h"
#include "cli/simulation.h"
#include "devices/device_source.h"
#include "devices/process_inspector.h"
#include "nvml/library.h"
#include "render/status_view.h"
#include "store/lease_store.h"

namespace gpuman::cli {

class Context {
 public:
  /// `layout`: where this gpuman's pieces are (computed once by Main; tests leave it empty).
  Context(Environment env, Config config, std::optional<Simulation> sim, std::ostream& out,
          std::ostream& err, InstalledLayout layout = {});
  ~Context();

  /// GPU facts for a client command: the daemon's latest sample when a daemon serves
  /// (DaemonSampleSource: no NVML in this process), else Nvml(). Errors: Nvml()'s, or the
  /// daemon's (kUnavailable) when it serves but cannot read the GPUs.
  Result<devices::DeviceSource*> Devices();
  /// The sample source behind Devices() when a daemon serves it; nullptr otherwise (or
  /// before Devices() was called).
  const class DaemonSampleSource* daemon_sample() const { return daemon_sample_.get(); }
  /// NVML in this process (or the stand-in when simulating), opened on first use: for the
  /// daemon itself, and for `status`, `top` and `health` when no daemon's sample serves.
  /// Errors: kUnavailable when NVML cannot be loaded or initialised.
  Result<devices::DeviceSource*> Nvml();
  devices::ProcessInspector& Inspector();
  /// The NVML library behind Nvml(), once that succeeded; else nullptr.
  const nvml::NvmlLibrary* nvml_library() const { return nvml_.get(); }
  /// The NVML library Nvml() loads: the stand-in under --simulate, else the config's.
  std::string NvmlLibraryPath() const;

  /// A connection to the machine's daemon when one answers (first use tries once), else
  /// nullptr.
  /// FindDaemonSocket's answer, found once; a default socket it skipped (not trusted) is
  /// said once on stderr as a warning.
  const std::string& DaemonSocketPath();
  class DaemonClient* Daemon();
  /// Like Daemon(), but an expected daemon that does not answer (its socket exists, or
  /// GPUMAN_SOCKET names one) is an error, not nullptr: commands that take or list leases
  /// must never quietly use another lease table. Errors: kUnavailable.
  Result<class DaemonClient*> ExpectedDaemon();
  /// Makes `client` reconnect as the config says ([client] reconnect_timeout), with its
  /// notes on err().
  void ConfigureReconnect(class DaemonClient& client);
  /// For commands that follow a job over time (wait, logs -f, queue --watch): connects to
  /// the daemon at `socket_path`, configured as ConfigureReconnect says. When its socket
  /// exists but the daemon does not answer (kUnavailable: it is restarting), or a daemon
  /// accepted the connection and closed it before answering the hello (it was stopping, and
  /// may have removed its socket), reconnects as after a lost connection, for the
  /// reconnect time, with the same two notes on err().
  /// Errors: as DaemonClient::Connect; kUnavailable "lost the daemon and it did not come
  /// back within 60s: ..." after the reconnect time.
  Result<std::unique_ptr<class DaemonClient>> ConnectFollowing(const std::string& socket_path);

  /// The machine lease table (used when no daemon runs), opened on first use.
  /// Errors: as store::OpenMachineLeaseTable.
  Result<store::LeaseStore*> Leases();
  /// The one lease authority for this command: the daemon when one runs, else the machine
  /// lease table. Errors: as ExpectedDaemon, Leases and Devices.
  Result<class LeaseBroker*> Broker();
  /// Where the machine lease table lives: $GPUMAN_LEASE_DIR, else lease_dir from the
  /// config, else $GPUMAN_STATE_DIR (tests, private setups), else /run/gpuman/leases.
  const std::string& lease_dir() const { return lease_dir_; }
  /// $GPUMAN_STATE_DIR, else $XDG_STATE_HOME/gpuman, else ~/.local/state/gpuman.
  const std::string& state_dir() const { return state_dir_; }
  const Clock& clock() const { return clock_; }

  const Environment& env() const { return env_; }
  const InstalledLayout& layout() const { return layout_; }
  const Config& config() const { return config_; }
  const std::optional<Simulation>& simulation() const { return sim_; }
  bool is_simulated() const { return sim_.has_value(); }

  /// Terminal facts for stdout: width from the tty (or $COLUMNS, else 80); lines cut to it
  /// only on a tty (a pipe or a file gets them whole); colour when stdout is a tty,
  /// $NO_COLOR is unset, $TERM is not "dumb" and --no-color was not given.
  render::TerminalInfo Terminal(bool no_color) const;
  bool stdout_is_tty() const { return stdout_is_tty_; }

  std::ostream& out() { return out_; }
  std::ostream& err() { return err_; }

  /// The exit policy of the command being run (its row in the command table, cli/app.h).
  ExitPolicy exit_policy() const { return exit_policy_; }
  void set_exit_policy(ExitPolicy policy) { exit_policy_ = policy; }
  /// Prints `gpuman: error: <message>` on err() and returns the exit code the command's
  /// policy gives it (ReportError).
  int Fail(const Error& error) { return ReportError(err_, error, exit_policy_); }

 private:
  Environment env_;
  Config config_;
  std::optional<Simulation> sim_;
  InstalledLayout layout_;
  std::ostream& out_;
  std::ostream& err_;
  ExitPolicy exit_policy_ = ExitPolicy::kPlain;
  bool stdout_is_tty_ = false;
  SystemClock clock_;
  std::unique_ptr<nvml::NvmlLibrary> nvml_;
  std::unique_ptr<devices::DeviceSource> source_;
  std::unique_ptr<class DaemonSampleSource> daemon_sample_;
  std::unique_ptr<devices::ProcessInspector> procfs_;
  std::unique_ptr<devices::ProcessInspector> inspector_;
  std::string state_dir_;
  std::string lease_dir_;
  std::unique_ptr<store::LeaseStore> leases_;
  std::unique_ptr<class DaemonClient> daemon_;
  std::optional<Error> daemon_error_;  // the daemon is expected but did not answer
  bool daemon_tried_ = false;
  std::optional<std::string> daemon_socket_;
  std::unique_ptr<class LeaseBroker> broker_;
};

}  // namespace gpuman::cli
