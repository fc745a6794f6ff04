// The top loop's sleep between draws (tui::IdleWaitMs): once a second at a 1 s interval,
// the clock's next second otherwise, a late frame waited for only a quarter second.
#include "tui/top_app.h"

#include <gtest/gtest.h>

namespace gpuman::tui {
namespace {

constexpr int64_t kSecond = 1'700'000'000'000;  // a whole second, in ms since the epoch

TEST(IdleWaitTest, NoFrameYetWakesAtTheClocksNextSecond) {
  EXPECT_EQ(IdleWaitMs(kSecond + 300, 0, 1000), 700);
  EXPECT_EQ(IdleWaitMs(kSecond, 0, 1000), 1000);
  EXPECT_EQ(IdleWaitMs(kSecond + 999, 0, 1000), 1);
}

// At a 1 s interval the next frame is always due within a second: the loop waits for it
// (its draw moves the clock) instead of also waking at the second and every half second.
TEST(IdleWaitTest, AtOneSecondTheFrameIsTheOnlyWake) {
  const int64_t frame = kSecond + 300;
  EXPECT_EQ(IdleWaitMs(frame + 5, frame, 1000), 1000 - 5 + 250);
  // Whatever the phase of the frames against the clock's seconds.
  for (int64_t phase : {0, 1, 500, 750, 999}) {
    const int64_t seen = kSecond + phase;
    EXPECT_GT(IdleWaitMs(seen + 2, seen, 1000), 1000) << phase;
  }
  // And at shorter intervals.
  EXPECT_EQ(IdleWaitMs(frame + 10, frame, 500), 500 - 10 + 250);
}

// At a 5 s interval the clock still moves every second; within the last second before the
// frame, the frame is waited for.
TEST(IdleWaitTest, LongerIntervalsWakeEverySecondAndForTheFrame) {
  const int64_t frame = kSecond + 300;
  EXPECT_EQ(IdleWaitMs(frame + 10, frame, 5000), 690);                          // to kSecond+1000
  EXPECT_EQ(IdleWaitMs(kSecond + 4000, frame, 5000), 1000);                     // frame due at +5300
  EXPECT_EQ(IdleWaitMs(kSecond + 5000, frame, 5000), 300 + 250);                // within the second
}

// A frame past its time (a slow driver) no longer holds the clock back: once it is late,
// the loop wakes every second again, so "data ... old" and the clock keep moving.
TEST(IdleWaitTest, ALateFrameIsNotWaitedForAgain) {
  const int64_t frame = kSecond + 300;
  EXPECT_EQ(IdleWaitMs(frame + 1000 + 250, frame, 1000), 450);  // due at +1300, now +1550: to +2000
  EXPECT_EQ(IdleWaitMs(frame + 1000, frame, 1000), 700);        // exactly due: not in the future
}

}  // namespace
}  // namespace gpuman::tui
