// Peak figures of a GPU from what NVML says of it (issue 24, docs/selection.md "The fastest
// GPU"): the documented formula behind `--prefer fastest`, `status --json`'s "peak" and
// `status --long`. Pure; any thread.
//
//   FP32 TFLOPS   = CUDA cores x 2 (a fused multiply-add) x max SM clock
//   tensor TFLOPS = SMs x dense FP16/BF16 tensor FLOPs per SM per clock (by architecture)
//                   x max SM clock, SMs = CUDA cores / FP32 cores per SM (by architecture)
//   memory GB/s   = bus width / 8 x max memory clock x 2 (data rate NVML's clock reports)
//
// The per-architecture figures are NVIDIA's whitepaper numbers for the data-centre part of
// each compute capability; GeForce cards reach half the tensor figure with FP32
// accumulation. A peak is what the silicon can do, not what a job will see: it ranks GPUs
// of different generations, which is what `--prefer fastest` asks.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "model/device_snapshot.h"

namespace gpuman::model {

struct PeakFigures {
  std::optional<double> fp32_tflops;
  std::optional<double> tensor_tflops;  // dense FP16/BF16
  std::optional<double> memory_gbps;
  std::optional<int64_t> sms;           // streaming multiprocessors
};

/// FP32 cores and dense FP16/BF16 tensor FLOPs per clock of one SM for a compute
/// capability ("9.0"); nullopt for one this table does not know.
struct SmFigures {
  int fp32_cores = 0;
  int tensor_flops_per_clock = 0;  // 0: no tensor cores (before 7.0)
};
std::optional<SmFigures> SmFiguresFor(const std::string& compute_capability);

/// What can be computed from `gpu`'s compute capability, CUDA cores, bus width and
/// maximum clocks; each figure absent when one of its inputs is.
PeakFigures PeakOf(const DeviceSnapshot& gpu);

/// The figure `--prefer fastest` ranks by: the tensor peak where known, else the FP32
/// peak, else nullopt (such a GPU ranks last).
std::optional<double> SpeedScore(const PeakFigures& peak);

/// The same with a figure `gpuman bench` measured on the GPU (FP32 TFLOPS): the computed
/// score scaled by the share of its FP32 peak the GPU reached (measured / computed FP32),
/// so a GPU held back (power cap, clocks, cooling) ranks as it runs; the measured figure
/// itself when the computed FP32 peak is unknown; SpeedScore(peak) when none was measured.
std::optional<double> SpeedScore(const PeakFigures& peak, std::optional<double> measured_fp32_tflops);

}  // namespace gpuman::model
