// Taking a lease from the command line: builds the request once (ids resolved against a
// snapshot, the enclosing allocation and lease from the environment) and hands it to the
// machine's one lease authority (cli/lease_broker.h), optionally waiting. Shared by
// `select --lease` and `run`; plain `select` previews through the same authority.
// Main thread only.
#pragma once

#include <optional>
#include <string>

#include "cli/context.h"
#include "cli/selection_options.h"
#include "model/lease.h"
#include "policy/lease_rules.h"
#include "policy/selection.h"
#include "visibility/child_env.h"

namespace gpuman::cli {

struct AcquireOptions {
  std::optional<int64_t> wait_ms;  // nullopt: do not wait; <0: wait forever
  std::string waiting_for;         // "2 GPUs for 'python train.py'" for the stderr notes
  /// Set to the signal (SIGINT, SIGTERM, SIGHUP) that ended the wait, if one did. The
  /// caller holds those signals blocked (BlockInterrupts, or sched::ChildProcess) so they
  /// reach the wait as pending; one that arrives as the lease is granted gives it back.
  int* interrupted_by = nullptr;
};

struct Acquired {
  model::Lease lease;
  policy::Selection selection;
  model::MachineSnapshot snapshot;  // the snapshot the choice was made on
  bool nested = false;              // joined the enclosing lease (GPUMAN_LEASE_ID): never release it
  std::string cgroup;               // where the daemon confined the command (docs/enforce.md); "": not
  std::optional<visibility::MpsClient> mps;  // an MPS lease: its GPU's control daemon
};

/// Errors: kBusy when nothing fits and we may not wait (or the wait ran out; the message
/// says why); kNotFound when the request can never be met here (machine size, the user's
/// cap); kUnavailable when the machine's daemon is expected but does not answer; others
/// from NVML, the daemon or the lease table; kBusy "interrupted by SIGINT ..." when a
/// signal ended the wait (options.interrupted_by says which).
/// For a slice lease (`--gpu-memory`): the slice and the smallest of its GPUs' total
/// memory, so that the child gets visibility::SliceEnv. Nothing for a whole-GPU lease.
void AddSliceEnv(const Acquired& acquired, visibility::ChildGpuEnvRequest& env);

Result<Acquired> AcquireLease(Context& ctx, const SelectionArgs& args, model::Lease draft,
                              const AcquireOptions& options);

/// What AcquireLease would be granted now by the same authority (its rules, drains,
/// leases and the enclosing lease), taking and writing nothing: plain `select`.
/// `lease.id` is the enclosing lease when nested, else 0. Errors: as AcquireLease
/// without waiting.
Result<Acquired> PreviewLease(Context& ctx, const SelectionArgs& args);

/// The live leases, from the machine's lease authority (daemon or machine lease table).
Result<std::vector<model::Lease>> LiveLeases(Context& ctx);

/// Adds processes to a lease / gives it back, through the machine's lease authority.
Status AddLeaseProcesses(Context& ctx, int64_t lease_id, const std::vector<model::LeaseProcess>& processes);
Status ReleaseLease(Context& ctx, int64_t lease_id);

/// Who runs this command, from the kernel (getuid) and the user database; root is the
/// admin here (the admin group is the daemon's to judge).
policy::Caller CurrentCaller();

/// A draft lease for the current user, held by `holder` (the runner, or the shell for
/// `select --lease`). Errors: kNotFound when the holder's start time cannot be read.
Result<model::Lease> DraftLease(Context& ctx, int holder_pid, std::string kind, std::string command);

/// GPUMAN_LEASE_ID of the environment, when it names a lease (nested use). Errors:
/// kInvalidArgument for a value that is not a lease id.
Result<std::optional<int64_t>> EnclosingLease(const Context& ctx);

}  // namespace gpuman::cli
