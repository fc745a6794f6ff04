// CUDA_DEVICE_ORDER and the order in which CUDA enumerates GPUs. Pure functions over a
// snapshot list; the caller passes the variable's value in. Thread-safe.
// See docs/visibility.md and shared/reference/cuda-visible-devices.md section 2.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/device_snapshot.h"
#include "visibility/ids.h"

namespace gpuman::visibility {

enum class DeviceOrder { kFastestFirst, kPciBusId };

/// "FASTEST_FIRST" or "PCI_BUS_ID", the spelling CUDA reads.
const char* DeviceOrderName(DeviceOrder order);

struct DeviceOrderSetting {
  DeviceOrder order = DeviceOrder::kFastestFirst;
  bool is_set = false;         // the variable exists (possibly empty)
  bool is_recognized = true;   // false: set to something CUDA does not know (treated as default)
};

/// Reads CUDA_DEVICE_ORDER's value: exactly "PCI_BUS_ID" or "FASTEST_FIRST"; unset, empty
/// or anything else means FASTEST_FIRST (the latter with is_recognized == false).
DeviceOrderSetting ParseDeviceOrder(std::optional<std::string_view> value);

/// GPUs in CUDA's enumeration order: entry k is the GPU CUDA calls device k when nothing
/// is hidden. order_is_estimate is true when CUDA's undocumented FASTEST_FIRST heuristic
/// had to be guessed, i.e. under FASTEST_FIRST on a machine whose GPUs are not all the
/// same model (see EstimateFastestFirst).
struct CudaEnumeration {
  std::vector<PhysicalIndex> order;
  bool order_is_estimate = false;
};

CudaEnumeration EnumerateCuda(const std::vector<model::DeviceSnapshot>& gpus, DeviceOrder order);

/// Ascending PCI bus id (NVML form, compared case-insensitively); GPUs without a bus id
/// come last, by NVML index.
std::vector<PhysicalIndex> PciBusOrder(const std::vector<model::DeviceSnapshot>& gpus);

/// Our estimate of FASTEST_FIRST: higher compute capability first, then more total
/// memory, then PCI bus order. CUDA's real heuristic is undocumented (it is believed to
/// weigh multiprocessor count and clocks, which snapshots do not carry).
std::vector<PhysicalIndex> EstimateFastestFirst(const std::vector<model::DeviceSnapshot>& gpus);

/// True when every GPU reports the same, known name (0 or 1 GPU: true). On such a machine
/// FASTEST_FIRST and PCI_BUS_ID give the same order.
bool IsHomogeneous(const std::vector<model::DeviceSnapshot>& gpus);

}  // namespace gpuman::visibility
