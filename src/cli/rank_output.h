// The output of `run --per-gpu`'s ranks on a terminal: each rank writes to a terminal of
// its own (a pseudo-terminal, so that it line-buffers and colours as on the real one; a
// pipe where none can be had), and `run` copies whole lines to the real terminal, each
// behind its rank ("[2] "), so that two ranks' lines never mix. Where gpuman's stdout and
// stderr are not terminals nothing of this is used: the ranks write there themselves.
// Main thread only (the wait loop of sched::ChildProcess calls it).
#pragma once

#include <sys/ioctl.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"
#include "sched/child_process.h"

namespace gpuman::cli {

/// Splits one rank's bytes into lines and puts its prefix before each. Pure.
/// A line ends at '\n' or at '\r' (a progress bar redrawing its line shows at once, prefix
/// included); "\r\n" is one end. A partial line waits for its end, up to kMaxLine bytes
/// (then it is cut there), or for Finish.
class LinePrefixer {
 public:
  static constexpr size_t kMaxLine = 64 * 1024;
  explicit LinePrefixer(std::string prefix) : prefix_(std::move(prefix)) {}
  /// What to write for `bytes`: the lines it completes, each prefixed.
  std::string Feed(std::string_view bytes);
  /// The partial last line, prefixed and ended with '\n'; "" when there is none.
  std::string Finish();

 private:
  std::string prefix_;
  std::string partial_;
  bool after_cr_ = false;  // the last line ended with '\r': a '\n' now ends it for good
};

/// "[3] ": rank `rank` of `ranks`, right-aligned to the widest rank.
std::string RankPrefix(int rank, int ranks);

/// The ranks' terminals and the copying (sched::OutputPump). Open() decides from
/// `stdout_fd` and `stderr_fd`: both terminals: one terminal per rank for both its streams
/// (their order kept), copied to stdout; one of them a terminal: that stream only; neither:
/// nothing (Enabled() false, ChildOutputs() empty).
class RankOutput : public sched::OutputPump {
 public:
  RankOutput(int ranks, int stdout_fd, int stderr_fd);
  /// Errors: kIo when neither a pseudo-terminal nor a pipe can be made.
  Status Open();
  bool Enabled() const { return !streams_.empty(); }
  /// JobSpec::outputs: per rank, its {stdout, stderr}.
  std::vector<std::pair<int, int>> ChildOutputs() const;
  /// Once the ranks are forked: our copies of their ends, so that a rank's end reads as EOF.
  void CloseChildEnds();

  std::vector<int> Fds() const override;
  void Drain(int fd) override;
  void Finish() override;

 private:
  struct Stream {
    UniqueFd read;
    UniqueFd child_end;
    int target = -1;
    LinePrefixer lines;
    explicit Stream(std::string prefix) : lines(std::move(prefix)) {}
  };
  void Read(Stream& s);
  // Gives the ranks' terminals the real terminal's new size, when it changed.
  void FollowResize();
  int ranks_;
  winsize last_size_{};  // the real terminal's, as the ranks' terminals last got it
  int stdout_fd_, stderr_fd_;
  bool routes_stdout_ = false, routes_stderr_ = false;  // which of a rank's streams go to its Stream
  std::vector<Stream> streams_;                 // one per rank, in rank order
};

}  // namespace gpuman::cli
