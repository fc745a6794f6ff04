// Taking a lease: snapshot, select, and record in one lease-store transaction, optionally
// waiting (woken by changes to the state directory, re-checking at least every second)
// until GPUs fit. Shared by `select --lease` and `run`. Main thread only.
#pragma once

#include <optional>
#include <string>

#include "cli/context.h"
#include "cli/selection_options.h"
#include "model/lease.h"
#include "policy/selection.h"

namespace gpuman::cli {

struct AcquireOptions {
  std::optional<int64_t> wait_ms;  // nullopt: do not wait; <0: wait forever
  std::string waiting_for;         // "2 GPUs for 'python train.py'" for the stderr notes
};

struct Acquired {
  model::Lease lease;
  policy::Selection selection;
  model::MachineSnapshot snapshot;  // the snapshot the choice was made on
};

/// Errors: kBusy when nothing fits and we may not wait (or the wait ran out; the message
/// says why); kNotFound when the request can never be met here; others from NVML/store.
Result<Acquired> AcquireLease(Context& ctx, const SelectionArgs& args, model::Lease draft,
                              const AcquireOptions& options);

/// The live leases, from the daemon when one runs, else from the per-user store.
Result<std::vector<model::Lease>> LiveLeases(Context& ctx);

/// Adds processes to a lease / gives it back, through the daemon when one runs.
Status AddLeaseProcesses(Context& ctx, int64_t lease_id, const std::vector<model::LeaseProcess>& processes);
Status ReleaseLease(Context& ctx, int64_t lease_id);

/// A draft lease for the current user, held by `holder` (the runner, or the shell for
/// `select --lease`). Errors: kNotFound when the holder's start time cannot be read.
Result<model::Lease> DraftLease(Context& ctx, int holder_pid, std::string kind, std::string command);

}  // namespace gpuman::cli
