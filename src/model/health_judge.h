// The one judge of a GPU's health: a pure function from what one DeviceSnapshot says
// (ECC counts, pending retirement or row remapping, throttling, and the errors its source
// recorded) to a verdict with findings. The device source writes the verdict into the
// snapshot (ApplyHealthVerdict); `health`, the daemon's watch, `status` and metrics all
// read the same verdict, so they agree on wording and counting. Any thread.
#pragma once

#include <string>
#include <vector>

#include "model/device_snapshot.h"
#include "model/health.h"

namespace gpuman::model {

/// What the judge says about one GPU.
struct HealthVerdict {
  bool is_healthy = true;  // no fatal finding
  bool is_lost = false;    // the driver says the GPU is lost or needs a reset (finding gpu_lost)
  /// Why it is not healthy, as DeviceSnapshot::health_problems shows it: the errors the
  /// source recorded first, then the judged signals (same wording as their findings).
  std::vector<std::string> problems;
  /// Noteworthy but not unhealthy (lifetime ECC, throttling), as in DeviceSnapshot::warnings.
  std::vector<std::string> warnings;
  /// One finding per fact, fatal ones first, in this order: gpu_lost or (ecc_volatile_uncorrected,
  /// retired_pages_pending, remapped_rows_failure or else remapped_rows_pending, or else
  /// gpu_error), then the warnings ecc_aggregate_uncorrected, throttle_thermal,
  /// throttle_power or else throttle_hw. Source "nvml".
  std::vector<Finding> findings;
};

/// Judges `dev`. Rules (docs/health.md, "Findings"):
/// - a recorded problem naming "is lost", "reset required" or "fallen off" makes one fatal
///   gpu_lost finding and hides the other fatal signals (a lost GPU answers nothing);
/// - otherwise each fatal signal is one finding; row remapping failed supersedes pending;
/// - an unhealthy snapshot with no fatal signal is one gpu_error finding, naming the
///   recorded problems ("GPU reported unhealthy" when there are none);
/// - warnings never make a GPU unhealthy.
/// Idempotent: judging a snapshot that ApplyHealthVerdict already changed gives the same
/// verdict, so a snapshot judged by the daemon can be judged again by a client.
HealthVerdict JudgeGpuHealth(const DeviceSnapshot& dev);

/// Writes the verdict of `dev` into it: is_healthy, health_problems (the verdict's
/// problems) and warnings (the verdict's warnings appended to the source's own, once).
void ApplyHealthVerdict(DeviceSnapshot& dev);

}  // namespace gpuman::model
