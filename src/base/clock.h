// Clock: the seam for wall time (STYLE.md section 2). Only loops that need "now"
// hold one; pure code takes `now` as a parameter. SystemClock is thread-safe.
#pragma once

#include <chrono>
#include <cstdint>

namespace gpuman {

class Clock {
 public:
  virtual ~Clock() = default;
  /// Milliseconds since the Unix epoch.
  virtual int64_t NowUnixMs() const = 0;
};

class SystemClock final : public Clock {
 public:
  int64_t NowUnixMs() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
};

}  // namespace gpuman
