#include "model/device_snapshot.h"

#include <gtest/gtest.h>

namespace gpuman::model {
namespace {

TEST(FormatCpuListTest, CompressesRanges) {
  EXPECT_EQ(FormatCpuList({}), "");
  EXPECT_EQ(FormatCpuList({0, 1, 2, 3, 8}), "0-3,8");
  EXPECT_EQ(FormatCpuList({5, 3, 4, 4}), "3-5");
  EXPECT_EQ(FormatCpuList({1, 3, 5}), "1,3,5");
}

TEST(ClockEventReasonNamesTest, NamesEachSetBit) {
  EXPECT_TRUE(ClockEventReasonNames(0).empty());
  EXPECT_EQ(ClockEventReasonNames(0x1), (std::vector<std::string>{"gpu_idle"}));
  EXPECT_EQ(ClockEventReasonNames(0x44),
            (std::vector<std::string>{"sw_power_cap", "hw_thermal_slowdown"}));
}

TEST(ProcessTypeNameTest, StableNames) {
  EXPECT_STREQ(ProcessTypeName(ProcessType::kCompute), "compute");
  EXPECT_STREQ(ProcessTypeName(ProcessType::kGraphics), "graphics");
  EXPECT_STREQ(ProcessTypeName(ProcessType::kComputeAndGraphics), "compute+graphics");
}

}  // namespace
}  // namespace gpuman::model
