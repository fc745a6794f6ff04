// NVIDIA_VISIBLE_DEVICES and Slurm GPU lists, read in the host's numbering. Inside a
// container or a device-constrained Slurm job CUDA and NVML renumber from 0; we model
// the host view throughout (see docs/visibility.md, "Host view").
#include "visibility/allocation.h"

#include <algorithm>
#include <iterator>
#include <limits>
#include <set>

#include "base/strings.h"
#include "visibility/cuda_visible_devices.h"
#include "visibility/device_order.h"

namespace gpuman::visibility {
namespace {

void AddOnce(std::vector<PhysicalIndex>& list, PhysicalIndex index) {
  if (std::find(list.begin(), list.end(), index) == list.end()) list.push_back(index);
}

std::string EntryLabel(size_t i, std::string_view text) {
  return "entry " + std::to_string(i + 1) + " \"" + std::string(text) + "\"";
}

// An NVML index written as a plain decimal.
std::optional<PhysicalIndex> ResolveIndex(std::string_view text,
                                          const std::vector<model::DeviceSnapshot>& gpus) {
  const auto n = ParseInt(text);
  if (!n || *n < 0 || *n > std::numeric_limits<int>::max()) return std::nullopt;
  const PhysicalIndex index{static_cast<int>(*n)};
  if (FindGpu(gpus, index) == nullptr) return std::nullopt;
  return index;
}

std::set<int> ToSet(const std::vector<PhysicalIndex>& list) {
  std::set<int> out;
  for (PhysicalIndex i : list) out.insert(i.value);
  return out;
}

}  // namespace

std::optional<std::string_view> GetVar(const Environment& env, const std::string& name) {
  const auto it = env.find(name);
  if (it == env.end()) return std::nullopt;
  return std::string_view(it->second);
}

ContainerDevices ParseNvidiaVisibleDevices(std::optional<std::string_view> value,
                                           const std::vector<model::DeviceSnapshot>& gpus) {
  ContainerDevices result;
  if (!value) return result;
  const std::string_view v = Trim(*value);
  if (v.empty() || v == "void") return result;
  if (v == "all") {
    result.mode = ContainerMode::kAll;
    return result;
  }
  if (v == "none") {
    result.mode = ContainerMode::kNone;
    return result;
  }
  result.mode = ContainerMode::kList;
  const std::vector<std::string> parts = Split(v, ',');
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string_view entry = Trim(parts[i]);
    if (entry.starts_with("GPU-")) {
      std::vector<PhysicalIndex> matches;
      for (const model::DeviceSnapshot& gpu : gpus) {
        if (gpu.uuid && gpu.uuid->starts_with(entry)) matches.push_back({gpu.index});
      }
      if (matches.size() == 1) {
        AddOnce(result.devices, matches[0]);
      } else {
        result.problems.push_back(EntryLabel(i, entry) + (matches.empty()
                                                              ? ": no GPU has this UUID"
                                                              : ": ambiguous UUID prefix"));
      }
    } else if (const auto index = ResolveIndex(entry, gpus)) {
      AddOnce(result.devices, *index);
    } else {
      result.problems.push_back(EntryLabel(i, entry) +
                                ": not a host GPU index or UUID known on this machine");
    }
  }
  return result;
}

std::vector<PhysicalIndex> JobLocalOrder(const std::vector<PhysicalIndex>& cuda_order,
                                         const std::optional<SlurmGpus>& slurm) {
  if (!slurm || !slurm->is_constrained) return cuda_order;
  std::vector<PhysicalIndex> out;
  for (PhysicalIndex i : cuda_order) {
    if (std::find(slurm->devices.begin(), slurm->devices.end(), i) != slurm->devices.end()) out.push_back(i);
  }
  return out;
}

std::optional<std::vector<std::string>> AllowedGpus(const Environment& env,
                                                    const std::vector<model::DeviceSnapshot>& gpus,
                                                    const SlurmNode* slurm_node) {
  std::optional<std::set<int>> allowed;
  const auto restrict_to = [&allowed](const std::set<int>& set) {
    if (!allowed) {
      allowed = set;
      return;
    }
    std::set<int> both;
    std::set_intersection(allowed->begin(), allowed->end(), set.begin(), set.end(),
                          std::inserter(both, both.begin()));
    allowed = std::move(both);
  };

  const ContainerDevices container =
      ParseNvidiaVisibleDevices(GetVar(env, "NVIDIA_VISIBLE_DEVICES"), gpus);
  if (container.mode == ContainerMode::kNone) restrict_to({});
  if (container.mode == ContainerMode::kList) restrict_to(ToSet(container.devices));

  const auto slurm = ParseSlurmGpus(env, gpus, slurm_node);
  if (slurm) restrict_to(ToSet(slurm->devices));

  const auto outer = GetVar(env, "CUDA_VISIBLE_DEVICES");
  if (outer && !(slurm && slurm->cvd_is_slurms)) {
    const DeviceOrderSetting order = ParseDeviceOrder(GetVar(env, "CUDA_DEVICE_ORDER"));
    const CudaEnumeration enumeration = EnumerateCuda(gpus, order.order);
    const CudaVisibleDevices cvd = ParseCudaVisibleDevices(*outer, gpus, JobLocalOrder(enumeration.order, slurm));
    std::set<int> set;
    for (const ResolvedDevice& d : cvd.devices) {
      if (d.index) set.insert(d.index->value);
    }
    restrict_to(set);
  }

  if (!allowed) return std::nullopt;
  std::vector<std::string> uuids;
  for (const model::DeviceSnapshot& gpu : gpus) {
    if (gpu.uuid && allowed->count(gpu.index) > 0) uuids.push_back(*gpu.uuid);
  }
  return uuids;
}

}  // namespace gpuman::visibility
