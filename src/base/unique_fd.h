// UniqueFd: owns one file descriptor and closes it when it goes away (MPD's
// UniqueFileDescriptor). Move-only value type; one thread at a time, like the fd itself.
#pragma once

#include <unistd.h>

#include <utility>

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

 private:
  int fd_ = -1;
};

}  // namespace gpuman
