// Handlers for the lease table: leases, acquire (`gpuman run` through the daemon), preview
// (plain `select`), add_processes, release. The command table has resolved the lease a request names and
// checked its owner; here, every process a client names must be its own (CheckOwnProcess),
// and the machine's lease rules apply (AcquireFor, CheckReleaseFor in daemon.cc).
#include <unistd.h>

#include <algorithm>

#include "daemon/call.h"
#include "protocol/framing.h"
#include "protocol/json_io.h"
#include "protocol/model_json.h"

namespace gpuman::daemon {

using protocol::MakeErrorReply;
using protocol::MakeReply;
using protocol::Reply;

namespace {
// A leases page's leases take at most this much of the frame (the envelope takes the rest).
constexpr size_t kLeasePageBytes = protocol::kMaxMessageBytes - 4096;
}  // namespace

// One page of the live leases in id order (docs/protocol.md, "leases"): at most `limit`,
// and no more than fit in one frame (a lease's command is cut to 4 KiB when recorded, so
// one always fits); `next` says where the next page starts.
Reply Daemon::OnLeases(const Call& call) {
  const auto& args = call.args<protocol::LeasesArgs>();
  auto live = AllLiveLeases();
  if (!live) return Fail(call.id(), live.error());
  std::sort(live->begin(), live->end(), [](const model::Lease& a, const model::Lease& b) { return a.id < b.id; });
  if (args.after_id) {
    const int64_t after = *args.after_id;
    live->erase(live->begin(), std::upper_bound(live->begin(), live->end(), after,
                                                [](int64_t id, const model::Lease& l) { return id < l.id; }));
  }
  const auto limit = static_cast<size_t>(std::min(args.limit.value_or(protocol::kMaxLeasePage), protocol::kMaxLeasePage));
  bool more = live->size() > limit;
  if (more) live->resize(limit);
  if (collector_) collector_->Annotate(*live);
  protocol::LeasesResult result;
  size_t bytes = 0;
  for (auto& l : *live) {
    const size_t size = protocol::DumpJson(protocol::LeaseToJson(l)).size() + 1;
    if (!result.leases.empty() && bytes + size > kLeasePageBytes) {
      more = true;
      break;
    }
    bytes += size;
    result.leases.push_back(std::move(l));
  }
  if (more && !result.leases.empty()) result.next = result.leases.back().id;
  return MakeReply(call.id(), result);
}

Reply Daemon::OnAcquire(const Call& call) {
  // `gpuman run` / `select --lease` while a daemon runs: one lease table for everyone.
  auto got = AcquireFor(call.peer, call.args<protocol::AcquireArgs>());
  if (!got) return Fail(call.id(), got.error());
  return MakeReply(call.id(), *got);
}

Reply Daemon::OnPreview(const Call& call) {
  // Plain `gpuman select`: the acquire step as a preview, so it answers what `run` would
  // get from this daemon now (its rules, drains and leases), and writes nothing.
  const auto& a = call.args<protocol::PreviewArgs>();
  lease::AcquireAsk ask;
  ask.request = a.request;
  ask.within = a.within_lease_id;
  ask.preview = true;
  auto got = AcquireStepFor(call.peer, ask);
  if (!got) return Fail(call.id(), got.error());
  protocol::PreviewResult result;
  result.gpu_uuids = got->selection.uuids;
  result.placement = got->selection.placement;
  if (got->nested) result.lease_id = got->lease_id;
  result.nested = got->nested;
  return MakeReply(call.id(), result);
}

Reply Daemon::OnAddProcesses(const Call& call) {
  const auto& a = call.args<protocol::AddProcessesArgs>();
  for (const auto& p : a.processes) {
    if (auto bad = CheckOwnProcess(call.peer, p, identity())) return MakeErrorReply(call.id(), *bad);
  }
  protocol::AddProcessesResult result;
  auto confined = ConfineRunProcesses(*call.lease, a.processes, call.peer.pid);
  if (!confined) return Fail(call.id(), confined.error());
  result.cgroup = std::move(*confined);
  if (auto r = leases_->AddProcesses(a.lease_id, a.processes); !r) return Fail(call.id(), r.error());
  return MakeReply(call.id(), result);
}

Result<std::optional<std::string>> Daemon::ConfineRunProcesses(const model::Lease& lease,
                                                                 const std::vector<model::LeaseProcess>& processes,
                                                                 int32_t caller_pid) {
  // Confined (docs/enforce.md): the processes a `run` adds (its command, held at its start
  // barrier) go into the lease's cgroup before they may run; the caller itself does not.
  // A job's lease has its cgroup from the start, and what joins it runs inside it already.
  if (!confinement_.on || lease.kind == "job") return std::optional<std::string>{};
  const std::string why = "could not confine the command to its GPUs";
  std::string dir = confine::LeaseCgroup(confinement_, lease.id);
  if (access(dir.c_str(), F_OK) != 0) {
    auto made = ConfineLease(lease.id, lease.gpu_uuids, lease.gpu_memory_bytes);
    if (!made) return made.error().WithContext(why);
  }
  for (const auto& p : processes) {
    if (p.pid == caller_pid) continue;
    if (Status moved = confine::MoveIntoCgroup(dir, p.pid); !moved) return moved.error().WithContext(why);
  }
  return std::optional<std::string>{std::move(dir)};
}

Reply Daemon::OnRelease(const Call& call) {
  const auto& a = call.args<protocol::ReleaseArgs>();
  if (a.force) {
    // Root and the admin group: end what still runs on it, one step per request (the
    // client asks again), so that the daemon never waits for a process to die.
    auto left = ForceEndFor(call.peer, *call.lease);
    if (!left) return Fail(call.id(), left.error());
    if (*left > 0) return MakeReply(call.id(), protocol::ReleaseResult{*left});
  } else if (auto ok = CheckReleaseFor(call.peer, *call.lease); !ok) {
    return Fail(call.id(), ok.error());
  }
  if (auto r = leases_->Release(call.lease->id); !r) return Fail(call.id(), r.error());
  dirty_ = true;
  return MakeReply(call.id(), protocol::ReleaseResult{});
}

}  // namespace gpuman::daemon
