#include "cli/rank_output.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <optional>

#include "base/posix_error.h"
#include "base/spawn.h"

namespace gpuman::cli {
namespace {

// The size a rank's terminal gets: the real one's, less the prefix in width; nullopt when
// the real one has none (or too narrow a one to take the prefix off).
std::optional<winsize> RankSize(const winsize& real, size_t prefix_width) {
  if (real.ws_col <= prefix_width + 20) return std::nullopt;
  winsize size = real;
  size.ws_col = static_cast<unsigned short>(size.ws_col - prefix_width);
  return size;
}

// A pseudo-terminal whose slave a rank writes to: output as the real terminal's, except
// that '\n' stays '\n' (no "\r\n" to undo), and the real one's width less the prefix.
Result<Pipe> MakeTerminal(int like_fd, size_t prefix_width) {
  UniqueFd master(posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!master) return PosixError(ErrorCode::kIo, "posix_openpt", errno);
  if (grantpt(master.get()) != 0 || unlockpt(master.get()) != 0) return PosixError(ErrorCode::kIo, "unlockpt", errno);
  char name[128];
  if (ptsname_r(master.get(), name, sizeof name) != 0) return PosixError(ErrorCode::kIo, "ptsname", errno);
  UniqueFd slave(open(name, O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!slave) return PosixError(ErrorCode::kIo, std::string("open ") + name, errno);
  termios t{};
  if (tcgetattr(like_fd, &t) != 0) tcgetattr(slave.get(), &t);
  t.c_oflag &= ~static_cast<tcflag_t>(ONLCR);
  t.c_lflag &= ~static_cast<tcflag_t>(ECHO);  // nothing is typed here: stdin is the real terminal
  tcsetattr(slave.get(), TCSANOW, &t);
  winsize real{};
  if (ioctl(like_fd, TIOCGWINSZ, &real) == 0) {
    if (auto size = RankSize(real, prefix_width)) ioctl(slave.get(), TIOCSWINSZ, &*size);
  }
  return Pipe{std::move(master), std::move(slave)};
}

void WriteAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = WriteNoSigpipe(fd, data.data() + done, data.size() - done);
    if (n <= 0) return;  // the terminal is gone: the rank's output has nowhere to go
    done += static_cast<size_t>(n);
  }
}

}  // namespace

std::string LinePrefixer::Feed(std::string_view bytes) {
  std::string out;
  for (char c : bytes) {
    if (after_cr_) {
      after_cr_ = false;
      if (c == '\n') {  // "\r\n": the line was shown at '\r'; this only moves on
        out += '\n';
        continue;
      }
    }
    if (c == '\n' || c == '\r') {
      out += prefix_;
      out += partial_;
      out += c;
      partial_.clear();
      after_cr_ = c == '\r';
      continue;
    }
    partial_ += c;
    if (partial_.size() >= kMaxLine) {
      out += prefix_;
      out += partial_;
      out += '\n';
      partial_.clear();
    }
  }
  return out;
}

std::string LinePrefixer::Finish() {
  after_cr_ = false;
  if (partial_.empty()) return {};
  std::string out = prefix_ + partial_ + "\n";
  partial_.clear();
  return out;
}

std::string RankPrefix(int rank, int ranks) {
  const size_t width = std::to_string(ranks > 0 ? ranks - 1 : 0).size();
  std::string number = std::to_string(rank);
  if (number.size() < width) number.insert(0, width - number.size(), ' ');
  return "[" + number + "] ";
}

RankOutput::RankOutput(int ranks, int stdout_fd, int stderr_fd)
    : ranks_(ranks), stdout_fd_(stdout_fd), stderr_fd_(stderr_fd) {}

Status RankOutput::Open() {
  routes_stdout_ = isatty(stdout_fd_) == 1;
  routes_stderr_ = isatty(stderr_fd_) == 1;
  if (!routes_stdout_ && !routes_stderr_) return {};
  // Both terminals: one stream per rank for both, so that its stdout and stderr lines keep
  // their order, copied to our stdout.
  const int target = routes_stdout_ ? stdout_fd_ : stderr_fd_;
  for (int rank = 0; rank < ranks_; ++rank) {
    Stream stream(RankPrefix(rank, ranks_));
    auto ends = MakeTerminal(target, RankPrefix(rank, ranks_).size());
    if (!ends) ends = MakePipe();  // no pseudo-terminals here (a container without devpts)
    if (!ends) return ends.error().WithContext("rank output");
    int flags = fcntl(ends->read.get(), F_GETFL);
    fcntl(ends->read.get(), F_SETFL, flags | O_NONBLOCK);
    stream.read = std::move(ends->read);
    stream.child_end = std::move(ends->write);
    stream.target = target;
    streams_.push_back(std::move(stream));
  }
  if (ioctl(target, TIOCGWINSZ, &last_size_) != 0) last_size_ = winsize{};
  return {};
}

std::vector<std::pair<int, int>> RankOutput::ChildOutputs() const {
  std::vector<std::pair<int, int>> out;
  for (const auto& s : streams_) {
    out.emplace_back(routes_stdout_ ? s.child_end.get() : -1, routes_stderr_ ? s.child_end.get() : -1);
  }
  return out;
}

void RankOutput::CloseChildEnds() {
  for (auto& s : streams_) s.child_end.reset();
}

std::vector<int> RankOutput::Fds() const {
  std::vector<int> out;
  for (const auto& s : streams_) {
    if (s.read) out.push_back(s.read.get());
  }
  return out;
}

void RankOutput::Read(Stream& s) {
  char buf[16384];
  while (s.read) {
    const ssize_t n = read(s.read.get(), buf, sizeof buf);
    if (n > 0) {
      WriteAll(s.target, s.lines.Feed(std::string_view(buf, static_cast<size_t>(n))));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    // EOF (a pipe), EIO (a pseudo-terminal nobody holds open any more), or an error.
    WriteAll(s.target, s.lines.Finish());
    s.read.reset();
  }
}

void RankOutput::FollowResize() {
  winsize real{};
  if (ioctl(streams_.empty() ? -1 : streams_.front().target, TIOCGWINSZ, &real) != 0) return;
  if (real.ws_col == last_size_.ws_col && real.ws_row == last_size_.ws_row) return;
  last_size_ = real;
  const auto size = RankSize(real, RankPrefix(0, ranks_).size());
  if (!size) return;
  // Set on the master side: the kernel tells the terminal's foreground process group
  // (SIGWINCH), and a rank that asks its stdout for the size gets the new one. A pipe (no
  // pseudo-terminals here) refuses with ENOTTY, which changes nothing.
  for (auto& s : streams_) {
    if (s.read) ioctl(s.read.get(), TIOCSWINSZ, &*size);
  }
}

void RankOutput::Drain(int fd) {
  // The real terminal resized since the ranks last wrote: theirs follow, before they
  // write again (checked when they write: a rank that writes nothing needs no width).
  FollowResize();
  for (auto& s : streams_) {
    if (s.read.get() == fd) Read(s);
  }
}

void RankOutput::Finish() {
  // The ranks have ended: what they wrote is all there (a leftover that still holds its
  // end is not waited for).
  for (auto& s : streams_) {
    Read(s);
    WriteAll(s.target, s.lines.Finish());
    s.read.reset();
  }
}

}  // namespace gpuman::cli
