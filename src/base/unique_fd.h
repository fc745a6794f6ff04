// UniqueFd: owns one file descriptor and closes it when it goes away (MPD's
// UniqueFileDescriptor), and Pipe, the two ends of a pipe made with pipe2(O_CLOEXEC).
// Move-only value types; one thread at a time, like the fds themselves. Nothing outside
// base/ calls close(2) on an int: descriptors live in these.
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <utility>

#include "base/posix_error.h"
#include "base/result.h"

namespace gpuman {

class UniqueFd {
 public:
  UniqueFd() = default;
  /// Takes ownership of `fd`; a negative fd means "none".
  explicit UniqueFd(int fd) : fd_(fd < 0 ? -1 : fd) {}
  ~UniqueFd() { reset(); }

  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  /// The descriptor, or -1 when none is owned. Ownership stays here.
  int get() const { return fd_; }
  bool is_valid() const { return fd_ >= 0; }
  explicit operator bool() const { return is_valid(); }

  /// Gives the descriptor up without closing it; this object then owns none.
  int release() { return std::exchange(fd_, -1); }
  /// Closes the owned descriptor (if any) and takes `fd` instead.
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd < 0 ? -1 : fd;
  }
  /// Closes now and says how it went: 0, or close(2)'s errno (a file on NFS may report a
  /// failed write only here). Owns none afterwards, whatever the answer.
  int Close() {
    if (fd_ < 0) return 0;
    return ::close(release()) == 0 ? 0 : errno;
  }

 private:
  int fd_ = -1;
};

/// Both ends of a pipe. Each end is a UniqueFd: close one early with `write.reset()`.
struct Pipe {
  UniqueFd read;
  UniqueFd write;
};

/// pipe2(flags); O_CLOEXEC always. Errors: kIo "pipe: too many open files".
inline Result<Pipe> MakePipe(int flags = 0) {
  int fds[2];
  if (pipe2(fds, flags | O_CLOEXEC) != 0) return PosixError(ErrorCode::kIo, "pipe", errno);
  return Pipe{UniqueFd(fds[0]), UniqueFd(fds[1])};
}

}  // namespace gpuman
