// `gpuman health`: fatal and warning findings per GPU (Xids, ECC, pending retirement or
// remapping, throttling, lost GPUs, driver problems), from the daemon's continuous watch
// when one answers, else from one snapshot plus the kernel log. Exit code for scripts:
// 0 healthy, 7 warnings only, 6 a fatal finding, 3 no driver.
#pragma once

#include <optional>
#include <string>

#include "cli/context.h"
#include "model/health.h"

namespace gpuman::cli {

struct HealthArgs {
  bool json = false;
  bool no_color = false;
  bool local = false;                 // do not ask the daemon
  std::optional<std::string> since;  // kernel-log window, default the [health] xid_window
};

/// What `gpuman health` reports, without printing it: the daemon's report when one answers
/// (and `args` does not ask for --local/--since), else one snapshot plus the kernel log.
/// Also used by `gpuman slurm healthcheck` and `prolog`. Errors: as Context::Devices and
/// the snapshot (kUnavailable without a driver), kInvalidArgument for a bad --since.
struct HealthOutcome {
  model::HealthReport report;
  int gpu_count = 0;
  bool from_daemon = false;
};
Result<HealthOutcome> CollectHealth(const HealthArgs& args, Context& ctx);
int RunHealth(const HealthArgs& args, Context& ctx);

}  // namespace gpuman::cli
