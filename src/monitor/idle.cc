// The idle rule, and why it is built this way.
//
// What is measured. NVML gives two numbers: the device utilization (the share of the last
// sample period during which any kernel ran) and, on GPUs that support it, the SM % of each
// process. Device utilization over-reports (one tiny kernel per period counts as busy);
// per-process SM % is finer but missing on MIG and older GPUs, and a lease cannot be tied to
// its CUDA processes reliably: the lease records the holder pid (`gpuman run`, a shell, a
// supervisor), while the process on the GPU is often a grandchild, in a container, or in
// another PID namespace. So a GPU's activity is the larger of the two numbers, summing SM %
// over every process on the GPU. Taking the larger one means a lease is only called idle
// when both views agree it is: wrongly flagging busy work is the costly mistake, because
// the policy may release the lease. On a shared GPU another user's work keeps the lease
// busy too; again the safe side.
//
// Episodes. A lease is idle in a sample when every one of its GPUs has a reading below the
// threshold. An idle episode starts at the first such sample (idle_since = that `now`) and
// ends at the first sample where the lease is not idle: a reading at or above the
// threshold, a GPU without a reading, a GPU missing from the snapshot, or a lease without
// GPUs. There is no hysteresis: a short burst of work is work, and a missing reading must
// never count toward releasing someone's lease. Notify and release happen at most once per
// episode; a new episode may notify again.
//
// State lives in memory only: a daemon that restarts starts every lease fresh, so an idle
// lease is flagged `after` the restart at the earliest. Leases that disappear are forgotten.
#include "monitor/idle.h"

#include <algorithm>
#include <cstdio>
#include <set>

#include <toml++/toml.h>
#include <string_view>

#include "base/duration.h"
#include "base/strings.h"

namespace gpuman::monitor {
namespace {

bool IsInteractive(const model::Lease& lease) { return lease.kind == "run" || lease.kind == "select"; }

const model::DeviceSnapshot* FindGpu(const model::MachineSnapshot& snap, const std::string& uuid) {
  for (const auto& dev : snap.gpus) {
    if (dev.uuid && *dev.uuid == uuid) return &dev;
  }
  return nullptr;
}

nlohmann::json LeaseJson(const model::Lease& lease) {
  return {{"id", lease.id},
          {"user", lease.user},
          {"uid", lease.uid},
          {"kind", lease.kind},
          {"command", lease.command},
          {"gpu_uuids", lease.gpu_uuids},
          {"created_unix_ms", lease.created_unix_ms}};
}

Error Bad(const std::string& origin, const std::string& key, const std::string& what) {
  return MakeError(ErrorCode::kInvalidArgument, "config " + origin + ": idle." + key + ": " + what);
}

}  // namespace

std::optional<double> GpuActivityPercent(const model::DeviceSnapshot& dev) {
  std::optional<double> sm_sum;
  for (const auto& p : dev.processes) {
    if (p.sm_util_percent) sm_sum = sm_sum.value_or(0) + *p.sm_util_percent;
  }
  std::optional<double> util;
  if (dev.gpu_utilization_percent) util = *dev.gpu_utilization_percent;
  if (util && sm_sum) return std::max(*util, *sm_sum);
  return util ? util : sm_sum;
}

IdleWatch::IdleWatch(IdlePolicy policy, std::string hostname)
    : policy_(std::move(policy)), hostname_(std::move(hostname)) {}

std::vector<IdleAction> IdleWatch::Update(const model::MachineSnapshot& snap,
                                          const std::vector<model::Lease>& leases,
                                          const std::vector<model::Job>& jobs, int64_t now_unix_ms) {
  std::vector<IdleAction> actions;
  if (!policy_.enabled) {
    episodes_.clear();
    return actions;
  }
  std::map<int64_t, int64_t> job_of_lease;
  for (const auto& job : jobs) {
    if (job.lease_id) job_of_lease[*job.lease_id] = job.id;
  }
  std::set<int64_t> live;
  for (const auto& lease : leases) {
    live.insert(lease.id);
    bool idle = !lease.gpu_uuids.empty();
    for (const auto& uuid : lease.gpu_uuids) {
      const model::DeviceSnapshot* dev = FindGpu(snap, uuid);
      std::optional<double> activity = dev ? GpuActivityPercent(*dev) : std::nullopt;
      if (!activity || *activity >= policy_.threshold_percent) {
        idle = false;
        break;
      }
    }
    if (!idle) {
      episodes_.erase(lease.id);
      continue;
    }
    auto [it, started] = episodes_.try_emplace(lease.id);
    Episode& e = it->second;
    if (started) e.since_unix_ms = now_unix_ms;
    const int64_t idle_for = now_unix_ms - e.since_unix_ms;
    if (!e.flagged && idle_for >= policy_.idle_after_ms) e.flagged = true;
    if (!e.flagged) continue;

    std::optional<int64_t> job_id;
    if (auto j = job_of_lease.find(lease.id); j != job_of_lease.end()) job_id = j->second;
    model::Lease annotated = lease;
    annotated.idle_since_unix_ms = e.since_unix_ms;
    if (!e.notified) {
      e.notified = true;
      if (!policy_.notify_command.empty()) {
        actions.push_back({IdleAction::kNotify, annotated, e.since_unix_ms,
                           Payload("notify", lease, e, job_id, now_unix_ms)});
      }
    }
    if (!e.released && policy_.release_after_ms && idle_for >= *policy_.release_after_ms &&
        IsInteractive(lease) && !job_id) {
      e.released = true;
      actions.push_back({IdleAction::kRelease, annotated, e.since_unix_ms,
                         Payload("release", lease, e, job_id, now_unix_ms)});
    }
  }
  std::erase_if(episodes_, [&](const auto& kv) { return !live.count(kv.first); });
  return actions;
}

nlohmann::json IdleWatch::Payload(const char* action, const model::Lease& lease, const Episode& e,
                                  std::optional<int64_t> job_id, int64_t now_unix_ms) const {
  nlohmann::json p = {{"version", 1},
                      {"kind", "idle"},
                      {"action", action},
                      {"hostname", hostname_},
                      {"lease", LeaseJson(lease)},
                      {"job_id", job_id ? nlohmann::json(*job_id) : nlohmann::json(nullptr)},
                      {"idle_since_unix_ms", e.since_unix_ms},
                      {"idle_since", FormatIsoUtc(e.since_unix_ms / 1000)},
                      {"idle_seconds", (now_unix_ms - e.since_unix_ms) / 1000},
                      {"threshold_percent", policy_.threshold_percent},
                      {"now_unix_ms", now_unix_ms},
                      {"now", FormatIsoUtc(now_unix_ms / 1000)}};
  p["release_after_seconds"] =
      policy_.release_after_ms ? nlohmann::json(*policy_.release_after_ms / 1000) : nlohmann::json(nullptr);
  char threshold[32];
  std::snprintf(threshold, sizeof threshold, "%g", policy_.threshold_percent);
  p["message"] = std::string(std::string_view(action) == "release" ? "released " : "") + "lease " +
                 std::to_string(lease.id) + " of " + lease.user + " idle (below " + threshold +
                 " %) for " + FormatDurationMs(now_unix_ms - e.since_unix_ms);
  return p;
}

std::optional<int64_t> IdleWatch::IdleSince(int64_t lease_id) const {
  auto it = episodes_.find(lease_id);
  if (it == episodes_.end() || !it->second.flagged) return std::nullopt;
  return it->second.since_unix_ms;
}

void IdleWatch::Annotate(std::vector<model::Lease>& leases) const {
  for (auto& lease : leases) lease.idle_since_unix_ms = IdleSince(lease.id);
}

void IdleWatch::Annotate(std::vector<model::Job>& jobs) const {
  for (auto& job : jobs) job.idle_since_unix_ms = job.lease_id ? IdleSince(*job.lease_id) : std::nullopt;
}

Result<IdlePolicy> ParseIdlePolicy(const toml::table& idle, const std::string& origin) {
  IdlePolicy policy;
  std::optional<int64_t> after, release_after;
  for (const auto& [key, value] : idle) {
    const std::string k(key.str());
    if (k == "enabled") {
      auto v = value.value_exact<bool>();
      if (!v) return Bad(origin, k, "must be true or false");
      policy.enabled = *v;
    } else if (k == "threshold_percent") {
      auto v = value.value<double>();  // integers convert too
      if (!v || !(*v > 0 && *v <= 100)) return Bad(origin, k, "must be a number above 0 and at most 100");
      policy.threshold_percent = *v;
    } else if (k == "after" || k == "release_after") {
      auto v = value.value<std::string>();
      if (!v) return Bad(origin, k, "must be a duration such as \"30m\"");
      auto ms = ParseDurationMs(*v);
      if (!ms) return Bad(origin, k, ms.error().message);
      if (*ms <= 0) return Bad(origin, k, "must be longer than 0");
      (k == "after" ? after : release_after) = *ms;
    } else if (k == "notify_command") {
      auto* arr = value.as_array();
      if (!arr || arr->empty()) return Bad(origin, k, "must be a non-empty array of strings (argv)");
      std::vector<std::string> argv;
      for (const auto& item : *arr) {
        auto s = item.value<std::string>();
        if (!s) return Bad(origin, k, "must be a non-empty array of strings (argv)");
        argv.push_back(*s);
      }
      if (argv[0].empty()) return Bad(origin, k, "the program (first element) is empty");
      policy.notify_command = std::move(argv);
    } else {
      return MakeError(ErrorCode::kInvalidArgument,
                       "config " + origin + ": idle: unknown key '" + k +
                           "' (known: enabled, threshold_percent, after, notify_command, release_after)");
    }
  }
  if (after) policy.idle_after_ms = *after;
  if (release_after) {
    if (*release_after < policy.idle_after_ms) {
      return Bad(origin, "release_after", "must not be shorter than idle.after (" +
                                              FormatDurationMs(policy.idle_after_ms) + ")");
    }
    policy.release_after_ms = release_after;
  }
  return policy;
}

}  // namespace gpuman::monitor
