// gpuman's standard output: a buffer over fd 1 that remembers why a write failed, so that
// the command line can say so once, at its edge (FinishStdout), whichever command printed:
// a full disk or a closed stdout is one line and exit 1, a reader that went away (`| head`,
// with SIGPIPE ignored) is a quiet exit. Installed under std::cout by Main; one thread.
#pragma once

#include <ostream>
#include <streambuf>
#include <vector>

#include "cli/exit_codes.h"

namespace gpuman::cli {

class StdoutBuffer final : public std::streambuf {
 public:
  /// Writes to `fd`; with `line_buffered` (a terminal) every complete line goes out at
  /// once, else when the buffer fills or on flush. `failed_errno` != 0: the descriptor is
  /// unusable from the start (stdout was closed), and the first write fails with it.
  StdoutBuffer(int fd, bool line_buffered, int failed_errno = 0);
  ~StdoutBuffer() override;
  StdoutBuffer(const StdoutBuffer&) = delete;
  StdoutBuffer& operator=(const StdoutBuffer&) = delete;

  /// The errno of the first write that failed; 0 while none did. After a failure nothing
  /// more is written (the stream goes bad).
  int error() const { return error_; }

 protected:
  int_type overflow(int_type ch) override;
  std::streamsize xsputn(const char* s, std::streamsize n) override;
  int sync() override;

 private:
  bool Drain();  // writes what is buffered; false (and error_ set) when a write fails

  int fd_;
  bool line_buffered_;
  int error_ = 0;
  int pending_error_;  // failed_errno, reported at the first write
  std::vector<char> buffer_;
};

/// The end of every command: flushes `out` and, when a write to it failed, says so on `err`
/// ("gpuman: error: write standard output: no space left on device") and returns the exit
/// code of an I/O error under `policy` (1; 125 for run and wait); a reader that went away
/// (EPIPE) gets no message. A command that already failed keeps its own exit code. `rc` when
/// every write succeeded.
int FinishStdout(std::ostream& out, const StdoutBuffer& buffer, int rc, std::ostream& err, ExitPolicy policy);

}  // namespace gpuman::cli
