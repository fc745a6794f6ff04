#include "monitor/alerts.h"

#include <cmath>
#include <cstdio>
#include <set>
#include <type_traits>

#include <toml++/toml.h>

// alerts.h and idle.h forward-declare toml::v3::array/table; a toml++ with another
// inline namespace must fail here, not at link time.
static_assert(std::is_same_v<toml::table, toml::v3::table> && std::is_same_v<toml::array, toml::v3::array>);

#include "base/duration.h"
#include "base/strings.h"

namespace gpuman::monitor {
namespace {

struct MetricInfo {
  Metric metric;
  const char* name;
};
constexpr MetricInfo kMetrics[] = {
    {Metric::kTemperatureC, "temperature_c"},
    {Metric::kPowerW, "power_w"},
    {Metric::kUtilizationPercent, "utilization_percent"},
    {Metric::kMemoryUtilizationPercent, "memory_utilization_percent"},
    {Metric::kMemoryUsedPercent, "memory_used_percent"},
    {Metric::kMemoryUsedBytes, "memory_used_bytes"},
    {Metric::kEccVolatileUncorrected, "ecc_volatile_uncorrected"},
    {Metric::kEccVolatileCorrected, "ecc_volatile_corrected"},
    {Metric::kEccAggregateUncorrected, "ecc_aggregate_uncorrected"},
    {Metric::kFanPercent, "fan_percent"},
};

struct EventInfo {
  AlertKind kind;
  const char* name;
};
constexpr EventInfo kEvents[] = {
    {AlertKind::kFatal, "fatal"},         {AlertKind::kXidFatal, "xid_fatal"},
    {AlertKind::kFinding, "finding"},     {AlertKind::kGpuLost, "gpu_lost"},
    {AlertKind::kLeaseIdle, "lease_idle"}, {AlertKind::kQueueWait, "queue_wait"},
};

const char* EventName(AlertKind kind) {
  for (const auto& e : kEvents) {
    if (e.kind == kind) return e.name;
  }
  return "metric";
}

std::string FormatNumber(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

template <typename T>
std::optional<double> ToDouble(const std::optional<T>& v) {
  if (!v) return std::nullopt;
  return static_cast<double>(*v);
}

nlohmann::json Number(std::optional<double> v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }

// ---- subjects ----

std::string GpuKey(const std::string& uuid, std::optional<int> index) {
  if (!uuid.empty()) return "gpu:" + uuid;
  if (index) return "gpu-index:" + std::to_string(*index);
  return "driver";
}

nlohmann::json GpuSubject(const model::DeviceSnapshot& dev) {
  return {{"type", "gpu"},
          {"gpu_index", dev.index},
          {"gpu_uuid", dev.uuid ? nlohmann::json(*dev.uuid) : nlohmann::json(nullptr)},
          {"gpu_name", dev.name ? nlohmann::json(*dev.name) : nlohmann::json(nullptr)}};
}

std::string GpuLabel(const model::DeviceSnapshot& dev) {
  std::string label = "GPU " + std::to_string(dev.index);
  if (dev.name) label += " (" + *dev.name + ")";
  return label;
}

nlohmann::json FindingSubject(const model::Finding& f, const model::MachineSnapshot* snap) {
  if (f.gpu_uuid.empty() && !f.gpu_index) return {{"type", "driver"}};
  nlohmann::json s = {{"type", "gpu"},
                      {"gpu_index", f.gpu_index ? nlohmann::json(*f.gpu_index) : nlohmann::json(nullptr)},
                      {"gpu_uuid", f.gpu_uuid.empty() ? nlohmann::json(nullptr) : nlohmann::json(f.gpu_uuid)},
                      {"gpu_name", nullptr}};
  if (snap) {
    for (const auto& dev : snap->gpus) {
      bool same = !f.gpu_uuid.empty() ? (dev.uuid && *dev.uuid == f.gpu_uuid)
                                      : (f.gpu_index && dev.index == *f.gpu_index);
      if (!same) continue;
      s = GpuSubject(dev);
      break;
    }
  }
  return s;
}

nlohmann::json FindingJson(const model::Finding& f) {
  nlohmann::json j = {{"code", f.code},
                      {"severity", model::SeverityName(f.severity)},
                      {"message", f.message},
                      {"count", f.count},
                      {"source", f.source}};
  j["xid"] = f.xid ? nlohmann::json(*f.xid) : nlohmann::json(nullptr);
  j["first_seen_unix_ms"] = f.first_seen_unix_ms ? nlohmann::json(*f.first_seen_unix_ms) : nlohmann::json(nullptr);
  j["last_seen_unix_ms"] = f.last_seen_unix_ms ? nlohmann::json(*f.last_seen_unix_ms) : nlohmann::json(nullptr);
  return j;
}

bool FindingMatches(const AlertRule& rule, const model::Finding& f) {
  switch (rule.kind) {
    case AlertKind::kFatal:
      return f.severity == model::Severity::kFatal;
    case AlertKind::kXidFatal:
      return f.code == "xid" && f.severity == model::Severity::kFatal;
    case AlertKind::kGpuLost:
      return f.code == "gpu_lost";
    case AlertKind::kFinding:
      return f.code == rule.code && (!rule.severity || *rule.severity == f.severity);
    default:
      return false;
  }
}

using Observation = AlertEngine::Observation;

// What `rule` sees now, one entry per subject it knows about. Only entries with holds ==
// true keep a subject alive; the others carry the current value for "resolved" events.
std::vector<Observation> Observe(const AlertRule& rule, const model::MachineSnapshot* snap,
                                 const std::vector<model::Finding>& findings,
                                 const std::vector<model::Lease>& leases,
                                 const std::vector<model::Job>& jobs, int64_t now) {
  std::vector<Observation> out;
  switch (rule.kind) {
    case AlertKind::kMetric: {
      for (const auto& dev : snap->gpus) {
        Observation o;
        o.key = GpuKey(dev.uuid.value_or(""), dev.index);
        o.subject = GpuSubject(dev);
        std::optional<double> v = MetricValue(rule.metric, dev);
        o.value = Number(v);
        o.holds = v && ((rule.above && *v > *rule.above) || (rule.below && *v < *rule.below));
        o.message = GpuLabel(dev) + " " + MetricName(rule.metric) + " " +
                    (v ? FormatNumber(*v) : std::string("unknown")) +
                    (rule.above ? " (above " + FormatNumber(*rule.above) + ")"
                                : " (below " + FormatNumber(rule.below.value_or(0)) + ")");
        out.push_back(std::move(o));
      }
      break;
    }
    case AlertKind::kFatal:
    case AlertKind::kXidFatal:
    case AlertKind::kGpuLost:
    case AlertKind::kFinding: {
      for (const auto& f : findings) {
        if (!FindingMatches(rule, f)) continue;
        Observation o;
        o.key = GpuKey(f.gpu_uuid, f.gpu_index) + "/" + f.code + (f.xid ? "/" + std::to_string(*f.xid) : "");
        o.holds = true;
        o.subject = FindingSubject(f, snap);
        o.subject["finding"] = FindingJson(f);
        o.value = f.xid ? nlohmann::json(*f.xid) : nlohmann::json(nullptr);
        o.message = f.message.empty() ? f.code : f.message;
        out.push_back(std::move(o));
      }
      break;
    }
    case AlertKind::kLeaseIdle: {
      for (const auto& lease : leases) {
        if (!lease.idle_since_unix_ms) continue;
        const int64_t idle_ms = now - *lease.idle_since_unix_ms;
        if (idle_ms < rule.for_ms) continue;
        Observation o;
        o.key = "lease:" + std::to_string(lease.id);
        o.holds = true;
        o.subject = {{"type", "lease"},       {"lease_id", lease.id},   {"user", lease.user},
                     {"uid", lease.uid},      {"kind", lease.kind},     {"command", lease.command},
                     {"gpu_uuids", lease.gpu_uuids}};
        o.value = idle_ms / 1000;
        o.since_unix_ms = *lease.idle_since_unix_ms;
        o.message = "lease " + std::to_string(lease.id) + " of " + lease.user + " idle for " +
                    FormatDurationMs(idle_ms);
        out.push_back(std::move(o));
      }
      break;
    }
    case AlertKind::kQueueWait: {
      for (const auto& job : jobs) {
        if (job.state != model::JobState::kQueued) continue;
        const int64_t wait_ms = now - job.submitted_unix_ms;
        if (wait_ms < rule.for_ms) continue;
        Observation o;
        o.key = "job:" + std::to_string(job.id);
        o.holds = true;
        o.subject = {{"type", "job"}, {"job_id", job.id}, {"user", job.user}, {"name", job.name},
                     {"gpus", job.request.count}, {"reason", job.reason}};
        o.value = wait_ms / 1000;
        o.since_unix_ms = job.submitted_unix_ms;
        o.message = "job " + std::to_string(job.id) + " of " + job.user + " queued for " +
                    FormatDurationMs(wait_ms);
        out.push_back(std::move(o));
      }
      break;
    }
  }
  return out;
}

// ---- parsing ----

class RuleParser {
 public:
  RuleParser(const std::string& origin, size_t position) : origin_(origin), position_(position) {}

  Result<AlertRule> Parse(const toml::node& node) {
    const toml::table* t = node.as_table();
    if (!t) return Bad("must be a table ([[alert]])");
    if (const toml::node* n = t->get("name")) {
      auto v = n->value<std::string>();
      if (!v || v->empty()) return Bad("name must be a non-empty string");
      rule_.name = *v;
    } else {
      return Bad("missing name");
    }
    static const std::set<std::string> kKnown = {"name", "metric", "above", "below", "event", "code",
                                                 "severity", "for", "repeat", "resolved", "command"};
    for (const auto& [key, value] : *t) {
      const std::string k(key.str());
      if (!kKnown.count(k)) {
        return Bad("unknown key '" + k +
                   "' (known: name, metric, above, below, event, code, severity, for, repeat, "
                   "resolved, command)");
      }
    }
    const bool has_metric = t->contains("metric"), has_event = t->contains("event");
    if (has_metric == has_event) return Bad("needs exactly one of metric or event");
    if (has_metric) {
      if (auto s = ParseMetricForm(*t); !s) return s.error();
    } else {
      if (auto s = ParseEventForm(*t); !s) return s.error();
    }
    if (const toml::node* n = t->get("for")) {
      auto ms = Duration(*n, "for");
      if (!ms) return ms.error();
      rule_.for_ms = *ms;
    } else if (rule_.kind == AlertKind::kQueueWait) {
      return Bad("queue_wait needs for (the wait that is too long, such as \"4h\")");
    }
    if (const toml::node* n = t->get("repeat")) {
      auto ms = Duration(*n, "repeat");
      if (!ms) return ms.error();
      if (*ms <= 0) return Bad("repeat must be longer than 0");
      rule_.repeat_ms = *ms;
    }
    if (const toml::node* n = t->get("resolved")) {
      auto v = n->value_exact<bool>();
      if (!v) return Bad("resolved must be true or false");
      rule_.send_resolved = *v;
    }
    const toml::node* cmd = t->get("command");
    if (!cmd) return Bad("missing command (an array such as [\"/usr/bin/logger\", \"-t\", \"gpuman\"])");
    const toml::array* arr = cmd->as_array();
    if (!arr || arr->empty()) return Bad("command must be a non-empty array of strings (argv)");
    for (const auto& item : *arr) {
      auto s = item.value<std::string>();
      if (!s) return Bad("command must be a non-empty array of strings (argv)");
      rule_.command.push_back(*s);
    }
    if (rule_.command[0].empty()) return Bad("command: the program (first element) is empty");
    return rule_;
  }

 private:
  Status ParseMetricForm(const toml::table& t) {
    rule_.kind = AlertKind::kMetric;
    for (const char* k : {"code", "severity"}) {
      if (t.contains(k)) return Bad(std::string(k) + " only goes with event = \"finding\"");
    }
    auto name = t.get("metric")->value<std::string>();
    if (!name) return Bad("metric must be a string");
    auto metric = ParseMetric(*name);
    if (!metric) {
      std::string known;
      for (const auto& m : kMetrics) known += (known.empty() ? "" : ", ") + std::string(m.name);
      return Bad("unknown metric '" + *name + "' (known: " + known + ")");
    }
    rule_.metric = *metric;
    for (const char* k : {"above", "below"}) {
      const toml::node* n = t.get(k);
      if (!n) continue;
      auto v = n->value<double>();
      if (!v || !std::isfinite(*v)) return Bad(std::string(k) + " must be a number");
      (std::string_view(k) == "above" ? rule_.above : rule_.below) = *v;
    }
    if (rule_.above.has_value() == rule_.below.has_value()) {
      return Bad("metric " + *name + " needs exactly one of above or below");
    }
    return {};
  }

  Status ParseEventForm(const toml::table& t) {
    for (const char* k : {"above", "below"}) {
      if (t.contains(k)) return Bad(std::string(k) + " only goes with metric");
    }
    auto name = t.get("event")->value<std::string>();
    if (!name) return Bad("event must be a string");
    bool found = false;
    for (const auto& e : kEvents) {
      if (*name == e.name) {
        rule_.kind = e.kind;
        found = true;
      }
    }
    if (!found) {
      std::string known;
      for (const auto& e : kEvents) known += (known.empty() ? "" : ", ") + std::string(e.name);
      return Bad("unknown event '" + *name + "' (known: " + known + ")");
    }
    if (rule_.kind == AlertKind::kFinding) {
      const toml::node* c = t.get("code");
      auto code = c ? c->value<std::string>() : std::nullopt;
      if (!code || code->empty()) return Bad("event finding needs code (such as \"ecc_volatile_uncorrected\")");
      rule_.code = *code;
      if (const toml::node* s = t.get("severity")) {
        auto v = s->value<std::string>();
        if (v && *v == "fatal") rule_.severity = model::Severity::kFatal;
        else if (v && *v == "warning") rule_.severity = model::Severity::kWarning;
        else return Bad("severity must be \"fatal\" or \"warning\"");
      }
    } else {
      for (const char* k : {"code", "severity"}) {
        if (t.contains(k)) return Bad(std::string(k) + " only goes with event = \"finding\"");
      }
    }
    return {};
  }

  Result<int64_t> Duration(const toml::node& n, const std::string& key) {
    auto v = n.value<std::string>();
    if (!v) return Bad(key + " must be a duration string such as \"60s\"");
    auto ms = ParseDurationMs(*v);
    if (!ms) return Bad(key + ": " + ms.error().message);
    return *ms;
  }

  Error Bad(const std::string& what) const {
    std::string who = rule_.name.empty() ? "alert #" + std::to_string(position_ + 1) : "alert '" + rule_.name + "'";
    return MakeError(ErrorCode::kInvalidArgument, "config " + origin_ + ": " + who + ": " + what);
  }

  const std::string& origin_;
  size_t position_;
  AlertRule rule_;
};

}  // namespace

const char* MetricName(Metric m) {
  for (const auto& info : kMetrics) {
    if (info.metric == m) return info.name;
  }
  return "?";
}

std::optional<Metric> ParseMetric(const std::string& name) {
  for (const auto& info : kMetrics) {
    if (name == info.name) return info.metric;
  }
  return std::nullopt;
}

std::optional<double> MetricValue(Metric m, const model::DeviceSnapshot& dev) {
  switch (m) {
    case Metric::kTemperatureC: return ToDouble(dev.temperature_c);
    case Metric::kPowerW: return dev.power_usage_w;
    case Metric::kUtilizationPercent: return ToDouble(dev.gpu_utilization_percent);
    case Metric::kMemoryUtilizationPercent: return ToDouble(dev.memory_utilization_percent);
    case Metric::kMemoryUsedPercent:
      if (!dev.memory_used_bytes || !dev.memory_total_bytes || *dev.memory_total_bytes <= 0) return std::nullopt;
      return 100.0 * static_cast<double>(*dev.memory_used_bytes) / static_cast<double>(*dev.memory_total_bytes);
    case Metric::kMemoryUsedBytes: return ToDouble(dev.memory_used_bytes);
    case Metric::kEccVolatileUncorrected: return ToDouble(dev.ecc_volatile_uncorrected);
    case Metric::kEccVolatileCorrected: return ToDouble(dev.ecc_volatile_corrected);
    case Metric::kEccAggregateUncorrected: return ToDouble(dev.ecc_aggregate_uncorrected);
    case Metric::kFanPercent: return ToDouble(dev.fan_percent);
  }
  return std::nullopt;
}

std::string DescribeRule(const AlertRule& rule) {
  std::string text;
  if (rule.kind == AlertKind::kMetric) {
    text = std::string(MetricName(rule.metric)) +
           (rule.above ? " > " + FormatNumber(*rule.above) : " < " + FormatNumber(rule.below.value_or(0)));
  } else {
    text = EventName(rule.kind);
    if (rule.kind == AlertKind::kFinding) {
      text += " " + rule.code;
      if (rule.severity) text += std::string(" (") + model::SeverityName(*rule.severity) + ")";
    }
  }
  if (rule.for_ms > 0) text += " for " + FormatDurationMs(rule.for_ms);
  return text;
}

Result<std::vector<AlertRule>> ParseAlertRules(const toml::array& alerts, const std::string& origin) {
  std::vector<AlertRule> rules;
  std::set<std::string> names;
  for (size_t i = 0; i < alerts.size(); ++i) {
    auto rule = RuleParser(origin, i).Parse(*alerts.get(i));
    if (!rule) return rule.error();
    if (!names.insert(rule->name).second) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "config " + origin + ": alert '" + rule->name + "': the name is used twice");
    }
    rules.push_back(std::move(*rule));
  }
  return rules;
}

AlertEngine::AlertEngine(std::vector<AlertRule> rules, std::string hostname)
    : rules_(std::move(rules)), hostname_(std::move(hostname)), state_(rules_.size()) {}

int AlertEngine::FiringCount() const {
  int n = 0;
  for (const auto& per_rule : state_) {
    for (const auto& [key, s] : per_rule) n += s.firing ? 1 : 0;
  }
  return n;
}

std::vector<AlertEvent> AlertEngine::Evaluate(const model::MachineSnapshot* snap,
                                              const std::vector<model::Finding>& findings,
                                              const std::vector<model::Lease>& leases,
                                              const std::vector<model::Job>& jobs, int64_t now) {
  std::vector<AlertEvent> events;
  for (size_t r = 0; r < rules_.size(); ++r) {
    const AlertRule& rule = rules_[r];
    if (rule.kind == AlertKind::kMetric && snap == nullptr) continue;  // no data: keep state
    auto& states = state_[r];
    // lease_idle / queue_wait measure their own duration (idle_since, submitted): `for` is
    // already in the condition, so they fire as soon as it holds.
    const bool self_timed = rule.kind == AlertKind::kLeaseIdle || rule.kind == AlertKind::kQueueWait;
    std::map<std::string, const Observation*> seen;
    std::vector<Observation> obs = Observe(rule, snap, findings, leases, jobs, now);
    for (const Observation& o : obs) {
      seen[o.key] = &o;
      if (!o.holds) continue;
      auto [it, is_new] = states.try_emplace(o.key);
      SubjectState& s = it->second;
      if (is_new) s.since_unix_ms = o.since_unix_ms.value_or(now);
      s.subject = o.subject;
      s.value = o.value;
      s.message = o.message;
      if (!s.firing) {
        if (self_timed || now - s.since_unix_ms >= rule.for_ms) {
          s.firing = true;
          s.fired_unix_ms = now;
          s.last_sent_unix_ms = now;
          events.push_back(MakeEvent(rule, AlertEvent::State::kFiring, s, o.value, o.message, now));
        }
      } else if (rule.repeat_ms && now - s.last_sent_unix_ms >= *rule.repeat_ms) {
        s.last_sent_unix_ms = now;
        events.push_back(MakeEvent(rule, AlertEvent::State::kFiring, s, o.value, o.message, now));
      }
    }
    for (auto it = states.begin(); it != states.end();) {
      auto o = seen.find(it->first);
      if (o != seen.end() && o->second->holds) {
        ++it;
        continue;
      }
      const SubjectState& s = it->second;
      if (s.firing && rule.send_resolved) {
        // The current value when the subject is still there (a cooled-down GPU), else null.
        nlohmann::json value = o != seen.end() ? o->second->value : nlohmann::json(nullptr);
        std::string message = o != seen.end() ? o->second->message : s.message + " (gone)";
        events.push_back(MakeEvent(rule, AlertEvent::State::kResolved, s, value, message, now));
      }
      it = states.erase(it);
    }
  }
  return events;
}

AlertEvent AlertEngine::MakeEvent(const AlertRule& rule, AlertEvent::State state, const SubjectState& s,
                                  const nlohmann::json& value, const std::string& message, int64_t now) const {
  AlertEvent event;
  event.rule = rule.name;
  event.state = state;
  event.command = rule.command;
  nlohmann::json threshold = nullptr;
  if (rule.kind == AlertKind::kMetric) threshold = rule.above ? *rule.above : rule.below.value_or(0);
  if (rule.kind == AlertKind::kLeaseIdle || rule.kind == AlertKind::kQueueWait) threshold = rule.for_ms / 1000;
  event.payload = {
      {"version", 1},
      {"kind", "alert"},
      {"rule", rule.name},
      {"condition", DescribeRule(rule)},
      {"event", rule.kind == AlertKind::kMetric ? std::string("metric") : std::string(EventName(rule.kind))},
      {"metric", rule.kind == AlertKind::kMetric ? nlohmann::json(MetricName(rule.metric)) : nlohmann::json(nullptr)},
      {"state", state == AlertEvent::State::kFiring ? "firing" : "resolved"},
      {"subject", s.subject},
      {"value", value},
      {"threshold", threshold},
      {"since_unix_ms", s.since_unix_ms},
      {"since", FormatIsoUtc(s.since_unix_ms / 1000)},
      {"fired_unix_ms", s.fired_unix_ms},
      {"now_unix_ms", now},
      {"now", FormatIsoUtc(now / 1000)},
      {"hostname", hostname_},
      {"message", message},
  };
  return event;
}

}  // namespace gpuman::monitor
