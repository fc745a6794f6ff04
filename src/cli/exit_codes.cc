#include "cli/exit_codes.h"

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

}  // namespace gpuman::cli
