#include "devices/health.h"

#include <gtest/gtest.h>

namespace gpuman::devices {
namespace {

TEST(AssessHealthTest, HealthyWhenNothingIsWrongOrUnknown) {
  model::DeviceSnapshot dev;  // every signal unknown
  AssessHealth(dev);
  EXPECT_TRUE(dev.is_healthy);
  EXPECT_TRUE(dev.health_problems.empty());
  dev.ecc_volatile_uncorrected = 0;
  dev.retired_pages_pending = false;
  dev.clock_event_reasons = 0x1;  // idle is normal
  AssessHealth(dev);
  EXPECT_TRUE(dev.is_healthy);
  EXPECT_TRUE(dev.warnings.empty());
}

TEST(AssessHealthTest, EachSignalMakesItUnhealthy) {
  struct Case {
    const char* name;
    void (*set)(model::DeviceSnapshot&);
    const char* expect_substring;
  } cases[] = {
      {"ecc", [](model::DeviceSnapshot& d) { d.ecc_volatile_uncorrected = 3; }, "uncorrected ECC errors: 3"},
      {"retired", [](model::DeviceSnapshot& d) { d.retired_pages_pending = true; }, "retired pages pending"},
      {"remap pending", [](model::DeviceSnapshot& d) { d.remapped_rows_pending = true; }, "row remapping pending"},
      {"remap failed", [](model::DeviceSnapshot& d) { d.remapped_rows_failure = true; }, "row remapping failed"},
  };
  for (const auto& c : cases) {
    model::DeviceSnapshot dev;
    c.set(dev);
    AssessHealth(dev);
    EXPECT_FALSE(dev.is_healthy) << c.name;
    ASSERT_EQ(dev.health_problems.size(), 1u) << c.name;
    EXPECT_NE(dev.health_problems[0].find(c.expect_substring), std::string::npos) << c.name;
  }
}

TEST(AssessHealthTest, ThrottlingIsAWarningOnly) {
  model::DeviceSnapshot dev;
  dev.clock_event_reasons = 0x40 | 0x80;
  AssessHealth(dev);
  EXPECT_TRUE(dev.is_healthy);
  EXPECT_EQ(dev.warnings.size(), 2u);
}

TEST(AssessHealthTest, KeepsEarlierProblems) {
  model::DeviceSnapshot dev;
  dev.is_healthy = false;
  dev.health_problems = {"nvmlDeviceGetUUID: GPU is lost"};
  AssessHealth(dev);
  EXPECT_FALSE(dev.is_healthy);
  EXPECT_EQ(dev.health_problems.size(), 1u);
}

}  // namespace
}  // namespace gpuman::devices
