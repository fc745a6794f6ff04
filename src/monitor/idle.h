// Idle-lease watch: which leases hold GPUs that stay (nearly) unused, since when, and which
// actions the idle policy asks for (tell the owner, release an interactive lease). Pure:
// the daemon's event loop feeds it one sample at a time with `now`; it does no I/O and
// holds no clock. Owned and called by the daemon's single event-loop thread.
// The rules (what "idle" means, episodes, restarts) are written down in docs/alerts.md.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "model/device_snapshot.h"
#include "model/job.h"
#include "model/lease.h"

// toml++ stays inside the config parsing (alerts.cc, idle.cc, cli/config.cc): the header
// only names its node types (toml++ 3's inline namespace; alerts.cc checks it).
namespace toml {
inline namespace v3 {
class array;
class table;
}  // namespace v3
}  // namespace toml

namespace gpuman::monitor {

/// The `[idle]` table of the config file.
struct IdlePolicy {
  bool enabled = true;
  /// A GPU is idle while its activity (see GpuActivityPercent) stays below this.
  double threshold_percent = 5;
  /// A lease is flagged once all its GPUs stayed idle this long (config key `after`).
  int64_t idle_after_ms = 30 * 60 * 1000;
  /// argv run once per idle episode when the lease is flagged, and again when it is
  /// released; the JSON payload comes on stdin. Empty: nobody is told.
  std::vector<std::string> notify_command;
  /// Interactive leases (kind "run"/"select", not held by a queue job) are released after
  /// this long idle (config key `release_after`); unset: never.
  std::optional<int64_t> release_after_ms;
};

struct IdleAction {
  enum Kind { kNotify, kRelease };
  Kind kind = kNotify;
  model::Lease lease;  // with idle_since_unix_ms set
  int64_t idle_since_unix_ms = 0;
  nlohmann::json payload;  // what notify_command gets on stdin (schema in docs/alerts.md)
};

/// How busy a GPU is for the idle rule, in percent: the larger of the device utilization
/// and the sum of the per-process SM % NVML reports for the processes on it; whichever of
/// the two is known when only one is; nullopt when neither is (then the GPU is not idle).
std::optional<double> GpuActivityPercent(const model::DeviceSnapshot& dev);

class IdleWatch {
 public:
  /// `hostname` only goes into payloads.
  explicit IdleWatch(IdlePolicy policy, std::string hostname = "");

  /// One sample: the live leases, the current snapshot and the jobs (a lease named by a
  /// Job::lease_id belongs to a queue job and is never released). Returns the actions due
  /// now, each at most once per idle episode: kNotify when a lease is flagged (only when
  /// notify_command is set), kRelease when an interactive lease reached release_after.
  /// Leases missing from `leases` are forgotten.
  std::vector<IdleAction> Update(const model::MachineSnapshot& snap,
                                 const std::vector<model::Lease>& leases,
                                 const std::vector<model::Job>& jobs, int64_t now_unix_ms);

  /// Start of the current idle episode of a lease, only once it is flagged (idle for at
  /// least idle_after_ms); nullopt otherwise.
  std::optional<int64_t> IdleSince(int64_t lease_id) const;

  /// For replies: sets Lease::idle_since_unix_ms (by lease id) and Job::idle_since_unix_ms
  /// (by Job::lease_id) of flagged leases; clears it on the others.
  void Annotate(std::vector<model::Lease>& leases) const;
  void Annotate(std::vector<model::Job>& jobs) const;

  const IdlePolicy& policy() const { return policy_; }

 private:
  struct Episode {
    int64_t since_unix_ms = 0;
    bool flagged = false;
    bool notified = false;
    bool released = false;
  };
  nlohmann::json Payload(const char* action, const model::Lease& lease, const Episode& e,
                         std::optional<int64_t> job_id, int64_t now_unix_ms) const;

  IdlePolicy policy_;
  std::string hostname_;
  std::map<int64_t, Episode> episodes_;  // lease id -> current idle episode
};

/// Parses the `[idle]` table: enabled (bool), threshold_percent (0 < x <= 100),
/// after (duration > 0), notify_command (non-empty array of strings), release_after
/// (duration >= after). Errors: kInvalidArgument naming `origin` and the key, for unknown
/// keys, wrong types and bad values ("config FILE: idle.after: ...").
Result<IdlePolicy> ParseIdlePolicy(const toml::table& idle, const std::string& origin);

}  // namespace gpuman::monitor
