// Error codes as they travel on the wire: the eight ErrorCodes plus the codes only the
// protocol itself produces (unknown_op, bad_message, ...). This is the one place that maps
// gpuman::ErrorCode to and from wire strings (STYLE.md section 3). Pure; any thread.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"

namespace gpuman::protocol {

enum class WireCode {
  // One per gpuman::ErrorCode.
  kInvalidArgument,
  kNotFound,
  kPermissionDenied,
  kConflict,
  kUnavailable,
  kBusy,
  kIo,
  kInternal,
  // Protocol-only.
  kUnknownOp,           // "op" names no operation this daemon knows
  kUnsupportedVersion,  // "v" (or hello's "protocol") is not one we speak
  kBadMessage,          // not JSON, not an object, too deep, missing envelope fields, zero-length frame
  kTooLarge,            // frame or reply over kMaxMessageBytes
  kHelloRequired,       // first request on a connection was not hello
};

/// An error as carried in a reply: {"code": WireCodeName(code), "message": message}.
struct WireError {
  WireCode code = WireCode::kInternal;
  std::string message;
  bool operator==(const WireError&) const = default;
};

/// "invalid_argument", ..., "unknown_op", "unsupported_version", "bad_message", "too_large",
/// "hello_required". Stable: part of the protocol.
const char* WireCodeName(WireCode code);
/// The inverse of WireCodeName; nullopt for a name this build does not know.
std::optional<WireCode> ParseWireCode(std::string_view name);

/// Total: every ErrorCode has a wire code of the same name.
WireCode ToWireCode(ErrorCode code);
/// For the client. Protocol-only codes map to: unknown_op, bad_message, too_large,
/// hello_required -> kInvalidArgument; unsupported_version -> kUnavailable.
ErrorCode ToErrorCode(WireCode code);

WireError ToWireError(const Error& error);
Error ToError(const WireError& error);

}  // namespace gpuman::protocol
