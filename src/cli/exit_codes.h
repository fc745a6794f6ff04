// Process exit codes of the gpuman CLI, and the one mapping from ErrorCode to them.
// Documented in docs/cli.md; scripts depend on them, so numbers never change.
#pragma once

#include "base/result.h"

namespace gpuman::cli {

enum ExitCode : int {
  kExitOk = 0,
  kExitError = 1,         // anything not listed below
  kExitUsage = 2,         // invalid arguments, unknown GPU ids, broken config
  kExitNoDriver = 3,      // NVML / driver could not be loaded or initialised
  kExitNotEnoughGpus = 4, // reserved for `select`/`run` (no GPUs fit)
  kExitPermission = 5,    // not allowed
  kExitUnhealthy = 6,     // `health`: at least one fatal finding
  kExitHealthWarnings = 7,  // `health`: warnings only
};

/// The exit code for an error that reached the CLI's edge.
int ExitCodeFor(ErrorCode code);

}  // namespace gpuman::cli
