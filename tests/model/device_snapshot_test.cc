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

// nvidia-smi's names: the share of the GPU's memory in eighths (rounded up) times the
// GPU's memory in whole GB (rounded up), rounded.
TEST(MigProfileNameTest, NamesAsNvidiaSmiDoes) {
  const int64_t a100_40 = 40960LL << 20, a100_80 = 81920LL << 20, h100_80 = 85520809984LL;
  EXPECT_EQ(MigProfileName(1, 1, 4864, a100_40), "1g.5gb");
  EXPECT_EQ(MigProfileName(3, 3, 19968, a100_40), "3g.20gb");
  EXPECT_EQ(MigProfileName(7, 7, 40192, a100_40), "7g.40gb");
  EXPECT_EQ(MigProfileName(1, 1, 9728, a100_80), "1g.10gb");
  EXPECT_EQ(MigProfileName(3, 3, 40320, h100_80), "3g.40gb");
  EXPECT_EQ(MigProfileName(2, 2, 20096, h100_80), "2g.20gb");
  EXPECT_EQ(MigProfileName(3, 1, 40320, h100_80), "1c.3g.40gb");  // a compute instance of fewer slices
  EXPECT_EQ(MigProfileName(1, 1, 9728, 0), "1g.10gb");            // parent unknown: whole GiB up
}

TEST(MigDeviceTest, FindAndProfiles) {
  MachineSnapshot snap;
  snap.gpus.resize(2);
  snap.gpus[1].uuid = "GPU-1";
  snap.gpus[1].mig_devices.resize(2);
  snap.gpus[1].mig_devices[0].uuid = "MIG-a";
  snap.gpus[1].mig_devices[0].profile = "2g.20gb";
  snap.gpus[1].mig_devices[1].uuid = "MIG-b";
  snap.gpus[1].mig_devices[1].profile = "1g.10gb";
  const DeviceSnapshot* parent = nullptr;
  ASSERT_NE(FindMigDevice(snap, "MIG-b", &parent), nullptr);
  EXPECT_EQ(parent, &snap.gpus[1]);
  EXPECT_EQ(FindMigDevice(snap, "MIG-c"), nullptr);
  EXPECT_EQ(MigProfiles(snap), (std::vector<std::string>{"1g.10gb", "2g.20gb"}));
  EXPECT_TRUE(InMigMode(snap.gpus[1]));
  EXPECT_FALSE(InMigMode(snap.gpus[0]));
}

}  // namespace
}  // namespace gpuman::model
