// DeviceSource: the seam between gpuman and whatever reports GPU state (NVML, or a fake
// in tests). Implementations are owned by main() and may be called from one thread at a
// time unless they say otherwise.
#pragma once

#include "base/result.h"
#include "model/device_snapshot.h"

namespace gpuman::devices {

struct SnapshotOptions {
  bool topology = false;        // also read NVLink and PCIe topology (n^2 queries)
  bool processes_only = false;  // only index, UUID and processes (a cheap "who is on it")
};

class DeviceSource {
 public:
  virtual ~DeviceSource() = default;

  /// Returns the state of every GPU and of the driver. Per-device failures are reported
  /// inside the snapshot (DeviceSnapshot::is_healthy), not as an error.
  /// Errors: kUnavailable when the driver cannot be queried at all.
  virtual Result<model::MachineSnapshot> Snapshot(const SnapshotOptions& options) = 0;
  Result<model::MachineSnapshot> Snapshot() { return Snapshot(SnapshotOptions{}); }
};

}  // namespace gpuman::devices
