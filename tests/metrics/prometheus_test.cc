// FormatPrometheus: the output is parsed back line by line with a strict reader of the
// text format 0.0.4, and the values are compared with the input.
#include "metrics/prometheus.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "support/subprocess.h"

namespace gpuman::metrics {
namespace {

using Labels = std::map<std::string, std::string>;

struct Sample {
  std::string name;
  Labels labels;
  double value = 0;
};

struct Exposition {
  std::vector<Sample> samples;
  std::map<std::string, std::string> types;  // family -> type
  std::map<std::string, std::string> help;
  std::vector<std::string> errors;           // what a strict reader rejects

  // Samples of `name` whose labels include `match`.
  std::vector<Sample> Find(const std::string& name, const Labels& match = {}) const {
    std::vector<Sample> out;
    for (const auto& s : samples) {
      if (s.name != name) continue;
      bool ok = true;
      for (const auto& [k, v] : match) {
        auto it = s.labels.find(k);
        ok = ok && it != s.labels.end() && it->second == v;
      }
      if (ok) out.push_back(s);
    }
    return out;
  }
  // The single sample of `name` with `match`; NaN (and a test failure) unless exactly one.
  double Value(const std::string& name, const Labels& match = {}) const {
    auto found = Find(name, match);
    EXPECT_EQ(found.size(), 1u) << name;
    return found.size() == 1 ? found[0].value : std::nan("");
  }
};

const std::regex kMetricName("[a-zA-Z_:][a-zA-Z0-9_:]*");
const std::regex kLabelName("[a-zA-Z_][a-zA-Z0-9_]*");

// A strict reader of the text format: HELP and TYPE once per family, before its samples;
// each family's lines together; valid names; escapes only \\ \" \n; no duplicate series.
Exposition Parse(const std::string& text) {
  Exposition x;
  auto error = [&](const std::string& line, const std::string& why) { x.errors.push_back(why + ": " + line); };
  std::string current;
  std::set<std::string> closed, series;
  std::istringstream in(text);
  std::string line;
  if (!text.empty() && text.back() != '\n') x.errors.push_back("no newline at the end");
  auto enter = [&](const std::string& family, const std::string& line_text) {
    if (family == current) return;
    if (!current.empty()) closed.insert(current);
    if (closed.count(family)) error(line_text, "family split in two");
    current = family;
  };
  while (std::getline(in, line)) {
    if (line.empty()) {
      error(line, "empty line");
      continue;
    }
    if (line[0] == '#') {
      std::istringstream words(line);
      std::string hash, kind, name;
      words >> hash >> kind >> name;
      std::string rest;
      std::getline(words, rest);
      if (!rest.empty() && rest[0] == ' ') rest.erase(0, 1);
      if (!std::regex_match(name, kMetricName)) error(line, "bad family name");
      enter(name, line);
      if (kind == "HELP") {
        if (x.help.count(name)) error(line, "second HELP");
        x.help[name] = rest;
      } else if (kind == "TYPE") {
        if (x.types.count(name)) error(line, "second TYPE");
        static const std::set<std::string> kTypes = {"counter", "gauge", "histogram", "summary", "untyped"};
        if (!kTypes.count(rest)) error(line, "bad type");
        x.types[name] = rest;
      } else {
        error(line, "unexpected comment");
      }
      continue;
    }
    Sample s;
    size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
    s.name = line.substr(0, i);
    if (!std::regex_match(s.name, kMetricName)) error(line, "bad metric name");
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        size_t eq = line.find('=', i);
        if (eq == std::string::npos || eq + 1 >= line.size() || line[eq + 1] != '"') {
          error(line, "bad label");
          break;
        }
        std::string lname = line.substr(i, eq - i);
        if (!std::regex_match(lname, kLabelName)) error(line, "bad label name");
        std::string value;
        size_t j = eq + 2;
        for (; j < line.size() && line[j] != '"'; ++j) {
          if (line[j] == '\\') {
            char next = j + 1 < line.size() ? line[j + 1] : '\0';
            if (next == '\\') value += '\\';
            else if (next == '"') value += '"';
            else if (next == 'n') value += '\n';
            else error(line, "bad escape");
            ++j;
          } else {
            value += line[j];
          }
        }
        if (s.labels.count(lname)) error(line, "label twice");
        s.labels[lname] = value;
        i = j + 1;
        if (i < line.size() && line[i] == ',') ++i;
      }
      ++i;  // '}'
    }
    if (i >= line.size() || line[i] != ' ') {
      error(line, "no space before the value");
      continue;
    }
    std::string value = line.substr(i + 1);
    if (value == "NaN") s.value = std::nan("");
    else if (value == "+Inf") s.value = INFINITY;
    else if (value == "-Inf") s.value = -INFINITY;
    else {
      size_t used = 0;
      try {
        s.value = std::stod(value, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != value.size() || value.empty()) error(line, "bad value");
    }
    std::string family = s.name;
    if (!x.types.count(family)) {
      for (const char* suffix : {"_bucket", "_sum", "_count"}) {
        std::string sfx(suffix);
        if (family.size() > sfx.size() && family.ends_with(sfx) &&
            x.types.count(family.substr(0, family.size() - sfx.size())) &&
            x.types[family.substr(0, family.size() - sfx.size())] == "histogram") {
          family = family.substr(0, family.size() - sfx.size());
        }
      }
    }
    if (!x.types.count(family) || !x.help.count(family)) error(line, "sample without HELP and TYPE");
    if (family != current) error(line, "sample outside its family's block");
    std::string key = s.name;
    for (const auto& [k, v] : s.labels) key += "|" + k + "=" + v;
    if (!series.insert(key).second) error(line, "duplicate series");
    x.samples.push_back(s);
  }
  return x;
}

constexpr const char* kUuid0 = "GPU-00000000-0000-0000-0000-000000000000";
constexpr const char* kUuid1 = "GPU-11111111-1111-1111-1111-111111111111";

model::GpuProcess Process(uint32_t pid, std::optional<uint32_t> uid, std::optional<std::string> user,
                          std::optional<int64_t> memory) {
  model::GpuProcess p;
  p.pid = pid;
  p.uid = uid;
  p.user = std::move(user);
  p.is_visible = uid.has_value();
  p.used_memory_bytes = memory;
  return p;
}

// Two GPUs: gpu 0 fully known and leased by bob for job 42 (with carol squatting on it);
// gpu 1 lost (unhealthy, nearly everything unknown) and drained.
class FormatTest : public ::testing::Test {
 protected:
  void SetUp() override {
    snapshot_.system.driver_version = "550.54.15";
    snapshot_.system.nvml_version = "12.550.54.15";
    snapshot_.system.cuda_driver_version = "12.4";
    snapshot_.taken_at_unix_ms = 1'700'000'000'500;
    model::DeviceSnapshot g0;
    g0.index = 0;
    g0.uuid = kUuid0;
    g0.name = "NVIDIA H100 80GB HBM3";
    g0.pci_bus_id = "00000000:18:00.0";
    g0.memory_total_bytes = 85520809984;
    g0.memory_used_bytes = 76554436608;
    g0.memory_free_bytes = 8398045184;
    g0.memory_reserved_bytes = 568328192;
    g0.gpu_utilization_percent = 99;
    g0.memory_utilization_percent = 71;
    g0.temperature_c = 58;
    g0.power_usage_w = 612.5;
    g0.power_limit_w = 700;
    g0.clocks.sm_mhz = 1980;
    g0.performance_state = 0;
    g0.ecc_volatile_corrected = 3;
    g0.ecc_volatile_uncorrected = 0;
    g0.ecc_aggregate_corrected = 17;
    g0.ecc_aggregate_uncorrected = 1;
    g0.remapped_rows_pending = false;
    g0.clock_event_reasons = 0x4 | 0x40;  // sw_power_cap, hw_thermal_slowdown
    g0.processes.push_back(Process(100, 1001, "bob", 1'000'000'000));
    g0.processes.push_back(Process(200, 1002, "carol", 2'000'000'000));
    g0.processes.push_back(Process(300, std::nullopt, std::nullopt, 3'000'000'000));
    g0.processes.push_back(Process(400, 1001, "bob", std::nullopt));  // memory not available
    g0.processes[0].sm_util_percent = 42;
    model::DeviceSnapshot g1;
    g1.index = 1;
    g1.uuid = kUuid1;
    g1.name = "NVIDIA H100 80GB HBM3";
    g1.is_healthy = false;
    g1.health_problems = {"GPU is lost"};
    snapshot_.gpus = {g0, g1};

    in_.snapshot = &snapshot_;
    in_.hostname = "node1";
    in_.now_unix_ms = 1'700'000'100'000;
    in_.drained_gpus = {kUuid1};
    in_.xid_totals[{kUuid0, 13}] = 2;
    in_.xid_totals[{kUuid1, 79}] = 1;
    model::Finding xid79;
    xid79.code = "xid";
    xid79.severity = model::Severity::kFatal;
    xid79.gpu_uuid = kUuid1;
    xid79.xid = 79;
    xid79.last_seen_unix_ms = 1'700'000'050'000;
    model::Finding throttle;
    throttle.code = "hw_thermal_slowdown";
    throttle.gpu_uuid = kUuid0;
    throttle.gpu_index = 0;
    model::Finding driver;
    driver.code = "kernel_log_unreadable";
    in_.findings = {xid79, throttle, driver};

    model::Lease lease;
    lease.id = 7;
    lease.gpu_uuids = {kUuid0};
    lease.uid = 1001;
    lease.user = "bob";
    lease.kind = "run";
    lease.created_unix_ms = in_.now_unix_ms - 60'000;
    lease.idle_since_unix_ms = in_.now_unix_ms - 1'500;
    lease.processes = {{555, 1}};
    in_.leases = {lease};
    model::Job running;
    running.id = 42;
    running.user = "bob";
    running.uid = 1001;
    running.state = model::JobState::kRunning;
    running.gpu_uuids = {kUuid0};
    running.lease_id = 7;
    model::Job queued1;
    queued1.id = 43;
    queued1.user = "carol";
    queued1.state = model::JobState::kQueued;
    queued1.submitted_unix_ms = in_.now_unix_ms - 30'000;
    queued1.request.count = 2;
    model::Job queued2 = queued1;
    queued2.id = 44;
    queued2.submitted_unix_ms = in_.now_unix_ms - 90'000;
    queued2.request.count = 4;
    jobs_ = {running, queued1, queued2};
    in_.jobs = jobs_;
    wait_.Observe(0.5);
    wait_.Observe(3);
    wait_.Observe(5);
    wait_.Observe(1e6);
    in_.job_wait_seconds = &wait_;
  }

  Exposition Formatted() {
    text_ = FormatPrometheus(in_);
    Exposition x = Parse(text_);
    for (const auto& e : x.errors) ADD_FAILURE() << e;
    return x;
  }

  model::MachineSnapshot snapshot_;
  Histogram wait_{{1, 5, 60}};
  std::vector<model::Job> jobs_;  // what in_.jobs shows
  MetricsInput in_;
  std::string text_;
};

TEST_F(FormatTest, EveryLineIsWellFormed) {
  Exposition x = Formatted();
  EXPECT_GT(x.samples.size(), 50u);
  for (const auto& [family, type] : x.types) {
    EXPECT_TRUE(family.starts_with("gpuman_")) << family;
    EXPECT_FALSE(x.help[family].empty()) << family;
    // Prometheus conventions: `_total` exactly on counters.
    EXPECT_EQ(family.ends_with("_total"), type == "counter") << family;
  }
  EXPECT_EQ(x.types["gpuman_gpu_ecc_errors_total"], "counter");
  EXPECT_EQ(x.types["gpuman_gpu_xid_errors_total"], "counter");
  EXPECT_EQ(x.types["gpuman_job_wait_seconds"], "histogram");
}

// Prometheus's own linter (Debian package `prometheus`): format and naming conventions.
TEST_F(FormatTest, PromtoolFindsNothingToComplainAbout) {
  const std::string promtool = "/usr/bin/promtool";
  if (access(promtool.c_str(), X_OK) != 0) GTEST_SKIP() << promtool << " not installed";
  auto r = testing::Run({promtool, "check", "metrics"}, {}, FormatPrometheus(in_));
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out + r.err, "");
  // The linter itself can fail.
  auto bad = testing::Run({promtool, "check", "metrics"}, {}, "# HELP x_total h\n# TYPE x_total gauge\nx_total 1\n");
  EXPECT_NE(bad.out + bad.err, "");
}

TEST_F(FormatTest, GpuValuesMatchTheSnapshot) {
  Exposition x = Formatted();
  Labels g0 = {{"gpu", "0"}, {"uuid", kUuid0}, {"name", "NVIDIA H100 80GB HBM3"}};
  EXPECT_EQ(x.Value("gpuman_gpu_memory_total_bytes", g0), 85520809984.0);
  EXPECT_EQ(x.Value("gpuman_gpu_memory_used_bytes", g0), 76554436608.0);
  EXPECT_EQ(x.Value("gpuman_gpu_memory_free_bytes", g0), 8398045184.0);
  EXPECT_EQ(x.Value("gpuman_gpu_memory_reserved_bytes", g0), 568328192.0);
  EXPECT_DOUBLE_EQ(x.Value("gpuman_gpu_utilization_ratio", g0), 0.99);
  EXPECT_DOUBLE_EQ(x.Value("gpuman_gpu_memory_bandwidth_utilization_ratio", g0), 0.71);
  EXPECT_EQ(x.Value("gpuman_gpu_temperature_celsius", g0), 58);
  EXPECT_EQ(x.Value("gpuman_gpu_power_watts", g0), 612.5);
  EXPECT_EQ(x.Value("gpuman_gpu_power_limit_watts", g0), 700);
  EXPECT_EQ(x.Value("gpuman_gpu_sm_clock_hertz", g0), 1.98e9);
  EXPECT_EQ(x.Value("gpuman_gpu_performance_state", g0), 0);
  EXPECT_EQ(x.Value("gpuman_gpu_healthy", g0), 1);
  EXPECT_EQ(x.Value("gpuman_gpu_healthy", {{"gpu", "1"}}), 0);
  EXPECT_EQ(x.Value("gpuman_gpu_drained", g0), 0);
  EXPECT_EQ(x.Value("gpuman_gpu_drained", {{"uuid", kUuid1}}), 1);
  EXPECT_EQ(x.Value("gpuman_gpu_ecc_errors_total", {{"gpu", "0"}, {"type", "corrected"}, {"counter", "volatile"}}), 3);
  EXPECT_EQ(x.Value("gpuman_gpu_ecc_errors_total", {{"gpu", "0"}, {"type", "uncorrected"}, {"counter", "volatile"}}), 0);
  EXPECT_EQ(x.Value("gpuman_gpu_ecc_errors_total", {{"gpu", "0"}, {"type", "corrected"}, {"counter", "aggregate"}}), 17);
  EXPECT_EQ(x.Value("gpuman_gpu_ecc_errors_total", {{"gpu", "0"}, {"type", "uncorrected"}, {"counter", "aggregate"}}), 1);
  EXPECT_EQ(x.Value("gpuman_gpu_remapped_rows_pending", g0), 0);
  EXPECT_EQ(x.Value("gpuman_gpu_clock_event_reason", {{"gpu", "0"}, {"reason", "sw_power_cap"}}), 1);
  EXPECT_EQ(x.Value("gpuman_gpu_clock_event_reason", {{"gpu", "0"}, {"reason", "hw_thermal_slowdown"}}), 1);
  EXPECT_EQ(x.Value("gpuman_gpu_clock_event_reason", {{"gpu", "0"}, {"reason", "gpu_idle"}}), 0);
  EXPECT_EQ(x.Value("gpuman_gpu_info", {{"gpu", "0"}, {"pci_bus_id", "00000000:18:00.0"}}), 1);
  EXPECT_EQ(x.Value("gpuman_gpus"), 2);
  EXPECT_EQ(x.Value("gpuman_nvml_up"), 1);
  EXPECT_EQ(x.Value("gpuman_up"), 1);
  EXPECT_EQ(x.Value("gpuman_daemon_info", {{"hostname", "node1"}}), 1);
  EXPECT_EQ(x.Value("gpuman_driver_info", {{"driver_version", "550.54.15"}, {"cuda_driver_version", "12.4"}}), 1);
  EXPECT_EQ(x.Value("gpuman_snapshot_timestamp_seconds"), 1'700'000'000.5);
}

TEST_F(FormatTest, UnknownValuesHaveNoSample) {
  Exposition x = Formatted();
  // gpu 1 is lost: only identity, health, drain and findings are known.
  std::set<std::string> gpu1_families;
  for (const auto& s : x.samples) {
    auto it = s.labels.find("uuid");
    if (it != s.labels.end() && it->second == kUuid1) gpu1_families.insert(s.name);
  }
  EXPECT_EQ(gpu1_families, (std::set<std::string>{"gpuman_gpu_info", "gpuman_gpu_healthy", "gpuman_gpu_drained",
                                                  "gpuman_gpu_declared_memory_bytes",
                                                  "gpuman_gpu_health_findings", "gpuman_gpu_xid_errors_total",
                                                  "gpuman_gpu_xid_last_seen_timestamp_seconds"}));
  // gpu 0 has no fan, memory clock, retired-pages or remap-failure value.
  EXPECT_TRUE(x.Find("gpuman_gpu_fan_speed_ratio").empty());
  EXPECT_TRUE(x.Find("gpuman_gpu_memory_clock_hertz").empty());
  EXPECT_TRUE(x.Find("gpuman_gpu_retired_pages_pending").empty());
  EXPECT_TRUE(x.Find("gpuman_gpu_remapped_rows_failure").empty());
  // ... and no HELP/TYPE for families left empty.
  EXPECT_EQ(text_.find("gpuman_gpu_fan_speed_ratio"), std::string::npos);
  // pid 400's memory is not available: no memory sample, not a 0.
  EXPECT_TRUE(x.Find("gpuman_process_gpu_memory_bytes", {{"pid", "400"}}).empty());
  for (const auto& s : x.samples) {
    EXPECT_LT(s.value, 1e18) << s.name << ": looks like a sentinel";
  }
}

TEST_F(FormatTest, ProcessesAreAttributedToTheirOwnersLeaseAndJob) {
  Exposition x = Formatted();
  auto bob = x.Find("gpuman_process_gpu_memory_bytes", {{"pid", "100"}});
  ASSERT_EQ(bob.size(), 1u);
  EXPECT_EQ(bob[0].value, 1e9);
  EXPECT_EQ(bob[0].labels, (Labels{{"gpu", "0"}, {"uuid", kUuid0}, {"pid", "100"}, {"user", "bob"},
                                   {"job_id", "42"}, {"lease_id", "7"}}));
  // carol runs on bob's GPU: her process is hers, not bob's job.
  EXPECT_EQ(x.Value("gpuman_process_gpu_memory_bytes", {{"pid", "200"}, {"user", "carol"}, {"job_id", ""}, {"lease_id", ""}}), 2e9);
  // A process in another PID namespace: owner unknown, attributed to nobody.
  EXPECT_EQ(x.Value("gpuman_process_gpu_memory_bytes", {{"pid", "300"}, {"user", ""}, {"job_id", ""}, {"lease_id", ""}}), 3e9);
  EXPECT_DOUBLE_EQ(x.Value("gpuman_process_sm_utilization_ratio", {{"pid", "100"}}), 0.42);
}

TEST_F(FormatTest, LeasesAndQueue) {
  Exposition x = Formatted();
  EXPECT_EQ(x.Value("gpuman_leases"), 1);
  EXPECT_EQ(x.Value("gpuman_gpus_held", {{"user", "bob"}}), 1) << "lease 7 and job 42 hold the same GPU";
  EXPECT_TRUE(x.Find("gpuman_gpus_held", {{"user", "carol"}}).empty());
  EXPECT_EQ(x.Value("gpuman_lease_idle_seconds", {{"lease_id", "7"}, {"user", "bob"}, {"job_id", "42"}}), 1.5);
  EXPECT_EQ(x.Value("gpuman_lease_age_seconds", {{"lease_id", "7"}, {"kind", "run"}}), 60);
  EXPECT_EQ(x.Value("gpuman_jobs", {{"state", "queued"}}), 2);
  EXPECT_EQ(x.Value("gpuman_jobs", {{"state", "running"}}), 1);
  EXPECT_EQ(x.Value("gpuman_jobs", {{"state", "held"}}), 0) << "zero states are exported, not left out";
  EXPECT_EQ(x.Value("gpuman_jobs", {{"state", "starting"}}), 0);
  EXPECT_EQ(x.Value("gpuman_queue_oldest_wait_seconds"), 90);
  EXPECT_EQ(x.Value("gpuman_queue_requested_gpus"), 6);
}

// Issue 25: a slice lease's declared memory, the GPU's sum of declarations, and a holder
// over theirs (bob's process uses 1 GB of GPU 0 on a 0.5 GB slice).
TEST_F(FormatTest, MemorySlicesAndAHolderOverTheirs) {
  in_.leases[0].gpu_memory_bytes = 500'000'000;
  Exposition x = Formatted();
  EXPECT_EQ(x.Value("gpuman_lease_gpu_memory_bytes", {{"lease_id", "7"}, {"user", "bob"}, {"job_id", "42"}}), 5e8);
  EXPECT_EQ(x.Value("gpuman_gpu_declared_memory_bytes", {{"gpu", "0"}, {"uuid", kUuid0}}), 5e8);
  EXPECT_EQ(x.Value("gpuman_gpu_declared_memory_bytes", {{"gpu", "1"}}), 0);
  EXPECT_EQ(x.Value("gpuman_slice_over_used_bytes", {{"gpu", "0"}, {"user", "bob"}, {"lease_id", "7"}}), 1e9);
  EXPECT_EQ(x.Value("gpuman_slice_over_declared_bytes", {{"gpu", "0"}, {"user", "bob"}, {"lease_id", "7"}}), 5e8);
  // Within the declaration: no overrun sample at all.
  in_.leases[0].gpu_memory_bytes = 2'000'000'000;
  x = Formatted();
  EXPECT_TRUE(x.Find("gpuman_slice_over_used_bytes").empty());
  // A whole-GPU lease is no slice.
  in_.leases[0].gpu_memory_bytes.reset();
  x = Formatted();
  EXPECT_TRUE(x.Find("gpuman_lease_gpu_memory_bytes").empty());
  EXPECT_EQ(x.Value("gpuman_gpu_declared_memory_bytes", {{"gpu", "0"}}), 0);
}

// MIG devices (docs/metrics.md): memory and whether leased, labelled with the parent GPU
// and their own UUID and profile; none without MIG devices.
TEST_F(FormatTest, MigDevicesHaveMemoryAndLeasedWithTheirParentAndProfile) {
  Exposition x = Formatted();
  EXPECT_TRUE(x.Find("gpuman_mig_device_info").empty());
  EXPECT_TRUE(x.Find("gpuman_mig_device_leased").empty());
  for (int i = 0; i < 2; ++i) {
    model::MigDevice m;
    m.index = i;
    m.uuid = "MIG-" + std::to_string(i);
    m.parent_uuid = kUuid0;
    m.gpu_instance_id = 3 + i;
    m.compute_instance_id = 0;
    m.profile = "2g.20gb";
    m.memory_total_bytes = 20'937'965'568;
    m.memory_used_bytes = i == 0 ? 1'000'000'000 : 0;
    snapshot_.gpus[0].mig_devices.push_back(m);
  }
  snapshot_.gpus[0].mig_mode_current = true;
  in_.leases[0].gpu_uuids = {"MIG-0"};
  x = Formatted();
  const Labels first = {
      {"gpu", "0"}, {"uuid", kUuid0}, {"mig_uuid", "MIG-0"}, {"profile", "2g.20gb"}};
  const Labels second = {
      {"gpu", "0"}, {"uuid", kUuid0}, {"mig_uuid", "MIG-1"}, {"profile", "2g.20gb"}};
  EXPECT_EQ(x.Value("gpuman_mig_device_memory_total_bytes", first), 20'937'965'568.0);
  EXPECT_EQ(x.Value("gpuman_mig_device_memory_used_bytes", first), 1e9);
  EXPECT_EQ(x.Value("gpuman_mig_device_memory_used_bytes", second), 0);
  EXPECT_EQ(x.Value("gpuman_mig_device_leased", first), 1);
  EXPECT_EQ(x.Value("gpuman_mig_device_leased", second), 0);
  EXPECT_EQ(x.Value("gpuman_mig_device_info", {{"mig_uuid", "MIG-1"}, {"gpu_instance_id", "4"}, {"compute_instance_id", "0"}}), 1);
}

TEST_F(FormatTest, EmptyQueueExportsZeros) {
  in_.jobs = {};
  in_.leases.clear();
  Exposition x = Formatted();
  EXPECT_EQ(x.Value("gpuman_leases"), 0);
  EXPECT_EQ(x.Value("gpuman_queue_oldest_wait_seconds"), 0);
  EXPECT_EQ(x.Find("gpuman_jobs").size(), 4u);
  for (const auto& s : x.Find("gpuman_jobs")) EXPECT_EQ(s.value, 0) << s.labels.at("state");
  EXPECT_TRUE(x.Find("gpuman_gpus_held").empty());
}

TEST_F(FormatTest, HealthAndXids) {
  Exposition x = Formatted();
  EXPECT_EQ(x.Value("gpuman_gpu_xid_errors_total", {{"gpu", "0"}, {"xid", "13"}}), 2);
  EXPECT_EQ(x.Value("gpuman_gpu_xid_errors_total", {{"uuid", kUuid1}, {"xid", "79"}}), 1);
  EXPECT_EQ(x.Value("gpuman_gpu_xid_last_seen_timestamp_seconds", {{"gpu", "1"}, {"xid", "79"}}), 1'700'000'050);
  EXPECT_EQ(x.Value("gpuman_gpu_health_findings", {{"gpu", "1"}, {"severity", "fatal"}}), 1);
  EXPECT_EQ(x.Value("gpuman_gpu_health_findings", {{"gpu", "1"}, {"severity", "warning"}}), 0);
  EXPECT_EQ(x.Value("gpuman_gpu_health_findings", {{"gpu", "0"}, {"severity", "warning"}}), 1);
  EXPECT_EQ(x.Value("gpuman_gpu_health_findings", {{"gpu", "0"}, {"severity", "fatal"}}), 0);
  EXPECT_EQ(x.Value("gpuman_health_findings", {{"severity", "warning"}}), 2) << "driver-wide findings count here";
  EXPECT_EQ(x.Value("gpuman_health_findings", {{"severity", "fatal"}}), 1);
}

TEST_F(FormatTest, HistogramIsCumulative) {
  Exposition x = Formatted();
  EXPECT_EQ(x.Value("gpuman_job_wait_seconds_bucket", {{"le", "1"}}), 1);
  EXPECT_EQ(x.Value("gpuman_job_wait_seconds_bucket", {{"le", "5"}}), 3) << "le is inclusive";
  EXPECT_EQ(x.Value("gpuman_job_wait_seconds_bucket", {{"le", "60"}}), 3);
  EXPECT_EQ(x.Value("gpuman_job_wait_seconds_bucket", {{"le", "+Inf"}}), 4);
  EXPECT_EQ(x.Value("gpuman_job_wait_seconds_count"), 4);
  EXPECT_EQ(x.Value("gpuman_job_wait_seconds_sum"), 1e6 + 8.5);
  double previous = 0;
  for (const auto& s : x.Find("gpuman_job_wait_seconds_bucket")) {
    EXPECT_GE(s.value, previous) << s.labels.at("le");
    previous = s.value;
  }
}

TEST_F(FormatTest, NvmlDownKeepsQueueMetrics) {
  in_.snapshot = nullptr;
  Exposition x = Formatted();
  EXPECT_EQ(x.Value("gpuman_nvml_up"), 0);
  EXPECT_EQ(x.Value("gpuman_up"), 1);
  EXPECT_TRUE(x.Find("gpuman_gpu_memory_total_bytes").empty());
  EXPECT_TRUE(x.Find("gpuman_gpus").empty());
  EXPECT_EQ(x.Value("gpuman_jobs", {{"state", "queued"}}), 2);
  // Known only from the daemon's own state, with what the finding tells of the GPU.
  EXPECT_EQ(x.Value("gpuman_gpu_drained", {{"uuid", kUuid1}, {"gpu", ""}}), 1);
  EXPECT_EQ(x.Value("gpuman_gpu_xid_errors_total", {{"uuid", kUuid1}}), 1);
  EXPECT_EQ(x.Value("gpuman_gpu_health_findings", {{"uuid", kUuid0}, {"gpu", "0"}, {"severity", "warning"}}), 1);
}

TEST_F(FormatTest, LabelValuesAreEscapedAndValidUtf8) {
  in_.hostname = "a\"b\\c\nd";
  snapshot_.gpus[0].processes[0].user = std::string("b\xff") + "ob\xc3\xa9";  // invalid byte, then é
  snapshot_.gpus[0].name = "Tesla \xe2\x80\x9cX\xe2\x80\x9d";
  Exposition x = Formatted();
  EXPECT_EQ(x.Value("gpuman_daemon_info", {{"hostname", "a\"b\\c\nd"}}), 1);
  EXPECT_NE(text_.find("hostname=\"a\\\"b\\\\c\\nd\""), std::string::npos) << text_;
  EXPECT_EQ(x.Value("gpuman_process_gpu_memory_bytes", {{"pid", "100"}, {"user", "b\xef\xbf\xbdob\xc3\xa9"}}), 1e9);
  EXPECT_EQ(x.Value("gpuman_gpu_healthy", {{"gpu", "0"}, {"name", "Tesla \xe2\x80\x9cX\xe2\x80\x9d"}}), 1);
}

TEST(EscapeLabelValue, Cases) {
  EXPECT_EQ(EscapeLabelValue("plain"), "plain");
  EXPECT_EQ(EscapeLabelValue("a\\b"), "a\\\\b");
  EXPECT_EQ(EscapeLabelValue("say \"hi\""), "say \\\"hi\\\"");
  EXPECT_EQ(EscapeLabelValue("two\nlines"), "two\\nlines");
  EXPECT_EQ(EscapeLabelValue("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"), "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
  EXPECT_EQ(EscapeLabelValue("\xc0\xaf"), "\xef\xbf\xbd\xef\xbf\xbd") << "overlong '/'";
  EXPECT_EQ(EscapeLabelValue("\xed\xa0\x80"), "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd") << "surrogate";
  EXPECT_EQ(EscapeLabelValue("x\xe2\x82"), "x\xef\xbf\xbd\xef\xbf\xbd") << "truncated";
}

TEST(FormatValue, Cases) {
  EXPECT_EQ(FormatValue(int64_t{85520809984}), "85520809984");
  EXPECT_EQ(FormatValue(int64_t{-3}), "-3");
  EXPECT_EQ(FormatValue(612.0), "612");
  EXPECT_EQ(FormatValue(0.99), "0.99");
  EXPECT_EQ(FormatValue(1.5e-7), "1.5e-07");
  EXPECT_EQ(FormatValue(std::nan("")), "NaN");
  EXPECT_EQ(FormatValue(INFINITY), "+Inf");
  EXPECT_EQ(FormatValue(-INFINITY), "-Inf");
}

TEST(Histogram, BoundsAreSortedAndObservationsCounted) {
  Histogram h({60, 1, 5, 5, INFINITY, std::nan("")});
  EXPECT_EQ(h.upper_bounds(), (std::vector<double>{1, 5, 60}));
  EXPECT_EQ(h.cumulative_counts(), (std::vector<int64_t>{0, 0, 0}));
  h.Observe(1);
  h.Observe(2);
  h.Observe(61);
  EXPECT_EQ(h.cumulative_counts(), (std::vector<int64_t>{1, 2, 2}));
  EXPECT_EQ(h.count(), 3);
  EXPECT_EQ(h.sum(), 64);
  EXPECT_FALSE(Histogram::DefaultWaitBuckets().empty());
}

TEST(Parse, RejectsWhatPrometheusRejects) {
  // The reader above is what the other tests lean on: make sure it can fail.
  EXPECT_FALSE(Parse("x 1\n").errors.empty()) << "no HELP/TYPE";
  EXPECT_FALSE(Parse("# HELP x h\n# TYPE x gauge\nx{a=\"1\"} 1\nx{a=\"1\"} 2\n").errors.empty()) << "duplicate";
  EXPECT_FALSE(Parse("# HELP x h\n# TYPE x gauge\nx 1\n# HELP y h\n# TYPE y gauge\ny 1\nx 2\n").errors.empty())
      << "split family";
  EXPECT_FALSE(Parse("# HELP x h\n# TYPE x gauge\nx{a=\"\\t\"} 1\n").errors.empty()) << "bad escape";
  EXPECT_FALSE(Parse("# HELP 1x h\n# TYPE 1x gauge\n1x 1\n").errors.empty()) << "bad name";
  EXPECT_TRUE(Parse("# HELP x h\n# TYPE x gauge\nx{a=\"q\\\"\"} 1\n").errors.empty());
}

}  // namespace
}  // namespace gpuman::metrics
