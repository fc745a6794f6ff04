#include "base/unique_fd.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

namespace gpuman {
namespace {

bool IsOpen(int fd) { return fcntl(fd, F_GETFD) != -1; }

TEST(UniqueFdTest, ClosesWhenItGoesAway) {
  int fds[2];
  ASSERT_EQ(pipe2(fds, O_CLOEXEC), 0);
  close(fds[1]);
  {
    UniqueFd owned(fds[0]);
    EXPECT_TRUE(owned.is_valid());
    EXPECT_EQ(owned.get(), fds[0]);
    EXPECT_TRUE(IsOpen(fds[0]));
  }
  EXPECT_FALSE(IsOpen(fds[0]));
}

TEST(UniqueFdTest, MoveHandsOwnershipOverAndResetCloses) {
  int fds[2];
  ASSERT_EQ(pipe2(fds, O_CLOEXEC), 0);
  UniqueFd a(fds[0]);
  UniqueFd b(std::move(a));
  EXPECT_FALSE(a.is_valid());  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
  EXPECT_EQ(b.get(), fds[0]);
  UniqueFd c;
  c = std::move(b);
  EXPECT_EQ(c.get(), fds[0]);
  c.reset(fds[1]);
  EXPECT_FALSE(IsOpen(fds[0]));
  EXPECT_TRUE(IsOpen(fds[1]));
  int raw = c.release();
  EXPECT_FALSE(c.is_valid());
  EXPECT_TRUE(IsOpen(raw));
  close(raw);
}

TEST(UniqueFdTest, NegativeMeansNone) {
  UniqueFd none(-5);
  EXPECT_FALSE(none);
  EXPECT_EQ(none.get(), -1);
}

}  // namespace
}  // namespace gpuman
