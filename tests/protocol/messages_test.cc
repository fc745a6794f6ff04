#include "protocol/messages.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "protocol/envelope.h"
#include "protocol/framing.h"
#include "protocol/json_io.h"
#include "protocol/model_json.h"
#include "protocol_samples.h"

namespace gpuman::protocol {
namespace {

using nlohmann::json;
using namespace testing_samples;

// Frame -> decoder -> payload, as a socket would carry it.
std::string ThroughDecoder(const std::string& frame) {
  FrameDecoder decoder;
  EXPECT_TRUE(decoder.Feed(frame));
  Result<std::optional<std::string>> next = decoder.Next();
  EXPECT_TRUE(next && next->has_value());
  EXPECT_TRUE(decoder.at_frame_boundary());
  return next && next->has_value() ? **next : std::string();
}

TEST(OpTest, NamesRoundTrip) {
  const std::vector<std::string> expected = {"hello",   "submit",        "queue",   "show",  "cancel",  "hold",
                                             "resume",  "wait",          "logs",    "drain", "undrain", "leases",
                                             "acquire", "add_processes", "release", "status"};
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const auto op = static_cast<Op>(i);
    EXPECT_EQ(OpName(op), expected[i]);
    EXPECT_EQ(ParseOp(expected[i]), op);
  }
  EXPECT_EQ(ParseOp("Hello"), std::nullopt);
  EXPECT_EQ(ParseOp(""), std::nullopt);
}

TEST(RequestRoundTripTest, EveryOp) {
  const std::vector<Request> requests = OneRequestPerOp();
  ASSERT_EQ(requests.size(), std::variant_size_v<RequestArgs>);
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const Request& request = requests[i];
    SCOPED_TRACE(OpName(request.op()));
    EXPECT_EQ(static_cast<std::size_t>(request.op()), i);
    Result<std::string> frame = EncodeRequestFrame(request);
    ASSERT_TRUE(frame) << frame.error().message;
    std::variant<Request, RequestError> parsed = ParseRequest(ThroughDecoder(*frame));
    ASSERT_TRUE(std::holds_alternative<Request>(parsed)) << std::get<RequestError>(parsed).error.message;
    const Request& back = std::get<Request>(parsed);
    EXPECT_EQ(back.id, request.id);
    EXPECT_EQ(back.op(), request.op());
    EXPECT_EQ(ToJson(back), ToJson(request));
    EXPECT_EQ(ToJson(back)["v"], 1);
  }
}

TEST(RequestRoundTripTest, SubmitFieldsSurvive) {
  const Request request = OneRequestPerOp()[1];
  std::variant<Request, RequestError> parsed = ParseRequest(DumpJson(ToJson(request)));
  ASSERT_TRUE(std::holds_alternative<Request>(parsed));
  const auto& a = std::get<SubmitArgs>(std::get<Request>(parsed).args);
  EXPECT_EQ(a.argv, (std::vector<std::string>{"python", "train.py"}));
  EXPECT_EQ(a.env.at("LANG"), "C.UTF-8");
  EXPECT_EQ(a.cwd, "/home/alice");
  EXPECT_EQ(a.output, "/home/alice/out.log");
  EXPECT_EQ(a.request.count, 2);
  EXPECT_EQ(a.request.gpus, (std::vector<std::string>{"GPU-aaaa", "GPU-bbbb"}));
  EXPECT_EQ(a.request.min_free_memory_bytes, int64_t{40} << 30);
  EXPECT_EQ(a.request.max_utilization_percent, 10);
  EXPECT_EQ(a.request.model, "A100");
  EXPECT_EQ(a.request.min_compute_capability, "8.0");
  EXPECT_EQ(a.request.exclude, std::vector<std::string>{"GPU-cccc"});
  EXPECT_TRUE(a.request.allow_shared);
  EXPECT_EQ(a.priority, 7);
  EXPECT_EQ(a.time_limit_ms, 60000);
  EXPECT_TRUE(a.requeue);
  EXPECT_EQ(a.after, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(a.notify, (model::JobNotify{false, {"/home/alice/bin/tell", "job %j", "%s"}}));
}

TEST(RequestRoundTripTest, SubmitNotifyMailAndNone) {
  auto parsed = ParseRequest(R"({"v":1,"id":1,"op":"submit","args":{"argv":["true"],"cwd":"/","notify":{"mail":true}}})");
  ASSERT_TRUE(std::holds_alternative<Request>(parsed)) << std::get<RequestError>(parsed).error.message;
  EXPECT_EQ(std::get<SubmitArgs>(std::get<Request>(parsed).args).notify, (model::JobNotify{true, {}}));
  parsed = ParseRequest(R"({"v":1,"id":1,"op":"submit","args":{"argv":["true"],"cwd":"/","notify":null}})");
  ASSERT_TRUE(std::holds_alternative<Request>(parsed));
  EXPECT_EQ(std::get<SubmitArgs>(std::get<Request>(parsed).args).notify, std::nullopt);
  parsed = ParseRequest(R"({"v":1,"id":1,"op":"submit","args":{"argv":["true"],"cwd":"/","notify":{"argv":"x"}}})");
  EXPECT_TRUE(std::holds_alternative<RequestError>(parsed)) << "argv must be an array";
}

TEST(JobJsonTest, NotifySaysWhatAndWhetherItWasSentAndItsCommandOnlyWhenPrivate) {
  model::Job job = FullJob();
  job.notify = model::JobNotify{false, {"/home/alice/bin/tell", "%j"}};
  const json pub = JobToJson(job, false);
  EXPECT_EQ(pub["notify"], (json{{"kind", "program"}, {"sent", false}, {"sent_unix_ms", nullptr}, {"outcome", ""}}));
  job.notified_unix_ms = 1'700'000'000'123;
  job.notify_outcome = "exited with status 0";
  const json priv = JobToJson(job, true);
  EXPECT_EQ(priv["notify"]["argv"], (json{"/home/alice/bin/tell", "%j"}));
  EXPECT_EQ(priv["notify"]["sent"], true);
  Result<model::Job> back = JobFromJson(priv);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->notify, job.notify);
  EXPECT_EQ(back->notified_unix_ms, job.notified_unix_ms);
  EXPECT_EQ(back->notify_outcome, "exited with status 0");
  job.notify = model::JobNotify{true, {}};
  EXPECT_EQ(JobToJson(job, true)["notify"]["kind"], "mail");
  EXPECT_EQ(JobFromJson(JobToJson(job, true))->notify, job.notify);
  EXPECT_FALSE(JobToJson(FullJob(), true).contains("notify")) << "absent when the job has none";
}

TEST(RequestRoundTripTest, SubmitMinimalUsesDefaults) {
  std::variant<Request, RequestError> parsed =
      ParseRequest(R"({"v":1,"id":1,"op":"submit","args":{"argv":["true"],"cwd":"/"}})");
  ASSERT_TRUE(std::holds_alternative<Request>(parsed)) << std::get<RequestError>(parsed).error.message;
  const auto& a = std::get<SubmitArgs>(std::get<Request>(parsed).args);
  EXPECT_EQ(a.name, "");
  EXPECT_TRUE(a.env.empty());
  EXPECT_EQ(a.output, std::nullopt);
  EXPECT_EQ(a.request.count, 1);
  EXPECT_EQ(a.request.gpus, std::nullopt);
  EXPECT_EQ(a.time_limit_ms, std::nullopt);
  EXPECT_FALSE(a.requeue);
}

// A task of an array travels as "12_7"; a plain id stays an integer, as before arrays.
TEST(RequestRoundTripTest, JobReferencesAreIntegersOrTaskStrings) {
  std::variant<Request, RequestError> parsed =
      ParseRequest(R"({"v":1,"id":1,"op":"cancel","args":{"ids":[12,"12_7","13"]}})");
  ASSERT_TRUE(std::holds_alternative<Request>(parsed)) << std::get<RequestError>(parsed).error.message;
  const auto& ids = std::get<CancelArgs>(std::get<Request>(parsed).args).ids;
  EXPECT_EQ(ids, (std::vector<model::JobRef>{{12}, {12, 7}, {13}}));
  EXPECT_EQ(ToJson(CancelArgs{{model::JobRef{12}, model::JobRef{12, 7}}}).dump(), R"({"ids":[12,"12_7"]})");
  EXPECT_EQ(ToJson(WaitArgs{model::JobRef{12, 0}}).dump(), R"({"id":"12_0"})");
  for (const char* bad : {R"("12_")", R"("x")", "0", R"("-1")", "1.5", "null"}) {
    auto refused = ParseRequest(std::string(R"({"v":1,"id":1,"op":"show","args":{"id":)") + bad + "}}");
    ASSERT_TRUE(std::holds_alternative<RequestError>(refused)) << bad;
    EXPECT_NE(std::get<RequestError>(refused).error.message.find("args.id"), std::string::npos) << bad;
  }
}

// One case per result type: encode as a reply, carry it through a frame, read it back.
struct ResultCase {
  const char* name;
  std::function<json()> to_json;                   // ToJson(sample)
  std::function<Result<json>(const Reply&)> back;  // ToJson(*ResultOf<T>(reply))
};

template <typename T>
ResultCase Case(const char* name, T sample) {
  return ResultCase{name, [sample] { return ToJson(sample); },
                    [](const Reply& reply) -> Result<json> {
                      Result<T> r = ResultOf<T>(reply);
                      if (!r) return r.error();
                      return ToJson(*r);
                    }};
}

std::vector<ResultCase> ResultCases() {
  model::Job public_job = FullJob();
  public_job.argv.clear();
  public_job.env.clear();
  public_job.cwd.clear();
  public_job.output_path.clear();
  IdsResult ids;
  ids.results = {{1, std::nullopt},
                 {2, WireError{WireCode::kNotFound, "job 2: not found"}},
                 {3, WireError{WireCode::kPermissionDenied, "job 3 belongs to bob"}},
                 {model::JobRef{12, 7}, std::nullopt}};
  ShowResult array_show{public_job, false};
  array_show.array = ArrayInfo{12, 8, 100, {{"queued", "5-99"}, {"running", "0-4"}}};
  SnapshotResult full_snapshot;
  full_snapshot.snapshot = FullSnapshot();
  full_snapshot.sample_interval_ms = 1000;
  full_snapshot.scenario = "h100-8";
  full_snapshot.leases = {FullLease()};
  full_snapshot.jobs = {public_job};
  full_snapshot.drains = {{"GPU-aaaa", "health: Xid 79", 0, "root", 1700000000000}};
  SnapshotResult failed_snapshot;
  failed_snapshot.error = "nvmlInit_v2: driver not loaded";
  failed_snapshot.sample_interval_ms = 500;
  StatusResult status;
  status.status = {{"gpus", json::array({{{"uuid", "GPU-aaaa"}, {"drained", false}}})}, {"jobs", 3}};
  return {
      Case("hello", HelloResult{1, 1000, "alice", "gpumand 0.1.0"}),
      Case("submit", SubmitResult{17}),
      Case("queue", QueueResult{{public_job, public_job}}),
      Case("show_private", ShowResult{FullJob(), true}),
      Case("show_public", ShowResult{public_job, false}),
      Case("ids", ids),
      Case("wait", WaitResult{model::JobState::kFailed, 2}),
      Case("wait_no_exit", WaitResult{model::JobState::kCancelled, std::nullopt}),
      Case("wait_array", WaitResult{model::JobState::kFailed, 3, model::JobRef{12, 7}}),
      Case("submit_array", SubmitResult{12, 100}),
      Case("show_array", array_show),
      Case("logs", LogsResult{"line 1\nline 2\n\x01\t\"quoted\"", 123, true}),
      Case("drain", DrainResult{"GPU-aaaa"}),
      Case("leases", LeasesResult{{FullLease(), FullLease()}}),
      Case("leases_page", LeasesResult{{FullLease()}, 12}),
      Case("acquire", AcquireResult{9, {"GPU-aaaa", "GPU-bbbb"}}),
      Case("acquire_with_processes", AcquireResult{9, {"GPU-aaaa"}, false, true, "/sys/fs/cgroup/gpuman-jobs/lease-9"}),
      Case("acquire_described", [] {
        AcquireResult r{9, {"GPU-aaaa", "GPU-bbbb"}};
        r.master_port = 29501;
        r.gpus = {{3, "GPU-aaaa", "NVIDIA H100"}, {5, "GPU-bbbb", std::nullopt}};
        r.env = {{"CUDA_VISIBLE_DEVICES", "GPU-aaaa,GPU-bbbb"}, {"GPUMAN_LEASE_ID", "9"}};
        return r;
      }()),
      Case("empty", EmptyResult{}),
      Case("status", status),
      Case("drains", DrainsResult{{{"GPU-aaaa", "health: Xid 79", 0, "root", 1700000000000},
                                   {"GPU-bbbb", "fan noise", 1000, "alice", 1700000001000}}}),
      Case("no_drains", DrainsResult{}),
      Case("snapshot", full_snapshot),
      Case("snapshot_failed", failed_snapshot),
  };
}

TEST(ReplyRoundTripTest, EveryResult) {
  for (const ResultCase& c : ResultCases()) {
    SCOPED_TRACE(c.name);
    const json sent = c.to_json();
    const Reply reply{77, std::nullopt, sent, {}};
    Result<Reply> parsed = ParseReply(ThroughDecoder(EncodeReplyFrame(reply)));
    ASSERT_TRUE(parsed) << parsed.error().message;
    EXPECT_EQ(parsed->id, 77);
    EXPECT_TRUE(parsed->ok());
    Result<json> back = c.back(*parsed);
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(*back, sent);
  }
}

TEST(ReplyRoundTripTest, ErrorReply) {
  const Reply reply = MakeErrorReply(5, WireError{WireCode::kConflict, "GPU-aaaa: already drained"});
  const json j = ToJson(reply);
  EXPECT_EQ(
      j, json::parse(R"({"v":1,"id":5,"ok":false,"error":{"code":"conflict","message":"GPU-aaaa: already drained"}})"));
  Result<Reply> parsed = ParseReply(DumpJson(j));
  ASSERT_TRUE(parsed);
  ASSERT_FALSE(parsed->ok());
  EXPECT_EQ(parsed->error, reply.error);
  Result<SubmitResult> typed = ResultOf<SubmitResult>(*parsed);
  ASSERT_FALSE(typed);
  EXPECT_EQ(typed.error().code, ErrorCode::kConflict);
  EXPECT_EQ(typed.error().message, "GPU-aaaa: already drained");
}

TEST(ReplyRoundTripTest, NullIdForUnreadableRequest) {
  const Reply reply = MakeErrorReply(std::nullopt, WireError{WireCode::kBadMessage, "json: ..."});
  EXPECT_TRUE(ToJson(reply)["id"].is_null());
  Result<Reply> parsed = ParseReply(DumpJson(ToJson(reply)));
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->id, std::nullopt);
}

TEST(ReplyRoundTripTest, UnknownErrorCodeFromNewerDaemon) {
  Result<Reply> parsed =
      ParseReply(R"({"v":1,"id":1,"ok":false,"error":{"code":"quota_exceeded","message":"3 jobs max"}})");
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->error->code, WireCode::kInternal);
  EXPECT_EQ(parsed->error->message, "quota_exceeded: 3 jobs max");
}

TEST(ReplyRoundTripTest, OversizedReplyBecomesTooLarge) {
  LogsResult huge{std::string(kMaxMessageBytes, 'x'), 1, false};
  const std::string frame = EncodeReplyFrame(MakeReply(3, huge));
  ASSERT_LE(frame.size(), kMaxMessageBytes + kFrameHeaderBytes);
  Result<Reply> parsed = ParseReply(ThroughDecoder(frame));
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->id, 3);
  ASSERT_FALSE(parsed->ok());
  EXPECT_EQ(parsed->error->code, WireCode::kTooLarge);
}

TEST(ReplyRoundTripTest, OversizedRequestIsRefusedByEncoder) {
  SubmitArgs submit;
  submit.argv = {"x"};
  submit.cwd = "/";
  submit.env["BIG"] = std::string(kMaxMessageBytes, 'y');
  Result<std::string> frame = EncodeRequestFrame(Request{1, submit});
  ASSERT_FALSE(frame);
  EXPECT_EQ(frame.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(frame.error().message.find("exceeds the limit"), std::string::npos);
}

TEST(ReplyRoundTripTest, LogDataWithInvalidUtf8IsReplacedNotThrown) {
  LogsResult logs{std::string("ok \xff\xfe end"), 9, false};
  const std::string frame = EncodeReplyFrame(MakeReply(1, logs));
  Result<Reply> parsed = ParseReply(ThroughDecoder(frame));
  ASSERT_TRUE(parsed) << parsed.error().message;
  Result<LogsResult> back = ResultOf<LogsResult>(*parsed);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->data, "ok \xEF\xBF\xBD\xEF\xBF\xBD end");
  EXPECT_EQ(back->next_offset, 9);
}

TEST(JobJsonTest, PrivateFieldsOnlyWhenAllowed) {
  const model::Job job = FullJob();
  const json pub = JobToJson(job, false);
  for (const char* key : {"argv", "env", "cwd", "output_path"}) EXPECT_FALSE(pub.contains(key)) << key;
  const json priv = JobToJson(job, true);
  for (const char* key : {"argv", "env", "cwd", "output_path"}) EXPECT_TRUE(priv.contains(key)) << key;
  // Every other field in both, with its snake_case name.
  for (const char* key : {"id",
                          "name",
                          "uid",
                          "gid",
                          "user",
                          "request",
                          "priority",
                          "time_limit_ms",
                          "requeue",
                          "after",
                          "state",
                          "submitted_unix_ms",
                          "started_unix_ms",
                          "ended_unix_ms",
                          "exit_code",
                          "gpu_uuids",
                          "lease_id",
                          "supervisor_pid",
                          "supervisor_start_ticks",
                          "reason"}) {
    EXPECT_TRUE(pub.contains(key)) << key;
    EXPECT_TRUE(priv.contains(key)) << key;
  }
  EXPECT_EQ(priv.size(), pub.size() + 4);
  EXPECT_EQ(pub["state"], "running");
  EXPECT_EQ(priv["env"]["HOME"], "/home/alice");
}

TEST(JobJsonTest, UnsetOptionalsAreNull) {
  model::Job job;
  job.id = 1;
  const json j = JobToJson(job, true);
  for (const char* key : {"time_limit_ms", "started_unix_ms", "ended_unix_ms", "exit_code", "lease_id",
                          "supervisor_pid", "supervisor_start_ticks"}) {
    EXPECT_TRUE(j[key].is_null()) << key;
  }
  EXPECT_TRUE(j["request"]["gpus"].is_null());
  EXPECT_EQ(j["state"], "queued");
}

TEST(JobJsonTest, EveryStateRoundTrips) {
  for (model::JobState s : {model::JobState::kQueued, model::JobState::kHeld, model::JobState::kStarting,
                            model::JobState::kRunning, model::JobState::kSucceeded, model::JobState::kFailed,
                            model::JobState::kCancelled, model::JobState::kTimedOut}) {
    model::Job job = FullJob();
    job.state = s;
    Result<model::Job> back = JobFromJson(JobToJson(job, true));
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(back->state, s);
    EXPECT_EQ(JobToJson(*back, true), JobToJson(job, true));
  }
}

TEST(JobJsonTest, FailureKindRoundTripsAndIsNullWhenTheCommandRan) {
  EXPECT_TRUE(JobToJson(FullJob(), false)["failure"].is_null());
  for (model::JobFailure f : {model::JobFailure::kCommandNotFound, model::JobFailure::kCannotExecute,
                              model::JobFailure::kCannotStart}) {
    model::Job job = FullJob();
    job.state = model::JobState::kFailed;
    job.failure = f;
    const json j = JobToJson(job, false);
    EXPECT_EQ(j["failure"], model::JobFailureName(f));
    Result<model::Job> back = JobFromJson(j);
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(back->failure, f);
  }
  json newer = JobToJson(FullJob(), false);
  newer["failure"] = "some_new_kind";  // a newer daemon's: still "never ran"
  EXPECT_EQ(JobFromJson(newer)->failure, model::JobFailure::kCannotStart);
}

TEST(JobJsonTest, UnknownStateIsAnError) {
  json j = JobToJson(FullJob(), false);
  j["state"] = "exploded";
  Result<model::Job> back = JobFromJson(j);
  ASSERT_FALSE(back);
  EXPECT_EQ(back.error().message, "job.state: unknown job state 'exploded'");
}

TEST(HelloTest, CheckHello) {
  EXPECT_EQ(CheckHello(HelloArgs{"gpuman 0.1.0", 1}), std::nullopt);
  std::optional<WireError> e = CheckHello(HelloArgs{"gpuman 9.0", 2});
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code, WireCode::kUnsupportedVersion);
}

}  // namespace
}  // namespace gpuman::protocol

namespace gpuman::protocol {
namespace {

TEST(DrainsOpTest, WireFormAndStrictness) {
  // The op's name and result shape are the contract docs/protocol.md gives.
  EXPECT_STREQ(OpName(Op::kDrains), "drains");
  EXPECT_EQ(ParseOp("drains"), Op::kDrains);
  const json j = ToJson(DrainsResult{{{"GPU-aaaa", "fan noise", 1000, "alice", 17}}});
  EXPECT_EQ(j, json::parse(R"({"drains":[{"uuid":"GPU-aaaa","reason":"fan noise","by_uid":1000,"by_user":"alice","since_unix_ms":17}]})"));
  // A reply without the list, or a drain without a uuid, is malformed.
  Result<DrainsResult> missing = FromJson<DrainsResult>(json::object());
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().message, "result.drains: missing");
  Result<DrainsResult> no_uuid = FromJson<DrainsResult>(json::parse(R"({"drains":[{"reason":"x"}]})"));
  ASSERT_FALSE(no_uuid);
  EXPECT_NE(no_uuid.error().message.find("result.drains[0].uuid"), std::string::npos) << no_uuid.error().message;
}

// The leases op in pages: a request for everything is still `{}` (what a daemon from
// before paging knows), and its reply without `next` reads as the last page.
TEST(LeasesPagingTest, WireForm) {
  EXPECT_EQ(ToJson(LeasesArgs{}), json::object());
  EXPECT_EQ(ToJson(LeasesArgs{-3, 50}), json::parse(R"({"after_id":-3,"limit":50})"));
  auto old_reply = FromJson<LeasesResult>(json::parse(R"({"leases":[]})"));
  ASSERT_TRUE(old_reply);
  EXPECT_EQ(old_reply->next, std::nullopt);
  auto page = FromJson<LeasesResult>(ToJson(LeasesResult{{}, 12}));
  ASSERT_TRUE(page);
  EXPECT_EQ(page->next, 12);
  Result<LeasesArgs> zero = FromJson<LeasesArgs>(json::parse(R"({"limit":0})"));
  ASSERT_FALSE(zero);
  EXPECT_NE(zero.error().message.find("args.limit"), std::string::npos) << zero.error().message;
}

}  // namespace
}  // namespace gpuman::protocol
