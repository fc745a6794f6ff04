// CUDA_DEVICE_ORDER parsing and the enumeration-order estimate. The reasoning behind the
// estimate is in cuda_visible_devices.cc's essay ("Ordering").
#include "visibility/device_order.h"

#include <algorithm>
#include <tuple>

#include "base/strings.h"

namespace gpuman::visibility {
namespace {

// "8.6" -> (8, 6); unknown or malformed -> (-1, -1) so it sorts last under "higher first".
std::pair<int, int> ComputeCapability(const std::optional<std::string>& cc) {
  if (!cc) return {-1, -1};
  const size_t dot = cc->find('.');
  if (dot == std::string::npos) {
    const auto major = ParseInt(*cc);
    return major ? std::pair<int, int>{static_cast<int>(*major), 0} : std::pair<int, int>{-1, -1};
  }
  const auto major = ParseInt(std::string_view(*cc).substr(0, dot));
  const auto minor = ParseInt(std::string_view(*cc).substr(dot + 1));
  if (!major || !minor) return {-1, -1};
  return {static_cast<int>(*major), static_cast<int>(*minor)};
}

// Sort key for PCI order: GPUs with a bus id first, by lower-cased id, then NVML index.
std::tuple<bool, std::string, int> PciKey(const model::DeviceSnapshot& gpu) {
  return {!gpu.pci_bus_id.has_value(), gpu.pci_bus_id ? ToLower(*gpu.pci_bus_id) : "",
          gpu.index};
}

}  // namespace

const model::DeviceSnapshot* FindGpu(const std::vector<model::DeviceSnapshot>& gpus,
                                     PhysicalIndex index) {
  for (const model::DeviceSnapshot& gpu : gpus) {
    if (gpu.index == index.value) return &gpu;
  }
  return nullptr;
}

const char* DeviceOrderName(DeviceOrder order) {
  return order == DeviceOrder::kPciBusId ? "PCI_BUS_ID" : "FASTEST_FIRST";
}

DeviceOrderSetting ParseDeviceOrder(std::optional<std::string_view> value) {
  DeviceOrderSetting setting;
  if (!value) return setting;
  setting.is_set = true;
  if (*value == "PCI_BUS_ID") {
    setting.order = DeviceOrder::kPciBusId;
  } else if (*value != "FASTEST_FIRST" && !value->empty()) {
    setting.is_recognized = false;
  }
  return setting;
}

std::vector<PhysicalIndex> PciBusOrder(const std::vector<model::DeviceSnapshot>& gpus) {
  std::vector<const model::DeviceSnapshot*> sorted;
  for (const model::DeviceSnapshot& gpu : gpus) sorted.push_back(&gpu);
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto* a, const auto* b) { return PciKey(*a) < PciKey(*b); });
  std::vector<PhysicalIndex> order;
  for (const auto* gpu : sorted) order.push_back(PhysicalIndex{gpu->index});
  return order;
}

std::vector<PhysicalIndex> EstimateFastestFirst(const std::vector<model::DeviceSnapshot>& gpus) {
  std::vector<const model::DeviceSnapshot*> sorted;
  for (const model::DeviceSnapshot& gpu : gpus) sorted.push_back(&gpu);
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto* a, const auto* b) {
    const auto cc_a = ComputeCapability(a->compute_capability);
    const auto cc_b = ComputeCapability(b->compute_capability);
    if (cc_a != cc_b) return cc_a > cc_b;
    const int64_t mem_a = a->memory_total_bytes.value_or(-1);
    const int64_t mem_b = b->memory_total_bytes.value_or(-1);
    if (mem_a != mem_b) return mem_a > mem_b;
    return PciKey(*a) < PciKey(*b);
  });
  std::vector<PhysicalIndex> order;
  for (const auto* gpu : sorted) order.push_back(PhysicalIndex{gpu->index});
  return order;
}

bool IsHomogeneous(const std::vector<model::DeviceSnapshot>& gpus) {
  if (gpus.size() <= 1) return true;
  for (const model::DeviceSnapshot& gpu : gpus) {
    if (!gpu.name || gpu.name != gpus.front().name) return false;
  }
  return true;
}

CudaEnumeration EnumerateCuda(const std::vector<model::DeviceSnapshot>& gpus, DeviceOrder order) {
  CudaEnumeration result;
  if (order == DeviceOrder::kPciBusId || IsHomogeneous(gpus)) {
    // Identical models: whatever FASTEST_FIRST weighs ties, and ties keep bus order.
    result.order = PciBusOrder(gpus);
    return result;
  }
  result.order = EstimateFastestFirst(gpus);
  result.order_is_estimate = true;
  return result;
}

}  // namespace gpuman::visibility
