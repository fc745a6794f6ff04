// FakeClock: the test side of the Clock seam (src/base/clock.h). Time moves only when the
// test moves it: set `now` or call Advance(). Header-only test support; not thread-safe
// (set it from the thread that reads it, or before starting others).
#pragma once

#include <cstdint>

#include "base/clock.h"

namespace gpuman::testing {

class FakeClock final : public Clock {
 public:
  /// A fixed default (2023-11-14T22:13:20Z) so tests that never set it stay reproducible.
  static constexpr int64_t kDefaultNowUnixMs = 1'700'000'000'000;

  explicit FakeClock(int64_t now_unix_ms = kDefaultNowUnixMs) : now(now_unix_ms) {}

  int64_t NowUnixMs() const override { return now; }
  void Advance(int64_t ms) { now += ms; }

  /// What NowUnixMs() answers; tests read and write it directly.
  int64_t now;
};

}  // namespace gpuman::testing
