// The daemon's source for a driver that comes late (issue 23, "No driver is a finding"):
// an error naming why until NVML loads, retried at growing intervals, then the GPUs.
#include "nvml/late_source.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include "support/fake_clock.h"

namespace gpuman::nvml {
namespace {

using ::gpuman::testing::FakeClock;

TEST(LateNvmlSourceTest, AnErrorUntilTheDriverLoadsThenTheGpus) {
  unsetenv("GPUMAN_FAKE_NVML_SCENARIO");  // the stand-in says "driver not loaded"
  FakeClock clock{1'000'000};
  auto first = NvmlLibrary::Load(GPUMAN_TEST_FAKE_NVML);
  ASSERT_FALSE(first);
  LateNvmlSource source(GPUMAN_TEST_FAKE_NVML, clock, first.error());

  auto none = source.Snapshot();
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(none.error().message.find("driver not loaded"), std::string::npos) << none.error().message;

  clock.now += LateNvmlSource::kFirstRetryMs;  // the first retry: still no driver
  ASSERT_FALSE(source.Snapshot());
  EXPECT_FALSE(source.loaded());

  // The driver comes; the next try is 2 s after the last (the interval doubles).
  setenv("GPUMAN_FAKE_NVML_SCENARIO", GPUMAN_TEST_SCENARIO_DIR "/a100-4.json", 1);
  clock.now += 1000;
  EXPECT_FALSE(source.Snapshot()) << "tried again before its time";
  clock.now += 1000;
  auto gpus = source.Snapshot();
  ASSERT_TRUE(gpus) << gpus.error().message;
  EXPECT_EQ(gpus->gpus.size(), 4u);
  EXPECT_TRUE(source.loaded());
  unsetenv("GPUMAN_FAKE_NVML_SCENARIO");
}

}  // namespace
}  // namespace gpuman::nvml
