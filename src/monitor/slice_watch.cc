#include "monitor/slice_watch.h"

#include <algorithm>

#include "model/intruders.h"
#include "monitor/gpu_findings.h"

namespace gpuman::monitor {

std::vector<SliceStep> SliceWatch::Update(const model::MachineSnapshot& snap, const std::vector<model::Lease>& leases,
                                          int64_t now) {
  std::vector<SliceStep> steps;
  std::map<std::pair<std::string, uint32_t>, Known> seen;
  for (const auto& gpu : snap.gpus) {
    if (!gpu.uuid) continue;
    for (const model::SliceOverrun& o : model::SliceOverruns(gpu, leases)) {
      SliceStep step;
      step.gpu_uuid = *gpu.uuid;
      step.gpu_index = gpu.index;
      step.lease_id = o.lease_id;
      step.uid = o.uid;
      step.used_bytes = o.used_bytes;
      step.declared_bytes = o.declared_bytes;
      for (const auto& l : leases) {
        if (l.id == o.lease_id) step.user = l.user;
      }
      for (const auto& p : gpu.processes) {
        if (p.uid && *p.uid == o.uid) step.pids.push_back(p.pid);
      }
      const auto key = std::make_pair(*gpu.uuid, o.uid);
      auto it = current_.find(key);
      Known k = it != current_.end() ? it->second : Known{step, now, -1, false};
      if (it == current_.end()) {
        step.kind = SliceStep::kOver;
        steps.push_back(step);
      }
      k.step = step;
      if (policy_.kill) {
        if (k.termed_ms < 0 && now - k.first_seen_ms >= policy_.grace_ms) {
          k.termed_ms = now;
          step.kind = SliceStep::kTerm;
          steps.push_back(step);
        } else if (k.termed_ms >= 0 && !k.killed && now - k.termed_ms >= policy_.grace_ms) {
          k.killed = true;
          step.kind = SliceStep::kKill;
          steps.push_back(step);
        }
      }
      seen[key] = std::move(k);
    }
  }
  for (const auto& [key, k] : current_) {
    if (seen.contains(key)) continue;
    SliceStep step = k.step;
    step.kind = SliceStep::kWithin;
    step.pids.clear();
    steps.push_back(std::move(step));
  }
  current_ = std::move(seen);
  return steps;
}

std::vector<model::Finding> SliceWatch::Findings() const {
  GpuFindings findings("slice_over");
  for (const auto& [key, k] : current_) {
    findings.Add(k.step.gpu_uuid, k.step.gpu_index, k.first_seen_ms,
                 k.step.user + "'s processes use " + std::to_string(k.step.used_bytes >> 20) + " MiB of GPU " +
                 std::to_string(k.step.gpu_index) + ", " + std::to_string(k.step.declared_bytes >> 20) +
                 " MiB declared (lease " + std::to_string(k.step.lease_id) + ")");
  }
  return findings.Take();
}

}  // namespace gpuman::monitor
