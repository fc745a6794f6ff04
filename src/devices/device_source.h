// DeviceSource: the seam between gpuman and whatever reports GPU state (NVML, or a fake
// in tests). Implementations are owned by main() and may be called from one thread at a
// time unless they say otherwise.
//
// Callers say which fields they will use (SnapshotOptions::fields); a source may leave the
// others unknown. What never changes while the driver is loaded (UUID, name, serial, PCI
// address, compute capability, maximum clocks, CPU affinity, NUMA node, driver versions,
// topology) a source may read once and keep: every caller gets it, whatever it asks for.
#pragma once

#include <chrono>
#include <cstdint>

#include "base/result.h"
#include "model/device_snapshot.h"

namespace gpuman::devices {

/// Groups of DeviceSnapshot fields, combined as a bit mask. The index and the UUID always
/// come. "static": read once per GPU; "slow": kept for SnapshotOptions::slow_max_age.
enum Field : uint32_t {
  kFieldIdentity = 1u << 0,     // name, PCI bus id (static)
  kFieldDetails = 1u << 1,      // serial, minor number, compute capability, max clocks, CPU affinity, NUMA node (static)
  kFieldCore = 1u << 2,         // memory, utilization, temperature, power draw, fan, P-state
  kFieldPowerLimit = 1u << 3,   // enforced power limit (slow)
  kFieldSettings = 1u << 4,     // compute mode, persistence mode, MIG mode (slow)
  kFieldHealth = 1u << 5,       // volatile ECC counts, retired pages pending, remapped rows (slow)
  kFieldEccAggregate = 1u << 6, // aggregate ECC counts (slow)
  kFieldClocks = 1u << 7,       // current SM and memory clocks
  kFieldThrottle = 1u << 8,     // clock event reasons (the "throttled" warnings)
  kFieldProcesses = 1u << 9,    // compute and graphics process lists
  kFieldProcessUtilization = 1u << 10,  // per-process SM % (with kFieldProcesses)
};
using FieldSet = uint32_t;
inline constexpr FieldSet kAllFields = (1u << 11) - 1;
inline constexpr FieldSet kStaticFields = kFieldIdentity | kFieldDetails;
inline constexpr FieldSet kSlowFields = kFieldPowerLimit | kFieldSettings | kFieldHealth | kFieldEccAggregate;

struct SnapshotOptions {
  FieldSet fields = kAllFields;
  bool topology = false;        // also read NVLink and PCIe topology (static: read once)
  bool processes_only = false;  // only index, UUID and processes (fields = kFieldProcesses)
  /// How old kFieldSettings and kFieldHealth values may be when the source read them for an
  /// earlier snapshot. 0 (the default) reads them now, as one-shot commands want; monitors
  /// that sample every second pass a minute, and 0 again when something happened (an Xid).
  /// The same age bounds how long a source trusts that index N is still the GPU it saw.
  std::chrono::milliseconds slow_max_age{0};
};

/// What each view shows (docs/design.md, "Static and dynamic fields"); every output of a
/// view uses its list. The health group is in every list that shows health marks.
/// `status` as text (and its --watch): no serial, clocks, settings, ECC totals, affinity.
inline constexpr FieldSet kStatusTextFields = kFieldIdentity | kFieldCore | kFieldPowerLimit | kFieldHealth |
                                              kFieldThrottle | kFieldProcesses;
/// `status --json`, `health` and the scheduler: everything.
inline constexpr FieldSet kStatusJsonFields = kAllFields;
/// `top`: what its screen shows (no serial, clocks, settings, ECC totals, warnings).
inline constexpr FieldSet kTopFields = kFieldIdentity | kFieldCore | kFieldPowerLimit | kFieldHealth |
                                       kFieldProcesses | kFieldProcessUtilization;
/// Choosing GPUs (`run`, `select`, the machine lease table's acquire step, `--bind-numa`):
/// names, compute capability and CPU affinity, memory and utilization, health, processes;
/// not power, settings, ECC totals, clocks or throttling (issue 27).
inline constexpr FieldSet kSelectionFields = kFieldIdentity | kFieldDetails | kFieldCore | kFieldHealth | kFieldProcesses;
/// The daemon's collector (history, metrics, alerts, the health watch): everything.
inline constexpr FieldSet kCollectorFields = kAllFields;
/// How old the slow groups may be for a monitor sampling every second or so.
inline constexpr std::chrono::milliseconds kMonitorSlowAge{60000};

class DeviceSource {
 public:
  virtual ~DeviceSource() = default;

  /// Returns the state of every GPU and of the driver. Per-device failures are reported
  /// inside the snapshot (DeviceSnapshot::is_healthy), not as an error.
  /// Errors: kUnavailable when the driver cannot be queried at all.
  virtual Result<model::MachineSnapshot> Snapshot(const SnapshotOptions& options) = 0;
  Result<model::MachineSnapshot> Snapshot() { return Snapshot(SnapshotOptions{}); }

  /// Holds the processes of cgroup `cgroup` (a full sysfs path) to at most `bytes` of GPU
  /// `uuid`'s memory, through the driver (nvmlDeviceSetMemoryLimits_v1; docs/share.md,
  /// "Which mechanism holds the memory limit"). Errors: kUnavailable when the driver (or
  /// this source) has no such call, or refuses it, with why.
  virtual Status LimitCgroupMemory(const std::string& uuid, const std::string& cgroup, int64_t bytes) {
    (void)uuid, (void)cgroup, (void)bytes;
    return MakeError(ErrorCode::kUnavailable, "this device source sets no memory limits");
  }
};

/// One snapshot of `fields`, everything read now (one-shot commands).
inline SnapshotOptions FieldOptions(FieldSet fields) {
  SnapshotOptions o;
  o.fields = fields;
  return o;
}

/// The options a long-lived monitor (top: kTopFields, the collector: kCollectorFields)
/// samples with.
inline SnapshotOptions MonitorOptions(FieldSet fields) {
  SnapshotOptions o;
  o.fields = fields;
  o.slow_max_age = kMonitorSlowAge;
  return o;
}

}  // namespace gpuman::devices
