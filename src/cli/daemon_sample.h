// GPU facts for a client command while a daemon serves: the daemon's latest sample over
// its socket (the snapshot op, GPU facts only), so that no client command loads NVML of
// its own (docs/design.md, "One sample of the machine"). The daemon samples every GPU once
// a period; a client that read NVML itself would pay hundreds of driver calls and an
// nvmlInit for facts at most a period old anyway.
#pragma once

#include <cstdint>

#include "base/clock.h"
#include "devices/device_source.h"

namespace gpuman::cli {

class DaemonClient;

class DaemonSampleSource final : public devices::DeviceSource {
 public:
  DaemonSampleSource(DaemonClient& daemon, const Clock& clock) : daemon_(daemon), clock_(clock) {}

  /// The daemon's latest sample: every field whatever `options.fields` says (the daemon
  /// reads them all), processes unless no process field is asked for, the topology when
  /// asked. Other users' processes come as the caller's /proc would show them.
  /// Errors: kUnavailable when the daemon does not answer, or has no sample (its own read
  /// of the devices failed: the daemon's reason).
  Result<model::MachineSnapshot> Snapshot(const devices::SnapshotOptions& options) override;

  /// How old the last sample handed out was when it came (ms); -1 before the first.
  int64_t last_age_ms() const { return last_age_ms_; }
  /// The daemon's simulated scenario ("h100-8"), "" for real GPUs (or before a Snapshot).
  const std::string& scenario() const { return scenario_; }

 private:
  DaemonClient& daemon_;
  const Clock& clock_;
  int64_t last_age_ms_ = -1;
  std::string scenario_;
};

}  // namespace gpuman::cli
