// The machine's rules for handing out GPUs, in one place for every path that hands them
// out: the daemon's acquire and submit handlers, and the machine lease table used when no
// daemon runs. Pure: the caller passes the live leases, the rules and who is asking;
// nothing here reads a clock, a file or NVML. docs/design.md ("One lease authority").
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "model/job.h"
#include "model/lease.h"
#include "policy/selection.h"

namespace gpuman::policy {

/// The rules an admin sets for the machine ([daemon] in the config file).
/// Where leases' rendezvous ports come from (`[launch] ports`, docs/python.md).
struct PortRange {
  int first = 29500;
  int last = 29999;
};

/// How GPUs may be shared as memory slices (`[share]`, docs/share.md).
struct ShareRules {
  bool allow = true;                          // allow = false: no --gpu-memory on this machine
  int64_t min_slice_bytes = int64_t{1} << 30; // min_slice: the smallest slice handed out
  /// gpus: which GPUs may be sliced, as written (indices or UUIDs); empty: every GPU.
  std::vector<std::string> gpus;
  /// mps = "on": every slice lease is an MPS lease (as if --mps were given).
  bool mps_on = false;
  /// mps_control: the MPS control program the daemon runs; a bare name is looked up on the
  /// daemon's PATH.
  std::string mps_control = "nvidia-cuda-mps-control";
  /// mps_dir: under it, each GPU's MPS pipe and log directories (visibility::MpsDirectories).
  std::string mps_dir = "/run/gpuman/mps";
};

struct MachineRules {
  std::optional<int> default_max_gpus_per_user;  // max_gpus_per_user; unset: no cap
  std::map<uint32_t, int> max_gpus_per_user;     // [daemon.user_limits], by uid
  std::map<std::string, std::string> drained;    // uuid -> reason: never handed out
  std::optional<PortRange> launch_ports = PortRange{};  // nullopt: `[launch] ports = "off"`
  ShareRules share;

  /// The cap of `uid`, or nullopt when there is none.
  std::optional<int> CapFor(uint32_t uid) const;
  /// Where CapFor's answer comes from, for messages: "[daemon.user_limits]" for a uid
  /// listed there, else "max_gpus_per_user".
  const char* CapOrigin(uint32_t uid) const;
};

/// Who asks, from the kernel (SO_PEERCRED or getuid()).
struct Caller {
  uint32_t uid = 0;
  std::string user;
  bool is_admin = false;  // root or the admin group
};

/// A request after the rules were applied: what to pass to Select, against which leases.
struct RuledRequest {
  model::GpuRequest request;
  /// The live leases Select must respect. Without `within`, all of them; with it, all but
  /// the enclosing lease (its GPUs are the caller's to use).
  std::vector<model::Lease> leases;
  /// Set when the request runs inside one of the caller's own leases (a `gpuman run` in a
  /// shell that holds `select --lease`, or inside a job): no new lease is taken; the
  /// caller's processes join the enclosing lease, like a Slurm step inside its allocation.
  std::optional<int64_t> within;
};

/// What a caller wants to do with an existing lease.
enum class LeaseAct {
  kJoin,    // run inside it (GPUMAN_LEASE_ID, a nested `run`/`select`): its holder only
  kManage,  // add processes to it, release it: its holder, root and the admin group
};

/// The one "is this lease yours" rule, for every path that acts on a lease (the daemon's
/// command table, the machine lease table's broker, nested joins, release). Root counts as
/// an admin whether or not `caller.is_admin` says so.
bool IsYourLease(const model::Lease& lease, const Caller& caller, LeaseAct act);

/// IsYourLease as a Status. Errors: kPermissionDenied "lease 12 belongs to bob" ("another
/// user" when the lease names no user).
Status CheckYourLease(const model::Lease& lease, const Caller& caller, LeaseAct act);

/// GPUs held by `uid` in `leases`, leaving out the lease `except` (the enclosing one). Each
/// GPU counts once, however many of the user's memory slices it carries.
int GpusHeldBy(uint32_t uid, const std::vector<model::Lease>& leases,
               std::optional<int64_t> except = std::nullopt);

/// Applies the rules to `req` for `caller`:
/// - drained GPUs are excluded (the verdicts name them "drained: REASON");
/// - `within_lease` (the GPUMAN_LEASE_ID of the caller's environment): the lease must be
///   live and the caller's; the request is confined to its GPUs and sees them as free;
/// - the caller's cap: more GPUs than the cap can never be granted (kNotFound); more than
///   the cap leaves after what the caller holds now is kBusy (wait or release one).
/// `machine_gpus` is the number of GPUs of the machine (a request for more is kNotFound).
/// Errors: kNotFound (never satisfiable), kBusy (cap reached for now), kPermissionDenied
/// (the enclosing lease is another user's), kInvalidArgument (the enclosing lease is not
/// live: "GPUMAN_LEASE_ID=12: no such lease (it ended?)").
Result<RuledRequest> ApplyLeaseRules(model::GpuRequest req, const Caller& caller,
                                     std::optional<int64_t> within_lease,
                                     const std::vector<model::Lease>& live,
                                     const MachineRules& rules, int machine_gpus);

/// How many units of `snap` a request of `req`'s kind can be given: its MIG devices for a
/// MIG request (--mig, MIG UUIDs in --gpus; docs/share.md, "MIG"), else its GPUs. The
/// `machine_gpus` of ApplyLeaseRules and CheckSatisfiable.
int MachineUnits(const model::MachineSnapshot& snap, const model::GpuRequest& req);

/// The GPUs of `snap` that `share` leaves out of slicing (UUID -> why), for
/// GpuRequest::not_sliceable.
std::map<std::string, std::string> NotSliceable(const model::MachineSnapshot& snap, const ShareRules& share);

/// Whether a slice of `bytes` (per GPU) may be asked for on this machine at all.
/// Errors: kNotFound ([share] allow = false), kInvalidArgument (below [share] min_slice).
Status CheckSlice(int64_t bytes, const ShareRules& share);

/// Whether a job asking for `count` GPUs (with the `gpus` list it named) can ever run for
/// `caller`: refused at submit with the reason instead of waiting forever.
/// Errors: kNotFound (more GPUs than the machine has, than its --gpus list names, or than
/// the caller's cap).
Status CheckSatisfiable(int count, const std::optional<std::vector<std::string>>& gpus,
                        const Caller& caller, const MachineRules& rules, int machine_gpus);

/// What a lease is for, when it is a queue job's: how the job is named (`7`, or `12_3` for
/// a task of an array: its plain id would name the whole array) and its name.
struct LeaseJob {
  model::JobRef ref;
  std::string name;
};

/// Whether `caller` may release `lease`. A queue job's lease belongs to the job: nobody
/// releases it (cancel the job instead). Otherwise the holder, root and the admin group.
/// Errors: kConflict (a job's lease: "lease 12 belongs to job 7 (train), which is still
/// running: cancel the job with `gpuman cancel 7`"), kPermissionDenied (another user's),
/// kConflict for a `run` lease whose command still runs (`live`: its processes the caller
/// found alive): its GPUs would go to the next user under a command that still uses them.
/// A `select --lease` lease (held by a shell) is released while the shell lives: that is
/// how it is given back.
Status CheckRelease(const model::Lease& lease, const Caller& caller,
                    const std::optional<LeaseJob>& job, const std::vector<model::LeaseProcess>& live = {});

/// Whether `caller` may `release --force` `lease`: end what still runs on it, then free it.
/// Root and the admin group only (ending another user's processes is theirs to do; a
/// holder ends their own command with Ctrl-C). A job's lease stays the job's: cancel it.
/// Errors: kConflict (a job's lease, as CheckRelease), kPermissionDenied ("release --force
/// is for root and the admin group ...").
Status CheckForceRelease(const model::Lease& lease, const Caller& caller, const std::optional<LeaseJob>& job);

/// The job a lease of kind "job" was taken for ("job 7 (train)", "job 12_3 (sweep)"), or
/// nullopt.
std::optional<model::JobRef> JobIdOfLease(const model::Lease& lease);

}  // namespace gpuman::policy
