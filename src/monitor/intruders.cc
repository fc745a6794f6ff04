#include "monitor/intruders.h"

#include "model/intruders.h"
#include "monitor/gpu_findings.h"

namespace gpuman::monitor {

std::vector<IntruderStep> IntruderWatch::Update(const model::MachineSnapshot& snap,
                                                const std::vector<model::Lease>& leases, int64_t now) {
  std::vector<IntruderStep> steps;
  std::map<std::pair<std::string, uint32_t>, Known> next;
  for (const auto& gpu : snap.gpus) {
    for (const auto& p : gpu.processes) {
      const model::Lease* lease = model::IntrudedLease(gpu, p, leases);
      if (!lease) continue;
      const auto key = std::make_pair(*gpu.uuid, p.pid);
      auto known = current_.find(key);
      Known k;
      if (known != current_.end() && known->second.step.lease_id == lease->id) {
        k = known->second;
      } else {
        k.first_seen_ms = now;
        k.step.pid = p.pid;
        k.step.gpu_uuid = *gpu.uuid;
        k.step.gpu_index = gpu.index;
        k.step.lease_id = lease->id;
        k.step.lease_user = lease->user;
        k.step.user = p.user.value_or("");
        k.step.command = p.command.value_or("");
        if (!p.is_visible || !p.uid) k.step.spared = "its owner is not visible in this PID namespace";
        else if (*p.uid == 0) k.step.spared = "it is root's";
        IntruderStep seen = k.step;
        seen.kind = IntruderStep::kSeen;
        steps.push_back(seen);
      }
      if (policy_.kill && k.step.spared.empty()) {
        if (!k.termed) {
          k.termed = true;
          IntruderStep term = k.step;
          term.kind = IntruderStep::kTerm;
          steps.push_back(term);
        } else if (!k.killed && now - k.first_seen_ms >= policy_.grace_ms) {
          k.killed = true;
          IntruderStep kill = k.step;
          kill.kind = IntruderStep::kKill;
          steps.push_back(kill);
        }
      }
      next[key] = std::move(k);
    }
  }
  for (const auto& [key, k] : current_) {
    auto still = next.find(key);
    if (still == next.end() || still->second.step.lease_id != k.step.lease_id) {
      IntruderStep gone = k.step;
      gone.kind = IntruderStep::kGone;
      steps.push_back(gone);
    }
  }
  current_ = std::move(next);
  return steps;
}

std::vector<model::Finding> IntruderWatch::Findings() const {
  GpuFindings findings("intruder");
  for (const auto& [key, k] : current_) {
    findings.Add(k.step.gpu_uuid, k.step.gpu_index, k.first_seen_ms,
                 "process " + std::to_string(k.step.pid) + (k.step.user.empty() ? "" : " of " + k.step.user) +
                 " uses GPU " + std::to_string(k.step.gpu_index) + ", leased to " + k.step.lease_user + " (lease " +
                 std::to_string(k.step.lease_id) + ")");
  }
  return findings.Take();
}

}  // namespace gpuman::monitor
