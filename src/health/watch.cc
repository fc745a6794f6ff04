#include "health/watch.h"

#include <algorithm>
#include <cstdlib>

#include "health/findings.h"

namespace gpuman::health {

using model::Severity;

void HealthWatch::AddXid(model::XidEvent ev) {
  if (ev.gpu_uuid.empty()) {
    unmatched_.push_back(std::move(ev));  // matched by bus id at the next Update
    return;
  }
  Insert(std::move(ev));
}

void HealthWatch::Insert(model::XidEvent ev) {
  for (const auto& seen : xids_) {
    if (seen.gpu_uuid == ev.gpu_uuid && seen.xid == ev.xid && seen.source != ev.source &&
        std::llabs(seen.at_unix_ms - ev.at_unix_ms) <= 10000) {
      return;  // the same error, reported by the NVML event and by the kernel log
    }
  }
  ++xid_totals_[{ev.gpu_uuid, ev.xid}];
  xids_.push_back(std::move(ev));
}

void HealthWatch::RestoreQuarantine(const std::string& uuid, int64_t now_unix_ms) {
  quarantined_.insert(uuid);
  last_evidence_[uuid] = now_unix_ms;
}

void HealthWatch::SetXidSources(std::vector<std::string> sources, std::vector<std::string> notes) {
  sources_ = std::move(sources);
  notes_ = std::move(notes);
}

HealthWatch::Changes HealthWatch::Update(const model::MachineSnapshot* snap, const std::string& driver_error,
                                         int64_t now) {
  Changes changes;
  model::HealthReport report;
  report.taken_at_unix_ms = now;
  report.xid_sources = sources_;
  report.notes = notes_;

  if (snap) {
    // Kernel-log Xids name a PCI address; match them now that we know the GPUs.
    std::vector<model::XidEvent> still;
    for (auto& ev : unmatched_) {
      if (MatchXidToGpu(*snap, ev)) {
        Insert(std::move(ev));
      } else {
        still.push_back(std::move(ev));
      }
    }
    unmatched_ = std::move(still);
    for (auto& ev : xids_) MatchXidToGpu(*snap, ev);  // fill index / bus id
  }
  std::erase_if(xids_, [&](const model::XidEvent& e) { return now - e.at_unix_ms > policy_.xid_window_ms; });
  std::erase_if(unmatched_, [&](const model::XidEvent& e) { return now - e.at_unix_ms > policy_.xid_window_ms; });

  if (snap) {
    // A MIG device's health is its parent GPU's (docs/share.md, "MIG"): no finding of its
    // own, one note per GPU in MIG mode saying what the GPU's findings and drains cover.
    for (const auto& g : snap->gpus) {
      if (!model::InMigMode(g)) continue;
      std::vector<std::pair<std::string, int>> profiles;
      for (const auto& m : g.mig_devices) {
        const std::string p = m.profile.value_or("unknown profile");
        auto it = std::find_if(profiles.begin(), profiles.end(), [&](const auto& e) { return e.first == p; });
        if (it == profiles.end()) profiles.emplace_back(p, 1);
        else ++it->second;
      }
      std::string list;
      for (const auto& [p, n] : profiles) list += (list.empty() ? "" : ", ") + (n > 1 ? std::to_string(n) + "x " : "") + p;
      report.notes.push_back("GPU " + std::to_string(g.index) + " is in MIG mode with " + std::to_string(g.mig_devices.size()) +
                             " MIG device" + (g.mig_devices.size() == 1 ? "" : "s") + (list.empty() ? "" : " (" + list + ")") +
                             ": its findings and drains are theirs");
    }
  }

  std::vector<model::Finding> findings;
  if (snap) {
    findings = SnapshotFindings(*snap);
  } else {
    findings.push_back(DriverFinding(driver_error, now));
  }
  auto xid_findings = XidFindings(xids_, cleared_before_);
  auto unmatched = XidFindings(unmatched_);
  findings.insert(findings.end(), xid_findings.begin(), xid_findings.end());
  findings.insert(findings.end(), unmatched.begin(), unmatched.end());

  // Fatal evidence per GPU: now for snapshot findings, the Xid's time for Xids.
  std::map<std::string, std::string> first_fatal;  // uuid -> message
  std::set<std::string> fatal_now;
  for (const auto& f : findings) {
    if (f.severity != Severity::kFatal || f.gpu_uuid.empty()) continue;
    int64_t when = f.code == "xid" ? f.last_seen_unix_ms.value_or(now) : now;
    if (f.code != "xid") fatal_now.insert(f.gpu_uuid);
    last_evidence_[f.gpu_uuid] = std::max(last_evidence_[f.gpu_uuid], when);
    first_fatal.try_emplace(f.gpu_uuid, f.message);
  }
  if (snap) {
    for (const auto& [uuid, message] : first_fatal) {
      if (policy_.drain_on_fatal && !quarantined_.count(uuid)) {
        quarantined_.insert(uuid);
        changes.drain.emplace_back(uuid, "health: " + message);
      }
    }
    // Recheck: quiet long enough, and the GPU is present and healthy right now.
    for (auto it = quarantined_.begin(); it != quarantined_.end();) {
      const std::string& uuid = *it;
      const model::DeviceSnapshot* dev = nullptr;
      for (const auto& d : snap->gpus) {
        if (d.uuid == uuid) dev = &d;
      }
      bool quiet = now - last_evidence_[uuid] >= policy_.recheck_after_ms;
      if (quiet && dev && dev->is_healthy && !fatal_now.count(uuid)) {
        changes.lift.push_back(uuid);
        cleared_before_[uuid] = now;
        it = quarantined_.erase(it);
      } else {
        ++it;
      }
    }
    if (!changes.lift.empty()) {  // cleared Xids are warnings now
      findings.erase(std::remove_if(findings.begin(), findings.end(), [](const model::Finding& f) { return f.code == "xid"; }),
                     findings.end());
      auto again = XidFindings(xids_, cleared_before_);
      findings.insert(findings.end(), again.begin(), again.end());
      findings.insert(findings.end(), unmatched.begin(), unmatched.end());
    }
  }
  SortFindings(findings);
  report.findings = std::move(findings);
  report.quarantined.assign(quarantined_.begin(), quarantined_.end());
  report_ = std::move(report);
  return changes;
}

}  // namespace gpuman::health
