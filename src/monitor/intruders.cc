#include "monitor/intruders.h"

#include <algorithm>

#include "model/intruders.h"
#include "monitor/gpu_findings.h"

namespace gpuman::monitor {

std::vector<IntruderStep> IntruderWatch::Update(const model::MachineSnapshot& snap,
                                                const std::vector<model::Lease>& leases, int64_t now) {
  std::vector<IntruderStep> steps;
  std::map<std::pair<std::string, uint32_t>, Known> next;
  const bool watch_unleased = policy_.unleased != IntruderPolicy::Unleased::kAllow;
  for (const auto& gpu : snap.gpus) {
    if (!gpu.uuid) continue;
    // Whether any live lease holds this GPU: a process on a GPU nobody holds is unleased.
    bool held = false;
    if (watch_unleased) {
      // A lease of one of its MIG devices holds the GPU too: a MIG tenant's processes
      // run on the parent GPU (docs/share.md, "MIG").
      for (const auto& l : leases) {
        for (const auto& u : l.gpu_uuids) {
          held = held || u == *gpu.uuid ||
                 std::any_of(gpu.mig_devices.begin(), gpu.mig_devices.end(),
                             [&](const model::MigDevice& m) { return m.uuid == u; });
        }
      }
    }
    for (const auto& p : gpu.processes) {
      const model::Lease* lease = model::IntrudedLease(gpu, p, leases);
      const bool unleased = !lease && watch_unleased && !held;
      if (!lease && !unleased) continue;
      const int64_t lease_id = lease ? lease->id : 0;
      const bool may_kill = lease ? policy_.kill : policy_.unleased == IntruderPolicy::Unleased::kKill;
      const auto key = std::make_pair(*gpu.uuid, p.pid);
      auto known = current_.find(key);
      Known k;
      if (known != current_.end() && known->second.step.lease_id == lease_id) {
        k = known->second;
      } else {
        k.first_seen_ms = now;
        k.step.pid = p.pid;
        k.step.gpu_uuid = *gpu.uuid;
        k.step.gpu_index = gpu.index;
        k.step.lease_id = lease_id;
        k.step.lease_user = lease ? lease->user : "";
        k.step.user = p.user.value_or("");
        k.step.command = p.command.value_or("");
        if (!p.is_visible || !p.uid) k.step.spared = "its owner is not visible in this PID namespace";
        else if (*p.uid == 0) k.step.spared = "it is root's";
        IntruderStep seen = k.step;
        seen.kind = IntruderStep::kSeen;
        steps.push_back(seen);
      }
      if (may_kill && k.step.spared.empty()) {
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
  GpuFindings findings("intruder"), unleased("unleased");
  for (const auto& [key, k] : current_) {
    const std::string who =
        "process " + std::to_string(k.step.pid) + (k.step.user.empty() ? "" : " of " + k.step.user) + " uses GPU " +
        std::to_string(k.step.gpu_index);
    if (k.step.lease_id == 0) {
      unleased.Add(k.step.gpu_uuid, k.step.gpu_index, k.first_seen_ms, who + ", which no lease holds (outside gpuman)");
    } else {
      findings.Add(k.step.gpu_uuid, k.step.gpu_index, k.first_seen_ms,
                   who + ", leased to " + k.step.lease_user + " (lease " + std::to_string(k.step.lease_id) + ")");
    }
  }
  std::vector<model::Finding> out = findings.Take();
  for (auto& f : unleased.Take()) out.push_back(std::move(f));
  return out;
}

}  // namespace gpuman::monitor
