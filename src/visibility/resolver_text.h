// Internal to the visibility layer: the wording shared by Resolve() and
// ExplainWithoutDriver() ("GPU 1 (NVIDIA GeForce RTX 4090)", index lists, the
// CUDA_DEVICE_ORDER effect line). Not for use outside src/visibility/. Pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/device_snapshot.h"
#include "visibility/device_order.h"
#include "visibility/ids.h"

namespace gpuman::visibility::detail {

/// "GPU 1 (NVIDIA GeForce RTX 4090)", or "GPU 1" when the name is unknown.
std::string GpuLabel(const std::vector<model::DeviceSnapshot>& gpus, PhysicalIndex index);

/// "GPU 1 (GPU-8932f9aa…)": index and the start of the UUID, for warnings about who else
/// uses a GPU (the model name does not tell two A100s apart). "GPU 1" without a UUID.
std::string GpuIdLabel(const model::DeviceSnapshot& gpu);

/// "alice (uid 1001)", or "uid 1001" when the name is unknown or empty.
std::string UserLabel(const std::optional<std::string>& name, uint32_t uid);

/// "0, 2, 3"; "none" for an empty list.
std::string JoinIndices(const std::vector<PhysicalIndex>& indices);

/// The effect line of the CUDA_DEVICE_ORDER layer. `gpus` may be empty (no driver).
std::string OrderEffect(const DeviceOrderSetting& setting, const CudaEnumeration& enumeration,
                        const std::vector<model::DeviceSnapshot>& gpus);

}  // namespace gpuman::visibility::detail
