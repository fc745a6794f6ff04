#include "base/duration.h"

#include <gtest/gtest.h>

namespace gpuman {
namespace {

TEST(ParseDurationMsTest, AcceptsUnitsAndSums) {
  struct Case {
    const char* text;
    int64_t ms;
  } cases[] = {
      {"45", 45000}, {"90s", 90000}, {"5m", 300000}, {"1h30m", 5400000}, {"2.5h", 9000000},
      {"250ms", 250}, {"1d", 86400000}, {"0", 0}, {"0.5s", 500},
  };
  for (const auto& c : cases) {
    auto got = ParseDurationMs(c.text);
    ASSERT_TRUE(got.has_value()) << c.text << ": " << got.error().message;
    EXPECT_EQ(*got, c.ms) << c.text;
  }
}

TEST(ParseDurationMsTest, RejectsJunk) {
  for (const char* text : {"", "-5s", "5x", "m", "1.2.3s", "5 m", "400d", "10s5"}) {
    auto got = ParseDurationMs(text);
    EXPECT_FALSE(got.has_value()) << text;
    if (!got) {
      EXPECT_EQ(got.error().code, ErrorCode::kInvalidArgument);
    }
  }
}

TEST(FormatDurationMsTest, TwoMostSignificantUnits) {
  EXPECT_EQ(FormatDurationMs(0), "0s");
  EXPECT_EQ(FormatDurationMs(45000), "45s");
  EXPECT_EQ(FormatDurationMs(725000), "12m 5s");
  EXPECT_EQ(FormatDurationMs(7200000), "2h");
  EXPECT_EQ(FormatDurationMs(12000000), "3h 20m");
  EXPECT_EQ(FormatDurationMs(187200000), "2d 4h");
}

}  // namespace
}  // namespace gpuman
