#include "cli/drains.h"

#include "cli/daemon_client.h"
#include "protocol/messages.h"

namespace gpuman::cli {

Result<std::vector<model::GpuDrain>> MachineDrains(Context& ctx) {
  DaemonClient* daemon = ctx.Daemon();
  if (daemon == nullptr) return std::vector<model::GpuDrain>{};  // drains live in the daemon's state
  auto reply = daemon->Call<protocol::DrainsResult>(protocol::DrainsArgs{});
  if (!reply) {
    // A daemon from before the drains op knows of drains but cannot list them: none shown.
    if (reply.error().code == ErrorCode::kInvalidArgument &&
        reply.error().message.find("unknown op") != std::string::npos) {
      return std::vector<model::GpuDrain>{};
    }
    return reply.error().WithContext("drains");
  }
  return std::move(reply->drains);
}

}  // namespace gpuman::cli
