// Handlers for the lease table: leases, acquire (`gpuman run` through the daemon),
// add_processes, release. The command table has resolved the lease a request names and
// checked its owner; here, every process a client names must be its own (CheckOwnProcess),
// and the machine's lease rules apply (AcquireFor, CheckReleaseFor in daemon.cc).
#include "daemon/call.h"

namespace gpuman::daemon {

using protocol::MakeErrorReply;
using protocol::MakeReply;
using protocol::Reply;

Reply Daemon::OnLeases(const Call& call) {
  auto live = AllLiveLeases();
  if (!live) return Fail(call.id(), live.error());
  if (collector_) collector_->Annotate(*live);
  return MakeReply(call.id(), protocol::LeasesResult{*live});
}

Reply Daemon::OnAcquire(const Call& call) {
  // `gpuman run` / `select --lease` while a daemon runs: one lease table for everyone.
  auto got = AcquireFor(call.peer, call.args<protocol::AcquireArgs>());
  if (!got) return Fail(call.id(), got.error());
  return MakeReply(call.id(), *got);
}

Reply Daemon::OnAddProcesses(const Call& call) {
  const auto& a = call.args<protocol::AddProcessesArgs>();
  for (const auto& p : a.processes) {
    if (auto bad = CheckOwnProcess(call.peer, p, identity())) return MakeErrorReply(call.id(), *bad);
  }
  if (auto r = leases_->AddProcesses(a.lease_id, a.processes); !r) return Fail(call.id(), r.error());
  return MakeReply(call.id(), protocol::EmptyResult{});
}

Reply Daemon::OnRelease(const Call& call) {
  if (auto ok = CheckReleaseFor(call.peer, *call.lease); !ok) return Fail(call.id(), ok.error());
  if (auto r = leases_->Release(call.lease->id); !r) return Fail(call.id(), r.error());
  dirty_ = true;
  return MakeReply(call.id(), protocol::EmptyResult{});
}

}  // namespace gpuman::daemon
