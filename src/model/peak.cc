#include "model/peak.h"

#include <charconv>

namespace gpuman::model {

std::optional<SmFigures> SmFiguresFor(const std::string& compute_capability) {
  const size_t dot = compute_capability.find('.');
  if (dot == std::string::npos) return std::nullopt;
  int major = 0, minor = 0;
  const char* s = compute_capability.data();
  if (std::from_chars(s, s + dot, major).ec != std::errc() ||
      std::from_chars(s + dot + 1, s + compute_capability.size(), minor).ec != std::errc()) {
    return std::nullopt;
  }
  // FP32 cores per SM; dense FP16/BF16 tensor FLOPs per SM per clock.
  switch (major) {
    case 6:  // Pascal: P100 (6.0) 64 cores, the others 128; no tensor cores
      return SmFigures{minor == 0 ? 64 : 128, 0};
    case 7:  // Volta V100 (7.0), Turing T4/RTX 20 (7.5): 64 cores, 8 tensor cores of 64 FMA
      return SmFigures{64, 1024};
    case 8:
      if (minor == 0) return SmFigures{64, 2048};  // A100, A30: third-generation tensor cores
      return SmFigures{128, 1024};                 // A10/A40/RTX 30 (8.6), L4/L40/RTX 40 (8.9)
    case 9:
      return SmFigures{128, 4096};  // H100, H200
    case 10:
      return SmFigures{128, 8192};  // B200, B300
    case 12:
      return SmFigures{128, 1024};  // RTX 50, RTX PRO Blackwell
    default:
      return std::nullopt;
  }
}

PeakFigures PeakOf(const DeviceSnapshot& gpu) {
  PeakFigures peak;
  SmFigures sm;  // zeros when the architecture is unknown
  if (gpu.compute_capability) {
    if (auto known = SmFiguresFor(*gpu.compute_capability)) sm = *known;
  }
  if (gpu.cuda_cores && gpu.clocks.sm_max_mhz) {
    const double ghz = static_cast<double>(*gpu.clocks.sm_max_mhz) / 1000.0;
    peak.fp32_tflops = static_cast<double>(*gpu.cuda_cores) * 2 * ghz / 1000.0;
    if (sm.fp32_cores > 0) {
      peak.sms = *gpu.cuda_cores / sm.fp32_cores;
      if (sm.tensor_flops_per_clock > 0) {
        peak.tensor_tflops = static_cast<double>(*peak.sms) * sm.tensor_flops_per_clock * ghz / 1000.0;
      }
    }
  }
  if (gpu.memory_bus_width_bits && gpu.clocks.memory_max_mhz) {
    peak.memory_gbps =
        static_cast<double>(*gpu.memory_bus_width_bits) / 8 * static_cast<double>(*gpu.clocks.memory_max_mhz) * 2 / 1000.0;
  }
  return peak;
}

std::optional<double> SpeedScore(const PeakFigures& peak) {
  if (peak.tensor_tflops) return peak.tensor_tflops;
  return peak.fp32_tflops;
}

std::optional<double> SpeedScore(const PeakFigures& peak, std::optional<double> measured_fp32_tflops) {
  std::optional<double> computed = SpeedScore(peak);
  if (!measured_fp32_tflops || *measured_fp32_tflops <= 0) return computed;
  if (!computed || !peak.fp32_tflops || *peak.fp32_tflops <= 0) return measured_fp32_tflops;
  return *computed * *measured_fp32_tflops / *peak.fp32_tflops;
}

}  // namespace gpuman::model
