#include "health/findings.h"

#include <algorithm>
#include <map>
#include <iterator>
#include <tuple>

#include "health/xid.h"
#include "model/health_judge.h"

namespace gpuman::health {
using model::Finding;
using model::Severity;

std::vector<Finding> SnapshotFindings(const model::MachineSnapshot& snap) {
  std::vector<Finding> out;
  for (const auto& dev : snap.gpus) {
    std::vector<Finding> judged = model::JudgeGpuHealth(dev).findings;
    out.insert(out.end(), std::make_move_iterator(judged.begin()), std::make_move_iterator(judged.end()));
  }
  return out;
}

Finding DriverFinding(const std::string& error_message, int64_t now_unix_ms) {
  Finding f;
  f.code = "driver";
  f.severity = Severity::kFatal;
  f.message = error_message;
  f.source = "driver";
  f.first_seen_unix_ms = f.last_seen_unix_ms = now_unix_ms;
  return f;
}

bool MatchXidToGpu(const model::MachineSnapshot& snap, model::XidEvent& ev) {
  for (const auto& dev : snap.gpus) {
    bool match = (!ev.gpu_uuid.empty() && dev.uuid == ev.gpu_uuid) ||
                 (ev.pci_bus_id && dev.pci_bus_id && *dev.pci_bus_id == *ev.pci_bus_id) ||
                 (ev.gpu_uuid.empty() && !ev.pci_bus_id && ev.gpu_index == dev.index);
    if (match) {
      if (ev.gpu_uuid.empty()) ev.gpu_uuid = dev.uuid.value_or("");
      ev.gpu_index = dev.index;
      if (!ev.pci_bus_id) ev.pci_bus_id = dev.pci_bus_id;
      return true;
    }
  }
  return false;
}

std::vector<Finding> XidFindings(const std::vector<model::XidEvent>& events,
                                 const std::map<std::string, int64_t>& cleared_before) {
  // Keyed by (uuid or bus id, xid, cleared).
  std::map<std::tuple<std::string, int, bool>, Finding> by_key;
  for (const auto& ev : events) {
    XidClass cls = ClassifyXid(ev.xid);
    auto c = cleared_before.find(ev.gpu_uuid);
    bool cleared = c != cleared_before.end() && ev.at_unix_ms <= c->second;
    std::string who = !ev.gpu_uuid.empty() ? ev.gpu_uuid : ev.pci_bus_id.value_or("?");
    auto [it, fresh] = by_key.try_emplace({who, ev.xid, cleared});
    Finding& f = it->second;
    if (fresh) {
      f.code = "xid";
      f.xid = ev.xid;
      f.gpu_uuid = ev.gpu_uuid;
      f.gpu_index = ev.gpu_index;
      f.severity = cleared ? Severity::kWarning : cls.severity;
      f.source = ev.source;
      f.count = 0;
      std::string what = *cls.description ? std::string(cls.description) : "no description";
      f.message = "Xid " + std::to_string(ev.xid) + ": " + what;
      if (cls.application) f.message += " (usually caused by the application)";
      if (ev.gpu_uuid.empty() && ev.pci_bus_id) f.message += " on PCI " + *ev.pci_bus_id;
      if (cleared) f.message += " (cleared: the GPU passed a recheck since)";
      f.first_seen_unix_ms = ev.at_unix_ms;
      f.last_seen_unix_ms = ev.at_unix_ms;
    }
    ++f.count;
    if (f.source != ev.source) f.source = "nvml_event+kernel_log";
    f.first_seen_unix_ms = std::min(*f.first_seen_unix_ms, ev.at_unix_ms);
    f.last_seen_unix_ms = std::max(*f.last_seen_unix_ms, ev.at_unix_ms);
  }
  std::vector<Finding> out;
  for (auto& [key, f] : by_key) out.push_back(std::move(f));
  return out;
}

void SortFindings(std::vector<Finding>& findings) {
  std::stable_sort(findings.begin(), findings.end(), [](const Finding& a, const Finding& b) {
    auto key = [](const Finding& f) {
      return std::make_tuple(f.severity == Severity::kFatal ? 0 : 1, f.gpu_index.value_or(-1), f.code, f.xid.value_or(0));
    };
    return key(a) < key(b);
  });
}

}  // namespace gpuman::health
