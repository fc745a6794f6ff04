// Peak figures (model/peak.h): the formula against NVIDIA's published figures.
#include "model/peak.h"

#include <gtest/gtest.h>

namespace gpuman::model {
namespace {

DeviceSnapshot Gpu(const char* cc, int64_t cores, int64_t sm_mhz, int64_t bus_bits, int64_t mem_mhz) {
  DeviceSnapshot g;
  g.compute_capability = cc;
  g.cuda_cores = cores;
  g.clocks.sm_max_mhz = sm_mhz;
  g.memory_bus_width_bits = bus_bits;
  g.clocks.memory_max_mhz = mem_mhz;
  return g;
}

TEST(PeakTest, PublishedFiguresComeOut) {
  // H100 SXM at NVIDIA's quoted 1,830 MHz boost: 989 dense BF16 TFLOPS, 3.35 TB/s.
  auto h100 = PeakOf(Gpu("9.0", 16896, 1830, 5120, 2619));
  EXPECT_EQ(h100.sms, 132);
  EXPECT_NEAR(*h100.tensor_tflops, 989, 1);
  EXPECT_NEAR(*h100.fp32_tflops, 61.8, 0.1);
  EXPECT_NEAR(*h100.memory_gbps, 3352, 1);
  // A100 SXM at 1,410 MHz: 312 TFLOPS, 19.5 FP32, 2,039 GB/s (80 GB, 1,593 MHz).
  auto a100 = PeakOf(Gpu("8.0", 6912, 1410, 5120, 1593));
  EXPECT_EQ(a100.sms, 108);
  EXPECT_NEAR(*a100.tensor_tflops, 312, 1);
  EXPECT_NEAR(*a100.fp32_tflops, 19.5, 0.1);
  EXPECT_NEAR(*a100.memory_gbps, 2039, 1);
  // RTX 4090 at 2,520 MHz: 330 TFLOPS (FP16 accumulate), 82.6 FP32, 1,008 GB/s.
  auto ada = PeakOf(Gpu("8.9", 16384, 2520, 384, 10501));
  EXPECT_NEAR(*ada.tensor_tflops, 330, 1);
  EXPECT_NEAR(*ada.fp32_tflops, 82.6, 0.1);
  EXPECT_NEAR(*ada.memory_gbps, 1008, 1);
  // V100 at 1,530 MHz: 125 TFLOPS.
  EXPECT_NEAR(*PeakOf(Gpu("7.0", 5120, 1530, 4096, 877)).tensor_tflops, 125, 1);
}

TEST(PeakTest, UnknownInputsLeaveFiguresOut) {
  DeviceSnapshot none;
  none.compute_capability = "9.0";
  auto p = PeakOf(none);
  EXPECT_FALSE(p.fp32_tflops || p.tensor_tflops || p.memory_gbps || p.sms);
  EXPECT_EQ(SpeedScore(p), std::nullopt);
  // Pascal has no tensor cores: the FP32 figure ranks it.
  auto pascal = PeakOf(Gpu("6.1", 3584, 1582, 352, 5505));
  EXPECT_FALSE(pascal.tensor_tflops);
  EXPECT_NEAR(*SpeedScore(pascal), 11.3, 0.1);
  // An architecture the table does not know: FP32 only.
  auto future = PeakOf(Gpu("13.0", 20000, 2000, 512, 2000));
  EXPECT_TRUE(future.fp32_tflops);
  EXPECT_FALSE(future.tensor_tflops);
  EXPECT_EQ(SmFiguresFor("garbage"), std::nullopt);
}

// `gpuman bench`'s FP32 figure scales the computed score by the share of the FP32 peak
// reached (docs/selection.md, "Measured figures").
TEST(PeakTest, AMeasuredFigureScalesTheScore) {
  auto ada = PeakOf(Gpu("8.9", 16384, 2520, 384, 10501));  // 82.6 FP32, 330 tensor
  EXPECT_EQ(SpeedScore(ada, std::nullopt), SpeedScore(ada));
  EXPECT_NEAR(*SpeedScore(ada, *ada.fp32_tflops / 2), *ada.tensor_tflops / 2, 1e-9);
  EXPECT_EQ(SpeedScore(ada, 0.0), SpeedScore(ada));  // not a measurement
  DeviceSnapshot unknown;
  EXPECT_EQ(SpeedScore(PeakOf(unknown), 12.5), 12.5);  // nothing computed: the measured figure
}

}  // namespace
}  // namespace gpuman::model
