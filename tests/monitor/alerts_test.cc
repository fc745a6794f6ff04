#include "monitor/alerts.h"

#include <gtest/gtest.h>
#include <toml++/toml.h>

#include <set>

namespace gpuman::monitor {
namespace {

constexpr int64_t kSec = 1000;
constexpr int64_t kT0 = 1'700'000'000'000;

Result<std::vector<AlertRule>> Parse(const std::string& text) {
  toml::table t = toml::parse(text);
  const toml::array* arr = t["alert"].as_array();
  if (!arr) return MakeError(ErrorCode::kInternal, "test: no alert array");
  return ParseAlertRules(*arr, "test.toml");
}

AlertRule One(const std::string& text) {
  auto rules = Parse(text);
  EXPECT_TRUE(rules) << (rules ? "" : rules.error().message);
  if (!rules || rules->size() != 1) return AlertRule{};
  return (*rules)[0];
}

model::MachineSnapshot Temps(std::vector<std::optional<int>> temps) {
  model::MachineSnapshot s;
  for (size_t i = 0; i < temps.size(); ++i) {
    model::DeviceSnapshot d;
    d.index = static_cast<int>(i);
    d.uuid = "GPU-" + std::to_string(i);
    d.name = "Test GPU";
    d.temperature_c = temps[i];
    s.gpus.push_back(d);
  }
  return s;
}

const std::vector<model::Finding> kNoFindings;
const std::vector<model::Lease> kNoLeases;
const std::vector<model::Job> kNoJobs;

std::vector<AlertEvent> EvalTemps(AlertEngine& engine, std::vector<std::optional<int>> temps, int64_t now) {
  auto snap = Temps(std::move(temps));
  return engine.Evaluate(&snap, kNoFindings, kNoLeases, kNoJobs, now);
}

// ---- parsing ----

TEST(ParseAlertRulesTest, ReadsMetricAndEventForms) {
  auto rules = Parse(R"(
[[alert]]
name = "hot"
metric = "temperature_c"
above = 85
for = "60s"
repeat = "1h"
command = ["/usr/local/bin/notify", "--channel", "gpu"]

[[alert]]
name = "xid"
event = "xid_fatal"
resolved = false
command = ["/usr/bin/logger", "-t", "gpuman"]

[[alert]]
name = "ecc"
event = "finding"
code = "ecc_volatile_uncorrected"
severity = "fatal"
command = ["logger"]

[[alert]]
name = "idle-2h"
event = "lease_idle"
for = "2h"
command = ["logger"]

[[alert]]
name = "cold-memory"
metric = "memory_used_percent"
below = 0.5
command = ["logger"]
)");
  ASSERT_TRUE(rules) << rules.error().message;
  ASSERT_EQ(rules->size(), 5u);
  const AlertRule& hot = (*rules)[0];
  EXPECT_EQ(hot.name, "hot");
  EXPECT_EQ(hot.kind, AlertKind::kMetric);
  EXPECT_EQ(hot.metric, Metric::kTemperatureC);
  EXPECT_EQ(hot.above, 85.0);
  EXPECT_FALSE(hot.below);
  EXPECT_EQ(hot.for_ms, 60 * kSec);
  EXPECT_EQ(hot.repeat_ms, 3600 * kSec);
  EXPECT_TRUE(hot.send_resolved);
  EXPECT_EQ(hot.command, (std::vector<std::string>{"/usr/local/bin/notify", "--channel", "gpu"}));
  EXPECT_EQ(DescribeRule(hot), "temperature_c > 85 for 1m");
  EXPECT_EQ((*rules)[1].kind, AlertKind::kXidFatal);
  EXPECT_FALSE((*rules)[1].send_resolved);
  EXPECT_EQ((*rules)[2].kind, AlertKind::kFinding);
  EXPECT_EQ((*rules)[2].code, "ecc_volatile_uncorrected");
  EXPECT_EQ((*rules)[2].severity, model::Severity::kFatal);
  EXPECT_EQ((*rules)[3].kind, AlertKind::kLeaseIdle);
  EXPECT_EQ((*rules)[3].for_ms, 2 * 3600 * kSec);
  EXPECT_EQ((*rules)[4].below, 0.5);
}

TEST(ParseAlertRulesTest, RejectsMistakesNamingTheRule) {
  struct Case {
    const char* text;
    const char* expect;
  } cases[] = {
      {"[[alert]]\nname='hot'\nmetric='temperature_c'\nabove=85\n", "alert 'hot': missing command"},
      {"[[alert]]\nname='hot'\nmetric='temperature_c'\nabove=85\ncommand=[]\n", "alert 'hot': command must be"},
      {"[[alert]]\nname='hot'\nmetric='temperature_c'\nabove=85\ncommand='/bin/x'\n", "alert 'hot': command must be"},
      {"[[alert]]\nname='hot'\nmetric='temp'\nabove=85\ncommand=['x']\n", "alert 'hot': unknown metric 'temp'"},
      {"[[alert]]\nname='hot'\nmetric='temperature_c'\ncommand=['x']\n", "alert 'hot': metric temperature_c needs exactly one of above or below"},
      {"[[alert]]\nname='hot'\nmetric='temperature_c'\nabove=85\nbelow=10\ncommand=['x']\n", "exactly one of above or below"},
      {"[[alert]]\nname='hot'\nmetric='temperature_c'\nabove='85'\ncommand=['x']\n", "alert 'hot': above must be a number"},
      {"[[alert]]\nname='hot'\nmetric='temperature_c'\nabove=85\nfor='soon'\ncommand=['x']\n", "alert 'hot': for: "},
      {"[[alert]]\nname='hot'\nmetric='temperature_c'\nabove=85\nfor=60\ncommand=['x']\n", "alert 'hot': for must be a duration"},
      {"[[alert]]\nname='hot'\nmetric='temperature_c'\nabove=85\nrepeat='0s'\ncommand=['x']\n", "alert 'hot': repeat must be longer than 0"},
      {"[[alert]]\nname='hot'\nmetric='temperature_c'\nabove=85\nwhen='x'\ncommand=['x']\n", "alert 'hot': unknown key 'when'"},
      {"[[alert]]\nname='hot'\ncommand=['x']\n", "alert 'hot': needs exactly one of metric or event"},
      {"[[alert]]\nname='hot'\nmetric='power_w'\nevent='fatal'\nabove=1\ncommand=['x']\n", "needs exactly one of metric or event"},
      {"[[alert]]\nname='x'\nevent='xid'\ncommand=['x']\n", "alert 'x': unknown event 'xid'"},
      {"[[alert]]\nname='x'\nevent='fatal'\nabove=3\ncommand=['x']\n", "alert 'x': above only goes with metric"},
      {"[[alert]]\nname='x'\nevent='fatal'\ncode='xid'\ncommand=['x']\n", "alert 'x': code only goes with event = \"finding\""},
      {"[[alert]]\nname='x'\nevent='finding'\ncommand=['x']\n", "alert 'x': event finding needs code"},
      {"[[alert]]\nname='x'\nevent='finding'\ncode='xid'\nseverity='bad'\ncommand=['x']\n", "alert 'x': severity must be"},
      {"[[alert]]\nname='x'\nevent='queue_wait'\ncommand=['x']\n", "alert 'x': queue_wait needs for"},
      {"[[alert]]\nname='x'\nevent='fatal'\nresolved='no'\ncommand=['x']\n", "alert 'x': resolved must be true or false"},
      {"[[alert]]\nevent='fatal'\ncommand=['x']\n", "config test.toml: alert #1: missing name"},
      {"[[alert]]\nname='a'\nevent='fatal'\ncommand=['x']\n[[alert]]\nname=''\nevent='fatal'\ncommand=['x']\n", "alert #2: name must be"},
      {"[[alert]]\nname='a'\nevent='fatal'\ncommand=['x']\n[[alert]]\nname='a'\nevent='gpu_lost'\ncommand=['x']\n", "alert 'a': the name is used twice"},
      {"[[alert]]\nname='x'\nevent='fatal'\ncommand=['', 'a']\n", "alert 'x': command: the program"},
  };
  for (const auto& c : cases) {
    auto rules = Parse(c.text);
    ASSERT_FALSE(rules) << c.text;
    EXPECT_EQ(rules.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(rules.error().message.find(c.expect), std::string::npos)
        << "got: " << rules.error().message << "\nwant: " << c.expect;
    EXPECT_EQ(rules.error().message.rfind("config test.toml: alert", 0), 0u) << rules.error().message;
  }
}

TEST(ParseAlertRulesTest, RejectsAnArrayOfNonTables) {
  toml::table t = toml::parse("alert = [1, 2]\n");
  auto rules = ParseAlertRules(*t["alert"].as_array(), "test.toml");
  ASSERT_FALSE(rules);
  EXPECT_NE(rules.error().message.find("alert #1: must be a table"), std::string::npos) << rules.error().message;
}

// ---- evaluation ----

TEST(AlertEngineTest, MetricFiresAfterForPerGpuAndResolves) {
  AlertEngine engine({One(R"([[alert]]
name = "hot"
metric = "temperature_c"
above = 85
for = "60s"
command = ["/bin/true"]
)")},
                     "node7");
  // GPU 1 is hot from t0; GPU 0 stays cool.
  for (int64_t s = 0; s < 60; s += 10) {
    EXPECT_EQ(EvalTemps(engine, {60, 90}, kT0 + s * kSec).size(), 0u)
        << "at " << s << " s";
  }
  auto events = EvalTemps(engine, {60, 91}, kT0 + 60 * kSec);
  ASSERT_EQ(events.size(), 1u);
  const auto& p = events[0].payload;
  EXPECT_EQ(events[0].rule, "hot");
  EXPECT_EQ(events[0].state, AlertEvent::State::kFiring);
  EXPECT_EQ(events[0].command, std::vector<std::string>{"/bin/true"});
  EXPECT_EQ(p["state"], "firing");
  EXPECT_EQ(p["rule"], "hot");
  EXPECT_EQ(p["subject"]["type"], "gpu");
  EXPECT_EQ(p["subject"]["gpu_index"], 1);
  EXPECT_EQ(p["subject"]["gpu_uuid"], "GPU-1");
  EXPECT_EQ(p["subject"]["gpu_name"], "Test GPU");
  EXPECT_EQ(p["value"], 91.0);
  EXPECT_EQ(p["threshold"], 85.0);
  EXPECT_EQ(p["since_unix_ms"], kT0);
  EXPECT_EQ(p["now_unix_ms"], kT0 + 60 * kSec);
  EXPECT_EQ(p["hostname"], "node7");
  EXPECT_EQ(engine.FiringCount(), 1);
  // No re-fire while it holds (no repeat set).
  EXPECT_EQ(EvalTemps(engine, {60, 95}, kT0 + 3600 * kSec).size(), 0u);
  // No snapshot this tick: state is kept, nothing sent.
  EXPECT_EQ(engine.Evaluate(nullptr, kNoFindings, kNoLeases, kNoJobs, kT0 + 3601 * kSec).size(), 0u);
  EXPECT_EQ(engine.FiringCount(), 1);
  // Cools down: one resolved event with the current value.
  events = EvalTemps(engine, {60, 80}, kT0 + 3602 * kSec);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].state, AlertEvent::State::kResolved);
  EXPECT_EQ(events[0].payload["state"], "resolved");
  EXPECT_EQ(events[0].payload["value"], 80.0);
  EXPECT_EQ(engine.FiringCount(), 0);
  EXPECT_EQ(EvalTemps(engine, {60, 80}, kT0 + 3603 * kSec).size(), 0u);
}

TEST(AlertEngineTest, ADipBeforeForRestartsThePendingTime) {
  AlertEngine engine({One("[[alert]]\nname='hot'\nmetric='temperature_c'\nabove=85\nfor='60s'\ncommand=['x']\n")}, "");
  EvalTemps(engine, {90}, kT0);
  EvalTemps(engine, {85}, kT0 + 30 * kSec);  // not above
  EvalTemps(engine, {90}, kT0 + 40 * kSec);
  EXPECT_EQ(EvalTemps(engine, {90}, kT0 + 99 * kSec).size(), 0u);
  EXPECT_EQ(EvalTemps(engine, {90}, kT0 + 100 * kSec).size(), 1u);
}

TEST(AlertEngineTest, MissingReadingResolvesAndRepeatRefires) {
  AlertEngine engine(
      {One("[[alert]]\nname='hot'\nmetric='temperature_c'\nabove=85\nrepeat='10m'\ncommand=['x']\n")}, "");
  EXPECT_EQ(EvalTemps(engine, {90}, kT0).size(), 1u);  // for = 0
  EXPECT_EQ(EvalTemps(engine, {90}, kT0 + 599 * kSec).size(), 0u);
  auto again = EvalTemps(engine, {90}, kT0 + 600 * kSec);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].state, AlertEvent::State::kFiring);
  EXPECT_EQ(again[0].payload["fired_unix_ms"], kT0);
  auto gone = EvalTemps(engine, {std::nullopt}, kT0 + 601 * kSec);
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_EQ(gone[0].state, AlertEvent::State::kResolved);
  EXPECT_TRUE(gone[0].payload["value"].is_null());
}

TEST(AlertEngineTest, ResolvedCanBeTurnedOff) {
  AlertEngine engine({One("[[alert]]\nname='hot'\nmetric='power_w'\nabove=300\nresolved=false\ncommand=['x']\n")}, "");
  auto snap = Temps({50});
  snap.gpus[0].power_usage_w = 350;
  EXPECT_EQ(engine.Evaluate(&snap, kNoFindings, kNoLeases, kNoJobs, kT0).size(), 1u);
  snap.gpus[0].power_usage_w = 100;
  EXPECT_EQ(engine.Evaluate(&snap, kNoFindings, kNoLeases, kNoJobs, kT0 + kSec).size(), 0u);
  EXPECT_EQ(engine.FiringCount(), 0);
}

TEST(AlertEngineTest, MemoryUsedPercent) {
  model::DeviceSnapshot d;
  d.memory_total_bytes = 1000;
  d.memory_used_bytes = 950;
  EXPECT_EQ(MetricValue(Metric::kMemoryUsedPercent, d), 95.0);
  d.memory_total_bytes.reset();
  EXPECT_FALSE(MetricValue(Metric::kMemoryUsedPercent, d));
  EXPECT_EQ(MetricValue(Metric::kMemoryUsedBytes, d), 950.0);
  EXPECT_FALSE(MetricValue(Metric::kEccVolatileUncorrected, d));
}

model::Finding Xid(const std::string& uuid, int index, int xid, model::Severity severity) {
  model::Finding f;
  f.code = "xid";
  f.severity = severity;
  f.gpu_uuid = uuid;
  f.gpu_index = index;
  f.xid = xid;
  f.message = "Xid " + std::to_string(xid);
  f.source = "nvml_event";
  return f;
}

TEST(AlertEngineTest, XidFatalFiresOncePerGpuAndXidAndIgnoresWarnings) {
  AlertEngine engine({One("[[alert]]\nname='xid'\nevent='xid_fatal'\ncommand=['x']\n")}, "h");
  auto snap = Temps({50, 50});
  std::vector<model::Finding> findings = {Xid("GPU-1", 1, 79, model::Severity::kFatal),
                                          Xid("GPU-0", 0, 13, model::Severity::kWarning)};
  auto events = engine.Evaluate(&snap, findings, kNoLeases, kNoJobs, kT0);
  ASSERT_EQ(events.size(), 1u);
  const auto& p = events[0].payload;
  EXPECT_EQ(p["event"], "xid_fatal");
  EXPECT_EQ(p["subject"]["gpu_uuid"], "GPU-1");
  EXPECT_EQ(p["subject"]["gpu_name"], "Test GPU");
  EXPECT_EQ(p["subject"]["finding"]["xid"], 79);
  EXPECT_EQ(p["subject"]["finding"]["severity"], "fatal");
  EXPECT_EQ(p["value"], 79);
  EXPECT_EQ(engine.Evaluate(&snap, findings, kNoLeases, kNoJobs, kT0 + kSec).size(), 0u);
  // A second fatal Xid on the same GPU is a new subject.
  findings.push_back(Xid("GPU-1", 1, 48, model::Severity::kFatal));
  EXPECT_EQ(engine.Evaluate(&snap, findings, kNoLeases, kNoJobs, kT0 + 2 * kSec).size(), 1u);
  // Findings cleared (drain lifted): both resolve.
  events = engine.Evaluate(&snap, kNoFindings, kNoLeases, kNoJobs, kT0 + 3 * kSec);
  ASSERT_EQ(events.size(), 2u);
  for (const auto& e : events) EXPECT_EQ(e.state, AlertEvent::State::kResolved);
}

TEST(AlertEngineTest, FindingByCodeFatalAndGpuLost) {
  auto rules = Parse(R"(
[[alert]]
name = "any-fatal"
event = "fatal"
command = ["x"]
[[alert]]
name = "ecc-warn"
event = "finding"
code = "ecc_volatile_corrected"
severity = "warning"
command = ["x"]
[[alert]]
name = "lost"
event = "gpu_lost"
command = ["x"]
)");
  ASSERT_TRUE(rules) << rules.error().message;
  AlertEngine engine(*rules, "");
  model::Finding lost;
  lost.code = "gpu_lost";
  lost.severity = model::Severity::kFatal;
  lost.gpu_uuid = "GPU-0";
  model::Finding ecc;
  ecc.code = "ecc_volatile_corrected";
  ecc.severity = model::Severity::kWarning;
  ecc.gpu_uuid = "GPU-1";
  model::Finding driver;
  driver.code = "driver_mismatch";
  driver.severity = model::Severity::kFatal;
  auto events = engine.Evaluate(nullptr, {lost, ecc, driver}, kNoLeases, kNoJobs, kT0);
  std::multiset<std::string> fired;
  for (const auto& e : events) fired.insert(e.rule + ":" + e.payload["subject"]["type"].get<std::string>());
  EXPECT_EQ(fired, (std::multiset<std::string>{"any-fatal:gpu", "any-fatal:driver", "ecc-warn:gpu", "lost:gpu"}));
}

TEST(AlertEngineTest, LeaseIdleFiresWhenIdleLongerThanForAndResolvesWhenBusy) {
  AlertEngine engine({One("[[alert]]\nname='idle-2h'\nevent='lease_idle'\nfor='2h'\ncommand=['x']\n")}, "");
  model::Lease lease;
  lease.id = 12;
  lease.user = "bob";
  lease.gpu_uuids = {"GPU-0"};
  lease.kind = "select";
  std::vector<model::Lease> leases = {lease};
  EXPECT_EQ(engine.Evaluate(nullptr, kNoFindings, leases, kNoJobs, kT0).size(), 0u);  // not idle
  leases[0].idle_since_unix_ms = kT0;
  EXPECT_EQ(engine.Evaluate(nullptr, kNoFindings, leases, kNoJobs, kT0 + 7199 * kSec).size(), 0u);
  auto events = engine.Evaluate(nullptr, kNoFindings, leases, kNoJobs, kT0 + 7200 * kSec);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].payload["subject"]["type"], "lease");
  EXPECT_EQ(events[0].payload["subject"]["lease_id"], 12);
  EXPECT_EQ(events[0].payload["subject"]["user"], "bob");
  EXPECT_EQ(events[0].payload["value"], 7200);
  EXPECT_EQ(events[0].payload["threshold"], 7200);
  EXPECT_EQ(events[0].payload["since_unix_ms"], kT0);
  EXPECT_EQ(engine.Evaluate(nullptr, kNoFindings, leases, kNoJobs, kT0 + 9000 * kSec).size(), 0u);
  leases[0].idle_since_unix_ms.reset();
  events = engine.Evaluate(nullptr, kNoFindings, leases, kNoJobs, kT0 + 9001 * kSec);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].state, AlertEvent::State::kResolved);
}

TEST(AlertEngineTest, LeaseThatGoesAwayResolves) {
  AlertEngine engine({One("[[alert]]\nname='idle'\nevent='lease_idle'\ncommand=['x']\n")}, "");
  model::Lease lease;
  lease.id = 3;
  lease.idle_since_unix_ms = kT0;
  EXPECT_EQ(engine.Evaluate(nullptr, kNoFindings, {lease}, kNoJobs, kT0 + kSec).size(), 1u);
  auto events = engine.Evaluate(nullptr, kNoFindings, kNoLeases, kNoJobs, kT0 + 2 * kSec);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].state, AlertEvent::State::kResolved);
  EXPECT_EQ(events[0].payload["subject"]["lease_id"], 3);
}

TEST(AlertEngineTest, QueueWaitCountsQueuedJobsOnly) {
  AlertEngine engine({One("[[alert]]\nname='wait'\nevent='queue_wait'\nfor='4h'\ncommand=['x']\n")}, "");
  model::Job queued, held;
  queued.id = 5;
  queued.user = "carol";
  queued.state = model::JobState::kQueued;
  queued.submitted_unix_ms = kT0;
  held = queued;
  held.id = 6;
  held.state = model::JobState::kHeld;
  std::vector<model::Job> jobs = {queued, held};
  EXPECT_EQ(engine.Evaluate(nullptr, kNoFindings, kNoLeases, jobs, kT0 + 4 * 3600 * kSec - 1).size(), 0u);
  auto events = engine.Evaluate(nullptr, kNoFindings, kNoLeases, jobs, kT0 + 4 * 3600 * kSec);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].payload["subject"]["job_id"], 5);
  jobs[0].state = model::JobState::kRunning;
  events = engine.Evaluate(nullptr, kNoFindings, kNoLeases, jobs, kT0 + 5 * 3600 * kSec);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].state, AlertEvent::State::kResolved);
}

}  // namespace
}  // namespace gpuman::monitor
