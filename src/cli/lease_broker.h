// LeaseBroker: the one seam through which every command takes, lists and gives back
// GPU leases. Two implementations: the machine's daemon (when one runs, it is the
// authority: one table for interactive runs and queued jobs), and the machine lease
// table (a shared SQLite file, store/machine_lease_table.h) when no daemon runs. Both
// run the one acquire step (lease/acquire_step.h): the daemon in its handler, the table
// broker here. The waiting loop is
// AcquireWaiting, written once against this interface with time passed in, so waits
// are unit-testable with a fake broker and clock. Main thread only.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/result.h"
#include "devices/device_source.h"
#include "model/device_snapshot.h"
#include "model/lease.h"
#include "visibility/child_env.h"
#include "policy/lease_rules.h"
#include "policy/selection.h"

namespace gpuman::devices {
class DeviceSource;
}
namespace gpuman::store {
class LeaseStore;
}

namespace gpuman::cli {

class DaemonClient;

/// One request for a lease, as the CLI built it (ids resolved against a snapshot once).
struct LeaseAsk {
  model::GpuRequest request;
  model::Lease draft;                 // uid, user, kind, command, created, processes
  std::optional<int64_t> within;      // GPUMAN_LEASE_ID of the caller's environment
  /// The snapshot the request was built on (no topology), and the fields it holds: the
  /// table's broker chooses on it for its first attempt when it holds what choosing needs
  /// (devices::kSelectionFields) instead of reading again. Optional.
  std::optional<model::MachineSnapshot> snapshot;
  devices::FieldSet snapshot_fields = devices::kSelectionFields;
};

struct Granted {
  int64_t lease_id = 0;
  std::vector<std::string> uuids;     // in index order
  std::vector<int> indices;           // their NVML indices, same order
  std::string placement;              // "NVLink (NV12)", "chosen by the daemon", ...
  bool nested = false;                // joined the enclosing lease: do not release it
  model::MachineSnapshot snapshot;    // the snapshot the choice was made on (or looked up)
  std::string cgroup;                 // the daemon confined the processes added here (docs/enforce.md)
  std::optional<int> master_port;     // the lease's rendezvous port (lease/ports.h), when it has one
  /// An MPS lease: where its GPU's control daemon is (the daemon's answer; docs/share.md).
  std::optional<visibility::MpsClient> mps;
};

class LeaseBroker {
 public:
  virtual ~LeaseBroker() = default;
  /// One attempt. Errors: kBusy (nothing fits now; the message says why), kNotFound
  /// (never: more than the machine or the cap allows), kPermissionDenied, others.
  virtual Result<Granted> TryAcquire(const LeaseAsk& ask) = 0;
  /// What TryAcquire would grant now, taking nothing and writing nothing (plain `select`);
  /// `placement` without the "inside lease N" of a nested grant. Errors: as TryAcquire.
  virtual Result<Granted> Preview(const LeaseAsk& ask) = 0;
  virtual Status AddProcesses(int64_t lease_id, const std::vector<model::LeaseProcess>& processes) = 0;
  /// Errors: kNotFound, kPermissionDenied (another user's), kConflict (a job's lease).
  virtual Status Release(int64_t lease_id) = 0;
  /// One step of `release --force` (lease/force_release.h): signals what still runs on the
  /// lease and returns how many of its processes live; 0 once the lease is freed.
  /// Errors: those of Release, and kPermissionDenied (not root or the admin group; without
  /// a daemon, not root: nobody else may signal another user's processes).
  virtual Result<int64_t> ForceReleaseStep(int64_t lease_id) = 0;
  /// The live leases of the machine.
  virtual Result<std::vector<model::Lease>> List() = 0;
  /// Returns when something may have changed (a lease given back), or after `ms`.
  virtual void WaitForChange(int ms) = 0;
  /// "the daemon at /run/gpuman/gpuman.sock", "the machine lease table /run/gpuman/leases".
  virtual std::string Describe() const = 0;
};

struct WaitPolicy {
  std::optional<int64_t> wait_ms;  // nullopt: one attempt; < 0: wait forever
  std::string waiting_for;         // "2 GPUs for 'python train.py'" for the notes
  int64_t note_every_ms = 10000;   // how often a waiter says it still waits
  /// Asked before every attempt: a signal number ends the wait (SIGINT: Ctrl-C), 0 goes
  /// on. Unset: nothing interrupts but the process's own signal handling.
  std::function<int()> interrupted;
};

/// The one line for a wait a signal ended: "interrupted by SIGINT while waiting for
/// WAITING_FOR; OUTCOME" (kBusy), OUTCOME saying what became of the lease.
Error InterruptedWait(int signal, const std::string& waiting_for, const std::string& outcome);

/// Tries until granted, a lasting refusal, or the wait runs out; says on `note` (one
/// line each, at most every note_every_ms) what it waits for. kBusy and kConflict are
/// retried; anything else ends the wait. Errors: the broker's; kBusy "gave up after 30s:
/// ..." when the wait ran out; kBusy "interrupted by SIGINT while waiting for ..." when
/// policy.interrupted said so (within a second of the signal: one wait for a change).
Result<Granted> AcquireWaiting(LeaseBroker& broker, const LeaseAsk& ask, const WaitPolicy& policy,
                               const Clock& clock, const std::function<void(const std::string&)>& note);

/// The device source, opened when first needed (listing or releasing leases needs no driver).
using DeviceGetter = std::function<Result<devices::DeviceSource*>()>;

/// The daemon as broker. Rules are the daemon's; selection happens there.
std::unique_ptr<LeaseBroker> MakeDaemonBroker(DaemonClient& daemon, DeviceGetter devices, std::string socket_path);

/// The machine lease table as broker: `caller` from getuid(), `rules` from the config,
/// `clock` for the creation time of its leases.
std::unique_ptr<LeaseBroker> MakeTableBroker(store::LeaseStore& table, DeviceGetter devices, policy::Caller caller,
                                             policy::MachineRules rules, std::string table_dir, const Clock& clock);

}  // namespace gpuman::cli
