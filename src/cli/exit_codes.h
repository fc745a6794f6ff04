// Process exit codes of the gpuman CLI, and the one mapping from ErrorCode to them.
// Documented in docs/cli.md; scripts depend on them, so numbers never change.
#pragma once

#include <iosfwd>
#include <string_view>

#include "base/result.h"
#include "model/job.h"

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

/// How a command turns an error into its exit code: one per row of the command table
/// (cli/app.cc), so the table, not each command, says which codes a command uses.
enum class ExitPolicy {
  kPlain,      // ExitCodeFor(code)
  kLease,      // select, leases, release: busy and not found are kExitNotEnoughGpus
  kHistory,    // history, report: a missing history is kExitError, not a usage mistake
  kJobCode,    // run, wait: every failure of gpuman's own is kJobGpumanFailed
};

/// The exit code for an error that reached the CLI's edge.
int ExitCodeFor(ErrorCode code);
/// The same under `policy`.
int ExitCodeFor(ErrorCode code, ExitPolicy policy);

/// The one place the CLI reports an error: prints `gpuman: error: <message>` on `err` and
/// returns the exit code `policy` gives it.
int ReportError(std::ostream& err, const Error& error, ExitPolicy policy);

// The codes of `wait` and `run` (docs/cli.md, "Exit codes of wait", and
// the `run` section): the job's own
// exit code when it ended by itself, otherwise one of these, which follow timeout(1) and
// env(1). None of gpuman's failures in `wait` or `run` (argument errors included) leaves
// it with a code below 124.
enum JobExitCode : int {
  kJobTimedOut = 124,       // ran past its --time-limit (whatever it exited with after SIGTERM)
  kJobGpumanFailed = 125,   // gpuman's own failure: the daemon did not come back, unknown job, internal
  kJobCannotExecute = 126,  // never ran: could not be started (directory, output, permission)
  kJobNotFound = 127,       // its command was not found
  kJobSignalBase = 128,     // 128+N: killed by signal N
  kJobCancelled = 193,      // `gpuman cancel`: 128+65, past every signal's 128+N (SIGRTMAX is 64)
};

/// Whether a finished job ended by itself (exited, or was killed by a signal gpuman did
/// not send): then `wait` exits with its own exit code.
bool EndedByItself(const model::Job& job);
/// The exit code of `wait` for a job in a final state (docs/cli.md, "Exit codes of wait").
int WaitExitCode(const model::Job& job);

}  // namespace gpuman::cli
