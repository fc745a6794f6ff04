#include "model/health_judge.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

namespace gpuman::model {
namespace {

// One row: the facts of a snapshot, and everything the judge must say about them.
struct Row {
  const char* name;
  std::function<void(DeviceSnapshot&)> facts;
  bool is_healthy;
  bool is_lost;
  std::vector<std::string> codes;  // findings in order, "code/severity"
  std::vector<std::string> problems;
  std::vector<std::string> warnings;
};

std::string Key(const Finding& f) { return f.code + "/" + SeverityName(f.severity); }

const std::vector<Row>& Rows() {
  static const std::vector<Row> rows = {
      {"nothing known", [](DeviceSnapshot&) {}, true, false, {}, {}, {}},
      {"all clear",
       [](DeviceSnapshot& d) {
         d.ecc_volatile_uncorrected = 0;
         d.ecc_aggregate_uncorrected = 0;
         d.retired_pages_pending = false;
         d.remapped_rows_pending = false;
         d.remapped_rows_failure = false;
         d.clock_event_reasons = kClockGpuIdle | kClockSwPowerCap;  // normal
       },
       true, false, {}, {}, {}},
      {"volatile ECC", [](DeviceSnapshot& d) { d.ecc_volatile_uncorrected = 3; }, false, false,
       {"ecc_volatile_uncorrected/fatal"}, {"3 uncorrected ECC errors since the driver loaded"}, {}},
      {"retired pages", [](DeviceSnapshot& d) { d.retired_pages_pending = true; }, false, false,
       {"retired_pages_pending/fatal"}, {"retired pages pending: reset the GPU to retire them"}, {}},
      {"remap pending", [](DeviceSnapshot& d) { d.remapped_rows_pending = true; }, false, false,
       {"remapped_rows_pending/fatal"}, {"row remapping pending: reset the GPU to apply it"}, {}},
      {"remap failed", [](DeviceSnapshot& d) { d.remapped_rows_failure = true; }, false, false,
       {"remapped_rows_failure/fatal"}, {"row remapping failed: the GPU should be serviced"}, {}},
      {"remap failed supersedes pending",
       [](DeviceSnapshot& d) {
         d.remapped_rows_failure = true;
         d.remapped_rows_pending = true;
       },
       false, false, {"remapped_rows_failure/fatal"}, {"row remapping failed: the GPU should be serviced"}, {}},
      {"every fatal signal, one finding each",
       [](DeviceSnapshot& d) {
         d.ecc_volatile_uncorrected = 1;
         d.retired_pages_pending = true;
         d.remapped_rows_pending = true;
       },
       false, false,
       {"ecc_volatile_uncorrected/fatal", "retired_pages_pending/fatal", "remapped_rows_pending/fatal"},
       {"1 uncorrected ECC errors since the driver loaded", "retired pages pending: reset the GPU to retire them",
        "row remapping pending: reset the GPU to apply it"},
       {}},
      {"lifetime ECC is a warning", [](DeviceSnapshot& d) { d.ecc_aggregate_uncorrected = 5; }, true, false,
       {"ecc_aggregate_uncorrected/warning"}, {}, {"5 uncorrected ECC errors over the GPU's life"}},
      {"hw thermal and power brake",
       [](DeviceSnapshot& d) { d.clock_event_reasons = kClockHwThermalSlowdown | kClockHwPowerBrakeSlowdown; }, true,
       false, {"throttle_thermal/warning", "throttle_power/warning"}, {},
       {"clocks throttled: hardware thermal slowdown", "clocks throttled: hardware power brake"}},
      {"sw thermal and hw slowdown",
       [](DeviceSnapshot& d) { d.clock_event_reasons = kClockSwThermalSlowdown | kClockHwSlowdown; }, true, false,
       {"throttle_thermal/warning", "throttle_hw/warning"}, {},
       {"clocks throttled: software thermal slowdown", "clocks throttled: hardware slowdown"}},
      {"hw thermal wins over sw thermal, power brake over hw slowdown",
       [](DeviceSnapshot& d) {
         d.clock_event_reasons =
             kClockHwThermalSlowdown | kClockSwThermalSlowdown | kClockHwPowerBrakeSlowdown | kClockHwSlowdown;
       },
       true, false, {"throttle_thermal/warning", "throttle_power/warning"}, {},
       {"clocks throttled: hardware thermal slowdown", "clocks throttled: hardware power brake"}},
      {"fatal and warnings together",
       [](DeviceSnapshot& d) {
         d.ecc_volatile_uncorrected = 3;
         d.ecc_aggregate_uncorrected = 5;
         d.clock_event_reasons = kClockHwThermalSlowdown;
       },
       false, false,
       {"ecc_volatile_uncorrected/fatal", "ecc_aggregate_uncorrected/warning", "throttle_thermal/warning"},
       {"3 uncorrected ECC errors since the driver loaded"},
       {"5 uncorrected ECC errors over the GPU's life", "clocks throttled: hardware thermal slowdown"}},
      {"lost GPU: one fatal finding, other fatal signals hidden",
       [](DeviceSnapshot& d) {
         d.is_healthy = false;
         d.health_problems = {"nvmlDeviceGetMemoryInfo_v2: GPU is lost"};
         d.ecc_volatile_uncorrected = 2;
       },
       false, true, {"gpu_lost/fatal"}, {"nvmlDeviceGetMemoryInfo_v2: GPU is lost"}, {}},
      {"reset required is lost",
       [](DeviceSnapshot& d) {
         d.is_healthy = false;
         d.health_problems = {"nvmlDeviceGetUUID: Reset Required"};
       },
       false, true, {"gpu_lost/fatal"}, {"nvmlDeviceGetUUID: Reset Required"}, {}},
      {"fallen off the bus is lost",
       [](DeviceSnapshot& d) {
         d.is_healthy = false;
         d.health_problems = {"GPU has fallen off the bus"};
       },
       false, true, {"gpu_lost/fatal"}, {"GPU has fallen off the bus"}, {}},
      {"lost GPU keeps its warnings",
       [](DeviceSnapshot& d) {
         d.is_healthy = false;
         d.health_problems = {"nvmlDeviceGetUUID: GPU is lost"};
         d.clock_event_reasons = kClockHwSlowdown;
       },
       false, true, {"gpu_lost/fatal", "throttle_hw/warning"}, {"nvmlDeviceGetUUID: GPU is lost"},
       {"clocks throttled: hardware slowdown"}},
      {"other source error is gpu_error",
       [](DeviceSnapshot& d) {
         d.is_healthy = false;
         d.health_problems = {"nvmlDeviceGetHandleByIndex: Insufficient Permissions", "nvmlDeviceGetUUID: Unknown Error"};
       },
       false, false, {"gpu_error/fatal"},
       {"nvmlDeviceGetHandleByIndex: Insufficient Permissions", "nvmlDeviceGetUUID: Unknown Error"}, {}},
      {"unhealthy without a reason", [](DeviceSnapshot& d) { d.is_healthy = false; }, false, false,
       {"gpu_error/fatal"}, {}, {}},
      {"source error and a fatal signal: the signal is the finding, both are problems",
       [](DeviceSnapshot& d) {
         d.is_healthy = false;
         d.health_problems = {"nvmlDeviceGetPowerUsage: Unknown Error"};
         d.retired_pages_pending = true;
       },
       false, false, {"retired_pages_pending/fatal"},
       {"nvmlDeviceGetPowerUsage: Unknown Error", "retired pages pending: reset the GPU to retire them"}, {}},
  };
  return rows;
}

DeviceSnapshot Facts(const Row& row) {
  DeviceSnapshot d;
  d.index = 2;
  d.uuid = "GPU-2";
  row.facts(d);
  return d;
}

TEST(HealthJudgeTest, Table) {
  for (const Row& row : Rows()) {
    SCOPED_TRACE(row.name);
    const DeviceSnapshot dev = Facts(row);
    const HealthVerdict v = JudgeGpuHealth(dev);
    EXPECT_EQ(v.is_healthy, row.is_healthy);
    EXPECT_EQ(v.is_lost, row.is_lost);
    std::vector<std::string> codes;
    for (const Finding& f : v.findings) {
      codes.push_back(Key(f));
      EXPECT_EQ(f.gpu_uuid, "GPU-2");
      EXPECT_EQ(f.gpu_index, 2);
      EXPECT_EQ(f.source, "nvml");
      EXPECT_FALSE(f.message.empty());
    }
    EXPECT_EQ(codes, row.codes);
    EXPECT_EQ(v.problems, row.problems);
    EXPECT_EQ(v.warnings, row.warnings);
    // Counting: exactly the fatal findings make the GPU unhealthy, and the warnings are
    // the messages of the warning findings, word for word.
    int fatal = 0;
    std::vector<std::string> warning_messages;
    for (const Finding& f : v.findings) {
      if (f.severity == Severity::kFatal) ++fatal;
      else warning_messages.push_back(f.message);
    }
    EXPECT_EQ(v.is_healthy, fatal == 0);
    EXPECT_LE(fatal, 3);
    EXPECT_EQ(warning_messages, v.warnings);
  }
}

TEST(HealthJudgeTest, FindingWordingOfEachFatalSignalIsItsProblem) {
  // One wording: `health` (findings), `status` and drain reasons (problems) say the same.
  for (const Row& row : Rows()) {
    SCOPED_TRACE(row.name);
    const HealthVerdict v = JudgeGpuHealth(Facts(row));
    for (const Finding& f : v.findings) {
      if (f.severity != Severity::kFatal || f.code == "gpu_lost" || f.code == "gpu_error") continue;
      EXPECT_NE(std::find(v.problems.begin(), v.problems.end(), f.message), v.problems.end()) << f.message;
    }
  }
  DeviceSnapshot lost;
  lost.is_healthy = false;
  lost.health_problems = {"nvmlDeviceGetUUID: GPU is lost"};
  EXPECT_EQ(JudgeGpuHealth(lost).findings.at(0).message, "GPU is lost (nvmlDeviceGetUUID: GPU is lost)");
  DeviceSnapshot error;
  error.is_healthy = false;
  error.health_problems = {"a: x", "b: y"};
  EXPECT_EQ(JudgeGpuHealth(error).findings.at(0).message, "a: x; b: y");
  DeviceSnapshot bare;
  bare.is_healthy = false;
  EXPECT_EQ(JudgeGpuHealth(bare).findings.at(0).message, "GPU reported unhealthy");
}

TEST(HealthJudgeTest, ApplyWritesTheVerdictAndJudgingAgainChangesNothing) {
  for (const Row& row : Rows()) {
    SCOPED_TRACE(row.name);
    DeviceSnapshot dev = Facts(row);
    dev.warnings = {"nvmlDeviceGetPowerUsage: Insufficient Permissions"};  // the source's own
    const HealthVerdict first = JudgeGpuHealth(dev);
    ApplyHealthVerdict(dev);
    EXPECT_EQ(dev.is_healthy, row.is_healthy);
    EXPECT_EQ(dev.health_problems, row.problems);
    std::vector<std::string> warnings = {"nvmlDeviceGetPowerUsage: Insufficient Permissions"};
    warnings.insert(warnings.end(), row.warnings.begin(), row.warnings.end());
    EXPECT_EQ(dev.warnings, warnings);

    // The daemon judged it; a client judging the snapshot it received agrees.
    const HealthVerdict again = JudgeGpuHealth(dev);
    EXPECT_EQ(again.is_healthy, first.is_healthy);
    EXPECT_EQ(again.is_lost, first.is_lost);
    EXPECT_EQ(again.problems, first.problems);
    EXPECT_EQ(again.warnings, first.warnings);
    ASSERT_EQ(again.findings.size(), first.findings.size());
    for (size_t i = 0; i < again.findings.size(); ++i) {
      EXPECT_EQ(Key(again.findings[i]), Key(first.findings[i]));
      EXPECT_EQ(again.findings[i].message, first.findings[i].message);
    }
    ApplyHealthVerdict(dev);
    EXPECT_EQ(dev.health_problems, row.problems);
    EXPECT_EQ(dev.warnings, warnings);
  }
}

}  // namespace
}  // namespace gpuman::model
