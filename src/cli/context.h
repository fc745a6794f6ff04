// Context: what every subcommand gets from main - configuration, environment, terminal
// facts, output streams, and the real implementations behind the seams (device source,
// process inspector), created lazily so commands that need no GPU never load NVML.
// One per process; single-threaded.
#pragma once

#include <iostream>
#include <memory>
#include <optional>

#include "base/clock.h"
#include "cli/config.h"
#include "cli/simulation.h"
#include "devices/device_source.h"
#include "devices/process_inspector.h"
#include "nvml/library.h"
#include "render/status_view.h"
#include "store/lease_store.h"

namespace gpuman::cli {

class Context {
 public:
  Context(Environment env, Config config, std::optional<Simulation> sim, std::ostream& out,
          std::ostream& err);
  ~Context();

  /// The machine's device source (NVML, or the stand-in when simulating), opened on
  /// first use. Errors: kUnavailable when NVML cannot be loaded or initialised.
  Result<devices::DeviceSource*> Devices();
  devices::ProcessInspector& Inspector();
  /// The NVML library behind Devices(), once that succeeded; else nullptr.
  const nvml::NvmlLibrary* nvml_library() const { return nvml_.get(); }

  /// A connection to the machine's daemon when one answers (first use tries once), else
  /// nullptr: leases then go to the per-user store.
  class DaemonClient* Daemon();

  /// The lease store in state_dir(), opened on first use. Errors: as LeaseStore::Open.
  Result<store::LeaseStore*> Leases();
  /// $GPUMAN_STATE_DIR, else $XDG_STATE_HOME/gpuman, else ~/.local/state/gpuman.
  const std::string& state_dir() const { return state_dir_; }
  const Clock& clock() const { return clock_; }

  const Environment& env() const { return env_; }
  const Config& config() const { return config_; }
  const std::optional<Simulation>& simulation() const { return sim_; }
  bool is_simulated() const { return sim_.has_value(); }

  /// Terminal facts for stdout: width from the tty (or $COLUMNS, else 80); colour when
  /// stdout is a tty, $NO_COLOR is unset, $TERM is not "dumb" and --no-color was not given.
  render::TerminalInfo Terminal(bool no_color) const;
  bool stdout_is_tty() const { return stdout_is_tty_; }

  std::ostream& out() { return out_; }
  std::ostream& err() { return err_; }

 private:
  Environment env_;
  Config config_;
  std::optional<Simulation> sim_;
  std::ostream& out_;
  std::ostream& err_;
  bool stdout_is_tty_ = false;
  SystemClock clock_;
  std::unique_ptr<nvml::NvmlLibrary> nvml_;
  std::unique_ptr<devices::DeviceSource> source_;
  std::unique_ptr<devices::ProcessInspector> procfs_;
  std::unique_ptr<devices::ProcessInspector> inspector_;
  std::string state_dir_;
  std::unique_ptr<store::LeaseStore> leases_;
  std::unique_ptr<class DaemonClient> daemon_;
  bool daemon_tried_ = false;
};

}  // namespace gpuman::cli
