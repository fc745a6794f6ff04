// Selection: which GPUs may a new job have, and which does it get.
//
// Eligibility. A GPU is judged by three kinds of test, and every failed test becomes a
// reason in its verdict, so `gpuman select --explain` can say exactly why not:
//
//   * Permanent filters, which no amount of waiting changes: the driver reported no
//     UUID (we hand out UUIDs only), the request's --gpus list, the enclosing
//     allocation (`allowed`: Slurm, a container, an outer CUDA_VISIBLE_DEVICES),
//     --exclude, --model, --min-compute-capability, and a total memory below
//     --min-free-memory. When fewer than `count` GPUs pass them the answer is kNotFound:
//     `--wait` would wait forever, so callers stop.
//   * Occupancy: a GPU is *taken* when any lease names its UUID, and *busy* when a
//     process runs on it that no lease of that GPU covers ("foreign"). Covered means
//     the process's pid is one of the pids recorded in a lease of that same GPU. We
//     cannot see descendants: a child the leaseholder forked after the lease was
//     written shows up as foreign on every GPU, which is harmless on the leased GPU
//     (it is taken anyway) and right everywhere else (the job escaped its GPUs).
//     allow_shared ignores foreign processes but never leases. A slice request
//     (`--gpu-memory`, docs/share.md) is judged by memory instead: a whole-GPU lease
//     takes the GPU, other slices take their declared memory, and foreign processes take
//     what they use; the GPU is eligible while the rest holds the slice. A whole-GPU
//     request sees a sliced GPU as taken. Slices are placed best fit (placement.cc is
//     for whole GPUs): sliced GPUs with the least room first. This is the rule that
//     fixes the pain point every peer tool has (two jobs land on one GPU): memory
//     thresholds such as task-spooler's 90 % or GPUtil's 50 % see a job that has not
//     allocated yet as free; a lease or a process does not lie.
//   * Momentary state: unhealthy and drained GPUs (an admin's drain or the daemon's
//     health watch, passed in as `drained`) are never eligible; --min-free-memory needs a
//     known memory_free_bytes at or above the bound; --max-utilization a known
//     utilization at or below it. An unknown value fails the test ("free memory
//     unknown"): a filter the user asked for is not waived because the driver was
//     silent. Occupancy and these are "now" reasons: the answer is kBusy and waiting
//     makes sense. Unhealthy counts as "now" because a reset can bring a GPU back, and
//     drained because drains are lifted (by an admin, or by the health watch's recheck).
//
// Placement of the eligible GPUs (topology first, then the least fragmentation, then
// the lowest indices) is explained in placement.cc.

#include "policy/selection.h"

#include <algorithm>
#include <functional>
#include <set>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "base/strings.h"
#include "model/peak.h"
#include "policy/byte_size.h"
#include "policy/placement.h"

namespace gpuman::policy {
namespace {

struct Reason {
  std::string text;   // the verdict's line, e.g. "utilization 97% > 50%"
  std::string label;  // how the summary groups it, e.g. "utilization above 50%"
  bool is_permanent = false;
};

struct GpuState {
  std::vector<Reason> reasons;
  bool is_free = false;    // machine-wide: healthy, allowed, not leased, no foreign process
  bool is_shared = false;  // has foreign processes that allow_shared let through
  /// For a slice request: the memory not yet declared by slices nor used outside gpuman.
  std::optional<int64_t> slice_room;

  bool is_eligible() const { return reasons.empty(); }
  bool passes_permanent() const {
    return std::none_of(reasons.begin(), reasons.end(),
                        [](const Reason& r) { return r.is_permanent; });
  }
};

struct ComputeCapability {
  int64_t major = 0;
  int64_t minor = 0;
  auto operator<=>(const ComputeCapability&) const = default;
};

std::optional<ComputeCapability> ParseComputeCapability(std::string_view text) {
  text = Trim(text);
  size_t dot = text.find('.');
  std::optional<int64_t> major = ParseInt(text.substr(0, dot));
  if (!major || *major < 0) return std::nullopt;
  if (dot == std::string_view::npos) return ComputeCapability{*major, 0};
  std::optional<int64_t> minor = ParseInt(text.substr(dot + 1));
  if (!minor || *minor < 0) return std::nullopt;
  return ComputeCapability{*major, *minor};
}

std::string Plural(int64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

Error Invalid(std::string message) {
  return MakeError(ErrorCode::kInvalidArgument, std::move(message));
}

struct ValidRequest {
  std::set<std::string> gpus;
  std::set<std::string> allowed;
  std::set<std::string> exclude;
  std::optional<ComputeCapability> min_cc;
};

Result<ValidRequest> Validate(const model::MachineSnapshot& snap, const model::GpuRequest& req) {
  bool gpus_none = req.gpus && req.gpus->empty();
  if (req.count < 0) return Invalid("count must be at least 1, got " + std::to_string(req.count));
  if (req.count == 0 && !gpus_none) {
    return Invalid("count must be at least 1 (0 only with --gpus none)");
  }
  if (req.count > 0 && gpus_none) {
    return Invalid("--gpus none selects no GPU, but count is " + std::to_string(req.count));
  }
  if (req.min_free_memory_bytes && *req.min_free_memory_bytes < 0) {
    return Invalid("minimum free memory must not be negative");
  }
  if (req.max_utilization_percent &&
      (*req.max_utilization_percent < 0 || *req.max_utilization_percent > 100)) {
    return Invalid("maximum utilization must be 0..100%, got " +
                   std::to_string(*req.max_utilization_percent));
  }
  if (req.gpu_memory_bytes && *req.gpu_memory_bytes <= 0) {
    return Invalid("a GPU memory slice must be larger than 0");
  }
  if (req.gpu_share_percent && !req.mps) return Invalid("--gpu-share needs --mps");
  if (req.gpu_share_percent && (*req.gpu_share_percent < 1 || *req.gpu_share_percent > 100)) {
    return Invalid("--gpu-share must be 1..100, got " + std::to_string(*req.gpu_share_percent));
  }
  if (req.mps && req.count != 1) {
    return Invalid("--mps takes one GPU (-n 1): an MPS client connects to one control daemon, and gpuman runs one per GPU");
  }
  ValidRequest valid;
  if (req.min_compute_capability) {
    valid.min_cc = ParseComputeCapability(*req.min_compute_capability);
    if (!valid.min_cc) {
      return Invalid("invalid compute capability \"" + *req.min_compute_capability +
                     "\": expected major.minor, e.g. 8.0");
    }
  }
  std::set<std::string> known;
  for (const auto& gpu : snap.gpus) {
    if (gpu.uuid) known.insert(*gpu.uuid);
  }
  if (req.gpus) {
    for (const auto& uuid : *req.gpus) {
      if (!known.contains(uuid)) return Invalid("unknown GPU " + uuid + " in --gpus");
      valid.gpus.insert(uuid);
    }
  }
  for (const auto& uuid : req.exclude) {
    if (!known.contains(uuid)) return Invalid("unknown GPU " + uuid + " in --exclude");
    valid.exclude.insert(uuid);
  }
  if (req.allowed) valid.allowed.insert(req.allowed->begin(), req.allowed->end());
  return valid;
}

std::string LeaseHolder(const model::Lease& lease) {
  if (!lease.user.empty()) return lease.user;
  return "uid " + std::to_string(lease.uid);
}

std::string ForeignProcessText(const std::vector<const model::GpuProcess*>& foreign) {
  constexpr size_t kShown = 3;
  std::string text = Plural(static_cast<int64_t>(foreign.size()), "foreign process",
                            "foreign processes") + ": ";
  for (size_t i = 0; i < foreign.size() && i < kShown; ++i) {
    if (i > 0) text += ", ";
    text += "pid " + std::to_string(foreign[i]->pid);
    if (foreign[i]->user) text += " (" + *foreign[i]->user + ")";
  }
  if (foreign.size() > kShown) text += ", ...";
  return text;
}

using LeasesByUuid = std::unordered_map<std::string, std::vector<const model::Lease*>>;

GpuState Judge(const model::DeviceSnapshot& gpu, const LeasesByUuid& leases,
               const model::GpuRequest& req, const ValidRequest& valid) {
  GpuState state;
  auto permanent = [&](std::string text, std::string label) {
    state.reasons.push_back({std::move(text), std::move(label), true});
  };
  auto now = [&](std::string text, std::string label) {
    state.reasons.push_back({std::move(text), std::move(label), false});
  };

  // Permanent filters.
  bool is_allowed = true;
  if (!gpu.uuid) {
    permanent("uuid unknown", "uuid unknown");
    is_allowed = false;
  } else {
    if (req.gpus && !valid.gpus.contains(*gpu.uuid)) {
      permanent("not among the requested GPUs", "not among the requested GPUs");
    }
    if (req.allowed && !valid.allowed.contains(*gpu.uuid)) {
      permanent("outside the enclosing allocation", "outside the enclosing allocation");
      is_allowed = false;
    }
    if (valid.exclude.contains(*gpu.uuid)) permanent("excluded", "excluded");
  }
  if (req.model) {
    std::string wanted = "model \"" + *req.model + "\"";
    if (!gpu.name) {
      permanent("name unknown, cannot match " + wanted, "name unknown");
    } else if (ToLower(*gpu.name).find(ToLower(*req.model)) == std::string::npos) {
      permanent("\"" + *gpu.name + "\" does not match " + wanted, "not " + wanted);
    }
  }
  if (valid.min_cc) {
    std::optional<ComputeCapability> cc;
    if (gpu.compute_capability) cc = ParseComputeCapability(*gpu.compute_capability);
    const std::string& bound = *req.min_compute_capability;
    if (!cc) {
      permanent("compute capability unknown", "compute capability unknown");
    } else if (*cc < *valid.min_cc) {
      permanent("compute capability " + *gpu.compute_capability + " < " + bound,
                "compute capability below " + bound);
    }
  }
  if (model::InMigMode(gpu)) {
    // Its MIG devices are the leasable units (docs/share.md, "MIG"), never the GPU whole.
    permanent("in MIG mode: lease its MIG devices (--mig PROFILE)", "in MIG mode");
  }
  if (req.mig_profile && gpu.name && *gpu.name != "MIG " + *req.mig_profile) {
    // A MIG unit (MigView) of another profile.
    permanent(gpu.name->substr(4) + ", not " + *req.mig_profile, "not MIG " + *req.mig_profile);
  }
  bool total_too_small = req.min_free_memory_bytes && gpu.memory_total_bytes &&
                         *gpu.memory_total_bytes < *req.min_free_memory_bytes;
  if (total_too_small) {
    std::string bound = FormatByteSize(*req.min_free_memory_bytes);
    permanent("total memory " + FormatByteSize(*gpu.memory_total_bytes) + " < " + bound,
              "total memory below " + bound);
  }

  // Occupancy and momentary state.
  if (!gpu.is_healthy) {
    std::string text = "unhealthy";
    for (size_t i = 0; i < gpu.health_problems.size(); ++i) {
      text += (i == 0 ? ": " : "; ") + gpu.health_problems[i];
    }
    now(text, "unhealthy");
  }
  bool is_drained = false;
  if (gpu.uuid) {
    if (auto it = req.drained.find(*gpu.uuid); it != req.drained.end()) {
      is_drained = true;
      std::string text = "drained (" + (it->second.empty() ? std::string("no reason given") : it->second) + ")";
      now(text, text);
    }
  }
  // Leases: a whole-GPU lease takes the GPU from everyone; slices (docs/share.md) take
  // declared memory, which other slices may share until the GPU's memory is declared.
  std::set<int64_t> covered;
  bool is_leased = false;
  int64_t declared = 0;
  int slices = 0;
  bool whole_leased = false;
  bool mps_reason = false;  // one MPS reason per GPU
  const bool wants_slice = req.gpu_memory_bytes.has_value();
  if (gpu.uuid) {
    auto it = leases.find(*gpu.uuid);
    if (it != leases.end()) {
      for (const model::Lease* lease : it->second) {
        is_leased = true;
        for (const auto& process : lease->processes) covered.insert(process.pid);
        std::string holder = LeaseHolder(*lease) + " (lease " + std::to_string(lease->id) + ")";
        // MPS (docs/share.md): one control daemon per GPU serves one Unix user at a time,
        // and its clients share the GPU with nobody else's processes.
        if (lease->mps && lease->gpu_memory_bytes) {
          const bool same_user = req.mps && req.uid && *req.uid == lease->uid;
          if (!same_user) {
            std::string text = "runs MPS for " + LeaseHolder(*lease) + "; " +
                               (req.mps ? "MPS serves one user at a time" : "only their --mps slices may share it");
            if (!mps_reason) now(text, text);
            mps_reason = true;
          }
        } else if (req.mps && lease->gpu_memory_bytes && !mps_reason) {
          std::string text = "sliced without MPS; an --mps slice shares a GPU only with MPS clients";
          now(text, text);
          mps_reason = true;
        }
        if (lease->gpu_memory_bytes) {
          declared += *lease->gpu_memory_bytes;
          ++slices;
          // A slice request judges the declared memory below; a whole one cannot share.
          if (!wants_slice) {
            std::string text = FormatByteSize(*lease->gpu_memory_bytes) + " slice leased to " + holder;
            now(text, "sliced");
          }
          continue;
        }
        whole_leased = true;
        std::string text = "leased to " + holder;
        now(text, text);
      }
    }
  }
  std::vector<const model::GpuProcess*> foreign;
  int64_t outside = 0;  // memory of processes no lease of this GPU records
  for (const auto& process : gpu.processes) {
    if (covered.contains(static_cast<int64_t>(process.pid))) continue;
    foreign.push_back(&process);
    outside += process.used_memory_bytes.value_or(0);
  }
  if (wants_slice) {
    const int64_t want = *req.gpu_memory_bytes;
    const std::string bound = FormatByteSize(want);
    if (gpu.uuid && req.not_sliceable.contains(*gpu.uuid)) {
      permanent("not for slices (" + req.not_sliceable.at(*gpu.uuid) + ")", "not for slices");
    } else if (!gpu.memory_total_bytes) {
      permanent("total memory unknown", "total memory unknown");
    } else if (*gpu.memory_total_bytes < want) {
      permanent("total memory " + FormatByteSize(*gpu.memory_total_bytes) + " < " + bound + " slice",
                "total memory below " + bound);
    } else if (!whole_leased) {
      // Outside gpuman's declarations: whatever runs there without a lease of this GPU.
      const int64_t room = std::max<int64_t>(0, *gpu.memory_total_bytes - declared - outside);
      // Reported only for GPUs this request could have: "the most free" names one of them.
      if (state.passes_permanent()) state.slice_room = room;
      if (room < want) {
        std::string text = FormatByteSize(room) + " of declared memory free < " + bound;
        if (slices > 0) text += " (" + Plural(slices, "slice", "slices") + " declare " + FormatByteSize(declared) + ")";
        if (outside > 0) text += " (" + FormatByteSize(outside) + " used outside gpuman)";
        now(text, "less than " + bound + " of declared memory free");
      }
    }
  } else if (!foreign.empty() && !req.allow_shared) {
    now(ForeignProcessText(foreign), "busy: foreign processes");
  }
  if (req.min_free_memory_bytes && !total_too_small) {
    std::string bound = FormatByteSize(*req.min_free_memory_bytes);
    if (!gpu.memory_free_bytes) {
      now("free memory unknown", "free memory unknown");
    } else if (*gpu.memory_free_bytes < *req.min_free_memory_bytes) {
      now("free memory " + FormatByteSize(*gpu.memory_free_bytes) + " < " + bound,
          "free memory below " + bound);
    }
  }
  if (req.max_utilization_percent) {
    std::string bound = std::to_string(*req.max_utilization_percent) + "%";
    if (!gpu.gpu_utilization_percent) {
      now("utilization unknown", "utilization unknown");
    } else if (*gpu.gpu_utilization_percent > *req.max_utilization_percent) {
      now("utilization " + std::to_string(*gpu.gpu_utilization_percent) + "% > " + bound,
          "utilization above " + bound);
    }
  }

  state.is_free = gpu.uuid && is_allowed && gpu.is_healthy && !is_drained && !is_leased && foreign.empty();
  state.is_shared = !foreign.empty();
  return state;
}

struct Evaluation {
  std::vector<GpuState> states;  // per position in snap.gpus
  std::vector<GpuVerdict> verdicts;
};

// A MIG request judged on MIG devices as if they were GPUs: one unit per MIG device (its
// UUID, its parent's index, health and drain, its memory and processes, "MIG <profile>" as
// its name), and the request's GPU UUIDs (exclusions, the enclosing allocation, drains)
// carried over to the parent's MIG devices.
struct MigView {
  model::MachineSnapshot snap;
  model::GpuRequest req;
  std::vector<std::string> names;  // per unit: "MIG 1 on GPU 0", as `status` lists them
};

// How a selection's messages name its units: GPUs by index ("GPU 2,3 busy"), or MIG
// devices by name ("MIG 1 on GPU 0 busy"), and what one unit is called in "need ...".
struct UnitWords {
  std::string need;                // "1 GPU", "2 MIG devices of profile 2g.20gb"
  std::vector<std::string> names;  // empty: GPUs, by index
};

Result<MigView> MakeMigView(const model::MachineSnapshot& snap, const model::GpuRequest& req) {
  const std::vector<std::string> profiles = model::MigProfiles(snap);
  bool any = false;
  for (const auto& g : snap.gpus) any = any || !g.mig_devices.empty();
  if (!any) return Invalid("--mig: this machine has no MIG devices (no GPU is in MIG mode)");
  if (req.gpu_memory_bytes) return Invalid("--mig and --gpu-memory cannot be combined: a MIG device is leased whole");
  if (req.mig_profile && std::find(profiles.begin(), profiles.end(), *req.mig_profile) == profiles.end()) {
    return Invalid("--mig: no MIG device of profile " + *req.mig_profile + " here; the profiles here: " +
                   Join(profiles, ", "));
  }
  MigView view;
  view.snap.system = snap.system;
  view.snap.taken_at_unix_ms = snap.taken_at_unix_ms;
  view.req = req;
  view.req.exclude.clear();
  view.req.drained.clear();
  if (req.allowed) view.req.allowed = std::vector<std::string>{};
  auto has = [](const std::vector<std::string>& list, const std::string& u) {
    return std::find(list.begin(), list.end(), u) != list.end();
  };
  for (const auto& g : snap.gpus) {
    for (const auto& m : g.mig_devices) {
      if (!m.uuid) continue;
      model::DeviceSnapshot unit;
      unit.index = g.index;
      unit.uuid = m.uuid;
      unit.name = "MIG " + m.profile.value_or("?");
      view.names.push_back("MIG " + std::to_string(m.index) + " on GPU " + std::to_string(g.index));
      unit.memory_total_bytes = m.memory_total_bytes;
      unit.memory_used_bytes = m.memory_used_bytes;
      if (m.memory_total_bytes) unit.memory_free_bytes = *m.memory_total_bytes - m.memory_used_bytes.value_or(0);
      unit.compute_capability = g.compute_capability;
      unit.processes = m.processes;
      unit.is_healthy = g.is_healthy;
      unit.health_problems = g.health_problems;
      const std::string parent = g.uuid.value_or("");
      if (has(req.exclude, *m.uuid) || (!parent.empty() && has(req.exclude, parent))) view.req.exclude.push_back(*m.uuid);
      if (req.allowed && (has(*req.allowed, *m.uuid) || has(*req.allowed, parent))) view.req.allowed->push_back(*m.uuid);
      if (auto d = req.drained.find(parent); d != req.drained.end()) view.req.drained[*m.uuid] = d->second;
      view.snap.gpus.push_back(std::move(unit));
    }
  }
  return view;
}

Result<Evaluation> Evaluate(const model::MachineSnapshot& snap,
                            const std::vector<model::Lease>& leases,
                            const model::GpuRequest& req) {
  if (req.gpu_memory_bytes && !snap.gpus.empty() &&
      std::all_of(snap.gpus.begin(), snap.gpus.end(), [](const model::DeviceSnapshot& g) { return model::InMigMode(g); })) {
    std::vector<std::string> profiles = model::MigProfiles(snap);
    return Invalid("--gpu-memory: every GPU here is in MIG mode; lease MIG devices instead (--mig " +
                   (profiles.empty() ? std::string("PROFILE") : Join(profiles, "|")) + ")");
  }
  Result<ValidRequest> valid = Validate(snap, req);
  if (!valid) return valid.error();
  LeasesByUuid by_uuid;
  for (const auto& lease : leases) {
    std::set<std::string> seen;  // a lease naming a GPU twice is still one lease
    for (const auto& uuid : lease.gpu_uuids) {
      if (seen.insert(uuid).second) by_uuid[uuid].push_back(&lease);
    }
  }
  Evaluation eval;
  for (const auto& gpu : snap.gpus) {
    GpuState state = Judge(gpu, by_uuid, req, *valid);
    GpuVerdict verdict{gpu.uuid.value_or(""), gpu.index, state.is_eligible(), {}, state.slice_room};
    for (const auto& reason : state.reasons) verdict.reasons.push_back(reason.text);
    eval.verdicts.push_back(std::move(verdict));
    eval.states.push_back(std::move(state));
  }
  return eval;
}

// "0,1" for two, "0-3,7" for runs of three or more (FormatCpuList would say "0-1").
std::string FormatIndexList(std::vector<int> indices) {
  std::sort(indices.begin(), indices.end());
  std::string text;
  for (size_t i = 0; i < indices.size();) {
    size_t j = i;
    while (j + 1 < indices.size() && indices[j + 1] == indices[j] + 1) ++j;
    if (!text.empty()) text += ",";
    if (j - i >= 2) {
      text += std::to_string(indices[i]) + "-" + std::to_string(indices[j]);
    } else {
      text += std::to_string(indices[i]);
      if (j > i) text += "," + std::to_string(indices[j]);
    }
    i = j + 1;
  }
  return text;
}

// "GPU 1 leased to alice (lease 3); GPU 2,3 busy: foreign processes": the first reason
// of each GPU that `include` accepts, grouped by label in order of first appearance.
// MIG devices are named one by one: "MIG 1 on GPU 0, MIG 2 on GPU 0 busy: ...".
template <typename Pred>
std::string Summarize(const model::MachineSnapshot& snap, const std::vector<GpuState>& states,
                      const UnitWords& words, Pred include) {
  constexpr size_t kMaxGroups = 6;
  std::vector<std::pair<std::string, std::vector<int>>> groups;  // label, positions
  for (size_t p = 0; p < states.size(); ++p) {
    if (!include(states[p])) continue;
    const Reason* reason = nullptr;
    for (const auto& r : states[p].reasons) {
      if (!reason || (r.is_permanent && !reason->is_permanent)) reason = &r;
    }
    if (!reason) continue;
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const auto& g) { return g.first == reason->label; });
    if (it == groups.end()) {
      groups.emplace_back(reason->label, std::vector<int>{});
      it = groups.end() - 1;
    }
    it->second.push_back(static_cast<int>(p));
  }
  std::string text;
  for (size_t i = 0; i < groups.size() && i < kMaxGroups; ++i) {
    if (i > 0) text += "; ";
    std::vector<int> indices;
    std::vector<std::string> names;
    for (int p : groups[i].second) {
      indices.push_back(snap.gpus[p].index);
      if (static_cast<size_t>(p) < words.names.size()) names.push_back(words.names[p]);
    }
    text += (words.names.empty() ? "GPU " + FormatIndexList(indices) : Join(names, ", ")) + " " + groups[i].first;
  }
  if (groups.size() > kMaxGroups) {
    text += "; " + Plural(static_cast<int64_t>(groups.size() - kMaxGroups), "more reason",
                          "more reasons");
  }
  return text;
}

Result<std::vector<GpuVerdict>> EvaluateUnits(const model::MachineSnapshot& snap,
                                              const std::vector<model::Lease>& leases,
                                              const model::GpuRequest& req) {
  Result<Evaluation> eval = Evaluate(snap, leases, req);
  if (!eval) return eval.error();
  return std::move(eval->verdicts);
}

Result<Selection> SelectUnits(const model::MachineSnapshot& snap,
                              const std::vector<model::Lease>& leases,
                              const model::GpuRequest& req, const UnitWords& words) {
  Result<Evaluation> eval = Evaluate(snap, leases, req);
  if (!eval) return eval.error();
  Selection selection;
  if (req.count == 0) {
    selection.placement = "none";
    selection.verdicts = std::move(eval->verdicts);
    return selection;
  }

  const std::vector<GpuState>& states = eval->states;
  int64_t possible = std::count_if(states.begin(), states.end(),
                                   [](const GpuState& s) { return s.passes_permanent(); });
  int64_t eligible = std::count_if(states.begin(), states.end(),
                                   [](const GpuState& s) { return s.is_eligible(); });
  std::string need = "need " + (req.gpu_memory_bytes ? FormatByteSize(*req.gpu_memory_bytes) + " on " : std::string()) +
                     (words.need.empty() ? Plural(req.count, "GPU", "GPUs") : words.need);
  if (possible < req.count) {
    std::string message = need + ", only " + std::to_string(possible) + " of " +
                          std::to_string(snap.gpus.size()) + " can ever be eligible";
    std::string why = Summarize(snap, states, words, [](const GpuState& s) {
      return !s.passes_permanent();
    });
    if (!why.empty()) message += ": " + why;
    return MakeError(ErrorCode::kNotFound, message);
  }
  if (eligible < req.count) {
    std::string message = need + ", " + std::to_string(eligible) + " eligible";
    std::string why = Summarize(snap, states, words, [](const GpuState& s) {
      return s.passes_permanent() && !s.is_eligible();
    });
    if (!why.empty()) message += ": " + why;
    return MakeError(ErrorCode::kBusy, message);
  }

  // --prefer fastest (docs/selection.md): the eligible GPUs ranked by peak throughput; only
  // those as fast as the count-th fastest stay candidates, so placement by topology still
  // chooses among equals. A GPU whose peak is unknown ranks last; one `gpuman bench`
  // measured ranks by its measured share of the peak (model::SpeedScore).
  std::vector<double> speed(states.size(), -1);
  std::vector<char> fast_enough(states.size(), 1);
  if (req.prefer_fastest) {
    std::vector<double> eligible_speeds;
    for (size_t p = 0; p < states.size(); ++p) {
      std::optional<double> measured;
      if (const auto& uuid = snap.gpus[p].uuid) {
        if (auto m = req.measured_fp32_tflops.find(*uuid); m != req.measured_fp32_tflops.end()) measured = m->second;
      }
      speed[p] = model::SpeedScore(model::PeakOf(snap.gpus[p]), measured).value_or(-1);
      if (states[p].is_eligible()) eligible_speeds.push_back(speed[p]);
    }
    std::sort(eligible_speeds.begin(), eligible_speeds.end(), std::greater<>());
    const double threshold = eligible_speeds[static_cast<size_t>(req.count) - 1];
    for (size_t p = 0; p < states.size(); ++p) fast_enough[p] = speed[p] >= threshold;
  }

  Placement placement;
  if (req.gpu_memory_bytes) {
    // Slices: best fit. GPUs already sliced first, the one with the least room that still
    // holds the slice first, so whole GPUs stay whole for whole-GPU requests.
    std::vector<int> order;
    for (size_t p = 0; p < states.size(); ++p) {
      if (states[p].is_eligible()) order.push_back(static_cast<int>(p));
    }
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      return std::make_tuple(-speed[a], states[a].is_free, states[a].slice_room.value_or(0), snap.gpus[a].index) <
             std::make_tuple(-speed[b], states[b].is_free, states[b].slice_room.value_or(0), snap.gpus[b].index);
    });
    order.resize(static_cast<size_t>(req.count));
    std::sort(order.begin(), order.end());
    placement.description = DescribePlacement(snap, order);
    placement.positions = std::move(order);
  } else {
    std::vector<PlacementGpu> gpus;
    gpus.reserve(states.size());
    for (size_t p = 0; p < states.size(); ++p) {
      const GpuState& s = states[p];
      const bool candidate = s.is_eligible() && fast_enough[p];
      gpus.push_back({candidate, s.is_free, candidate && s.is_shared});
    }
    placement = Place(snap, gpus, req.count);
  }
  std::sort(placement.positions.begin(), placement.positions.end(),
            [&](int a, int b) { return snap.gpus[a].index < snap.gpus[b].index; });
  for (int p : placement.positions) {
    selection.uuids.push_back(*snap.gpus[p].uuid);
    selection.indices.push_back(snap.gpus[p].index);
  }
  selection.placement = std::move(placement.description);
  selection.verdicts = std::move(eval->verdicts);
  return selection;
}

}  // namespace

Result<std::vector<GpuVerdict>> EvaluateGpus(const model::MachineSnapshot& snap,
                                             const std::vector<model::Lease>& leases,
                                             const model::GpuRequest& req) {
  if (!model::IsMigRequest(req)) return EvaluateUnits(snap, leases, req);
  auto view = MakeMigView(snap, req);
  if (!view) return view.error();
  return EvaluateUnits(view->snap, leases, view->req);
}

Result<Selection> Select(const model::MachineSnapshot& snap,
                         const std::vector<model::Lease>& leases,
                         const model::GpuRequest& req) {
  if (!model::IsMigRequest(req)) return SelectUnits(snap, leases, req, UnitWords{});
  auto view = MakeMigView(snap, req);
  if (!view) return view.error();
  UnitWords words{Plural(req.count, "MIG device", "MIG devices"), std::move(view->names)};
  if (req.mig_profile) words.need += " of profile " + *req.mig_profile;
  auto chosen = SelectUnits(view->snap, leases, view->req, words);
  if (!chosen) return chosen.error();
  const size_t n = chosen->uuids.size();
  chosen->placement = n == 1 ? "single MIG device"
                             : std::to_string(n) + " MIG devices (CUDA uses only the first in one process)";
  return chosen;
}

}  // namespace gpuman::policy
