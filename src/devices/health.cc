#include "devices/health.h"

#include <string>

namespace gpuman::devices {

void AssessHealth(model::DeviceSnapshot& dev) {
  auto problem = [&](std::string text) {
    dev.is_healthy = false;
    dev.health_problems.push_back(std::move(text));
  };
  if (dev.ecc_volatile_uncorrected.value_or(0) > 0) {
    problem("volatile uncorrected ECC errors: " + std::to_string(*dev.ecc_volatile_uncorrected));
  }
  if (dev.retired_pages_pending.value_or(false)) {
    problem("retired pages pending: reset the GPU to retire them");
  }
  if (dev.remapped_rows_pending.value_or(false)) {
    problem("row remapping pending: reset the GPU to apply it");
  }
  if (dev.remapped_rows_failure.value_or(false)) {
    problem("row remapping failed: the GPU should be serviced");
  }
  // Throttling is worth knowing but does not make a GPU unfit for jobs.
  using model::kClockHwPowerBrakeSlowdown, model::kClockHwSlowdown, model::kClockHwThermalSlowdown,
      model::kClockSwThermalSlowdown;
  uint64_t reasons = dev.clock_event_reasons.value_or(0);
  if (reasons & kClockHwThermalSlowdown) dev.warnings.push_back("throttled: hardware thermal slowdown");
  else if (reasons & kClockSwThermalSlowdown) dev.warnings.push_back("throttled: software thermal slowdown");
  if (reasons & kClockHwPowerBrakeSlowdown) dev.warnings.push_back("throttled: hardware power brake");
  else if (reasons & kClockHwSlowdown) dev.warnings.push_back("throttled: hardware slowdown");
}

}  // namespace gpuman::devices
