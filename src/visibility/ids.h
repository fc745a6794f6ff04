// Strong ids used across the visibility layer, and the environment it reads.
// PhysicalIndex is NVML's enumeration index (DeviceSnapshot::index, PCI order on Linux);
// VisibleOrdinal is a CUDA device ordinal ("cuda:N") inside one process. They are
// different numberings and are never mixed as bare ints. Plain values; thread-safe.
#pragma once

#include <compare>
#include <map>
#include <string>
#include <vector>

#include "model/device_snapshot.h"

namespace gpuman::visibility {

/// NVML index of a GPU: what nvidia-smi prints, host view.
struct PhysicalIndex {
  int value = 0;
  auto operator<=>(const PhysicalIndex&) const = default;
};

/// CUDA ordinal of a device as seen by one process (after CUDA_VISIBLE_DEVICES).
struct VisibleOrdinal {
  int value = 0;
  auto operator<=>(const VisibleOrdinal&) const = default;
};

/// The process environment as the CLI captured it (name -> value). A variable that
/// is absent is unset; one mapped to "" is set to the empty string. This layer never
/// calls getenv.
using Environment = std::map<std::string, std::string>;

/// The snapshot with NVML index `index`, or nullptr when `gpus` has none.
const model::DeviceSnapshot* FindGpu(const std::vector<model::DeviceSnapshot>& gpus,
                                     PhysicalIndex index);

}  // namespace gpuman::visibility
