// Request and reply envelopes: {"v", "id", "op", "args"} and {"v", "id", "ok", "result" |
// "error"}, their parsing from a frame's payload and their encoding into frames. The daemon
// parses requests and encodes replies; the client does the reverse. Pure; any thread.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "base/result.h"
#include "protocol/error_codes.h"
#include "protocol/json_io.h"
#include "protocol/messages.h"

namespace gpuman::protocol {

/// One alternative per Op, in the order of Op.
using RequestArgs =
    std::variant<HelloArgs, SubmitArgs, QueueArgs, ShowArgs, CancelArgs, HoldArgs, ResumeArgs, WaitArgs, LogsArgs,
                 DrainArgs, UndrainArgs, LeasesArgs, AcquireArgs, AddProcessesArgs, ReleaseArgs, StatusArgs,
                 HealthArgs, DrainsArgs, SnapshotArgs, PreviewArgs, UpdateArgs>;

struct Request {
  int64_t id = 0;  // chosen by the client, echoed in the reply
  RequestArgs args;

  Op op() const { return static_cast<Op>(args.index()); }
};

/// {"v": 1, "id": ..., "op": ..., "args": {...}}.
nlohmann::json ToJson(const Request& request);
/// A whole frame (header + payload). Errors: kInvalidArgument when the payload would exceed
/// kMaxMessageBytes (e.g. a huge env).
Result<std::string> EncodeRequestFrame(const Request& request);

/// Why a payload is not a Request, ready to be sent back as an error reply.
struct RequestError {
  std::optional<int64_t> id;  // the request's id when it could be read
  WireError error;
};

/// Parses a request frame's payload. Never throws. Errors, checked in this order:
///   bad_message: not JSON, invalid UTF-8, nested deeper than kMaxJsonDepth, not an object,
///                "v" missing or not an integer, "id" missing or not a 64-bit integer,
///                "op" missing or not a string;
///   unsupported_version: "v" is not kProtocolVersion;
///   unknown_op: "op" names no Op;
///   invalid_argument: "args" (absent means {}) is not what the op needs; the message
///                names the member, e.g. "args.ids: expected non-empty array of integers >= 1".
/// Members other than these (a "uid", say) are ignored: identity comes from the socket.
std::variant<Request, RequestError> ParseRequest(std::string_view payload);

struct Reply {
  std::optional<int64_t> id;                         // nullopt (JSON null) when answering an unreadable request
  std::optional<WireError> error;                    // set: "ok": false
  nlohmann::json result = nlohmann::json::object();  // when ok
  // When ok and not empty: the result already encoded as JSON text, written as it is
  // instead of `result` (the snapshot op's cache, EncodeSnapshotResult).
  std::string result_text;

  bool ok() const { return !error.has_value(); }
};

/// A success reply carrying ToJson(result).
template <typename T>
Reply MakeReply(int64_t id, const T& result) {
  return Reply{id, std::nullopt, ToJson(result), {}};
}
/// A success reply whose result is `result_text`, JSON text encoded already.
inline Reply MakeEncodedReply(int64_t id, std::string result_text) {
  return Reply{id, std::nullopt, nlohmann::json(), std::move(result_text)};
}
Reply MakeErrorReply(std::optional<int64_t> id, WireError error);
inline Reply MakeErrorReply(const RequestError& e) { return MakeErrorReply(e.id, e.error); }

/// {"v": 1, "id": ..., "ok": true, "result": {...}} or {..., "ok": false, "error": {...}}.
nlohmann::json ToJson(const Reply& reply);
/// A whole frame. Never fails: a reply whose payload would exceed kMaxMessageBytes is
/// replaced by a too_large error reply with the same id.
std::string EncodeReplyFrame(const Reply& reply);

/// Parses a reply frame's payload (client side). An unknown error code becomes internal
/// with the code's name kept in the message. Errors: kInvalidArgument for anything that is
/// not a well-formed reply ("reply.ok: missing", "reply.v: unsupported version 2", ...).
Result<Reply> ParseReply(std::string_view payload);

/// The typed result of a reply: its error as an Error (ToError), or FromJson<T>(result).
template <typename T>
Result<T> ResultOf(const Reply& reply) {
  if (reply.error) return ToError(*reply.error);
  if (!reply.result_text.empty()) {
    Result<nlohmann::json> parsed = ParseJson(reply.result_text);
    if (!parsed) return parsed.error();
    return FromJson<T>(*parsed);
  }
  return FromJson<T>(reply.result);
}

}  // namespace gpuman::protocol
