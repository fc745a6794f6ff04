// Handlers that only describe the daemon and the machine: hello, status, health and
// snapshot. Anyone may call them.
#include "daemon/call.h"
#include "daemon/proc_visibility.h"
#include "protocol/model_json.h"

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
  auto active = jobs_->ActiveSummaries();
  int queued = 0, running = 0;
  if (active) {
    for (const auto& j : **active) {
      queued += j.state == model::JobState::kQueued;
      running += j.state == model::JobState::kRunning || j.state == model::JobState::kStarting;
    }
  }
  result.status = {{"queued", queued}, {"running", running}, {"system_mode", options_.system_mode}};
  // Device confinement (docs/enforce.md): where leases are confined, or why they are not.
  const confine::Confinement& c = confinement_;
  result.status["confinement"] = {
      {"on", c.on},
      {"mechanism", c.on ? (c.version == confine::CgroupVersion::kV2 ? "cgroup-v2" : "cgroup-v1") : "off"},
      {"description", c.Describe()},
      {"favordynmods", c.favordynmods}};
  return MakeReply(call.id(), result);
}

Reply Daemon::OnHealth(const Call& call) {
  protocol::HealthResult result;
  if (collector_) result.report = collector_->HealthJson();
  return MakeReply(call.id(), result);
}

// The latest sample (read again when older than two periods: none yet, or the loop was
// held up), with the leases, active jobs and drains `status` and `top` show beside it. Other
// users' processes come with no more than the caller's own /proc would show it.
Reply Daemon::OnSnapshot(const Call& call) {
  const auto& args = call.args<protocol::SnapshotArgs>();
  const int64_t now = clock_.NowUnixMs();
  const int64_t period = options_.monitor.sample_interval_ms;
  if (!latest_ || now - latest_->at_unix_ms > 2 * period) TakeSample(now, false);
  protocol::SnapshotResult result;
  result.sample_interval_ms = period;
  result.scenario = options_.scenario;
  const std::string* snapshot_json = nullptr;
  if (latest_->snapshot) {
    std::optional<CallerView> view;
    if (args.processes) view = ReadCallerView(call.peer.uid, call.peer.gid, call.peer.pid);
    snapshot_json = &EncodedSnapshotFor(args.processes, args.topology, view);
  } else {
    result.error = latest_->error;
  }
  if (args.gpus_only) {  // GPU facts only (run, select, explain): no holders to gather
    if (!snapshot_json) return MakeReply(call.id(), result);
    return protocol::MakeEncodedReply(call.id(), protocol::EncodeSnapshotResult(result, *snapshot_json));
  }
  auto live = AllLiveLeases();
  if (!live) return Fail(call.id(), live.error());
  result.leases = std::move(*live);
  auto jobs = jobs_->List(false, std::nullopt, 0, -1, store::JobFields::kSummary);
  if (!jobs) return Fail(call.id(), jobs.error());
  for (auto& j : *jobs) result.jobs.push_back(WithWaitInfo(std::move(j)));
  if (collector_) {
    collector_->Annotate(result.leases);
    collector_->Annotate(result.jobs);
  }
  auto drained = jobs_->DrainedDetails();
  if (!drained) return Fail(call.id(), drained.error());
  for (const auto& d : *drained) {
    result.drains.push_back(model::GpuDrain{d.uuid, d.reason, d.by_uid, UserName(d.by_uid), d.since_unix_ms});
  }
  if (!snapshot_json) return MakeReply(call.id(), result);
  return protocol::MakeEncodedReply(call.id(), protocol::EncodeSnapshotResult(result, *snapshot_json));
}

const std::string& Daemon::EncodedSnapshotFor(bool processes, bool topology, const std::optional<CallerView>& view) {
  for (const EncodedSnapshot& e : encoded_snapshots_) {
    if (e.processes == processes && e.topology == topology && e.view == view) return e.text;
  }
  model::MachineSnapshot snap = *latest_->snapshot;
  if (topology) snap.topology = topology_;  // read once, with the first sample
  if (!processes) {
    for (auto& gpu : snap.gpus) gpu.processes.clear();
  } else {
    FilterForCaller(snap, *view);
  }
  constexpr size_t kMaxViews = 32;  // callers of one sample with different views; the oldest goes
  if (encoded_snapshots_.size() >= kMaxViews) encoded_snapshots_.erase(encoded_snapshots_.begin());
  encoded_snapshots_.push_back(EncodedSnapshot{processes, topology, view, protocol::DumpJson(protocol::MachineSnapshotToJson(snap))});
  return encoded_snapshots_.back().text;
}

}  // namespace gpuman::daemon
