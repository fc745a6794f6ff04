// CUDA_DEVICE_ORDER (reference section 2): values, the FASTEST_FIRST estimate on a mixed
// machine, and its absence on a homogeneous one.
#include "visibility/device_order.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "visibility/fixtures.h"

namespace gpuman::visibility {
namespace {

using namespace testing_fixtures;
using ::testing::ElementsAre;

std::vector<int> Values(const std::vector<PhysicalIndex>& order) {
  std::vector<int> out;
  for (PhysicalIndex i : order) out.push_back(i.value);
  return out;
}

TEST(ParseDeviceOrderTest, Table) {
  struct Case {
    std::optional<std::string_view> value;
    DeviceOrder order;
    bool is_set;
    bool is_recognized;
  };
  for (const Case& c : {Case{std::nullopt, DeviceOrder::kFastestFirst, false, true},
                        Case{"", DeviceOrder::kFastestFirst, true, true},
                        Case{"FASTEST_FIRST", DeviceOrder::kFastestFirst, true, true},
                        Case{"PCI_BUS_ID", DeviceOrder::kPciBusId, true, true},
                        Case{"pci_bus_id", DeviceOrder::kFastestFirst, true, false},
                        Case{"BUS", DeviceOrder::kFastestFirst, true, false}}) {
    const DeviceOrderSetting s = ParseDeviceOrder(c.value);
    EXPECT_EQ(s.order, c.order) << c.value.value_or("(unset)");
    EXPECT_EQ(s.is_set, c.is_set) << c.value.value_or("(unset)");
    EXPECT_EQ(s.is_recognized, c.is_recognized) << c.value.value_or("(unset)");
  }
}

TEST(EnumerateCudaTest, MixedMachineFastestFirstIsAnEstimate) {
  const CudaEnumeration e = EnumerateCuda(Mixed(), DeviceOrder::kFastestFirst);
  EXPECT_THAT(Values(e.order), ElementsAre(1, 0, 2));  // 4090 first, then 3090s by bus
  EXPECT_TRUE(e.order_is_estimate);
}

TEST(EnumerateCudaTest, MixedMachinePciBusIdIsExact) {
  const CudaEnumeration e = EnumerateCuda(Mixed(), DeviceOrder::kPciBusId);
  EXPECT_THAT(Values(e.order), ElementsAre(0, 1, 2));
  EXPECT_FALSE(e.order_is_estimate);
}

TEST(EnumerateCudaTest, HomogeneousMachineOrdersCoincide) {
  const CudaEnumeration fast = EnumerateCuda(FourA100(), DeviceOrder::kFastestFirst);
  const CudaEnumeration pci = EnumerateCuda(FourA100(), DeviceOrder::kPciBusId);
  EXPECT_EQ(fast.order, pci.order);
  EXPECT_FALSE(fast.order_is_estimate);
}

TEST(EnumerateCudaTest, MemoryBreaksComputeCapabilityTies) {
  auto gpus = Mixed();
  gpus[1].compute_capability = "8.6";  // same CC as the 3090s, less memory
  gpus[1].memory_total_bytes = 16 * kGiB;
  gpus[2].memory_total_bytes = 48 * kGiB;
  EXPECT_THAT(Values(EstimateFastestFirst(gpus)), ElementsAre(2, 0, 1));
}

TEST(EnumerateCudaTest, UnknownNamesAreNotAssumedHomogeneous) {
  auto gpus = FourA100();
  gpus[3].name.reset();
  EXPECT_FALSE(IsHomogeneous(gpus));
  EXPECT_TRUE(IsHomogeneous({}));
}

TEST(PciBusOrderTest, SortsByBusIdCaseInsensitivelyThenIndex) {
  auto gpus = FourA100();
  gpus[0].pci_bus_id = "00000000:B1:00.0";
  gpus[1].pci_bus_id = "00000000:0a:00.0";
  gpus[2].pci_bus_id.reset();
  EXPECT_THAT(Values(PciBusOrder(gpus)), ElementsAre(1, 3, 0, 2));
}

}  // namespace
}  // namespace gpuman::visibility
