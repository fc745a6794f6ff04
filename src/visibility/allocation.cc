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

std::vector<AllocationLimit> AllocationLimits(const Environment& env,
                                              const std::vector<model::DeviceSnapshot>& gpus,
                                              const SlurmNode* slurm_node) {
  std::vector<AllocationLimit> limits;
  const auto sorted = [](std::vector<PhysicalIndex> list) {
    std::sort(list.begin(), list.end(), [](PhysicalIndex a, PhysicalIndex b) { return a.value < b.value; });
    return list;
  };

  const auto nvd = GetVar(env, "NVIDIA_VISIBLE_DEVICES");
  const ContainerDevices container = ParseNvidiaVisibleDevices(nvd, gpus);
  if (container.mode == ContainerMode::kNone || container.mode == ContainerMode::kList) {
    limits.push_back({"NVIDIA_VISIBLE_DEVICES", std::string(*nvd), sorted(container.devices), container.problems});
  }

  const auto slurm = ParseSlurmGpus(env, gpus, slurm_node);
  if (slurm) limits.push_back({slurm->variable, slurm->value, sorted(slurm->devices), slurm->problems});

  const auto outer = GetVar(env, "CUDA_VISIBLE_DEVICES");
  if (outer && !(slurm && slurm->cvd_is_slurms)) {
    const DeviceOrderSetting order = ParseDeviceOrder(GetVar(env, "CUDA_DEVICE_ORDER"));
    const CudaEnumeration enumeration = EnumerateCuda(gpus, order.order);
    const CudaVisibleDevices cvd = ParseCudaVisibleDevices(*outer, gpus, JobLocalOrder(enumeration.order, slurm));
    AllocationLimit limit{"CUDA_VISIBLE_DEVICES", std::string(*outer), {}, {}};
    for (const ResolvedDevice& d : cvd.devices) {
      if (d.index) AddOnce(limit.allows, *d.index);
    }
    limit.allows = sorted(std::move(limit.allows));
    for (const EntryDiagnostic& e : cvd.entries) {
      if (e.outcome == EntryOutcome::kVisible) continue;
      std::string text = EntryLabel(static_cast<size_t>(e.position), e.text) + ": " + EntryOutcomeName(e.outcome);
      if (!e.reason.empty()) text += " (" + e.reason + ")";
      limit.problems.push_back(std::move(text));
    }
    limits.push_back(std::move(limit));
  }
  return limits;
}

std::optional<std::vector<std::string>> AllowedGpus(const Environment& env,
                                                    const std::vector<model::DeviceSnapshot>& gpus,
                                                    const SlurmNode* slurm_node) {
  const std::vector<AllocationLimit> limits = AllocationLimits(env, gpus, slurm_node);
  if (limits.empty()) return std::nullopt;
  std::set<int> allowed = ToSet(limits.front().allows);
  for (size_t i = 1; i < limits.size(); ++i) {
    const std::set<int> set = ToSet(limits[i].allows);
    std::set<int> both;
    std::set_intersection(allowed.begin(), allowed.end(), set.begin(), set.end(), std::inserter(both, both.begin()));
    allowed = std::move(both);
  }
  std::vector<std::string> uuids;
  for (const model::DeviceSnapshot& gpu : gpus) {
    if (gpu.uuid && allowed.count(gpu.index) > 0) uuids.push_back(*gpu.uuid);
  }
  return uuids;
}

std::string DescribeAllocationLimits(const Environment& env, const std::vector<model::DeviceSnapshot>& gpus,
                                     const SlurmNode* slurm_node) {
  const auto lease = GetVar(env, "GPUMAN_LEASE_ID");
  const std::string lease_id = lease ? std::string(Trim(*lease)) : "";
  std::vector<AllocationLimit> limits = AllocationLimits(env, gpus, slurm_node);
  std::erase_if(limits, [&](const AllocationLimit& l) { return l.allows.size() >= gpus.size(); });  // leave nothing out
  // `gpuman select --format env` and a lease's child get both CUDA_VISIBLE_DEVICES and
  // NVIDIA_VISIBLE_DEVICES with the same value: one clause for the two.
  const auto find = [&](std::string_view name) {
    return std::find_if(limits.begin(), limits.end(), [&](const AllocationLimit& l) { return l.variable == name; });
  };
  bool pair = false;
  if (const auto nvd = find("NVIDIA_VISIBLE_DEVICES"), cvd = find("CUDA_VISIBLE_DEVICES");
      nvd != limits.end() && cvd != limits.end() && Trim(nvd->value) == Trim(cvd->value)) {
    pair = true;
    limits.erase(nvd);
  }
  std::string out;
  for (const AllocationLimit& limit : limits) {
    const bool cvd = limit.variable == "CUDA_VISIBLE_DEVICES";
    const bool gpumans = cvd || (limit.variable == "NVIDIA_VISIBLE_DEVICES" && !lease_id.empty());
    const bool both = cvd && pair;
    std::vector<int> allows;
    for (PhysicalIndex i : limit.allows) allows.push_back(i.value);
    std::string text = (both ? "CUDA_VISIBLE_DEVICES and NVIDIA_VISIBLE_DEVICES" : limit.variable) + "=\"" +
                       EscapeControl(limit.value) + "\"";
    if (gpumans && !lease_id.empty()) {
      text += " of gpuman lease " + EscapeControl(lease_id) + " (GPUMAN_LEASE_ID)";
    } else if (cvd) {
      text += both ? " in this shell (as `gpuman select --format env` writes them; not set by a gpuman lease or Slurm)"
                   : " in this shell (not set by a gpuman lease or Slurm)";
    } else if (limit.variable == "NVIDIA_VISIBLE_DEVICES") {
      text += " (a container's device list)";
    } else {
      text += " (the Slurm job's GPUs)";
    }
    const std::string verb = both ? " confine" : " confines";
    text += allows.empty() ? (both ? " let no GPU through" : " lets no GPU through")
                           : verb + " gpuman to GPU " + FormatIndexList(allows);
    for (const std::string& problem : limit.problems) text += "; its " + EscapeControl(problem);
    if (gpumans && !lease_id.empty()) {
      text += ": a nested run or select stays inside the lease";
    } else if (cvd) {
      text += both ? ": if they are left over from an earlier job or shell, clear them with "
                     "`unset CUDA_VISIBLE_DEVICES NVIDIA_VISIBLE_DEVICES`"
                   : ": if it is left over from an earlier job or shell, clear it with `unset CUDA_VISIBLE_DEVICES`";
    }
    out += (out.empty() ? "" : "; ") + text;
  }
  return out;
}

}  // namespace gpuman::visibility
