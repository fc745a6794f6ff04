#include "protocol/envelope.h"

#include <utility>

#include "protocol/framing.h"
#include "protocol/json_io.h"

namespace gpuman::protocol {

using nlohmann::json;

namespace {

static_assert(std::variant_size_v<RequestArgs> == static_cast<std::size_t>(Op::kUpdate) + 1,
              "RequestArgs needs one alternative per Op");

// FromJson for the alternative at index I, chosen at run time by `op`.
template <std::size_t I = 0>
Result<RequestArgs> ArgsFromJson(Op op, const json& args) {
  if constexpr (I < std::variant_size_v<RequestArgs>) {
    if (static_cast<std::size_t>(op) == I) {
      using T = std::variant_alternative_t<I, RequestArgs>;
      Result<T> parsed = FromJson<T>(args);
      if (!parsed) return parsed.error();
      return RequestArgs(std::in_place_index<I>, std::move(parsed).value());
    }
    return ArgsFromJson<I + 1>(op, args);
  } else {
    return MakeError(ErrorCode::kInternal, "op without args type");
  }
}

RequestError BadMessage(std::optional<int64_t> id, std::string message) {
  return RequestError{id, WireError{WireCode::kBadMessage, std::move(message)}};
}

}  // namespace

json ToJson(const Request& request) {
  return json{
      {"v", kProtocolVersion},
      {"id", request.id},
      {"op", OpName(request.op())},
      {"args", std::visit([](const auto& a) { return ToJson(a); }, request.args)},
  };
}

Result<std::string> EncodeRequestFrame(const Request& request) {
  std::string payload = DumpJson(ToJson(request));
  if (payload.size() > kMaxMessageBytes) {
    return MakeError(ErrorCode::kInvalidArgument, std::string(OpName(request.op())) + " request of " +
                                                      std::to_string(payload.size()) + " bytes exceeds the limit of " +
                                                      std::to_string(kMaxMessageBytes));
  }
  return EncodeFrame(payload);
}

std::variant<Request, RequestError> ParseRequest(std::string_view payload) {
  Result<json> parsed = ParseJson(payload);
  if (!parsed) return BadMessage(std::nullopt, parsed.error().message);
  const json& j = *parsed;
  if (!j.is_object()) return BadMessage(std::nullopt, "request: expected object");

  // The id first, so that every later error can be matched to its request.
  std::optional<int64_t> id;
  std::optional<Error> id_error;
  if (auto it = j.find("id"); it == j.end()) {
    id_error = MakeError(ErrorCode::kInvalidArgument, "request.id: missing");
  } else {
    int64_t value = 0;
    ReadValue(*it, "request.id", value, id_error);
    if (!id_error) id = value;
  }

  auto v = j.find("v");
  if (v == j.end()) return BadMessage(id, "request.v: missing");
  if (!v->is_number_integer()) return BadMessage(id, "request.v: expected integer");
  if (id_error) return BadMessage(std::nullopt, id_error->message);
  if (!v->is_number_unsigned() || v->get<uint64_t>() != static_cast<uint64_t>(kProtocolVersion)) {
    return RequestError{id, WireError{WireCode::kUnsupportedVersion, "request.v: version " + DumpJson(*v) +
                                                                         " is not supported; this daemon speaks " +
                                                                         std::to_string(kProtocolVersion)}};
  }

  auto op_it = j.find("op");
  if (op_it == j.end()) return BadMessage(id, "request.op: missing");
  if (!op_it->is_string()) return BadMessage(id, "request.op: expected string");
  const std::string& op_name = op_it->get_ref<const std::string&>();
  std::optional<Op> op = ParseOp(op_name);
  if (!op) return RequestError{id, WireError{WireCode::kUnknownOp, "unknown op '" + op_name + "'"}};

  static const json kNoArgs = json::object();
  auto args_it = j.find("args");
  Result<RequestArgs> args = ArgsFromJson(*op, args_it == j.end() ? kNoArgs : *args_it);
  if (!args) return RequestError{id, ToWireError(args.error())};
  return Request{*id, std::move(args).value()};
}

Reply MakeErrorReply(std::optional<int64_t> id, WireError error) { return Reply{id, std::move(error), json::object(), {}}; }

json ToJson(const Reply& reply) {
  json j = {{"v", kProtocolVersion}, {"id", reply.id ? json(*reply.id) : json(nullptr)}, {"ok", reply.ok()}};
  if (reply.error) {
    j["error"] = ToJson(*reply.error);
  } else {
    if (!reply.result_text.empty()) {
      Result<json> parsed = ParseJson(reply.result_text);
      j["result"] = parsed && parsed->is_object() ? std::move(*parsed) : json::object();
    } else {
      j["result"] = reply.result.is_object() ? reply.result : json::object();
    }
  }
  return j;
}

std::string EncodeReplyFrame(const Reply& reply) {
  std::string payload;
  // A success reply's text as DumpJson(ToJson(reply)) writes it (members in key order: id,
  // ok, result, v), without copying the result into an envelope first: for a snapshot that
  // copy was a tenth of the daemon's work per request. An encoded result goes in as it is.
  std::string dumped;
  const std::string* result = nullptr;
  if (!reply.error && !reply.result_text.empty()) {
    result = &reply.result_text;
  } else if (!reply.error && reply.result.is_object()) {
    dumped = DumpJson(reply.result);
    result = &dumped;
  }
  if (result) {
    payload = "{\"id\":" + (reply.id ? std::to_string(*reply.id) : std::string("null")) + ",\"ok\":true,\"result\":" +
              *result + ",\"v\":" + std::to_string(kProtocolVersion) + "}";
  } else {
    payload = DumpJson(ToJson(reply));
  }
  if (payload.size() > kMaxMessageBytes) {
    Reply too_large =
        MakeErrorReply(reply.id, WireError{WireCode::kTooLarge, "reply of " + std::to_string(payload.size()) +
                                                                    " bytes exceeds the limit of " +
                                                                    std::to_string(kMaxMessageBytes)});
    payload = DumpJson(ToJson(too_large));
  }
  return EncodeFrame(payload);
}

Result<Reply> ParseReply(std::string_view payload) {
  Result<json> parsed = ParseJson(payload);
  if (!parsed) return parsed.error().WithContext("reply");
  const json& j = *parsed;
  FieldReader f(j, "reply");
  int64_t v = 0;
  f.Required("v", v);
  if (f.ok() && v != kProtocolVersion) f.Fail("v", "unsupported version " + std::to_string(v));
  Reply reply;
  if (const json* id = f.Find("id"); id != nullptr && !id->is_null()) {
    int64_t value = 0;
    f.Required("id", value);
    reply.id = value;
  }
  bool ok = false;
  f.Required("ok", ok);
  if (!f.ok()) return f.error();
  if (ok) {
    if (const json* result = f.Find("result")) {
      f.Check(result->is_object(), "result", "object");
      // Moved, not copied: a snapshot reply's DOM is most of the reply.
      if (f.ok()) reply.result = std::move(parsed->find("result").value());
    }
  } else {
    const json* error = f.Find("error");
    if (error == nullptr) return MakeError(ErrorCode::kInvalidArgument, "reply.error: missing");
    Result<WireError> e = FromJson<WireError>(*error);
    if (!e) return e.error().WithContext("reply");
    reply.error = std::move(e).value();
  }
  if (!f.ok()) return f.error();
  return reply;
}

}  // namespace gpuman::protocol
