// NvmlDeviceSource: devices::DeviceSource backed by a loaded NvmlLibrary. Turns NVML's
// return codes into snapshot fields: NOT_SUPPORTED and friends become "unknown"
// (std::nullopt), GPU_IS_LOST and similar mark that one device unhealthy while the others
// still report. Owned by main; call Snapshot() from one thread at a time.
#pragma once

#include <map>
#include <string>

#include "base/clock.h"
#include "devices/device_source.h"
#include "nvml/library.h"

namespace gpuman::nvml {

class NvmlDeviceSource final : public devices::DeviceSource {
 public:
  /// `sysfs_root` is where /sys/bus/pci/devices lives (NUMA node fallback); tests pass a
  /// temp dir. Both references must outlive this object.
  NvmlDeviceSource(const NvmlLibrary& lib, const Clock& clock, std::string sysfs_root = "/sys");

  /// Errors: kUnavailable when the device count cannot be read.
  Result<model::MachineSnapshot> Snapshot(const devices::SnapshotOptions& options) override;
  using devices::DeviceSource::Snapshot;

 private:
  const NvmlLibrary& lib_;
  const Clock& clock_;
  std::string sysfs_root_;
  std::map<std::string, unsigned long long> last_seen_us_;  // newest process-utilization sample, by UUID
};

}  // namespace gpuman::nvml
