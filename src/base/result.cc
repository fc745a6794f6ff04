#include "base/result.h"

namespace gpuman {

const char* ErrorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument: return "invalid_argument";
    case ErrorCode::kNotFound: return "not_found";
    case ErrorCode::kPermissionDenied: return "permission_denied";
    case ErrorCode::kConflict: return "conflict";
    case ErrorCode::kUnavailable: return "unavailable";
    case ErrorCode::kBusy: return "busy";
    case ErrorCode::kIo: return "io";
    case ErrorCode::kInternal: return "internal";
  }
  return "internal";
}

}  // namespace gpuman
