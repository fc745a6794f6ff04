// Where `status` and `top` get the machine's state: the daemon's latest sample over its
// socket when a daemon serves it (one request, no NVML session of our own), else NVML
// directly. Main thread, or the one thread that owns the Context (top's sampler).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "cli/context.h"
#include "devices/device_source.h"
#include "model/device_snapshot.h"
#include "model/drain.h"
#include "model/job.h"
#include "model/lease.h"

namespace gpuman::cli {

/// One look at the machine.
struct MachineView {
  /// The GPUs, owners of processes filled in (unless processes were not asked for), or
  /// why they could not be read.
  Result<model::MachineSnapshot> snapshot = model::MachineSnapshot{};
  bool from_daemon = false;  // the daemon's sample ("daemon"), else our own NVML read ("nvml")
  /// Why NVML was read although a daemon is expected (it does not answer, is too old for
  /// the snapshot op, cannot read the devices, or its sample is stale); "" otherwise.
  std::string note;
  std::optional<std::string> scenario;  // the daemon runs on the stand-in NVML (`--simulate`)
  /// Set when the daemon answered the snapshot op: its leases (idle marks set), active
  /// jobs and drains, from the same reply.
  bool has_holders = false;
  std::vector<model::Lease> leases;
  std::vector<model::Job> jobs;
  std::vector<model::GpuDrain> drains;

  const char* source() const { return from_daemon ? "daemon" : "nvml"; }
};

/// Reads the machine. `--simulate` always reads the stand-in itself (it names a machine,
/// which the daemon may not be). A daemon's sample older than two of its periods (plus a
/// second) counts as stale: NVML is read instead and the view says why. Never an error by
/// itself: a failed read is in `snapshot`.
/// `nvml_fields`: what to ask NVML for when it is read here (the daemon reads every field).
MachineView ReadMachine(Context& ctx, bool processes, const devices::SnapshotOptions& nvml_fields);

/// "source: daemon (sampled 0.4 s ago)", "source: NVML", "source: NVML (the daemon ...)".
std::string SourceLine(const MachineView& view, int64_t now_unix_ms);

}  // namespace gpuman::cli
