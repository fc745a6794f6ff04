#include "tui/sampler.h"

#include <poll.h>

#include <atomic>
#include <gtest/gtest.h>

namespace gpuman::tui {
namespace {

// Waits for the wake pipe (bounded, so a broken sampler fails instead of hanging).
bool WaitWake(Sampler& s) {
  pollfd p{s.wake_fd(), POLLIN, 0};
  return poll(&p, 1, 10000) == 1;
}

TEST(SamplerTest, PublishesFramesInOrderOffTheCallingThread) {
  std::atomic<int> calls{0};
  const auto caller = std::this_thread::get_id();
  std::atomic<bool> on_other_thread{true};
  Sampler s(
      [&] {
        if (std::this_thread::get_id() == caller) on_other_thread = false;
        Frame f;
        f.snapshot_error = "call " + std::to_string(++calls);
        return f;
      },
      std::chrono::milliseconds(10));
  EXPECT_EQ(s.Latest(), nullptr);
  Frame first;
  first.snapshot_error = "first";
  ASSERT_TRUE(s.Start(std::make_shared<const Frame>(first)).has_value());
  ASSERT_NE(s.Latest(), nullptr);
  EXPECT_EQ(s.Latest()->sequence, 1u);
  EXPECT_EQ(s.Latest()->snapshot_error, "first");
  uint64_t seen = 1;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(WaitWake(s));
    s.DrainWake();
    auto f = s.Latest();
    ASSERT_NE(f, nullptr);
    EXPECT_GT(f->sequence, seen);
    seen = f->sequence;
  }
  s.Stop();
  EXPECT_TRUE(on_other_thread);
  EXPECT_GE(calls.load(), 3);
}

TEST(SamplerTest, ASlowCollectionDoesNotBlockReaders) {
  std::mutex gate;
  gate.lock();  // the collection blocks until the test opens the gate
  Sampler s(
      [&] {
        std::lock_guard<std::mutex> wait(gate);
        return Frame{};
      },
      std::chrono::milliseconds(10));
  Frame first;
  first.snapshot_error = "first";
  ASSERT_TRUE(s.Start(std::make_shared<const Frame>(first)).has_value());
  // While the sampler is stuck, the newest frame is still there to draw.
  for (int i = 0; i < 100; ++i) ASSERT_EQ(s.Latest()->snapshot_error, "first");
  gate.unlock();
  ASSERT_TRUE(WaitWake(s));
  EXPECT_EQ(s.Latest()->sequence, 2u);
  s.Stop();
}

}  // namespace
}  // namespace gpuman::tui
