#include "tui/daemon_holders.h"

#include <gtest/gtest.h>

#include "tui_fixtures.h"

namespace gpuman::tui {
namespace {

Frame Answer() {
  Frame f;
  model::Job job;
  job.id = 12;
  job.name = "survivor";
  job.state = model::JobState::kRunning;
  f.jobs.push_back(job);
  model::Lease lease;
  lease.id = 7;
  f.leases.push_back(lease);
  return f;
}

// Issue 26: across a daemon restart top said "daemon gone for over 60s" within a second
// and dropped the jobs. The last answer stays, the note says "reconnecting" with how long,
// and only after the reconnect time that the daemon is gone.
TEST(DaemonHoldersTest, KeepsTheLastAnswerAndSaysGoneOnlyAfterTheTimeout) {
  const int64_t t0 = testing::kNowMs;
  DaemonHolders holders(60000, "60s");
  holders.Answered(Answer(), t0);
  EXPECT_FALSE(holders.lost());

  Frame f;
  holders.Unanswered(f, t0 + 500);  // the first failed sample: the outage starts here
  EXPECT_TRUE(holders.lost());
  EXPECT_FALSE(holders.gone(t0 + 500));
  EXPECT_TRUE(f.has_daemon);
  ASSERT_EQ(f.jobs.size(), 1u) << "the last jobs stay";
  EXPECT_EQ(f.jobs[0].name, "survivor");
  ASSERT_EQ(f.leases.size(), 1u);
  EXPECT_EQ(f.holders_error, "daemon reconnecting for 0s (up to 60s; showing its last answer)");

  Frame later;
  holders.Unanswered(later, t0 + 500 + 12300);
  EXPECT_EQ(later.holders_error, "daemon reconnecting for 12s (up to 60s; showing its last answer)");
  EXPECT_EQ(later.jobs.size(), 1u);

  Frame almost;
  holders.Unanswered(almost, t0 + 500 + 59999);
  EXPECT_EQ(almost.holders_error.rfind("daemon reconnecting for 59s", 0), 0u) << almost.holders_error;

  Frame gone;
  holders.Unanswered(gone, t0 + 500 + 60000);
  EXPECT_TRUE(holders.gone(t0 + 500 + 60000));
  EXPECT_EQ(gone.holders_error, "daemon gone for over 60s; still trying (showing its answer of 1m ago)");
  EXPECT_EQ(gone.jobs.size(), 1u) << "still the last answer";

  // Back: a new answer ends the outage; the next loss starts a new one, timed from then.
  Frame back = Answer();
  back.jobs.clear();
  holders.Answered(back, t0 + 70000);
  EXPECT_FALSE(holders.lost());
  Frame again;
  holders.Unanswered(again, t0 + 80000);
  EXPECT_EQ(again.holders_error, "daemon reconnecting for 0s (up to 60s; showing its last answer)");
  EXPECT_TRUE(again.jobs.empty()) << "the newest answer is the one kept";
}

TEST(DaemonHoldersTest, ARefusalIsSaidAtOnceAndAZeroTimeoutGivesUpAtOnce) {
  DaemonHolders holders(60000, "60s");
  holders.Answered(Answer(), testing::kNowMs);
  Frame f;
  holders.Unanswered(f, testing::kNowMs + 1000, "refusing daemon socket /x: owned by bob");
  EXPECT_EQ(f.holders_error.rfind("refusing daemon socket /x: owned by bob; still trying", 0), 0u) << f.holders_error;
  EXPECT_EQ(f.jobs.size(), 1u);

  DaemonHolders at_once(0, "0s");
  Frame g;
  at_once.Unanswered(g, testing::kNowMs);
  EXPECT_EQ(g.holders_error, "daemon gone for over 0s; still trying");  // never answered: no age
  EXPECT_TRUE(g.jobs.empty());
}

}  // namespace
}  // namespace gpuman::tui
