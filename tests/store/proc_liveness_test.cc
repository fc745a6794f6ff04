#include "store/proc_liveness.h"

#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "support/temp_dir.h"

namespace gpuman::store {
namespace {

// A stat line with starttime (field 22) = `ticks`; comm holds spaces and a ')'.
std::string StatLine(int pid, char state, int64_t ticks) {
  return std::to_string(pid) + " (py thon) x) " + state +
         " 1 4242 4242 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 " + std::to_string(ticks) +
         " 0 0\n";
}

TEST(ProcLivenessTest, OurOwnProcessIsAliveWithItsStartTime) {
  auto ticks = ProcessStartTicks(getpid());
  ASSERT_TRUE(ticks.has_value());
  EXPECT_GT(*ticks, 0);
  EXPECT_TRUE(IsProcessAlive({getpid(), *ticks}));
  auto current = CurrentLeaseProcess(getpid());
  ASSERT_TRUE(current.has_value());
  EXPECT_EQ(current->start_time_ticks, *ticks);
}

TEST(ProcLivenessTest, ARecycledPidWithAnotherStartTimeIsDead) {
  auto ticks = ProcessStartTicks(getpid());
  ASSERT_TRUE(ticks.has_value());
  EXPECT_FALSE(IsProcessAlive({getpid(), *ticks + 1}));
  EXPECT_FALSE(ProcLivenessCheck()({getpid(), *ticks - 1}));
}

TEST(ProcLivenessTest, MissingAndInvalidPidsAreDead) {
  EXPECT_FALSE(ProcessStartTicks(0).has_value());
  EXPECT_FALSE(ProcessStartTicks(-5).has_value());
  EXPECT_FALSE(IsProcessAlive({0, 0}));
  testing::TempDir dir;
  EXPECT_FALSE(ProcessStartTicks(4242, dir.path()).has_value());
}

TEST(ProcLivenessTest, ParsesAFakeProcTree) {
  testing::TempDir dir;
  dir.Write("4242/stat", StatLine(4242, 'S', 987654321));
  EXPECT_EQ(ProcessStartTicks(4242, dir.path()), std::optional<int64_t>(987654321));
  EXPECT_TRUE(IsProcessAlive({4242, 987654321}, dir.path()));
  EXPECT_TRUE(ProcLivenessCheck(dir.path())({4242, 987654321}));
  EXPECT_FALSE(ProcLivenessCheck(dir.path())({4242, 987654320}));
}

TEST(ProcLivenessTest, ZombiesAreDead) {
  testing::TempDir dir;
  dir.Write("77/stat", StatLine(77, 'Z', 500));
  EXPECT_FALSE(ProcessStartTicks(77, dir.path()).has_value());
  EXPECT_FALSE(IsProcessAlive({77, 500}, dir.path()));
}

TEST(ProcLivenessTest, TruncatedOrGarbageStatIsDead) {
  testing::TempDir dir;
  dir.Write("1/stat", "1 (init) S 0 1 1");
  dir.Write("2/stat", "garbage without parentheses 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20");
  dir.Write("3/stat", "3 (x) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 12ab 0");
  EXPECT_FALSE(ProcessStartTicks(1, dir.path()).has_value());
  EXPECT_FALSE(ProcessStartTicks(2, dir.path()).has_value());
  EXPECT_FALSE(ProcessStartTicks(3, dir.path()).has_value());
}

TEST(ProcLivenessTest, AReapedChildIsDead) {
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    pause();
    _exit(0);
  }
  auto ticks = ProcessStartTicks(child);
  ASSERT_TRUE(ticks.has_value());
  EXPECT_TRUE(IsProcessAlive({child, *ticks}));
  kill(child, SIGKILL);
  // Killed but not yet reaped: a zombie, already dead for lease purposes.
  for (int i = 0; i < 1000 && ProcessStartTicks(child).has_value(); ++i) usleep(1000);
  EXPECT_FALSE(IsProcessAlive({child, *ticks}));
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_FALSE(IsProcessAlive({child, *ticks}));
}

}  // namespace
}  // namespace gpuman::store
