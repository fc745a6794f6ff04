// Slice watch (issue 25, docs/share.md "Declared memory is watched"): which memory slices'
// holders use more of a GPU than they declared (model::SliceOverruns), since when, and what
// the machine's `[share] over_limit` asks for: report them (a log line, an alert finding)
// or end the holder's processes on that GPU (SIGTERM once over for the grace period,
// SIGKILL a grace period later). Pure: the daemon's event loop feeds it one sample at a
// time with `now`; it sends no signal itself. One thread (the daemon's).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "model/device_snapshot.h"
#include "model/health.h"
#include "model/lease.h"

namespace gpuman::monitor {

/// `[share] over_limit` and `over_limit_grace`.
struct SlicePolicy {
  bool kill = false;          // "kill"; default "report"
  int64_t grace_ms = 30000;   // over this long before SIGTERM; SIGKILL as long after
};

/// One thing to do or say about one holder over their slices of one GPU.
struct SliceStep {
  enum Kind {
    kOver,    // first seen over: report it
    kTerm,    // policy kill, over for the grace period: SIGTERM to `pids`
    kKill,    // still over a grace period later: SIGKILL to `pids`
    kWithin,  // back within the declaration (or the slices ended)
  };
  Kind kind = kOver;
  std::string gpu_uuid;
  int gpu_index = 0;
  int64_t lease_id = 0;   // the holder's first slice of the GPU
  uint32_t uid = 0;
  std::string user;       // the lease's user
  int64_t used_bytes = 0;
  int64_t declared_bytes = 0;
  std::vector<uint32_t> pids;  // the holder's processes on the GPU (kTerm, kKill)
};

class SliceWatch {
 public:
  explicit SliceWatch(SlicePolicy policy) : policy_(policy) {}

  /// One sample: the steps it calls for, in the order to take them.
  std::vector<SliceStep> Update(const model::MachineSnapshot& snap, const std::vector<model::Lease>& leases,
                                int64_t now_unix_ms);

  /// The holders over their slices in the last sample as findings (code "slice_over", a
  /// warning per GPU), for alert rules (`code = "slice_over"`; docs/alerts.md).
  std::vector<model::Finding> Findings() const;

 private:
  struct Known {
    SliceStep step;  // as last seen
    int64_t first_seen_ms = 0;
    int64_t termed_ms = -1;
    bool killed = false;
  };
  SlicePolicy policy_;
  std::map<std::pair<std::string, uint32_t>, Known> current_;  // (GPU, holder uid)
};

}  // namespace gpuman::monitor
