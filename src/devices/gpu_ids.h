// Resolving user-given GPU lists ("0,2", "GPU-3f2a9c1d", full UUIDs) against a snapshot.
// Pure. The visibility layer (CUDA_VISIBLE_DEVICES semantics) is separate; this is the
// strict form used by `--gpus` options, where a typo must be an error, not a truncation.
#pragma once

#include <string_view>
#include <vector>

#include "base/result.h"
#include "model/device_snapshot.h"

namespace gpuman::devices {

/// Returns positions into `gpus` for each comma-separated id: an NVML index, a full UUID,
/// or a unique UUID prefix of at least 4 hex digits after "GPU-" (case-insensitive).
/// Duplicates are removed, order of first mention kept.
/// Errors: kInvalidArgument for an empty list or item, an unknown index or UUID, or an
/// ambiguous prefix; the message names the item and what exists.
Result<std::vector<size_t>> ResolveGpuIds(std::string_view list,
                                          const std::vector<model::DeviceSnapshot>& gpus);

}  // namespace gpuman::devices
