// The ranks' output of `run --per-gpu` on a terminal (cli/rank_output.h): whole lines,
// each behind its rank, whatever pieces they arrive in; and the copying through a real
// pseudo-terminal or pipe pair.
#include "cli/rank_output.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <poll.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>

#include "base/unique_fd.h"

namespace gpuman::cli {
namespace {

TEST(LinePrefixerTest, WholeLinesBehindThePrefix) {
  struct Case {
    const char* name;
    std::vector<std::string> pieces;
    std::string want;          // what the pieces give
    std::string want_finish;   // and Finish after them
  };
  const Case cases[] = {
      {"one line", {"hello\n"}, "[1] hello\n", ""},
      {"two lines in one piece", {"a\nb\n"}, "[1] a\n[1] b\n", ""},
      {"a line in pieces waits for its end", {"hel", "lo", "\nwor"}, "[1] hello\n", "[1] wor\n"},
      {"an empty line", {"\n"}, "[1] \n", ""},
      {"a progress bar shows at each \\r", {"10%\r", "20%\r", "done\n"}, "[1] 10%\r[1] 20%\r[1] done\n", ""},
      {"\\r\\n is one end", {"dos\r", "\nnext\n"}, "[1] dos\r\n[1] next\n", ""},
      {"nothing", {}, "", ""},
  };
  for (const auto& c : cases) {
    LinePrefixer lines("[1] ");
    std::string got;
    for (const auto& piece : c.pieces) got += lines.Feed(piece);
    EXPECT_EQ(got, c.want) << c.name;
    EXPECT_EQ(lines.Finish(), c.want_finish) << c.name;
    EXPECT_EQ(lines.Finish(), "") << c.name << ": once";
  }
}

TEST(LinePrefixerTest, AnEndlessLineIsCut) {
  LinePrefixer lines("[0] ");
  const std::string big(LinePrefixer::kMaxLine, 'x');
  EXPECT_EQ(lines.Feed(big), "[0] " + big + "\n");
  EXPECT_EQ(lines.Feed("y\n"), "[0] y\n");
}

TEST(RankPrefixTest, AlignedToTheWidestRank) {
  EXPECT_EQ(RankPrefix(0, 1), "[0] ");
  EXPECT_EQ(RankPrefix(7, 8), "[7] ");
  EXPECT_EQ(RankPrefix(3, 12), "[ 3] ");
  EXPECT_EQ(RankPrefix(11, 12), "[11] ");
}

TEST(RankOutputTest, NothingWhenNeitherStreamIsATerminal) {
  auto out = MakePipe();
  ASSERT_TRUE(out.has_value());
  RankOutput ranks(2, out->write.get(), out->write.get());
  ASSERT_TRUE(ranks.Open().has_value());
  EXPECT_FALSE(ranks.Enabled());
  EXPECT_TRUE(ranks.ChildOutputs().empty()) << "the ranks write where gpuman would, themselves";
}

TEST(RankOutputTest, CopiesEachRanksLinesFromItsTerminal) {
  // Our "terminal" is a pseudo-terminal whose other side this test reads.
  UniqueFd master(posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!master || grantpt(master.get()) != 0 || unlockpt(master.get()) != 0) GTEST_SKIP() << "no pseudo-terminals here";
  UniqueFd tty(open(ptsname(master.get()), O_RDWR | O_NOCTTY | O_CLOEXEC));
  ASSERT_TRUE(tty);
  auto err = MakePipe();  // stderr is no terminal: only stdout goes through the ranks' terminals
  ASSERT_TRUE(err.has_value());
  RankOutput ranks(2, tty.get(), err->write.get());
  ASSERT_TRUE(ranks.Open().has_value());
  ASSERT_TRUE(ranks.Enabled());
  const auto ends = ranks.ChildOutputs();
  ASSERT_EQ(ends.size(), 2u);
  EXPECT_EQ(ends[0].second, -1) << "stderr is inherited";
  EXPECT_TRUE(isatty(ends[0].first)) << "a rank writes to a terminal: it line-buffers as on the real one";
  ASSERT_EQ(write(ends[1].first, "one\ntw", 6), 6);
  ASSERT_EQ(write(ends[0].first, "zero\n", 5), 5);
  ranks.CloseChildEnds();
  ranks.Finish();
  // The test's terminal turns '\n' into "\r\n" on the way out; the ranks' terminals do not.
  const std::string want = "[0] zero\r\n[1] one\r\n[1] tw\r\n";
  // A terminal may hand the bytes over in more than one read: read until all are there
  // (or nothing more comes within 5 s, which fails below).
  std::string got;
  while (got.size() < want.size()) {
    pollfd p{master.get(), POLLIN, 0};
    if (poll(&p, 1, 5000) <= 0) break;
    char buf[256];
    const ssize_t n = read(master.get(), buf, sizeof buf);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  EXPECT_EQ(got, want);
}

TEST(RankOutputTest, TheRanksTerminalsFollowTheRealOneWhenItIsResized) {
  UniqueFd master(posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!master || grantpt(master.get()) != 0 || unlockpt(master.get()) != 0) GTEST_SKIP() << "no pseudo-terminals here";
  UniqueFd tty(open(ptsname(master.get()), O_RDWR | O_NOCTTY | O_CLOEXEC));
  ASSERT_TRUE(tty);
  winsize real{};
  real.ws_col = 120;
  real.ws_row = 40;
  ASSERT_EQ(ioctl(tty.get(), TIOCSWINSZ, &real), 0);
  RankOutput ranks(2, tty.get(), tty.get());
  ASSERT_TRUE(ranks.Open().has_value());
  const auto ends = ranks.ChildOutputs();
  ASSERT_EQ(ends.size(), 2u);
  auto cols = [&](int rank) {
    winsize w{};
    EXPECT_EQ(ioctl(ends[rank].first, TIOCGWINSZ, &w), 0);
    return std::make_pair(static_cast<int>(w.ws_col), static_cast<int>(w.ws_row));
  };
  EXPECT_EQ(cols(0), std::make_pair(116, 40)) << "120 less \"[0] \"";
  // The window shrinks; rank 1 writes: both ranks' terminals get the new size.
  real.ws_col = 80;
  real.ws_row = 24;
  ASSERT_EQ(ioctl(tty.get(), TIOCSWINSZ, &real), 0);
  EXPECT_EQ(cols(1), std::make_pair(116, 40)) << "not before a rank writes";
  ASSERT_EQ(write(ends[1].first, "x\n", 2), 2);
  ranks.Drain(ranks.Fds()[1]);
  EXPECT_EQ(cols(0), std::make_pair(76, 24));
  EXPECT_EQ(cols(1), std::make_pair(76, 24));
  ranks.CloseChildEnds();
  ranks.Finish();
}

}  // namespace
}  // namespace gpuman::cli
