#include "model/health_judge.h"

#include <algorithm>
#include <cctype>
#include <string_view>
#include <utility>

namespace gpuman::model {
namespace {

// The judged signals of `dev` with their findings' wording, fatal ones first (the lost
// rule aside). Kept apart so that a problem text equal to one of them is known as the
// judge's own, not the source's: that makes the judge idempotent.
struct Signal {
  const char* code;
  Severity severity;
  std::string message;
};

std::vector<Signal> Signals(const DeviceSnapshot& dev) {
  std::vector<Signal> out;
  if (dev.ecc_volatile_uncorrected.value_or(0) > 0) {
    out.push_back({"ecc_volatile_uncorrected", Severity::kFatal,
                   std::to_string(*dev.ecc_volatile_uncorrected) + " uncorrected ECC errors since the driver loaded"});
  }
  if (dev.retired_pages_pending.value_or(false)) {
    out.push_back({"retired_pages_pending", Severity::kFatal, "retired pages pending: reset the GPU to retire them"});
  }
  if (dev.remapped_rows_failure.value_or(false)) {
    out.push_back({"remapped_rows_failure", Severity::kFatal, "row remapping failed: the GPU should be serviced"});
  } else if (dev.remapped_rows_pending.value_or(false)) {
    out.push_back({"remapped_rows_pending", Severity::kFatal, "row remapping pending: reset the GPU to apply it"});
  }
  if (dev.ecc_aggregate_uncorrected.value_or(0) > 0) {
    out.push_back({"ecc_aggregate_uncorrected", Severity::kWarning,
                   std::to_string(*dev.ecc_aggregate_uncorrected) + " uncorrected ECC errors over the GPU's life"});
  }
  // Throttling is worth knowing but does not make a GPU unfit for jobs.
  const uint64_t reasons = dev.clock_event_reasons.value_or(0);
  if (reasons & (kClockHwThermalSlowdown | kClockSwThermalSlowdown)) {
    out.push_back({"throttle_thermal", Severity::kWarning,
                   std::string("clocks throttled: ") +
                       ((reasons & kClockHwThermalSlowdown) ? "hardware thermal slowdown" : "software thermal slowdown")});
  }
  if (reasons & kClockHwPowerBrakeSlowdown) {
    out.push_back({"throttle_power", Severity::kWarning, "clocks throttled: hardware power brake"});
  } else if (reasons & kClockHwSlowdown) {
    out.push_back({"throttle_hw", Severity::kWarning, "clocks throttled: hardware slowdown"});
  }
  return out;
}

bool Mentions(const std::string& text, std::string_view what) {
  std::string lower = text;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return lower.find(what) != std::string::npos;
}

bool SaysLost(const std::string& problem) {
  return Mentions(problem, "is lost") || Mentions(problem, "reset required") || Mentions(problem, "fallen off");
}

Finding Make(const DeviceSnapshot& dev, std::string code, Severity severity, std::string message) {
  Finding f;
  f.code = std::move(code);
  f.severity = severity;
  f.gpu_uuid = dev.uuid.value_or("");
  f.gpu_index = dev.index;
  f.message = std::move(message);
  f.source = "nvml";
  return f;
}

std::string Join(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : "; ") + p;
  return out;
}

}  // namespace

HealthVerdict JudgeGpuHealth(const DeviceSnapshot& dev) {
  HealthVerdict v;
  const std::vector<Signal> signals = Signals(dev);
  // What the source recorded itself (driver errors), without the judge's own texts.
  std::vector<std::string> recorded;
  for (const auto& problem : dev.health_problems) {
    const bool judged = std::any_of(signals.begin(), signals.end(), [&](const Signal& s) {
      return s.severity == Severity::kFatal && s.message == problem;
    });
    if (!judged) recorded.push_back(problem);
  }

  auto lost = std::find_if(recorded.begin(), recorded.end(), SaysLost);
  if (lost != recorded.end()) {
    v.is_lost = true;
    v.findings.push_back(Make(dev, "gpu_lost", Severity::kFatal, "GPU is lost (" + *lost + ")"));
  } else {
    for (const auto& s : signals) {
      if (s.severity == Severity::kFatal) v.findings.push_back(Make(dev, s.code, s.severity, s.message));
    }
    // Anything else that made the source call the GPU unhealthy (e.g. an unreadable handle).
    if (v.findings.empty() && (!dev.is_healthy || !recorded.empty())) {
      v.findings.push_back(
          Make(dev, "gpu_error", Severity::kFatal, recorded.empty() ? "GPU reported unhealthy" : Join(recorded)));
    }
  }
  v.is_healthy = v.findings.empty();
  v.problems = recorded;
  if (!v.is_lost) {
    for (const auto& s : signals) {
      if (s.severity == Severity::kFatal) v.problems.push_back(s.message);
    }
  }
  for (const auto& s : signals) {
    if (s.severity != Severity::kWarning) continue;
    v.warnings.push_back(s.message);
    v.findings.push_back(Make(dev, s.code, s.severity, s.message));
  }
  return v;
}

void ApplyHealthVerdict(DeviceSnapshot& dev) {
  HealthVerdict v = JudgeGpuHealth(dev);
  dev.is_healthy = v.is_healthy;
  dev.health_problems = std::move(v.problems);
  for (auto& w : v.warnings) {
    if (std::find(dev.warnings.begin(), dev.warnings.end(), w) == dev.warnings.end()) dev.warnings.push_back(std::move(w));
  }
}

}  // namespace gpuman::model
