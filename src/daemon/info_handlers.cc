// Handlers that only describe the daemon: hello, status, health. Anyone may call them.
#include "daemon/call.h"

namespace gpuman::daemon {

using protocol::MakeErrorReply;
using protocol::MakeReply;
using protocol::Reply;

Reply Daemon::OnHello(const Call& call) {
  const auto& args = call.args<protocol::HelloArgs>();
  if (auto bad = protocol::CheckHello(args)) return MakeErrorReply(call.id(), *bad);
  protocol::HelloResult result;
  result.uid = call.peer.uid;
  result.user = call.peer.user;
  result.daemon = "gpumand";
  return MakeReply(call.id(), result);
}

Reply Daemon::OnStatus(const Call& call) {
  protocol::StatusResult result;
  auto active = jobs_->Active();
  int queued = 0, running = 0;
  if (active) {
    for (const auto& j : *active) {
      queued += j.state == model::JobState::kQueued;
      running += j.state == model::JobState::kRunning || j.state == model::JobState::kStarting;
    }
  }
  result.status = {{"queued", queued}, {"running", running}, {"system_mode", options_.system_mode}};
  return MakeReply(call.id(), result);
}

Reply Daemon::OnHealth(const Call& call) {
  protocol::HealthResult result;
  if (collector_) result.report = collector_->HealthJson();
  return MakeReply(call.id(), result);
}

}  // namespace gpuman::daemon
