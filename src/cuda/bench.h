// Measuring a GPU through the CUDA driver API (`gpuman bench`, docs/selection.md "The
// fastest GPU"): FP32 throughput with an FMA loop, device memory bandwidth with a copy
// kernel (cuda/kernels.h), each timed with CUDA events, calibrated to run about
// kTargetMs and taken as the best of three launches. Runs on whatever devices CUDA sees:
// the caller holds a lease on them and narrows CUDA_VISIBLE_DEVICES before Init.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "cuda/library.h"

namespace gpuman::cuda {

struct CudaDevice {
  int ordinal = 0;
  std::string uuid;  // NVML's spelling ("GPU-…"; FormatGpuUuid)
  std::string name;
};

struct Measurement {
  double fp32_tflops = 0;
  double memory_gbps = 0;  // bytes read + written per second, 1e9
};

/// The devices CUDA sees (after Init). Errors: kUnavailable with CUDA's text.
Result<std::vector<CudaDevice>> ListDevices(const CudaLibrary& lib);

/// CUDA's driver version as "12.4" (cuDriverGetVersion).
std::optional<std::string> CudaDriverVersion(const CudaLibrary& lib);

/// Measures device `ordinal` in its primary context. Errors: kUnavailable naming the CUDA
/// call that failed and CUDA's text.
Result<Measurement> MeasureDevice(const CudaLibrary& lib, int ordinal);

}  // namespace gpuman::cuda
