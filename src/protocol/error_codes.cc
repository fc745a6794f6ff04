#include "protocol/error_codes.h"

#include <utility>

namespace gpuman::protocol {

namespace {

constexpr std::pair<WireCode, const char*> kNames[] = {
    {WireCode::kInvalidArgument, "invalid_argument"},
    {WireCode::kNotFound, "not_found"},
    {WireCode::kPermissionDenied, "permission_denied"},
    {WireCode::kConflict, "conflict"},
    {WireCode::kUnavailable, "unavailable"},
    {WireCode::kBusy, "busy"},
    {WireCode::kIo, "io"},
    {WireCode::kInternal, "internal"},
    {WireCode::kUnknownOp, "unknown_op"},
    {WireCode::kUnsupportedVersion, "unsupported_version"},
    {WireCode::kBadMessage, "bad_message"},
    {WireCode::kTooLarge, "too_large"},
    {WireCode::kHelloRequired, "hello_required"},
};

}  // namespace

const char* WireCodeName(WireCode code) {
  for (const auto& [c, name] : kNames) {
    if (c == code) return name;
  }
  return "internal";
}

std::optional<WireCode> ParseWireCode(std::string_view name) {
  for (const auto& [c, n] : kNames) {
    if (name == n) return c;
  }
  return std::nullopt;
}

WireCode ToWireCode(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return WireCode::kInvalidArgument;
    case ErrorCode::kNotFound:
      return WireCode::kNotFound;
    case ErrorCode::kPermissionDenied:
      return WireCode::kPermissionDenied;
    case ErrorCode::kConflict:
      return WireCode::kConflict;
    case ErrorCode::kUnavailable:
      return WireCode::kUnavailable;
    case ErrorCode::kBusy:
      return WireCode::kBusy;
    case ErrorCode::kIo:
      return WireCode::kIo;
    case ErrorCode::kInternal:
      return WireCode::kInternal;
  }
  return WireCode::kInternal;
}

ErrorCode ToErrorCode(WireCode code) {
  switch (code) {
    case WireCode::kInvalidArgument:
      return ErrorCode::kInvalidArgument;
    case WireCode::kNotFound:
      return ErrorCode::kNotFound;
    case WireCode::kPermissionDenied:
      return ErrorCode::kPermissionDenied;
    case WireCode::kConflict:
      return ErrorCode::kConflict;
    case WireCode::kUnavailable:
      return ErrorCode::kUnavailable;
    case WireCode::kBusy:
      return ErrorCode::kBusy;
    case WireCode::kIo:
      return ErrorCode::kIo;
    case WireCode::kInternal:
      return ErrorCode::kInternal;
    case WireCode::kUnknownOp:
    case WireCode::kBadMessage:
    case WireCode::kTooLarge:
    case WireCode::kHelloRequired:
      return ErrorCode::kInvalidArgument;
    // The two ends cannot talk: for the user that is "the daemon is not usable".
    case WireCode::kUnsupportedVersion:
      return ErrorCode::kUnavailable;
  }
  return ErrorCode::kInternal;
}

WireError ToWireError(const Error& error) { return WireError{ToWireCode(error.code), error.message}; }

Error ToError(const WireError& error) { return Error{ToErrorCode(error.code), error.message}; }

}  // namespace gpuman::protocol
