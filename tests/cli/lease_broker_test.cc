#include "cli/lease_broker.h"

#include <gtest/gtest.h>

#include <csignal>
#include <deque>
#include <functional>

#include "base/duration.h"
#include "base/interrupts.h"
#include "support/fake_clock.h"

namespace gpuman::cli {
namespace {

using ::gpuman::testing::FakeClock;

// Answers TryAcquire from a script; WaitForChange moves the fake clock on.
class ScriptedBroker final : public LeaseBroker {
 public:
  explicit ScriptedBroker(FakeClock& clock) : clock_(clock) {}
  Result<Granted> TryAcquire(const LeaseAsk&) override {
    ++tries;
    if (script.empty()) return MakeError(ErrorCode::kBusy, "need 1 GPU, 0 eligible");
    auto next = script.front();
    script.pop_front();
    return next;
  }
  Result<Granted> Preview(const LeaseAsk&) override { return MakeError(ErrorCode::kBusy, "a script"); }
  Status AddProcesses(int64_t, const std::vector<model::LeaseProcess>&) override { return {}; }
  Status Release(int64_t) override { return {}; }
  Result<int64_t> ForceReleaseStep(int64_t) override { return 0; }
  Result<std::vector<model::Lease>> List() override { return std::vector<model::Lease>{}; }
  void WaitForChange(int ms) override {
    waits.push_back(ms);
    clock_.now += ms;
  }
  std::string Describe() const override { return "a script"; }

  std::deque<Result<Granted>> script;
  int tries = 0;
  std::vector<int> waits;

 private:
  FakeClock& clock_;
};

Granted Lease(int64_t id) {
  Granted g;
  g.lease_id = id;
  g.uuids = {"GPU-a"};
  return g;
}

Error Busy() { return MakeError(ErrorCode::kBusy, "need 1 GPU, 0 eligible: GPU 0 leased to bob (lease 3)"); }

struct Fixture {
  FakeClock clock{1'000'000};
  ScriptedBroker broker{clock};
  std::vector<std::string> notes;
  std::function<int()> interrupted;
  Result<Granted> Acquire(std::optional<int64_t> wait_ms) {
    WaitPolicy policy;
    policy.wait_ms = wait_ms;
    policy.waiting_for = "1 GPU(s) for 'train'";
    policy.interrupted = interrupted;
    return AcquireWaiting(broker, LeaseAsk{}, policy, clock, [&](const std::string& n) { notes.push_back(n); });
  }
};

TEST(AcquireWaitingTest, WithoutWaitOneAttemptOnly) {
  Fixture f;
  f.broker.script = {Busy()};
  auto r = f.Acquire(std::nullopt);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kBusy);
  EXPECT_EQ(f.broker.tries, 1);
  EXPECT_TRUE(f.notes.empty());
}

TEST(AcquireWaitingTest, WaitsUntilGrantedAndSaysSoOnce) {
  Fixture f;
  f.broker.script = {Busy(), Busy(), Busy(), Lease(12)};
  auto r = f.Acquire(-1);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->lease_id, 12);
  EXPECT_EQ(f.broker.tries, 4);
  EXPECT_EQ(f.broker.waits, (std::vector<int>{1000, 1000, 1000}));
  ASSERT_EQ(f.notes.size(), 1u);
  EXPECT_EQ(f.notes[0], "waiting for 1 GPU(s) for 'train': need 1 GPU, 0 eligible: GPU 0 leased to bob (lease 3)");
}

TEST(AcquireWaitingTest, NotesEveryTenSecondsWhileWaiting) {
  Fixture f;
  for (int i = 0; i < 25; ++i) f.broker.script.push_back(Busy());
  f.broker.script.push_back(Lease(1));
  ASSERT_TRUE(f.Acquire(-1));
  ASSERT_EQ(f.notes.size(), 3u);  // at 0 s, 10 s, 20 s
  EXPECT_EQ(f.notes[1].rfind("still waiting (10s) for 1 GPU(s) for 'train': ", 0), 0u) << f.notes[1];
}

TEST(AcquireWaitingTest, GivesUpWhenTheWaitRunsOut) {
  Fixture f;
  auto r = f.Acquire(2500);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kBusy);
  EXPECT_EQ(r.error().message, "gave up after " + FormatDurationMs(2500) + ": need 1 GPU, 0 eligible");
  EXPECT_EQ(f.broker.waits, (std::vector<int>{1000, 1000, 500})) << "the last wait is cut to the deadline";
}

TEST(AcquireWaitingTest, ARefusalThatLastsEndsTheWaitAtOnce) {
  Fixture f;
  f.broker.script = {MakeError(ErrorCode::kNotFound, "asked for 9 GPUs; this machine has 8 GPUs")};
  auto r = f.Acquire(-1);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(f.broker.tries, 1);
  EXPECT_TRUE(f.broker.waits.empty());
}

TEST(AcquireWaitingTest, ALostRaceIsRetried) {
  Fixture f;
  f.broker.script = {MakeError(ErrorCode::kConflict, "GPU-a is already leased (lease 4)"), Lease(5)};
  auto r = f.Acquire(1000);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->lease_id, 5);
}

// Ctrl-C while waiting (issue 23): the wait ends before the next attempt, with no lease.
TEST(AcquireWaitingTest, AnInterruptEndsTheWaitBeforeTheNextAttempt) {
  Fixture f;
  int asked = 0;
  f.interrupted = [&] { return ++asked == 3 ? SIGINT : 0; };
  f.broker.script = {Busy(), Busy(), Lease(7)};
  auto r = f.Acquire(-1);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "interrupted by SIGINT while waiting for 1 GPU(s) for 'train'; no lease was taken");
  EXPECT_EQ(f.broker.tries, 2) << "the lease that was free by then was not taken";
}

// The real signal path: a blocked SIGTERM is pending, taken once, then gone.
TEST(InterruptsTest, ABlockedSignalIsTakenOnce) {
  BlockInterrupts blocked;
  EXPECT_EQ(TakePendingInterrupt(), 0);
  ASSERT_EQ(raise(SIGTERM), 0);
  EXPECT_EQ(TakePendingInterrupt(), SIGTERM);
  EXPECT_EQ(TakePendingInterrupt(), 0) << "taken, so never delivered";
  EXPECT_STREQ(InterruptName(SIGINT), "SIGINT");
}

}  // namespace
}  // namespace gpuman::cli
