// Alert rules from the config file (`[[alert]]` tables) and the engine that evaluates them
// once per sample: per (rule, subject) it tracks pending -> firing -> resolved and says
// which hook runs now with which JSON payload. Pure: `now` comes in, nothing is run here
// (the daemon hands the events to a HookRunner). Owned by the daemon's event-loop thread.
// Syntax, semantics and the payload schema: docs/alerts.md.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "model/device_snapshot.h"
#include "model/health.h"
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

enum class AlertKind {
  kMetric,     // a per-GPU metric above/below a threshold
  kFatal,      // any fatal finding
  kXidFatal,   // a fatal finding of code "xid"
  kFinding,    // any finding of a given code (optionally of a given severity)
  kGpuLost,    // a finding of code "gpu_lost"
  kLeaseIdle,  // a lease idle (Lease::idle_since_unix_ms) for at least `for`
  kQueueWait,  // a queued job waiting for at least `for`
};

enum class Metric {
  kTemperatureC,
  kPowerW,
  kUtilizationPercent,
  kMemoryUtilizationPercent,
  kMemoryUsedPercent,  // used / total * 100
  kMemoryUsedBytes,
  kEccVolatileUncorrected,
  kEccVolatileCorrected,
  kEccAggregateUncorrected,
  kFanPercent,
};

/// Config name of a metric ("temperature_c", ...), and the inverse (nullopt if unknown).
const char* MetricName(Metric m);
std::optional<Metric> ParseMetric(const std::string& name);
/// A metric's value on one GPU; nullopt when the driver did not report it.
std::optional<double> MetricValue(Metric m, const model::DeviceSnapshot& dev);

struct AlertRule {
  std::string name;
  AlertKind kind = AlertKind::kMetric;
  // kMetric: exactly one of above/below (strict comparison).
  Metric metric = Metric::kTemperatureC;
  std::optional<double> above;
  std::optional<double> below;
  // kFinding
  std::string code;
  std::optional<model::Severity> severity;
  /// kMetric and findings: how long the condition must hold before the rule fires.
  /// kLeaseIdle / kQueueWait: the idle time / wait that is too long.
  int64_t for_ms = 0;
  std::optional<int64_t> repeat_ms;  // fire again while still firing, this often
  bool send_resolved = true;         // run the hook with state "resolved" when it ends
  std::vector<std::string> command;  // argv; payload on stdin
};

/// "temperature_c > 85 for 1m", "xid_fatal", "lease_idle for 2h", ...
std::string DescribeRule(const AlertRule& rule);

/// Parses the `alert` array of tables of the config file (`[[alert]]`). Strict: unknown
/// keys, unknown metrics or events, a missing or empty command, bad durations, duplicate
/// names and mixed forms are errors. Errors: kInvalidArgument, "config ORIGIN: alert
/// 'NAME': what is wrong" (or "alert #N" for a rule without a usable name).
Result<std::vector<AlertRule>> ParseAlertRules(const toml::array& alerts, const std::string& origin);

struct AlertEvent {
  enum class State { kFiring, kResolved };
  std::string rule;
  State state = State::kFiring;
  std::vector<std::string> command;
  nlohmann::json payload;  // schema in docs/alerts.md
};

class AlertEngine {
 public:
  /// `hostname` only goes into payloads.
  AlertEngine(std::vector<AlertRule> rules, std::string hostname);

  /// One evaluation. `snap` is null when no snapshot could be taken this tick: metric
  /// rules then keep their state. `findings` are the current health findings, `leases`
  /// carry idle_since_unix_ms (IdleWatch::Annotate), `jobs` the queue. Returns the hooks to
  /// run now: a rule fires once per subject when its condition held long enough, again
  /// every `repeat` while it holds, and resolves (once) when it stops holding or the subject
  /// goes away. Subjects: a GPU (metrics, findings), "driver" (findings without a GPU), a
  /// lease, a job.
  std::vector<AlertEvent> Evaluate(const model::MachineSnapshot* snap,
                                   const std::vector<model::Finding>& findings,
                                   const std::vector<model::Lease>& leases,
                                   const std::vector<model::Job>& jobs, int64_t now_unix_ms);

  /// How many (rule, subject) pairs are firing now (for status and tests).
  int FiringCount() const;
  const std::vector<AlertRule>& rules() const { return rules_; }

  /// What one rule sees for one subject in one evaluation (public for the .cc's helpers).
  struct Observation {
    std::string key;       // stable subject id, e.g. "gpu:GPU-…", "lease:12"
    bool holds = false;
    nlohmann::json subject;
    nlohmann::json value;  // number or null
    std::optional<int64_t> since_unix_ms;  // when the condition started, if the data says
    std::string message;
  };

 private:
  struct SubjectState {
    int64_t since_unix_ms = 0;
    bool firing = false;
    int64_t fired_unix_ms = 0;
    int64_t last_sent_unix_ms = 0;
    nlohmann::json subject;
    nlohmann::json value;
    std::string message;
  };
  AlertEvent MakeEvent(const AlertRule& rule, AlertEvent::State state, const SubjectState& s,
                       const nlohmann::json& value, const std::string& message, int64_t now) const;

  std::vector<AlertRule> rules_;
  std::string hostname_;
  std::vector<std::map<std::string, SubjectState>> state_;  // per rule, by subject key
};

}  // namespace gpuman::monitor
