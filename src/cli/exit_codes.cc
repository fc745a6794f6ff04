#include "cli/exit_codes.h"

#include <ostream>

namespace gpuman::cli {

int ExitCodeFor(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kNotFound:
      return kExitUsage;
    case ErrorCode::kUnavailable:
      return kExitNoDriver;
    case ErrorCode::kPermissionDenied:
      return kExitPermission;
    case ErrorCode::kConflict:
    case ErrorCode::kBusy:
    case ErrorCode::kIo:
    case ErrorCode::kInternal:
      return kExitError;
  }
  return kExitError;
}

int ExitCodeFor(ErrorCode code, ExitPolicy policy) {
  switch (policy) {
    case ExitPolicy::kPlain:
      break;
    case ExitPolicy::kLease:
      if (code == ErrorCode::kBusy || code == ErrorCode::kNotFound) return kExitNotEnoughGpus;
      break;
    case ExitPolicy::kHistory:
      if (code == ErrorCode::kNotFound) return kExitError;
      break;
    case ExitPolicy::kJobCode:
      return kJobGpumanFailed;
  }
  return ExitCodeFor(code);
}

int ReportError(std::ostream& err, const Error& error, ExitPolicy policy) {
  err << "gpuman: error: " << error.message << "\n";
  return ExitCodeFor(error.code, policy);
}

bool EndedByItself(const model::Job& job) {
  if (job.state == model::JobState::kSucceeded) return true;
  return job.state == model::JobState::kFailed && job.failure == model::JobFailure::kNone && job.exit_code &&
         job.reason != model::kGpuLostReason;
}

int WaitExitCode(const model::Job& job) {
  switch (job.state) {
    case model::JobState::kSucceeded:
      return job.exit_code.value_or(0);
    case model::JobState::kTimedOut:
      return kJobTimedOut;
    case model::JobState::kCancelled:
      return kJobCancelled;
    case model::JobState::kFailed:
      // It never ran its command (the supervisor says why).
      switch (job.failure) {
        case model::JobFailure::kCommandNotFound:
          return kJobNotFound;
        case model::JobFailure::kCannotExecute:
        case model::JobFailure::kCannotStart:
          return kJobCannotExecute;
        case model::JobFailure::kNone:
          break;
      }
      // Ended by gpuman, not by itself: its GPU failed under it.
      if (job.reason == model::kGpuLostReason) return kJobGpumanFailed;
      // Ended by itself: its own code (128+N when signal N killed it; 126/127 when its
      // command could not be executed or was not found).
      if (job.exit_code) return *job.exit_code;
      // No exit status: it never ran (could not be started), or its supervisor died and
      // the outcome is unknown.
      return job.started_unix_ms ? kJobGpumanFailed : kJobCannotExecute;
    case model::JobState::kQueued:
    case model::JobState::kHeld:
    case model::JobState::kStarting:
    case model::JobState::kRunning:
      break;
  }
  return kJobGpumanFailed;  // not final: never asked for
}

}  // namespace gpuman::cli
