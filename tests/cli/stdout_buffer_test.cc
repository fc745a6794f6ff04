// The stdout buffer (cli/stdout_buffer.h): what it writes and when, that it remembers why a
// write failed, and FinishStdout's one line and exit code.
#include "cli/stdout_buffer.h"

#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <csignal>
#include <sstream>
#include <string>

namespace gpuman::cli {
namespace {

std::string ReadAvailable(int fd) {
  fcntl(fd, F_SETFL, O_NONBLOCK);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  return out;
}

TEST(StdoutBufferTest, LineBufferedWritesEachLineFullyBufferedWaitsForFlush) {
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  {
    StdoutBuffer line(p[1], /*line_buffered=*/true);
    std::ostream out(&line);
    out << "one\ntw";
    EXPECT_EQ(ReadAvailable(p[0]), "one\n");
    out << "o\n";
    EXPECT_EQ(ReadAvailable(p[0]), "two\n");
  }
  {
    StdoutBuffer full(p[1], /*line_buffered=*/false);
    std::ostream out(&full);
    out << "three\n";
    EXPECT_EQ(ReadAvailable(p[0]), "");
    out.flush();
    EXPECT_EQ(ReadAvailable(p[0]), "three\n");
    out << "four\n";
  }  // the destructor writes what is left
  EXPECT_EQ(ReadAvailable(p[0]), "four\n");
  close(p[0]);
  close(p[1]);
}

TEST(StdoutBufferTest, RemembersTheFirstFailureAndFinishSaysItOnce) {
  const int full = open("/dev/full", O_WRONLY);
  ASSERT_GE(full, 0);
  StdoutBuffer buffer(full, false);
  std::ostream out(&buffer);
  out << std::string(100000, 'x');  // more than the buffer: written, and failed, already
  EXPECT_EQ(buffer.error(), ENOSPC);
  EXPECT_FALSE(out.good());
  std::ostringstream err;
  EXPECT_EQ(FinishStdout(out, buffer, kExitOk, err, ExitPolicy::kPlain), kExitError);
  EXPECT_EQ(err.str(), "gpuman: error: write standard output: no space left on device\n");
  // A command that failed already keeps its code; run and wait say 125.
  std::ostringstream err2;
  EXPECT_EQ(FinishStdout(out, buffer, kExitUsage, err2, ExitPolicy::kPlain), kExitUsage);
  EXPECT_EQ(FinishStdout(out, buffer, kExitOk, err2, ExitPolicy::kJobCode), kJobGpumanFailed);
  close(full);
}

TEST(StdoutBufferTest, AClosedStdoutFailsAtTheFirstWriteOnly) {
  const int null = open("/dev/null", O_WRONLY);
  StdoutBuffer buffer(null, false, EBADF);
  std::ostream out(&buffer);
  std::ostringstream err;
  EXPECT_EQ(FinishStdout(out, buffer, kExitOk, err, ExitPolicy::kPlain), kExitOk) << "nothing written, nothing failed";
  out << "x\n";
  EXPECT_EQ(FinishStdout(out, buffer, kExitOk, err, ExitPolicy::kPlain), kExitError);
  EXPECT_EQ(err.str(), "gpuman: error: write standard output: bad file descriptor\n");
  close(null);
}

TEST(StdoutBufferTest, AReaderThatWentAwayIsQuiet) {
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  close(p[0]);
  auto* const previous = std::signal(SIGPIPE, SIG_IGN);
  StdoutBuffer buffer(p[1], false);
  std::ostream out(&buffer);
  out << "lost\n";
  std::ostringstream err;
  EXPECT_EQ(FinishStdout(out, buffer, kExitOk, err, ExitPolicy::kPlain), kExitError);
  EXPECT_EQ(buffer.error(), EPIPE);
  EXPECT_EQ(err.str(), "");
  std::signal(SIGPIPE, previous);
  close(p[1]);
}

}  // namespace
}  // namespace gpuman::cli
