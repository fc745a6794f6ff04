#include "cli/health_command.h"

#include <algorithm>
#include <map>


#include "base/duration.h"
#include "cli/daemon_client.h"
#include "cli/drains.h"
#include "cli/exit_codes.h"
#include "health/kernel_log.h"
#include "health/watch.h"
#include "protocol/model_json.h"
#include "render/health_view.h"

namespace gpuman::cli {
namespace {

// The machine's drains with GPU indices: from the report's findings, else from a
// snapshot (only taken when some drain is not named by a finding). A daemon that cannot
// list its drains costs a warning, not the report.
std::vector<render::HealthDrain> HealthDrains(const model::HealthReport& report, Context& ctx) {
  std::vector<render::HealthDrain> out;
  auto drains = MachineDrains(ctx);
  if (!drains) {
    ctx.err() << "gpuman: warning: " << drains.error().message << "\n";
    return out;
  }
  std::map<std::string, int> index_of;
  for (const auto& f : report.findings) {
    if (!f.gpu_uuid.empty() && f.gpu_index) index_of[f.gpu_uuid] = *f.gpu_index;
  }
  bool all_known = std::all_of(drains->begin(), drains->end(), [&](const model::GpuDrain& d) { return index_of.count(d.uuid) > 0; });
  if (!all_known) {
    if (auto source = ctx.Devices()) {
      if (auto snap = (*source)->Snapshot()) {
        for (const auto& g : snap->gpus) {
          if (g.uuid) index_of[*g.uuid] = g.index;
        }
      }
    }
  }
  for (auto& d : *drains) {
    render::HealthDrain hd{std::move(d), std::nullopt};
    if (auto it = index_of.find(hd.drain.uuid); it != index_of.end()) hd.gpu_index = it->second;
    out.push_back(std::move(hd));
  }
  return out;
}

int ExitFor(const model::HealthReport& report) {
  if (report.has_fatal()) return kExitUnhealthy;
  return report.findings.empty() ? kExitOk : kExitHealthWarnings;
}

// One snapshot plus the kernel log, judged by the same HealthWatch the daemon runs.
Result<model::HealthReport> LocalReport(const HealthArgs& args, Context& ctx, int* gpu_count) {
  health::HealthPolicy policy = ctx.config().health;
  policy.drain_on_fatal = false;
  if (args.since) {
    auto ms = ParseDurationMs(*args.since);
    if (!ms) return ms.error().WithContext("--since");
    policy.xid_window_ms = *ms;
  }
  health::HealthWatch watch(policy);
  const int64_t now = ctx.clock().NowUnixMs();
  std::vector<std::string> sources, notes;
  auto reader = health::KernelLogReader::Open(ctx.config().kernel_log, health::BootTimeUnixMs());
  if (reader) {
    auto events = (*reader)->Read(now);
    if (events) {
      for (auto& ev : *events) watch.AddXid(std::move(ev));
      sources.push_back("kernel log " + ctx.config().kernel_log);
    } else {
      notes.push_back(events.error().message);
    }
  } else {
    notes.push_back(reader.error().message + " (Xids are not checked; run as root or start the daemon)");
  }
  notes.push_back("no gpuman daemon answered: NVML Xid events are only collected by the daemon");
  watch.SetXidSources(sources, notes);

  auto source = ctx.Nvml();  // judged here, from this process's own read
  if (!source) return source.error();
  auto snap = (*source)->Snapshot();
  if (!snap) return snap.error();
  *gpu_count = static_cast<int>(snap->gpus.size());
  (void)watch.Update(&*snap, "", now);
  return watch.Report();
}

}  // namespace

Result<HealthOutcome> CollectHealth(const HealthArgs& args, Context& ctx) {
  model::HealthReport report;
  int gpu_count = 0;
  bool from_daemon = false;
  if (!args.local && !args.since) {
    if (DaemonClient* client = ctx.Daemon()) {
      auto reply = client->Call<protocol::HealthResult>(protocol::HealthArgs{});
      if (reply) {
        auto parsed = protocol::HealthReportFromJson(reply->report);
        if (parsed) {
          report = std::move(*parsed);
          from_daemon = true;
          if (auto n = reply->report.find("gpu_count"); n != reply->report.end() && n->is_number_integer()) {
            gpu_count = n->get<int>();
          }
        }
      }
    }
  }
  if (!from_daemon) {
    auto local = LocalReport(args, ctx, &gpu_count);
    if (!local) return local.error();
    report = std::move(*local);
  }
  return HealthOutcome{std::move(report), gpu_count, from_daemon};
}

int RunHealth(const HealthArgs& args, Context& ctx) {
  auto outcome = CollectHealth(args, ctx);
  if (!outcome) {
    return ctx.Fail(outcome.error());
  }
  const model::HealthReport& report = outcome->report;
  const int gpu_count = outcome->gpu_count;
  const bool from_daemon = outcome->from_daemon;
  // Drains are notes: they change no finding and no exit code.
  const std::vector<render::HealthDrain> drains = HealthDrains(report, ctx);
  if (args.json) {
    auto j = protocol::HealthReportToJson(report);
    j["gpu_count"] = gpu_count;
    j["from_daemon"] = from_daemon;
    nlohmann::json list = nlohmann::json::array();
    for (const auto& d : drains) {
      j["notes"].push_back(render::DrainNote(d));
      list.push_back({{"uuid", d.drain.uuid},
                      {"index", d.gpu_index ? nlohmann::json(*d.gpu_index) : nlohmann::json(nullptr)},
                      {"reason", d.drain.reason},
                      {"by", d.drain.by_user},
                      {"by_uid", d.drain.by_uid},
                      {"since_unix_ms", d.drain.since_unix_ms}});
    }
    j["drains"] = std::move(list);
    ctx.out() << j.dump(2) << "\n";
  } else {
    ctx.out() << render::RenderHealthText(report, gpu_count, ctx.Terminal(args.no_color), drains);
  }
  if (!ctx.out().good()) return kExitError;
  return ExitFor(report);
}

}  // namespace gpuman::cli
