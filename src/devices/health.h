// Health assessment of one snapshot from the signals NVML reports (ECC, pending page
// retirement or row remapping, throttling). Pure; called by every DeviceSource after it
// filled a DeviceSnapshot, so fakes and NVML agree on what "unhealthy" means.
#pragma once

#include "model/device_snapshot.h"

namespace gpuman::devices {

/// Adds problems (and sets is_healthy = false) for: volatile uncorrected ECC errors,
/// retired pages pending, row remapping pending or failed. Adds warnings for hardware or
/// thermal throttling. Leaves problems already recorded (lost GPU, ...) in place.
void AssessHealth(model::DeviceSnapshot& dev);

}  // namespace gpuman::devices
