#include "cli/selection_options.h"


#include "base/strings.h"
#include "cli/slurm_node.h"
#include "devices/gpu_ids.h"
#include "model/capabilities.h"
#include "policy/byte_size.h"
#include "visibility/allocation.h"

namespace gpuman::cli {

namespace {

Result<std::vector<std::string>> ToUuids(const std::string& list, const model::MachineSnapshot& snap) {
  auto picked = devices::ResolveGpuIds(list, snap.gpus);
  if (!picked) return picked.error();
  std::vector<std::string> uuids;
  for (size_t i : *picked) {
    if (!snap.gpus[i].uuid) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "GPU " + std::to_string(snap.gpus[i].index) + " has no known UUID (is it lost?)");
    }
    uuids.push_back(*snap.gpus[i].uuid);
  }
  return uuids;
}

// Whether compute capability `a` is above `b` ("9.0" > "8.9"); an unreadable `b` is not kept.
bool HigherComputeCapability(const std::string& a, const std::string& b) {
  auto parse = [](const std::string& s) -> std::optional<std::pair<int64_t, int64_t>> {
    const size_t dot = s.find('.');
    if (dot == std::string::npos) return std::nullopt;
    auto major = ParseInt(s.substr(0, dot));
    auto minor = ParseInt(s.substr(dot + 1));
    if (!major || !minor) return std::nullopt;
    return std::pair{*major, *minor};
  };
  auto pa = parse(a), pb = parse(b);
  return !pb || (pa && *pa > *pb);
}

}  // namespace

Result<model::GpuRequest> BuildSelectionRequest(const SelectionArgs& args, const model::MachineSnapshot& snap,
                                                const visibility::Environment& env) {
  model::GpuRequest req;
  req.count = args.count;
  if (args.gpus) {
    if (ToLower(Trim(*args.gpus)) == "none") {
      req.gpus = std::vector<std::string>{};
    } else if (args.gpus->find("MIG-") != std::string::npos) {
      // MIG devices by UUID (docs/share.md, "MIG"); never mixed with whole GPUs.
      std::vector<std::string> uuids;
      for (std::string_view item : Split(*args.gpus, ',')) {
        const std::string uuid(Trim(item));
        if (uuid.empty()) continue;
        if (!uuid.starts_with("MIG-")) {
          return MakeError(ErrorCode::kInvalidArgument,
                           "--gpus: MIG devices and whole GPUs cannot be mixed (\"" + uuid + "\" is not a MIG UUID)");
        }
        if (!model::FindMigDevice(snap, uuid)) {
          return MakeError(ErrorCode::kInvalidArgument, "--gpus: no MIG device " + uuid + " on this machine");
        }
        uuids.push_back(uuid);
      }
      req.gpus = std::move(uuids);
    } else {
      auto uuids = ToUuids(*args.gpus, snap);
      if (!uuids) return uuids.error().WithContext("--gpus");
      req.gpus = *uuids;
    }
  }
  if (args.min_free_memory) {
    auto bytes = policy::ParseByteSize(*args.min_free_memory);
    if (!bytes) return bytes.error().WithContext("--min-free-memory");
    req.min_free_memory_bytes = *bytes;
  }
  if (args.gpu_memory) {
    auto bytes = policy::ParseByteSize(*args.gpu_memory);
    if (!bytes) return bytes.error().WithContext("--gpu-memory");
    if (*bytes <= 0) return MakeError(ErrorCode::kInvalidArgument, "--gpu-memory must be more than 0");
    req.gpu_memory_bytes = *bytes;
  }
  if (args.gpu_share && !args.mps) return MakeError(ErrorCode::kInvalidArgument, "--gpu-share needs --mps");
  if (args.gpu_share && (*args.gpu_share < 1 || *args.gpu_share > 100)) {
    return MakeError(ErrorCode::kInvalidArgument, "--gpu-share must be a percent from 1 to 100, got " + std::to_string(*args.gpu_share));
  }
  req.mps = args.mps;
  req.gpu_share_percent = args.gpu_share;
  if (args.mig) req.mig_profile = std::string(Trim(*args.mig));
  req.max_utilization_percent = args.max_utilization;
  req.model = args.model;
  req.min_compute_capability = args.min_compute_capability;
  if (args.require) {
    // Each capability is "compute capability at least X" (model/capabilities.h): the
    // request carries the highest such bound, with --min-compute-capability's.
    for (std::string_view item : Split(*args.require, ',')) {
      const std::string name = ToLower(Trim(item));
      if (name.empty()) continue;
      auto bound = model::MinComputeCapabilityFor(name);
      if (!bound) {
        std::string known;
        for (std::string_view k : model::kCapabilityNames) known += (known.empty() ? "" : ", ") + std::string(k);
        return MakeError(ErrorCode::kInvalidArgument, "--require: unknown capability '" + name + "' (known: " + known + ")");
      }
      if (!req.min_compute_capability || HigherComputeCapability(*bound, *req.min_compute_capability)) {
        req.min_compute_capability = *bound;
      }
    }
  }
  for (const auto& item : args.exclude) {
    auto uuids = ToUuids(item, snap);
    if (!uuids) return uuids.error().WithContext("--exclude");
    req.exclude.insert(req.exclude.end(), uuids->begin(), uuids->end());
  }
  req.allow_shared = args.allow_shared;
  if (args.prefer) {
    if (ToLower(Trim(*args.prefer)) != "fastest") {
      return MakeError(ErrorCode::kInvalidArgument, "--prefer: unknown preference '" + *args.prefer + "' (known: fastest)");
    }
    req.prefer_fastest = true;
  }
  // Inside a Slurm job the allocation is mapped through gres.conf and minor numbers.
  const auto slurm_node = SlurmNodeForJob(env, snap);
  req.allowed = visibility::AllowedGpus(env, snap.gpus, slurm_node ? &*slurm_node : nullptr);
  return req;
}

}  // namespace gpuman::cli
