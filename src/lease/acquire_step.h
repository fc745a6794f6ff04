// The one acquire step: with a device snapshot, a lease table, a request and who asks, it
// applies the machine's rules (policy/lease_rules.h), chooses GPUs (policy/selection.h)
// and takes the lease under the table's write lock, or joins the caller's enclosing lease,
// or (a preview) only says what a grant would be. Both lease authorities call it: the
// daemon's acquire and preview handlers, and the machine lease table's broker when no
// daemon runs; so `select`, `run` and `select --lease` get one answer from one authority.
// Keeps no state; any thread with its own LeaseStore. docs/design.md ("One acquire step").
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/result.h"
#include "model/device_snapshot.h"
#include "model/lease.h"
#include "policy/lease_rules.h"
#include "policy/selection.h"
#include "store/lease_store.h"
#include "store/liveness.h"

namespace gpuman::devices {
class DeviceSource;
}
namespace gpuman::store {
class LeaseStore;
}

namespace gpuman::lease {

/// What the caller asks for.
struct AcquireAsk {
  model::GpuRequest request;            // ids resolved; drains come from the rules
  std::string kind = "run";                    // recorded: "run" or "select"
  std::string command;                         // recorded, cut to model::kMaxLeaseCommandBytes
  std::vector<model::LeaseProcess> processes;  // keep the new lease alive / join the enclosing one
  std::optional<int64_t> within;               // GPUMAN_LEASE_ID of the caller's environment
  bool preview = false;                        // choose as a grant would, write nothing
};

/// The authority's side of the step.
struct Authority {
  store::LeaseStore& table;  // where its leases live and new ones are written
  /// Live leases of another table that the authority respects but never writes or joins
  /// (the daemon: the machine lease table's, with negative ids). Empty for the table itself.
  std::vector<model::Lease> foreign;
  policy::MachineRules rules;  // caps and drains, as this authority knows them
  store::LivenessCheck alive;  // whether a lease's process still runs
  const Clock& clock;          // when a new lease was created
};

struct Grant {
  /// The new lease; the enclosing one when nested; 0 for a preview of a new lease.
  int64_t lease_id = 0;
  policy::Selection selection;  // uuids, indices, placement, verdicts
  bool nested = false;          // inside the enclosing lease (its processes joined, unless a preview)
  std::optional<int> master_port;  // the lease's rendezvous port (lease/ports.h); the enclosing one's when nested
};

/// One attempt, never waiting (callers wait: cli::AcquireWaiting). The rules and the
/// selection run first on a read-only look at the live leases (so a refusal never takes
/// the write lock), then again on what the write lock shows (LeaseStore::Acquire, which
/// also reclaims stale leases). A preview stops after the look and writes nothing.
/// Errors: those of policy::ApplyLeaseRules and policy::Select (kBusy: nothing fits now;
/// kNotFound: never; kPermissionDenied: the enclosing lease is another user's;
/// kInvalidArgument: it is not live), and of the store (kConflict, kBusy, kIo).
Result<Grant> AcquireStep(const model::MachineSnapshot& snap, const AcquireAsk& ask, const policy::Caller& caller,
                          const Authority& authority);

/// Each GPU's index in `snap` (-1 when it is not there), recorded with a lease for display.
/// `snap` must outlive the function.
store::GpuIndexOf IndexIn(const model::MachineSnapshot& snap);

/// `sample` as choosing should see it now, for an authority that chooses on a recent
/// sample instead of reading the devices again (the daemon): the processes it lists that
/// have ended since (`ended(pid)`; only those the sample saw in our PID namespace) are left
/// out, and their memory counts as free again.
model::MachineSnapshot WithoutEndedProcesses(model::MachineSnapshot sample,
                                             const std::function<bool(uint32_t pid)>& ended);

/// Reads `source` once; the topology is read the first time only and kept in `topology`
/// (it does not change while a process runs). Errors: the source's.
Result<model::MachineSnapshot> SnapshotWithTopology(devices::DeviceSource& source,
                                                    std::optional<model::Topology>& topology);

}  // namespace gpuman::lease
