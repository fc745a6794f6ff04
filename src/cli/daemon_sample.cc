#include "cli/daemon_sample.h"

#include <algorithm>

#include "cli/daemon_client.h"
#include "protocol/messages.h"

namespace gpuman::cli {

Result<model::MachineSnapshot> DaemonSampleSource::Snapshot(const devices::SnapshotOptions& options) {
  protocol::SnapshotArgs args;
  args.processes = options.processes_only || (options.fields & devices::kFieldProcesses) != 0;
  args.topology = options.topology;
  args.gpus_only = true;
  auto reply = daemon_.CallResuming<protocol::SnapshotResult>(args);
  if (!reply) return reply.error().WithContext("the daemon's sample of the GPUs");
  if (!reply->snapshot) {
    return MakeError(ErrorCode::kUnavailable, "the daemon cannot read the GPUs: " + reply->error);
  }
  last_age_ms_ = std::max<int64_t>(0, clock_.NowUnixMs() - reply->snapshot->taken_at_unix_ms);
  scenario_ = reply->scenario.value_or("");
  return std::move(*reply->snapshot);
}

}  // namespace gpuman::cli
