#include "cli/machine_view.h"

#include <fmt/format.h>

#include "cli/daemon_client.h"
#include "devices/process_inspector.h"
#include "protocol/messages.h"

namespace gpuman::cli {
namespace {

void ReadNvml(Context& ctx, bool processes, const devices::SnapshotOptions& fields, MachineView& view) {
  view.from_daemon = false;
  auto source = ctx.Nvml();
  if (!source) {
    view.snapshot = source.error();
    return;
  }
  view.snapshot = (*source)->Snapshot(fields);
  if (view.snapshot && processes) devices::EnrichProcesses(*view.snapshot, ctx.Inspector());
}

}  // namespace

MachineView ReadMachine(Context& ctx, bool processes, const devices::SnapshotOptions& nvml_fields) {
  MachineView view;
  if (ctx.is_simulated()) {
    ReadNvml(ctx, processes, nvml_fields, view);
    return view;
  }
  auto daemon = ctx.ExpectedDaemon();
  if (!daemon) {  // expected but silent: the GPUs from NVML, said so; the holders stay unknown
    view.note = "the daemon does not answer";
    ReadNvml(ctx, processes, nvml_fields, view);
    return view;
  }
  if (*daemon == nullptr) {
    ReadNvml(ctx, processes, nvml_fields, view);
    return view;
  }
  protocol::SnapshotArgs args;
  args.processes = processes;
  auto reply = (*daemon)->Call<protocol::SnapshotResult>(args);
  if (!reply) {
    const bool too_old = reply.error().message.find("unknown op") != std::string::npos;
    view.note = too_old ? "the daemon is too old to serve snapshots" : "the daemon's snapshot: " + reply.error().message;
    ReadNvml(ctx, processes, nvml_fields, view);
    return view;
  }
  view.has_holders = true;
  view.leases = std::move(reply->leases);
  view.jobs = std::move(reply->jobs);
  view.drains = std::move(reply->drains);
  if (!reply->snapshot) {
    view.note = "the daemon cannot read the devices: " + reply->error;
    ReadNvml(ctx, processes, nvml_fields, view);
    return view;
  }
  const int64_t age_ms = ctx.clock().NowUnixMs() - reply->snapshot->taken_at_unix_ms;
  if (age_ms > 2 * reply->sample_interval_ms + 1000) {
    view.note = fmt::format("the daemon's sample is {:.1f} s old", static_cast<double>(age_ms) / 1000.0);
    ReadNvml(ctx, processes, nvml_fields, view);
    return view;
  }
  view.from_daemon = true;
  view.scenario = std::move(reply->scenario);
  view.snapshot = std::move(*reply->snapshot);
  return view;
}

std::string SourceLine(const MachineView& view, int64_t now_unix_ms) {
  if (view.from_daemon && view.snapshot) {
    const double age_s = static_cast<double>(std::max<int64_t>(0, now_unix_ms - view.snapshot->taken_at_unix_ms)) / 1000.0;
    return fmt::format("source: daemon (sampled {:.1f} s ago)", age_s);
  }
  return view.note.empty() ? "source: NVML" : "source: NVML (" + view.note + ")";
}

}  // namespace gpuman::cli
