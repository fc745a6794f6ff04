// HealthWatch: the daemon's continuous health state. It collects Xid events (NVML events
// and kernel log), turns each snapshot into findings, and decides which GPUs to drain
// ("quarantine") and when a recheck lifts the drain. Pure: time comes in as `now`.
//
// Rules (docs/health.md): a fatal finding (snapshot or Xid) drains the GPU. The drain is
// lifted by a passive recheck once the GPU has shown no fatal evidence for
// recheck_after_ms and its current snapshot is healthy; Xids before the recheck are then
// reported as cleared warnings. A GPU is never left drained by the watch forever: every
// snapshot is a new recheck.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "model/device_snapshot.h"
#include "model/health.h"

namespace gpuman::health {

struct HealthPolicy {
  bool drain_on_fatal = true;
  int64_t recheck_after_ms = 10 * 60 * 1000;      // quiet time before a drain is lifted
  int64_t xid_window_ms = 24LL * 3600 * 1000;      // Xids reported for this long
};

class HealthWatch {
 public:
  explicit HealthWatch(HealthPolicy policy) : policy_(policy) {}

  /// Records an Xid. The same Xid on the same GPU from the other source within 10 s is
  /// one occurrence (NVML event and kernel log line of one error).
  void AddXid(model::XidEvent ev);

  /// A drain left by an earlier daemon (reason starts with "health:"): quarantined again,
  /// and the recheck clock starts at `now`.
  void RestoreQuarantine(const std::string& uuid, int64_t now_unix_ms);

  struct Changes {
    std::vector<std::pair<std::string, std::string>> drain;  // uuid, reason ("health: ...")
    std::vector<std::string> lift;                            // uuids
  };
  /// Recomputes findings from `snap` (null with `driver_error` when the snapshot failed)
  /// and returns the drains to add and lift.
  Changes Update(const model::MachineSnapshot* snap, const std::string& driver_error, int64_t now_unix_ms);

  /// Findings as of the last Update, sorted; quarantined GPUs; sources.
  model::HealthReport Report() const { return report_; }
  /// (uuid, xid) -> count since this watch started; never decreases.
  const std::map<std::pair<std::string, int>, int64_t>& xid_totals() const { return xid_totals_; }
  const std::set<std::string>& quarantined() const { return quarantined_; }

  /// Where Xids come from, shown in the report ("nvml_events", "kernel_log /dev/kmsg").
  void SetXidSources(std::vector<std::string> sources, std::vector<std::string> notes);

 private:
  void Insert(model::XidEvent ev);  // with a GPU UUID; deduplicated across sources

  HealthPolicy policy_;
  std::vector<model::XidEvent> xids_;              // within the window
  std::vector<model::XidEvent> unmatched_;         // bus id not yet matched to a GPU
  std::map<std::pair<std::string, int>, int64_t> xid_totals_;
  std::set<std::string> quarantined_;
  std::map<std::string, int64_t> last_evidence_;   // uuid -> last fatal evidence
  std::map<std::string, int64_t> cleared_before_;  // uuid -> time of the last passing recheck
  std::vector<std::string> sources_, notes_;
  model::HealthReport report_;
};

}  // namespace gpuman::health
