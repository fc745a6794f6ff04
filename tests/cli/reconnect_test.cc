// The one reconnect loop (cli/daemon_client.h) on a fake clock: its sleep moves the clock.
#include <gtest/gtest.h>

#include <deque>

#include "cli/app.h"
#include "cli/daemon_client.h"
#include "cli/exit_codes.h"
#include "support/fake_clock.h"

namespace gpuman::cli {
namespace {

using ::gpuman::testing::FakeClock;

struct Harness {
  FakeClock clock{1'000'000};
  std::vector<int64_t> sleeps;
  std::vector<std::string> said;
  std::vector<int64_t> attempts_at;
  std::deque<Status> script;  // what each connect attempt returns; then kUnavailable
  Reconnector Make(int64_t timeout_ms) {
    ReconnectOptions o;
    o.timeout_ms = timeout_ms;
    o.first_delay_ms = 100;
    o.max_delay_ms = 1000;
    return Reconnector(
        o, clock,
        [this](int64_t ms) {
          sleeps.push_back(ms);
          clock.now += ms;
        },
        [this](const std::string& line) { said.push_back(line); });
  }
  std::function<Status()> Connect() {
    return [this]() -> Status {
      attempts_at.push_back(clock.now);
      if (script.empty()) return MakeError(ErrorCode::kUnavailable, "no gpuman daemon at /s: Connection refused");
      Status s = script.front();
      script.pop_front();
      return s;
    };
  }
};

TEST(ReconnectorTest, ComesBackAfterRetriesWithBackoffAndSaysSoOnce) {
  Harness h;
  Reconnector r = h.Make(60000);
  for (int i = 0; i < 5; ++i) h.script.push_back(MakeError(ErrorCode::kUnavailable, "refused"));
  h.script.push_back(Status{});
  ASSERT_TRUE(r.Recover(h.Connect()));
  // The first attempt at once, then 100, 200, 400, 800, 1000 (capped) apart.
  ASSERT_EQ(h.attempts_at.size(), 6u);
  EXPECT_EQ(h.attempts_at[0], 1'000'000);
  EXPECT_EQ(h.sleeps, (std::vector<int64_t>{100, 200, 400, 800, 1000}));
  EXPECT_EQ(h.said, (std::vector<std::string>{"gpuman: lost the daemon; reconnecting for up to 60s...",
                                              "gpuman: reconnected"}));
  EXPECT_FALSE(r.lost());
}

TEST(ReconnectorTest, GivesUpOnlyAfterTheTimeoutWithOneLine) {
  Harness h;
  Reconnector r = h.Make(2000);
  Status back = r.Recover(h.Connect());
  ASSERT_FALSE(back);
  EXPECT_EQ(back.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(back.error().message.find("did not come back within 2s"), std::string::npos) << back.error().message;
  EXPECT_NE(back.error().message.find("Connection refused"), std::string::npos) << "the last cause is kept";
  // The last attempt falls on the deadline: the whole time was used, not more.
  EXPECT_EQ(h.attempts_at.back(), 1'000'000 + 2000);
  EXPECT_EQ(h.clock.now, 1'000'000 + 2000);
  EXPECT_EQ(h.said.size(), 1u) << "only the 'lost' line; the error is the caller's to print";
}

TEST(ReconnectorTest, ALastingRefusalEndsAtOnce) {
  Harness h;
  Reconnector r = h.Make(60000);
  h.script.push_back(MakeError(ErrorCode::kPermissionDenied, "socket /s is owned by mallory"));
  Status back = r.Recover(h.Connect());
  ASSERT_FALSE(back);
  EXPECT_EQ(back.error().code, ErrorCode::kPermissionDenied);
  EXPECT_EQ(h.attempts_at.size(), 1u);
  EXPECT_TRUE(h.sleeps.empty());
}

TEST(ReconnectorTest, ZeroTimeoutTriesOnce) {
  Harness h;
  Reconnector r = h.Make(0);
  EXPECT_FALSE(r.Recover(h.Connect()));
  EXPECT_EQ(h.attempts_at.size(), 1u);
}

TEST(ReconnectorTest, EachOutageHasItsOwnTimeAndBackoff) {
  Harness h;
  Reconnector r = h.Make(1000);
  h.script = {MakeError(ErrorCode::kUnavailable, "x"), Status{}};
  ASSERT_TRUE(r.Recover(h.Connect()));
  h.clock.now += 5000;  // a long time connected
  h.sleeps.clear();
  h.script = {MakeError(ErrorCode::kUnavailable, "x"), Status{}};
  ASSERT_TRUE(r.Recover(h.Connect())) << "the time of the first outage does not count against the second";
  EXPECT_EQ(h.sleeps, (std::vector<int64_t>{100})) << "backoff starts over";
  EXPECT_EQ(h.said.size(), 4u);
}

TEST(ReconnectorTest, StepWiseForTheSampler) {
  Harness h;
  Reconnector r = h.Make(1000);
  EXPECT_TRUE(r.Due());
  r.Lost();
  EXPECT_TRUE(r.lost());
  EXPECT_TRUE(r.Due()) << "the first attempt at once";
  EXPECT_EQ(r.Record(MakeError(ErrorCode::kUnavailable, "x")), Reconnector::Step::kRetry);
  EXPECT_FALSE(r.Due());
  h.clock.now += 99;
  EXPECT_FALSE(r.Due());
  h.clock.now += 1;
  EXPECT_TRUE(r.Due());
  r.Lost();  // still the same outage: the clock is not restarted
  h.clock.now += 900;
  EXPECT_EQ(r.Record(MakeError(ErrorCode::kUnavailable, "x")), Reconnector::Step::kGaveUp);
  EXPECT_NE(r.last_error().message.find("within 1s"), std::string::npos);
  h.clock.now += 10;
  EXPECT_EQ(r.Record(Status{}), Reconnector::Step::kReconnected);
  EXPECT_FALSE(r.lost());
  EXPECT_TRUE(h.said.empty()) << "the step-wise form says nothing; the view shows it";
}

TEST(ReconnectorTest, TimeoutIsNamedAsConfigured) {
  EXPECT_EQ(FormatReconnectTimeout(60000), "60s");
  EXPECT_EQ(FormatReconnectTimeout(2500), "2.5s");
  EXPECT_EQ(FormatReconnectTimeout(500), "500ms");
}

// ---- exit codes of `wait`

model::Job Ended(model::JobState state, std::optional<int> exit_code, std::string reason = "") {
  model::Job j;
  j.id = 7;
  j.state = state;
  j.exit_code = exit_code;
  j.started_unix_ms = 1000;
  j.ended_unix_ms = 2000;
  j.reason = std::move(reason);
  return j;
}

TEST(WaitExitCodeTest, OneMeaningPerCode) {
  using S = model::JobState;
  EXPECT_EQ(WaitExitCode(Ended(S::kSucceeded, 0)), 0);
  EXPECT_EQ(WaitExitCode(Ended(S::kFailed, 3, "exit code 3")), 3) << "the job's own code";
  EXPECT_EQ(WaitExitCode(Ended(S::kFailed, 128 + 9, "exit code 137")), 137) << "killed by signal 9";
  EXPECT_EQ(WaitExitCode(Ended(S::kFailed, 127)), 127);
  EXPECT_EQ(WaitExitCode(Ended(S::kFailed, 126)), 126);
  EXPECT_EQ(WaitExitCode(Ended(S::kTimedOut, 0, "ran past its time limit")), kJobTimedOut)
      << "exited 0 after SIGTERM is still a time-out";
  EXPECT_EQ(WaitExitCode(Ended(S::kCancelled, 0, "cancelled while running")), kJobCancelled);
  EXPECT_EQ(WaitExitCode(Ended(S::kCancelled, std::nullopt, "cancelled by alice")), kJobCancelled);
  EXPECT_EQ(WaitExitCode(Ended(S::kFailed, 0, model::kGpuLostReason)), kJobGpumanFailed);
  model::Job never = Ended(S::kFailed, std::nullopt, "cannot enter /nope: No such file or directory");
  never.started_unix_ms.reset();
  EXPECT_EQ(WaitExitCode(never), kJobCannotExecute);
  EXPECT_EQ(WaitExitCode(Ended(S::kFailed, std::nullopt, "its supervisor died")), kJobGpumanFailed);
  EXPECT_TRUE(EndedByItself(Ended(S::kFailed, 3)));
  EXPECT_FALSE(EndedByItself(Ended(S::kTimedOut, 0)));
}

TEST(WaitExitCodeTest, FixedCodesDoNotCollide) {
  const std::vector<int> fixed = {kJobTimedOut, kJobGpumanFailed, kJobCannotExecute, kJobNotFound, kJobCancelled};
  for (size_t i = 0; i < fixed.size(); ++i) {
    for (size_t j = i + 1; j < fixed.size(); ++j) EXPECT_NE(fixed[i], fixed[j]);
  }
  EXPECT_GT(kJobCancelled, kJobSignalBase + 64) << "no signal N gives 128+N == the cancelled code";
  EXPECT_LE(kJobCancelled, 255);
}

// `run` and `wait` exit with a job's code: their own failures, argument errors included,
// are 125; every other command keeps its code (docs/cli.md, "Exit codes"). The command
// table says which (cli/app.h).
TEST(WaitExitCodeTest, GpumanFailuresOfRunAndWaitAre125) {
  const ErrorCode codes[] = {ErrorCode::kInvalidArgument, ErrorCode::kNotFound, ErrorCode::kPermissionDenied,
                             ErrorCode::kConflict,        ErrorCode::kUnavailable, ErrorCode::kBusy,
                             ErrorCode::kIo,              ErrorCode::kInternal};
  for (const char* command : {"run", "wait"}) {
    EXPECT_EQ(ExitPolicyOf(command), ExitPolicy::kJobCode) << command;
    for (ErrorCode code : codes) {
      EXPECT_EQ(ExitCodeFor(code, ExitPolicyOf(command)), kJobGpumanFailed) << command << " " << static_cast<int>(code);
    }
  }
  for (const char* command : {"select", "submit", "status", "logs", ""}) {
    EXPECT_NE(ExitPolicyOf(command), ExitPolicy::kJobCode) << command;
    EXPECT_EQ(ExitCodeFor(ErrorCode::kInvalidArgument, ExitPolicyOf(command)), kExitUsage) << command;
  }
}

}  // namespace
}  // namespace gpuman::cli
