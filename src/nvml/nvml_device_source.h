// NvmlDeviceSource: devices::DeviceSource backed by a loaded NvmlLibrary. Turns NVML's
// return codes into snapshot fields: NOT_SUPPORTED and friends become "unknown"
// (std::nullopt), GPU_IS_LOST and similar mark that one device unhealthy while the others
// still report. Owned by main; call Snapshot() from one thread at a time.
//
// It keeps what does not change while the driver is loaded (docs/design.md, "Static and
// dynamic fields"): device handles and the driver's versions while the device count stays,
// each GPU's static facts and the calls NVML said it does not support by UUID, until the GPU
// fails (lost, reset required, ...) or the count changes; settings and health values for as
// long as SnapshotOptions::slow_max_age allows.
#pragma once

#include <bitset>
#include <map>
#include <optional>
#include <string>
#include <vector>

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
  Status LimitCgroupMemory(const std::string& uuid, const std::string& cgroup, int64_t bytes) override;

  /// A warning with the position of the call that gave it (warnings stay in call order
  /// when some come from the cache).
  struct Note {
    int order = 0;
    devices::FieldSet group = 0;
    std::string text;
  };
  /// What is kept of one GPU between snapshots (by UUID). Internal; public for the reader.
  struct Cached {
    static constexpr size_t kVariants = 8;  // per symbol: clock type, ECC kind, ...
    std::bitset<kSymCount * kVariants> unsupported;  // NVML said NOT_SUPPORTED: not asked again
    devices::FieldSet have = 0;                      // static and slow groups in `values`
    int64_t read_at_ms[32] = {};                     // per group bit, when it was read
    model::DeviceSnapshot values;                    // those groups' fields
    std::vector<Note> notes;                         // their warnings
    unsigned process_counts[2] = {0, 0};  // last compute and graphics list sizes (buffer size hint)
    unsigned long long last_seen_us = 0;  // newest process-utilization sample
  };

 private:
  struct Slot {  // one NVML index, while the device count stays
    nvmlDevice_t handle = nullptr;
    std::string uuid;  // empty: not known yet, or to be asked again
    int64_t verified_at_ms = 0;
  };

  const NvmlLibrary& lib_;
  const Clock& clock_;
  std::string sysfs_root_;
  std::optional<model::SystemInfo> system_;
  std::vector<Slot> slots_;
  std::map<std::string, Cached> cache_;  // by UUID
  std::optional<model::Topology> topology_;
};

}  // namespace gpuman::nvml
