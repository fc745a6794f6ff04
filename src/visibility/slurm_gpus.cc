// Slurm GPU indices, and what they mean on this node.
//
// A Slurm GPU index (SLURM_STEP_GPUS, SLURM_JOB_GPUS, `GRES=gpu:2(IDX:3-4)`) is a position
// in slurmd's GRES list, which is gres.conf order. It is neither an NVML index nor a CUDA
// ordinal. The chain to a GPU is:
//
//   Slurm index k -> k-th GPU of gres.conf, File=/dev/nvidiaN -> device minor N ->
//   the NVML device whose nvmlDeviceGetMinorNumber is N -> its UUID.
//
// Minor numbers follow Linux device numbering, NVML numbers by PCI bus id, and the two
// need not agree (Slurm's gres docs: "nondeterministic and system dependent"). So a
// gres.conf that lists /dev/nvidia0..7 is in minor order, which may not be PCI order.
// Fallbacks, each said in `mapping_source`: gres.conf unknown -> minor = Slurm index
// (true for a gres.conf of /dev/nvidia[0-N] in order); no GPU reports a minor -> the
// NVML index is taken to be the minor.
//
// Constrained devices. With task/cgroup and ConstrainDevices=yes, Slurm numbers the job's
// GPUs from 0 in CUDA_VISIBLE_DEVICES (gres_use_local_device_index() in Slurm) while the
// SLURM_*_GPUS lists stay node indices. The rule, strongest evidence first:
//   1. the node says so (src/slurm/: the job's cgroup v1 devices.list, or slurm.conf
//      TaskPlugin=task/cgroup together with cgroup.conf ConstrainDevices=yes);
//   2. otherwise the lists: CUDA_VISIBLE_DEVICES is exactly 0..n-1 for an n-GPU Slurm list
//      that is not 0..n-1 itself. Unconstrained, Slurm writes its own indices there, so
//      this shape only arises from renumbering. When the Slurm list is 0..n-1 both readings
//      agree and the question does not matter.
// Inside a constrained job NVML may also show only the job's GPUs, renumbered from 0. The
// minor numbers still name them, so the chain above holds; when it cannot be followed and
// NVML shows exactly as many GPUs as the job holds, the allocation is what NVML shows.
#include "visibility/slurm_gpus.h"

#include <algorithm>
#include <unordered_set>

#include "base/strings.h"
#include "visibility/cuda_visible_devices.h"

namespace gpuman::visibility {
namespace {

std::optional<std::string_view> Var(const Environment& env, const char* name) {
  const auto it = env.find(name);
  if (it == env.end()) return std::nullopt;
  return std::string_view(it->second);
}

std::string EntryLabel(size_t i, std::string_view text) {
  return "entry " + std::to_string(i + 1) + " \"" + std::string(text) + "\"";
}

// "3,4" / "0-1,3" -> {3, 4} / {0, 1, 3}; unreadable entries go to `problems`.
std::vector<int> ParseIndexList(std::string_view value, std::vector<std::string>& problems) {
  std::vector<int> out;
  std::unordered_set<int> seen;  // ranges reach 4,096 entries each: no quadratic de-duplication
  const std::vector<std::string> parts = Split(Trim(value), ',');
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string_view entry = Trim(parts[i]);
    const size_t dash = entry.find('-');
    std::optional<int64_t> first = ParseInt(entry);
    std::optional<int64_t> last = first;
    if (dash != std::string_view::npos && dash > 0) {  // a range "a-b"
      first = ParseInt(entry.substr(0, dash));
      last = ParseInt(entry.substr(dash + 1));
    }
    if (!first || !last || *first < 0 || *last < *first || *last - *first > 4096 || *last > 1 << 20) {
      problems.push_back(EntryLabel(i, entry) + ": not a GPU index or range");
      continue;
    }
    for (int64_t n = *first; n <= *last; ++n) {
      if (seen.insert(static_cast<int>(n)).second) out.push_back(static_cast<int>(n));
    }
  }
  return out;
}

// CUDA_VISIBLE_DEVICES as plain integers, or nullopt when it is not a clean index list.
std::optional<std::vector<int>> CvdIntegers(std::optional<std::string_view> cvd) {
  if (!cvd || Trim(*cvd).empty()) return std::nullopt;
  std::vector<int> out;
  for (const LexedEntry& e : LexCudaVisibleDevices(*cvd)) {
    if (e.kind != EntryKind::kIndex || !e.number || !e.lexical_error.empty() || !e.note.empty() ||
        *e.number > 1 << 20) {
      return std::nullopt;
    }
    out.push_back(static_cast<int>(*e.number));
  }
  return out;
}

std::vector<int> Iota(size_t n) {
  std::vector<int> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<int>(i);
  return out;
}

std::string JoinInts(const std::vector<int>& list) {
  std::string out;
  for (int v : list) out += (out.empty() ? "" : ",") + std::to_string(v);
  return out;
}

bool AnyMinor(const std::vector<model::DeviceSnapshot>& gpus) {
  return std::any_of(gpus.begin(), gpus.end(), [](const model::DeviceSnapshot& g) { return g.minor_number.has_value(); });
}

const model::DeviceSnapshot* FindByMinor(const std::vector<model::DeviceSnapshot>& gpus, int minor) {
  if (!AnyMinor(gpus)) return FindGpu(gpus, PhysicalIndex{minor});
  for (const model::DeviceSnapshot& g : gpus) {
    if (g.minor_number == minor) return &g;
  }
  return nullptr;
}

}  // namespace

std::vector<std::optional<PhysicalIndex>> GresToNvml(const SlurmNode& node,
                                                     const std::vector<model::DeviceSnapshot>& gpus) {
  std::vector<std::optional<PhysicalIndex>> out;
  for (const GresGpu& g : node.gres) {
    const model::DeviceSnapshot* gpu = g.minor ? FindByMinor(gpus, *g.minor) : nullptr;
    out.push_back(gpu != nullptr ? std::optional<PhysicalIndex>(PhysicalIndex{gpu->index}) : std::nullopt);
  }
  return out;
}

bool GresInPciOrder(const SlurmNode& node, const std::vector<model::DeviceSnapshot>& gpus) {
  std::optional<int> last;
  for (const auto& index : GresToNvml(node, gpus)) {
    if (!index) continue;
    if (last && index->value < *last) return false;
    last = index->value;
  }
  return true;
}

std::optional<SlurmGpus> ParseSlurmGpus(const Environment& env,
                                        const std::vector<model::DeviceSnapshot>& gpus,
                                        const SlurmNode* node) {
  SlurmGpus result;
  for (const char* name : {"SLURM_STEP_GPUS", "SLURM_JOB_GPUS"}) {
    const auto value = Var(env, name);
    if (value && !Trim(*value).empty()) {
      result.variable = name;
      result.value = std::string(*value);
      break;
    }
  }
  if (result.variable.empty()) return std::nullopt;
  const std::vector<int> indices = ParseIndexList(result.value, result.problems);

  // Constrained or not (see the top of this file).
  const auto cvd = CvdIntegers(Var(env, "CUDA_VISIBLE_DEVICES"));
  const std::vector<int> local = Iota(indices.size());
  if (node != nullptr && node->devices_constrained) {
    result.is_constrained = *node->devices_constrained;
    result.constrained_reason = node->constrained_evidence;
  } else if (cvd && *cvd == local && indices != local) {
    result.is_constrained = true;
    result.constrained_reason = "CUDA_VISIBLE_DEVICES=" + JoinInts(*cvd) + " while " + result.variable + "=" +
                                result.value + ": Slurm renumbered it from 0 (ConstrainDevices)";
  } else {
    result.constrained_reason = "no sign of device confinement";
  }
  result.cvd_is_slurms = cvd && *cvd == (result.is_constrained ? local : indices) && !indices.empty();

  // Slurm index -> minor -> NVML device.
  const bool has_gres = node != nullptr && !node->gres.empty();
  result.minor_is_slurm_index = !has_gres;
  if (has_gres) {
    result.mapping_source = "gres.conf " + node->gres_path;
  } else {
    result.mapping_source = "minor number = Slurm index (" +
                            (node != nullptr && node->gres_error ? *node->gres_error : std::string("gres.conf not read")) +
                            ")";
  }
  if (!AnyMinor(gpus)) result.mapping_source += "; no GPU reports a minor number, NVML index taken as minor";
  std::vector<size_t> unmapped;
  for (size_t i = 0; i < indices.size(); ++i) {
    SlurmGpuMapping m;
    m.slurm_index = indices[i];
    if (has_gres) {
      if (static_cast<size_t>(indices[i]) < node->gres.size()) {
        m.file = node->gres[static_cast<size_t>(indices[i])].file;
        m.minor = node->gres[static_cast<size_t>(indices[i])].minor;
      }
    } else {
      m.minor = indices[i];
    }
    const model::DeviceSnapshot* gpu = m.minor ? FindByMinor(gpus, *m.minor) : nullptr;
    if (gpu != nullptr) {
      m.index = PhysicalIndex{gpu->index};
      m.uuid = gpu->uuid;
      if (std::find(result.devices.begin(), result.devices.end(), *m.index) == result.devices.end()) {
        result.devices.push_back(*m.index);
      }
    } else {
      unmapped.push_back(i);
    }
    result.mapping.push_back(std::move(m));
  }

  // Constrained, and NVML shows just the job's GPUs (renumbered): the allocation is them.
  if (!unmapped.empty() && result.is_constrained && !gpus.empty() && gpus.size() == indices.size()) {
    result.nvml_shows_only_job = true;
    result.devices.clear();
    for (const model::DeviceSnapshot& g : gpus) result.devices.push_back(PhysicalIndex{g.index});
    result.mapping_source += "; NVML shows exactly the job's " + std::to_string(gpus.size()) +
                             " GPU(s), taken as the allocation";
    return result;
  }
  for (size_t i : unmapped) {
    const SlurmGpuMapping& m = result.mapping[i];
    std::string why;
    if (has_gres && !m.file) {
      why = "gres.conf lists only " + std::to_string(node->gres.size()) + " GPU(s)";
    } else if (!m.minor) {
      why = "cannot tell the minor number of " + m.file.value_or("its device");
    } else if (!AnyMinor(gpus)) {
      why = "no GPU " + std::to_string(*m.minor);
    } else {
      why = "no GPU has minor number " + std::to_string(*m.minor) + (m.file ? " (" + *m.file + ")" : "");
    }
    result.problems.push_back("Slurm GPU " + std::to_string(m.slurm_index) + ": " + why);
  }
  return result;
}

}  // namespace gpuman::visibility
