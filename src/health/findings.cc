#include "health/findings.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "base/strings.h"
#include "health/xid.h"

namespace gpuman::health {
namespace {

using model::Finding;
using model::Severity;

Finding Make(const model::DeviceSnapshot& dev, std::string code, Severity sev, std::string message) {
  Finding f;
  f.code = std::move(code);
  f.severity = sev;
  f.gpu_uuid = dev.uuid.value_or("");
  f.gpu_index = dev.index;
  f.message = std::move(message);
  f.source = "nvml";
  return f;
}

bool Mentions(const std::string& text, const char* what) { return ToLower(text).find(what) != std::string::npos; }

}  // namespace

std::vector<Finding> SnapshotFindings(const model::MachineSnapshot& snap) {
  std::vector<Finding> out;
  for (const auto& dev : snap.gpus) {
    bool covered = false;  // a problem text already turned into a specific finding
    for (const auto& problem : dev.health_problems) {
      if (Mentions(problem, "is lost") || Mentions(problem, "reset required") || Mentions(problem, "fallen off")) {
        out.push_back(Make(dev, "gpu_lost", Severity::kFatal, "GPU is lost (" + problem + ")"));
        covered = true;
        break;
      }
    }
    if (!covered) {
      if (dev.ecc_volatile_uncorrected.value_or(0) > 0) {
        out.push_back(Make(dev, "ecc_volatile_uncorrected", Severity::kFatal,
                           std::to_string(*dev.ecc_volatile_uncorrected) +
                               " uncorrected ECC errors since the driver loaded"));
      }
      if (dev.retired_pages_pending.value_or(false)) {
        out.push_back(Make(dev, "retired_pages_pending", Severity::kFatal,
                           "retired pages pending: reset the GPU to retire them"));
      }
      if (dev.remapped_rows_failure.value_or(false)) {
        out.push_back(Make(dev, "remapped_rows_failure", Severity::kFatal,
                           "row remapping failed: the GPU should be serviced"));
      } else if (dev.remapped_rows_pending.value_or(false)) {
        out.push_back(Make(dev, "remapped_rows_pending", Severity::kFatal,
                           "row remapping pending: reset the GPU to apply it"));
      }
      // Anything else that made the source call the GPU unhealthy (e.g. an unreadable handle).
      bool specific = !out.empty() && out.back().gpu_index == dev.index;
      if (!dev.is_healthy && !specific) {
        out.push_back(Make(dev, "gpu_error", Severity::kFatal,
                           dev.health_problems.empty() ? "GPU reported unhealthy" : Join(dev.health_problems, "; ")));
      }
    }
    if (dev.ecc_aggregate_uncorrected.value_or(0) > 0) {
      out.push_back(Make(dev, "ecc_aggregate_uncorrected", Severity::kWarning,
                         std::to_string(*dev.ecc_aggregate_uncorrected) +
                             " uncorrected ECC errors over the GPU's life"));
    }
    using model::kClockHwPowerBrakeSlowdown, model::kClockHwSlowdown, model::kClockHwThermalSlowdown,
        model::kClockSwThermalSlowdown;
    uint64_t reasons = dev.clock_event_reasons.value_or(0);
    if (reasons & (kClockHwThermalSlowdown | kClockSwThermalSlowdown)) {
      out.push_back(Make(dev, "throttle_thermal", Severity::kWarning,
                         std::string("clocks throttled: ") +
                             ((reasons & kClockHwThermalSlowdown) ? "hardware thermal slowdown" : "software thermal slowdown")));
    }
    if (reasons & kClockHwPowerBrakeSlowdown) {
      out.push_back(Make(dev, "throttle_power", Severity::kWarning, "clocks throttled: hardware power brake"));
    } else if (reasons & kClockHwSlowdown) {
      out.push_back(Make(dev, "throttle_hw", Severity::kWarning, "clocks throttled: hardware slowdown"));
    }
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
