// Intruder watch (issue 23, docs/enforce.md): which processes intrude on a lease now (the
// rule of model/intruders.h), since when, and what the machine's policy asks for: report
// them (a log line, an alert finding) or end them (SIGTERM at once, SIGKILL after the grace
// period). Pure: the daemon's event loop feeds it one sample at a time with `now`; it does
// no I/O and sends no signal itself. One thread (the daemon's).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "model/device_snapshot.h"
#include "model/health.h"
#include "model/lease.h"

namespace gpuman::monitor {

/// `[enforce] foreign_processes`, `unleased_processes` and `grace`.
struct IntruderPolicy {
  bool kill = false;           // "kill"; default "report"
  int64_t grace_ms = 10000;    // SIGTERM, then SIGKILL this long after
  /// GPU use outside gpuman on a GPU no lease holds: ignored ("allow", the default),
  /// reported, or ended as an intruder is (with the same grace and the same sparing).
  enum class Unleased { kAllow, kReport, kKill };
  Unleased unleased = Unleased::kAllow;
};

/// One thing to do or say about one intruder.
struct IntruderStep {
  enum Kind {
    kSeen,   // first seen: report it
    kTerm,   // send SIGTERM (policy kill)
    kKill,   // still there after the grace period: send SIGKILL
    kGone,   // no longer on the GPU (ended, or the lease ended)
  };
  Kind kind = kSeen;
  uint32_t pid = 0;
  std::string gpu_uuid;
  int gpu_index = 0;
  int64_t lease_id = 0;   // 0: an unleased process (a GPU no lease holds)
  std::string lease_user; // "" for an unleased process
  std::string user;     // the intruder's owner ("" when it cannot be seen)
  std::string command;  // its command line ("" when it cannot be seen)
  /// Why it is reported but never ended, even under "kill": root's, or one whose owner
  /// this PID namespace cannot see (another container's). "" when it may be ended.
  std::string spared;
};

class IntruderWatch {
 public:
  explicit IntruderWatch(IntruderPolicy policy) : policy_(policy) {}

  /// One sample: the steps it calls for, in the order to take them.
  std::vector<IntruderStep> Update(const model::MachineSnapshot& snap, const std::vector<model::Lease>& leases,
                                   int64_t now_unix_ms);

  /// The intruders of the last sample as health findings (code "intruder", a warning per
  /// GPU), for alert rules (`event = "finding"`, `code = "intruder"`; docs/alerts.md);
  /// unleased processes (under "report" or "kill") as code "unleased".
  std::vector<model::Finding> Findings() const;

  size_t count() const { return current_.size(); }

 private:
  struct Known {
    IntruderStep step;  // as first seen
    int64_t first_seen_ms = 0;
    bool termed = false, killed = false;
  };
  IntruderPolicy policy_;
  std::map<std::pair<std::string, uint32_t>, Known> current_;  // (GPU, pid)
};

}  // namespace gpuman::monitor
