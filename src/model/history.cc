#include "model/history.h"

#include <algorithm>
#include <map>

namespace gpuman::model {

const char* HolderKindName(HolderKind kind) {
  switch (kind) {
    case HolderKind::kFree: return "free";
    case HolderKind::kLease: return "lease";
    case HolderKind::kJob: return "job";
    case HolderKind::kOutside: return "outside";
  }
  return "free";
}

std::vector<HolderShare> SharesOf(const GpuSample& sample) {
  if (!sample.holders.empty()) return sample.holders;
  return {HolderShare{sample.holder_kind, sample.user, 1.0}};
}

UsageKey UsageKeyOf(HolderKind kind, const std::string& user) {
  if (kind == HolderKind::kFree) return UsageKey{};
  return UsageKey{user, kind == HolderKind::kOutside};
}

std::string UsageLabel(const UsageKey& key) {
  if (key.user.empty() && !key.outside) return "(free)";
  return key.outside ? key.user + " (outside gpuman)" : key.user;
}

std::string ProcessUserLabel(const GpuProcess& process) {
  if (process.user && !process.user->empty()) return *process.user;
  if (process.uid) return "uid " + std::to_string(*process.uid);
  return "(unknown)";
}

HolderAttribution AttributeHolder(const DeviceSnapshot& gpu, const std::vector<Lease>& leases,
                                  const std::vector<Job>& jobs) {
  HolderAttribution out;
  const Lease* holder = nullptr;
  if (gpu.uuid) {
    for (const auto& lease : leases) {
      if (std::find(lease.gpu_uuids.begin(), lease.gpu_uuids.end(), *gpu.uuid) == lease.gpu_uuids.end()) {
        continue;
      }
      if (!holder || lease.id > holder->id) holder = &lease;
    }
  }
  if (holder) {
    out.kind = HolderKind::kLease;
    out.user = holder->user.empty() ? "uid " + std::to_string(holder->uid) : holder->user;
    for (const auto& job : jobs) {
      if (job.lease_id == holder->id) {
        out.kind = HolderKind::kJob;
        out.job_id = job.id;
      }
    }
    return out;
  }
  std::map<std::string, int64_t> users;  // user -> GPU memory of their processes
  for (const auto& process : gpu.processes) {
    users[ProcessUserLabel(process)] += process.used_memory_bytes.value_or(0);
  }
  if (users.empty()) return out;
  out.kind = HolderKind::kOutside;
  int64_t most = -1;
  for (const auto& [user, memory] : users) {
    if (memory > most) {  // ties: the first by name
      most = memory;
      out.user = user;
    }
  }
  if (users.size() > 1) {
    const double share = 1.0 / static_cast<double>(users.size());
    for (const auto& [user, memory] : users) out.holders.push_back({HolderKind::kOutside, user, share});
  }
  return out;
}

}  // namespace gpuman::model
