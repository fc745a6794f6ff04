#include "cli/acquire.h"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>

#include "base/interrupts.h"
#include "base/strings.h"
#include "cli/bench_store.h"
#include "cli/lease_broker.h"
#include "cli/slurm_node.h"
#include "visibility/allocation.h"
#include "store/proc_liveness.h"

namespace gpuman::cli {

policy::Caller CurrentCaller() {
  policy::Caller caller;
  caller.uid = getuid();
  passwd* pw = getpwuid(caller.uid);
  caller.user = pw ? pw->pw_name : std::to_string(caller.uid);
  caller.is_admin = caller.uid == 0;
  return caller;
}

Result<model::Lease> DraftLease(Context& ctx, int holder_pid, std::string kind, std::string command) {
  model::Lease draft;
  const policy::Caller caller = CurrentCaller();
  draft.uid = caller.uid;
  draft.user = caller.user;
  draft.kind = std::move(kind);
  draft.command = std::move(command);
  draft.created_unix_ms = ctx.clock().NowUnixMs();
  auto holder = store::CurrentLeaseProcess(holder_pid);
  if (!holder) {
    return MakeError(ErrorCode::kNotFound, "cannot read the start time of process " + std::to_string(holder_pid));
  }
  draft.processes.push_back(*holder);
  return draft;
}

Result<std::optional<int64_t>> EnclosingLease(const Context& ctx) {
  auto v = ctx.env().Get("GPUMAN_LEASE_ID");
  if (!v || v->empty()) return std::optional<int64_t>();
  auto id = ParseInt(*v);
  if (!id || *id < 1) {
    return MakeError(ErrorCode::kInvalidArgument, "GPUMAN_LEASE_ID='" + *v + "' is not a lease id");
  }
  return std::optional<int64_t>(*id);
}

Result<std::vector<model::Lease>> LiveLeases(Context& ctx) {
  auto broker = ctx.Broker();
  if (!broker) return broker.error();
  return (*broker)->List();
}

Status AddLeaseProcesses(Context& ctx, int64_t lease_id, const std::vector<model::LeaseProcess>& processes) {
  auto broker = ctx.Broker();
  if (!broker) return broker.error();
  return (*broker)->AddProcesses(lease_id, processes);
}

Status ReleaseLease(Context& ctx, int64_t lease_id) {
  auto broker = ctx.Broker();
  if (!broker) return broker.error();
  return (*broker)->Release(lease_id);
}

namespace {

// The ask for the machine's authority: ids resolved once (indices and UUIDs do not change
// while we wait) against a snapshot that also serves the broker's first attempt.
Result<LeaseAsk> BuildAsk(Context& ctx, const SelectionArgs& args) {
  auto source = ctx.Devices();
  if (!source) return source.error();
  // Where a daemon serves, it chooses on its own sample: this process needs only what
  // resolves ids and shapes the child's environment (no processes: the daemon reads no
  // caller's view for them). Otherwise the table's broker chooses on this very snapshot.
  const devices::FieldSet fields =
      ctx.daemon_sample() ? devices::kFieldIdentity | devices::kFieldDetails : devices::kSelectionFields;
  auto snap = (*source)->Snapshot(devices::FieldOptions(fields));
  if (!snap) return snap.error();
  auto req = BuildSelectionRequest(args, *snap, ctx.env().vars);
  if (!req) return req.error();
  if (req->prefer_fastest) {
    // What `gpuman bench` measured (the machine's file, and the caller's own): it only
    // ranks the GPUs this request may have anyway (cli/bench_store.h).
    std::vector<std::string> warnings;
    req->measured_fp32_tflops = MeasuredFp32(BenchFilePaths(ctx.env(), getuid()), warnings);
    for (const auto& w : warnings) ctx.err() << "gpuman: warning: " << w << "\n";
  }
  auto within = EnclosingLease(ctx);
  if (!within) return within.error();
  LeaseAsk ask;
  ask.request = std::move(*req);
  ask.within = *within;
  ask.snapshot = std::move(*snap);
  ask.snapshot_fields = fields;
  return ask;
}

// A selection that failed while the enclosing allocation leaves GPUs out says which
// variable does it and how to clear it (a CUDA_VISIBLE_DEVICES left over in the user's
// shell is the usual surprise): the rule is the same, only the words are more.
Error WithAllocationLimits(Error error, const LeaseAsk& ask, const Context& ctx) {
  if (error.code != ErrorCode::kNotFound && error.code != ErrorCode::kBusy) return error;
  // Inside a gpuman lease the error names the lease already.
  if (!ask.request.allowed || !ask.snapshot || ask.within) return error;
  const auto node = SlurmNodeForJob(ctx.env().vars, *ask.snapshot);
  const std::string limits =
      visibility::DescribeAllocationLimits(ctx.env().vars, ask.snapshot->gpus, node ? &*node : nullptr);
  if (!limits.empty()) error.message += "; " + limits;
  return error;
}

Acquired ToAcquired(model::Lease lease, Granted granted) {
  Acquired out;
  out.lease = std::move(lease);
  out.lease.id = granted.lease_id;
  out.lease.gpu_uuids = granted.uuids;
  out.lease.master_port = granted.master_port;
  out.selection.uuids = std::move(granted.uuids);
  out.selection.indices = std::move(granted.indices);
  out.selection.placement = std::move(granted.placement);
  out.snapshot = std::move(granted.snapshot);
  out.nested = granted.nested;
  out.cgroup = std::move(granted.cgroup);
  out.mps = std::move(granted.mps);
  out.lease.mps = out.mps.has_value();
  return out;
}

}  // namespace

Result<Acquired> AcquireLease(Context& ctx, const SelectionArgs& args, model::Lease draft,
                              const AcquireOptions& options) {
  auto broker = ctx.Broker();
  if (!broker) return broker.error();
  auto ask = BuildAsk(ctx, args);
  if (!ask) return ask.error();
  ask->draft = std::move(draft);
  WaitPolicy wait;
  wait.wait_ms = options.wait_ms;
  wait.waiting_for = options.waiting_for;
  int interrupted = 0;
  wait.interrupted = [&] { return interrupted = TakePendingInterrupt(); };
  auto granted = AcquireWaiting(**broker, *ask, wait, ctx.clock(),
                                [&](const std::string& line) { ctx.err() << "gpuman: " << line << "\n"; });
  if (!granted) {
    if (options.interrupted_by) *options.interrupted_by = interrupted;
    return WithAllocationLimits(granted.error(), *ask, ctx);
  }
  // Interrupted while the grant was on its way: it goes back, nothing starts.
  if (int sig = TakePendingInterrupt()) {
    if (!granted->nested) (void)(*broker)->Release(granted->lease_id);
    if (options.interrupted_by) *options.interrupted_by = sig;
    return InterruptedWait(sig, options.waiting_for, "the lease was given back");
  }
  Acquired out = ToAcquired(ask->draft, std::move(*granted));
  out.lease.gpu_memory_bytes = ask->request.gpu_memory_bytes;
  return out;
}

Result<Acquired> PreviewLease(Context& ctx, const SelectionArgs& args) {
  auto ask = BuildAsk(ctx, args);  // a bad request is reported before the authority is opened
  if (!ask) return ask.error();
  auto broker = ctx.Broker();
  if (!broker) return broker.error();
  auto previewed = (*broker)->Preview(*ask);
  if (!previewed) return WithAllocationLimits(previewed.error(), *ask, ctx);
  Acquired out = ToAcquired(model::Lease{}, std::move(*previewed));
  out.lease.gpu_memory_bytes = ask->request.gpu_memory_bytes;
  return out;
}

void AddSliceEnv(const Acquired& acquired, visibility::ChildGpuEnvRequest& env) {
  env.mps = acquired.mps;  // an MPS lease, slice or not
  if (!acquired.lease.gpu_memory_bytes) return;
  env.slice_bytes = acquired.lease.gpu_memory_bytes;
  env.slice_of_total_bytes = model::SmallestMemoryTotal(acquired.snapshot, acquired.selection.uuids);
}

}  // namespace gpuman::cli
