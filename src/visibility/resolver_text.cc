// Wording helpers for the explain report; see resolver_text.h.
#include "visibility/resolver_text.h"

namespace gpuman::visibility::detail {

std::string GpuLabel(const std::vector<model::DeviceSnapshot>& gpus, PhysicalIndex index) {
  std::string label = "GPU " + std::to_string(index.value);
  const model::DeviceSnapshot* gpu = FindGpu(gpus, index);
  if (gpu != nullptr && gpu->name) label += " (" + *gpu->name + ")";
  return label;
}

std::string GpuIdLabel(const model::DeviceSnapshot& gpu) {
  std::string label = "GPU " + std::to_string(gpu.index);
  if (gpu.uuid) {
    constexpr size_t kShown = 12;  // "GPU-" + 8 hex digits
    label += " (" + (gpu.uuid->size() > kShown ? gpu.uuid->substr(0, kShown) + "…" : *gpu.uuid) + ")";
  }
  return label;
}

std::string UserLabel(const std::optional<std::string>& name, uint32_t uid) {
  if (!name || name->empty()) return "uid " + std::to_string(uid);
  return *name + " (uid " + std::to_string(uid) + ")";
}

std::string JoinIndices(const std::vector<PhysicalIndex>& indices) {
  if (indices.empty()) return "none";
  std::string out;
  for (PhysicalIndex i : indices) out += (out.empty() ? "" : ", ") + std::to_string(i.value);
  return out;
}

std::string OrderEffect(const DeviceOrderSetting& setting, const CudaEnumeration& enumeration,
                        const std::vector<model::DeviceSnapshot>& gpus) {
  if (setting.order == DeviceOrder::kPciBusId) {
    return "PCI_BUS_ID: CUDA numbers GPUs in PCI bus order, as nvidia-smi does";
  }
  std::string effect = !setting.is_set ? "unset: FASTEST_FIRST (the default)"
                       : setting.is_recognized ? "FASTEST_FIRST"
                                               : "not a known value: FASTEST_FIRST applies";
  if (gpus.empty()) return effect;
  if (!enumeration.order_is_estimate) {
    return effect + "; the GPUs are all the same model, so this is PCI bus order";
  }
  effect += "; GPUs differ, estimated order:";
  for (size_t k = 0; k < enumeration.order.size(); ++k) {
    effect += (k == 0 ? " cuda:" : ", cuda:") + std::to_string(k) + "=GPU " +
              std::to_string(enumeration.order[k].value);
  }
  return effect;
}

}  // namespace gpuman::visibility::detail
