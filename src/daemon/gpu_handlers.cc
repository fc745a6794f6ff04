// Handlers that act on GPUs: drain and undrain (the command table lets only the admin
// group and root through), and the list of drained GPUs (anyone).
#include "daemon/call.h"
#include "devices/gpu_ids.h"

namespace gpuman::daemon {

using protocol::MakeErrorReply;
using protocol::MakeReply;
using protocol::Reply;
using protocol::WireCode;

namespace {

std::string ShortHost(const std::string& host) { return host.empty() ? "NODE" : host.substr(0, host.find('.')); }

}  // namespace

Reply Daemon::OnDrainUndrain(const Call& call) {
  const int64_t id = call.id();
  const bool drain = call.request.op() == protocol::Op::kDrain;
  std::string gpu = drain ? call.args<protocol::DrainArgs>().gpu : call.args<protocol::UndrainArgs>().gpu;
  std::string reason = drain ? call.args<protocol::DrainArgs>().reason : "";
  if (drain && options_.monitor.slurm_node) {
    // Slurm hands out this node's GPUs; it cannot leave one out, only the whole node.
    if (const auto slurm = options_.monitor.slurm_node()) {
      return Fail(id, MakeError(ErrorCode::kConflict,
                                "Slurm node (" + *slurm + "): Slurm cannot drain one GPU; drain the node: "
                                "scontrol update nodename=" + ShortHost(options_.monitor.hostname) + " state=drain reason=\"...\" (undrain still lifts earlier drains)"));
    }
  }
  auto snap = devices_.Snapshot();
  if (!snap) return Fail(id, snap.error());
  auto picked = devices::ResolveGpuIds(gpu, snap->gpus);
  if (!picked) return Fail(id, picked.error());
  if (picked->size() != 1 || !snap->gpus[picked->front()].uuid) {
    return MakeErrorReply(id, Wire(WireCode::kInvalidArgument, "name exactly one GPU"));
  }
  std::string uuid = *snap->gpus[picked->front()].uuid;
  Status done = drain ? jobs_->Drain(uuid, reason.empty() ? "drained by " + call.peer.user : reason, call.peer.uid,
                                     clock_.NowUnixMs())
                      : jobs_->Undrain(uuid);
  if (!done) return Fail(id, done.error());
  dirty_ = true;
  return MakeReply(id, protocol::DrainResult{uuid});
}

// Anyone may ask: a drain names a GPU and who drained it, nothing private.
Reply Daemon::OnDrains(const Call& call) {
  auto drained = jobs_->DrainedDetails();
  if (!drained) return Fail(call.id(), drained.error());
  protocol::DrainsResult result;
  for (const auto& d : *drained) {
    result.drains.push_back(model::GpuDrain{d.uuid, d.reason, d.by_uid, UserName(d.by_uid), d.since_unix_ms});
  }
  return MakeReply(call.id(), result);
}

}  // namespace gpuman::daemon
