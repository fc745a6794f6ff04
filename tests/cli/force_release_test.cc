// lease::ForceEndStep, the step of `release --force`: SIGTERM once, SIGKILL after the grace
// period, on a real child that ignores SIGTERM; nothing signalled when nothing lives.
#include "lease/force_release.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

namespace gpuman::lease {
namespace {

TEST(ForceReleaseTest, TermOnceThenKillAfterTheGrace) {
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    signal(SIGTERM, SIG_IGN);
    (void)write(ready[1], "x", 1);
    for (;;) pause();
  }
  char c;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  close(ready[0]);
  close(ready[1]);
  ForceEnding ending;
  EXPECT_EQ(ForceEndStep(7, {child}, 1000, ending), 1);
  EXPECT_EQ(ending.at(7), 1000);
  usleep(100 * 1000);
  int status = 0;
  EXPECT_EQ(waitpid(child, &status, WNOHANG), 0) << "it ignores SIGTERM";
  EXPECT_EQ(ForceEndStep(7, {child}, 1000 + kForceReleaseGraceMs - 1, ending), 1);
  EXPECT_EQ(waitpid(child, &status, WNOHANG), 0) << "not yet overdue";
  EXPECT_EQ(ForceEndStep(7, {child}, 1000 + kForceReleaseGraceMs, ending), 1);
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  EXPECT_EQ(ForceEndStep(7, {}, 1000 + kForceReleaseGraceMs + 100, ending), 0);
  EXPECT_TRUE(ending.empty()) << "forgotten once nothing lives";
}

}  // namespace
}  // namespace gpuman::lease
