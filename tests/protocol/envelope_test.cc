#include "protocol/envelope.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "protocol/framing.h"
#include "protocol/json_io.h"

namespace gpuman::protocol {
namespace {

struct BadRequestCase {
  const char* name;
  std::string payload;
  WireCode code;
  std::optional<int64_t> id;
  std::string message;  // exact, or a prefix when it ends with '*'
};

void ExpectMessage(const std::string& actual, const std::string& expected) {
  if (!expected.empty() && expected.back() == '*') {
    EXPECT_EQ(actual.substr(0, expected.size() - 1), expected.substr(0, expected.size() - 1)) << actual;
  } else {
    EXPECT_EQ(actual, expected);
  }
}

std::string Req(const std::string& op, const std::string& args) {
  return R"({"v":1,"id":9,"op":")" + op + R"(","args":)" + args + "}";
}

std::vector<BadRequestCase> BadRequests() {
  const WireCode kBad = WireCode::kBadMessage;
  const WireCode kArg = WireCode::kInvalidArgument;
  return {
      // Not a message at all.
      {"empty", "", kBad, std::nullopt, "json: *"},
      {"garbage", "hello daemon", kBad, std::nullopt, "json: parse error*"},
      {"truncated", R"({"v":1,"id":1,"op":"hel)", kBad, std::nullopt, "json: *"},
      {"trailing", R"({"v":1,"id":1,"op":"hello"} {})", kBad, std::nullopt, "json: *"},
      {"array", R"([1,2,3])", kBad, std::nullopt, "request: expected object"},
      {"string", R"("hello")", kBad, std::nullopt, "request: expected object"},
      {"null", "null", kBad, std::nullopt, "request: expected object"},
      {"number", "1", kBad, std::nullopt, "request: expected object"},
      {"invalid_utf8", "{\"v\":1,\"id\":1,\"op\":\"he\xffllo\"}", kBad, std::nullopt, "json: *"},
      {"overlong_utf8", "{\"v\":1,\"id\":1,\"op\":\"\xc0\xafx\"}", kBad, std::nullopt, "json: *"},
      {"lone_surrogate", R"({"v":1,"id":1,"op":"\ud800"})", kBad, std::nullopt, "json: *"},
      {"deep_arrays", std::string(100000, '['), kBad, std::nullopt, "json: nested deeper than 64 levels"},
      {"deep_objects",
       [] {
         std::string s;
         for (int i = 0; i < 65; ++i) s += R"({"a":)";
         s += "1";
         for (int i = 0; i < 65; ++i) s += "}";
         return s;
       }(),
       kBad, std::nullopt, "json: nested deeper than 64 levels"},
      // Envelope fields.
      {"no_v", R"({"id":1,"op":"hello"})", kBad, 1, "request.v: missing"},
      {"v_string", R"({"v":"1","id":1,"op":"hello"})", kBad, 1, "request.v: expected integer"},
      {"v_float", R"({"v":1.0,"id":1,"op":"hello"})", kBad, 1, "request.v: expected integer"},
      {"v_2", R"({"v":2,"id":1,"op":"hello"})", WireCode::kUnsupportedVersion, 1,
       "request.v: version 2 is not supported; this daemon speaks 1"},
      {"v_negative", R"({"v":-1,"id":1,"op":"hello"})", WireCode::kUnsupportedVersion, 1, "request.v: version -1*"},
      {"v_huge", R"({"v":18446744073709551615,"id":1,"op":"hello"})", WireCode::kUnsupportedVersion, 1, "*"},
      {"no_id", R"({"v":1,"op":"hello"})", kBad, std::nullopt, "request.id: missing"},
      {"id_string", R"({"v":1,"id":"1","op":"hello"})", kBad, std::nullopt, "request.id: expected 64-bit integer"},
      {"id_too_big", R"({"v":1,"id":9223372036854775808,"op":"hello"})", kBad, std::nullopt,
       "request.id: expected 64-bit integer"},
      {"id_1e400", R"({"v":1,"id":1e400,"op":"hello"})", kBad, std::nullopt, "*"},
      {"id_float", R"({"v":1,"id":1.5,"op":"hello"})", kBad, std::nullopt, "request.id: expected 64-bit integer"},
      {"no_op", R"({"v":1,"id":3})", kBad, 3, "request.op: missing"},
      {"op_number", R"({"v":1,"id":3,"op":7})", kBad, 3, "request.op: expected string"},
      {"unknown_op", R"({"v":1,"id":3,"op":"format_disk"})", WireCode::kUnknownOp, 3, "unknown op 'format_disk'"},
      {"args_array", Req("show", "[]"), kArg, 9, "args: expected object"},
      // hello
      {"hello_no_protocol", Req("hello", R"({"client":"gpuman 0.1.0"})"), kArg, 9, "args.protocol: missing"},
      {"hello_protocol_string", Req("hello", R"({"client":"x","protocol":"1"})"), kArg, 9,
       "args.protocol: expected 32-bit integer"},
      {"hello_no_client", Req("hello", R"({"protocol":1})"), kArg, 9, "args.client: missing"},
      // submit
      {"submit_no_argv", Req("submit", R"({"cwd":"/"})"), kArg, 9, "args.argv: missing"},
      {"submit_empty_argv", Req("submit", R"({"argv":[],"cwd":"/"})"), kArg, 9,
       "args.argv: expected non-empty array of strings"},
      {"submit_argv_number", Req("submit", R"({"argv":["a",1],"cwd":"/"})"), kArg, 9, "args.argv[1]: expected string"},
      {"submit_argv_nul", Req("submit", R"({"argv":["a","b\u0000c"],"cwd":"/"})"), kArg, 9,
       "args.argv[1]: expected string without NUL bytes"},
      {"submit_relative_cwd", Req("submit", R"({"argv":["a"],"cwd":"home"})"), kArg, 9,
       "args.cwd: expected absolute path"},
      {"submit_env_number", Req("submit", R"({"argv":["a"],"cwd":"/","env":{"A":1}})"), kArg, 9,
       "args.env.A: expected string"},
      {"submit_env_array", Req("submit", R"({"argv":["a"],"cwd":"/","env":["A=1"]})"), kArg, 9,
       "args.env: expected object of strings"},
      {"submit_env_key_eq", Req("submit", R"({"argv":["a"],"cwd":"/","env":{"A=B":"1"}})"), kArg, 9,
       "args.env: expected variable names that are non-empty, without '=' or NUL"},
      {"submit_count_zero", Req("submit", R"({"argv":["a"],"cwd":"/","request":{"count":0}})"), kArg, 9,
       "args.request.count: expected integer >= 1"},
      {"submit_count_huge", Req("submit", R"({"argv":["a"],"cwd":"/","request":{"count":99999999999}})"), kArg, 9,
       "args.request.count: expected 32-bit integer"},
      {"submit_count_float", Req("submit", R"({"argv":["a"],"cwd":"/","request":{"count":1.5}})"), kArg, 9,
       "args.request.count: expected 32-bit integer"},
      {"submit_util_101", Req("submit", R"({"argv":["a"],"cwd":"/","request":{"max_utilization_percent":101}})"), kArg,
       9, "args.request.max_utilization_percent: expected integer in [0, 100] or null"},
      {"submit_request_string", Req("submit", R"({"argv":["a"],"cwd":"/","request":"2 gpus"})"), kArg, 9,
       "args.request: expected object"},
      {"submit_time_limit_zero", Req("submit", R"({"argv":["a"],"cwd":"/","time_limit_ms":0})"), kArg, 9,
       "args.time_limit_ms: expected integer >= 1 or null"},
      {"submit_requeue_string", Req("submit", R"({"argv":["a"],"cwd":"/","requeue":"yes"})"), kArg, 9,
       "args.requeue: expected boolean"},
      {"submit_after_negative", Req("submit", R"({"argv":["a"],"cwd":"/","after":[3,-1]})"), kArg, 9,
       "args.after[1]: expected integer >= 1"},
      {"submit_output_empty", Req("submit", R"({"argv":["a"],"cwd":"/","output":""})"), kArg, 9,
       "args.output: expected non-empty path or null"},
      // ids
      {"cancel_no_ids", Req("cancel", "{}"), kArg, 9, "args.ids: missing"},
      {"cancel_empty_ids", Req("cancel", R"({"ids":[]})"), kArg, 9,
       "args.ids: expected non-empty array of job id (integer >= 1) or task (\"12_7\")"},
      {"hold_zero_id", Req("hold", R"({"ids":[1,0]})"), kArg, 9, "args.ids[1]: expected job id (integer >= 1) or task (\"12_7\")"},
      {"resume_ids_object", Req("resume", R"({"ids":{"1":true}})"), kArg, 9, "args.ids: expected non-empty array of job id (integer >= 1) or task (\"12_7\")"},
      {"show_no_id", Req("show", "{}"), kArg, 9, "args.id: missing"},
      {"wait_id_bool", Req("wait", R"({"id":true})"), kArg, 9, "args.id: expected job id (integer >= 1) or task (\"12_7\")"},
      {"logs_negative_offset", Req("logs", R"({"id":1,"offset":-1})"), kArg, 9, "args.offset: expected integer >= 0"},
      {"drain_no_gpu", Req("drain", R"({"reason":"x"})"), kArg, 9, "args.gpu: missing"},
      {"undrain_empty_gpu", Req("undrain", R"({"gpu":""})"), kArg, 9,
       "args.gpu: expected non-empty string (UUID or index)"},
      {"acquire_no_pid", Req("acquire", R"({"start_time_ticks":1})"), kArg, 9, "args.pid: missing"},
      {"acquire_pid_huge", Req("acquire", R"({"pid":4294967296,"start_time_ticks":1})"), kArg, 9,
       "args.pid: expected 32-bit integer"},
      {"acquire_wait_negative", Req("acquire", R"({"pid":5,"start_time_ticks":1,"wait_ms":-5})"), kArg, 9,
       "args.wait_ms: expected integer >= 0 or null"},
      {"add_processes_empty", Req("add_processes", R"({"lease_id":1,"processes":[]})"), kArg, 9,
       "args.processes: expected non-empty array of {pid, start_time_ticks}"},
      {"add_processes_bad_item",
       Req("add_processes",
           R"({"lease_id":1,"processes":[{"pid":1,"start_time_ticks":2},{"pid":0,"start_time_ticks":2}]})"),
       kArg, 9, "args.processes[1].pid: expected integer >= 1"},
      {"add_processes_not_objects", Req("add_processes", R"({"lease_id":1,"processes":[5]})"), kArg, 9,
       "args.processes[0]: expected object"},
      {"release_no_lease", Req("release", "{}"), kArg, 9, "args.lease_id: missing"},
      {"status_args_string", Req("status", R"("all")"), kArg, 9, "args: expected object"},
  };
}

class BadRequestTest : public testing::TestWithParam<BadRequestCase> {};

TEST_P(BadRequestTest, CleanError) {
  const BadRequestCase& c = GetParam();
  std::variant<Request, RequestError> parsed = ParseRequest(c.payload);
  ASSERT_TRUE(std::holds_alternative<RequestError>(parsed));
  const RequestError& e = std::get<RequestError>(parsed);
  EXPECT_EQ(WireCodeName(e.error.code), std::string(WireCodeName(c.code)));
  EXPECT_EQ(e.id, c.id);
  ExpectMessage(e.error.message, c.message);
  // The error reply can always be encoded and read back, whatever the message contains.
  Result<Reply> reply = ParseReply(EncodeReplyFrame(MakeErrorReply(e)).substr(4));
  ASSERT_TRUE(reply) << reply.error().message;
  EXPECT_EQ(reply->error->code, c.code);
}

INSTANTIATE_TEST_SUITE_P(Table, BadRequestTest, testing::ValuesIn(BadRequests()),
                         [](const testing::TestParamInfo<BadRequestCase>& p) { return std::string(p.param.name); });

TEST(ParseRequestTest, ToleratesUnknownFieldsAndIgnoresIdentityClaims) {
  std::variant<Request, RequestError> parsed = ParseRequest(
      R"({"v":1,"id":4,"op":"queue","uid":0,"user":"root","future":[1,2],"args":{"all":true,"uid":0,"x":{}}})");
  ASSERT_TRUE(std::holds_alternative<Request>(parsed));
  const Request& r = std::get<Request>(parsed);
  EXPECT_EQ(r.id, 4);
  EXPECT_TRUE(std::get<QueueArgs>(r.args).all);
}

TEST(ParseRequestTest, MissingArgsMeansEmptyObject) {
  for (const char* op : {"leases", "status", "queue"}) {
    std::variant<Request, RequestError> parsed = ParseRequest(std::string(R"({"v":1,"id":1,"op":")") + op + R"("})");
    ASSERT_TRUE(std::holds_alternative<Request>(parsed)) << op;
  }
  std::variant<Request, RequestError> parsed = ParseRequest(R"({"v":1,"id":1,"op":"show"})");
  ASSERT_TRUE(std::holds_alternative<RequestError>(parsed));
  EXPECT_EQ(std::get<RequestError>(parsed).error.message, "args.id: missing");
}

TEST(ParseRequestTest, DepthLimitIsExact) {
  auto nested = [](int depth) {
    // {"v":1,"id":1,"op":"status","args":{"x":[[...]]}} with `depth` levels in total.
    std::string s = R"({"v":1,"id":1,"op":"status","args":{"x":)";
    for (int i = 0; i < depth - 2; ++i) s += "[";
    for (int i = 0; i < depth - 2; ++i) s += "]";
    return s + "}}";
  };
  EXPECT_TRUE(std::holds_alternative<Request>(ParseRequest(nested(kMaxJsonDepth))));
  std::variant<Request, RequestError> too_deep = ParseRequest(nested(kMaxJsonDepth + 1));
  ASSERT_TRUE(std::holds_alternative<RequestError>(too_deep));
  EXPECT_EQ(std::get<RequestError>(too_deep).error.code, WireCode::kBadMessage);
}

TEST(ParseRequestTest, BracketsInsideStringsDoNotCount) {
  const std::string brackets(1000, '[');
  std::variant<Request, RequestError> parsed =
      ParseRequest(R"({"v":1,"id":1,"op":"submit","args":{"argv":[")" + brackets + R"(\"\\{"],"cwd":"/"}})");
  ASSERT_TRUE(std::holds_alternative<Request>(parsed)) << std::get<RequestError>(parsed).error.message;
  EXPECT_EQ(std::get<SubmitArgs>(std::get<Request>(parsed).args).argv[0], brackets + "\"\\{");
}

TEST(ParseRequestTest, NegativeAndLargeIdsAreEchoed) {
  for (int64_t id :
       {int64_t{0}, int64_t{-5}, std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()}) {
    std::variant<Request, RequestError> parsed =
        ParseRequest(R"({"v":1,"id":)" + std::to_string(id) + R"(,"op":"leases"})");
    ASSERT_TRUE(std::holds_alternative<Request>(parsed)) << id;
    EXPECT_EQ(std::get<Request>(parsed).id, id);
  }
}

TEST(ParseRequestTest, Utf8IsKept) {
  std::variant<Request, RequestError> parsed =
      ParseRequest(R"({"v":1,"id":1,"op":"drain","args":{"gpu":"0","reason":"Lüfter defekt ✓ \u00e9"}})");
  ASSERT_TRUE(std::holds_alternative<Request>(parsed));
  EXPECT_EQ(std::get<DrainArgs>(std::get<Request>(parsed).args).reason, "Lüfter defekt ✓ é");
}

struct BadReplyCase {
  const char* name;
  std::string payload;
  std::string message;
};

TEST(ParseReplyTest, CleanErrors) {
  const std::vector<BadReplyCase> cases = {
      {"garbage", "%%%", "reply: json: *"},
      {"array", "[]", "reply: expected object"},
      {"no_v", R"({"id":1,"ok":true})", "reply.v: missing"},
      {"v_2", R"({"v":2,"id":1,"ok":true})", "reply.v: unsupported version 2"},
      {"id_string", R"({"v":1,"id":"1","ok":true})", "reply.id: expected 64-bit integer"},
      {"no_ok", R"({"v":1,"id":1})", "reply.ok: missing"},
      {"ok_string", R"({"v":1,"id":1,"ok":"true"})", "reply.ok: expected boolean"},
      {"result_array", R"({"v":1,"id":1,"ok":true,"result":[]})", "reply.result: expected object"},
      {"no_error", R"({"v":1,"id":1,"ok":false})", "reply.error: missing"},
      {"error_no_code", R"({"v":1,"id":1,"ok":false,"error":{"message":"x"}})", "reply: error.code: missing"},
      {"deep", std::string(100000, '{'), "reply: json: nested deeper than 64 levels"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    Result<Reply> r = ParseReply(c.payload);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
    ExpectMessage(r.error().message, c.message);
  }
}

TEST(ParseReplyTest, TypedResultErrorsNameTheField) {
  Result<Reply> r = ParseReply(R"({"v":1,"id":1,"ok":true,"result":{"lease_id":0,"gpu_uuids":[]}})");
  ASSERT_TRUE(r);
  Result<AcquireResult> a = ResultOf<AcquireResult>(*r);
  ASSERT_FALSE(a);
  EXPECT_EQ(a.error().message, "result.lease_id: expected integer >= 1");
  Result<QueueResult> q =
      ResultOf<QueueResult>(*ParseReply(R"({"v":1,"id":1,"ok":true,"result":{"jobs":[{"id":1}]}})"));
  ASSERT_FALSE(q);
  EXPECT_EQ(q.error().message, "result.jobs[0].state: missing");
}


// EncodeReplyFrame writes a result without building the envelope object; the text is
// still the envelope's compact dump, byte for byte.
// A result encoded already (the snapshot op's cache) is written as it is, and reads back
// as the same result, in a frame and through ResultOf in the daemon's own process.
TEST(EnvelopeTest, EncodedResultIsWrittenAsItIs) {
  const nlohmann::json result = {{"b", {{"z", 1}, {"a", "\u00e9\n"}}}, {"a", nlohmann::json::array({1, nullptr, 2.5})}};
  const Reply dom{9, std::nullopt, result, {}};
  const Reply encoded = MakeEncodedReply(9, DumpJson(result));
  EXPECT_EQ(EncodeReplyFrame(encoded), EncodeReplyFrame(dom));
  EXPECT_EQ(ToJson(encoded), ToJson(dom));
  auto typed = ResultOf<DrainsResult>(MakeEncodedReply(9, R"({"drains":[{"uuid":"GPU-1","reason":"fan","by_uid":0,"by_user":"root","since_unix_ms":5}]})"));
  ASSERT_TRUE(typed) << typed.error().message;
  ASSERT_EQ(typed->drains.size(), 1u);
  EXPECT_EQ(typed->drains[0].reason, "fan");
  EXPECT_FALSE(ResultOf<DrainsResult>(MakeEncodedReply(9, "{not json")));
}

TEST(EnvelopeTest, ReplyFrameIsTheEnvelopesDump) {
  const nlohmann::json result = {{"b", {{"z", 1}, {"a", "\u00e9\n"}}}, {"a", nlohmann::json::array({1, nullptr, 2.5})}};
  for (const Reply& reply : {Reply{7, std::nullopt, result, {}}, Reply{std::nullopt, std::nullopt, result, {}},
                             Reply{0, std::nullopt, nlohmann::json::object(), {}},
                             MakeErrorReply(3, WireError{WireCode::kNotFound, "no job 3"})}) {
    EXPECT_EQ(EncodeReplyFrame(reply), EncodeFrame(DumpJson(ToJson(reply))));
    auto back = ParseReply(EncodeReplyFrame(reply).substr(4));
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(back->id, reply.id);
    EXPECT_EQ(back->ok(), reply.ok());
    if (reply.ok()) {
      EXPECT_EQ(back->result, reply.result);
    }
  }
}

}  // namespace
}  // namespace gpuman::protocol
