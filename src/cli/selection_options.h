// The GPU selection options shared by `select`, `run` (and later `submit`), and turning them
// into a model::GpuRequest against a snapshot. Main thread only.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "model/device_snapshot.h"
#include "policy/selection.h"
#include "visibility/ids.h"

namespace gpuman::cli {

struct SelectionArgs {
  int count = 1;
  std::optional<std::string> gpus;              // indices/UUIDs, or "none"
  std::optional<std::string> min_free_memory;   // "20GiB"
  std::optional<int> max_utilization;
  std::optional<std::string> model;
  std::optional<std::string> min_compute_capability;
  std::optional<std::string> require;           // "bf16,fp8": capabilities (model/capabilities.h)
  std::vector<std::string> exclude;             // indices/UUIDs (comma lists allowed)
  bool allow_shared = false;
  std::optional<std::string> gpu_memory;        // "20GiB": a slice of each GPU (docs/share.md)
  std::optional<std::string> prefer;            // "fastest" (docs/selection.md)
  bool mps = false;                             // --mps: MPS clients of the GPU's control daemon
  std::optional<int> gpu_share;                 // --gpu-share PERCENT (with --mps)
  std::optional<std::string> mig;               // "1g.10gb": MIG devices of this profile
};

/// Resolves ids against `snap` and the enclosing allocation in `env` (Slurm, container,
/// outer CUDA_VISIBLE_DEVICES). Errors: kInvalidArgument (unknown ids, bad sizes).
Result<model::GpuRequest> BuildSelectionRequest(const SelectionArgs& args, const model::MachineSnapshot& snap,
                                                const visibility::Environment& env);

}  // namespace gpuman::cli
