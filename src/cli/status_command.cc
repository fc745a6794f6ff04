#include "cli/status_command.h"

#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <thread>

#include <nlohmann/json.hpp>

#include "base/strings.h"

#include "cli/acquire.h"
#include "cli/drains.h"
#include "cli/exit_codes.h"
#include "cli/slurm_node.h"
#include "cli/machine_view.h"
#include "render/json_text.h"
#include "devices/gpu_ids.h"
#include "visibility/allocation.h"
#include "store/proc_liveness.h"

namespace gpuman::cli {
namespace {

volatile std::sig_atomic_t g_watch_stop = 0;  // set by SIGINT/SIGTERM during --watch
void OnStopSignal(int) { g_watch_stop = 1; }

// The allocation this process runs inside (Slurm job, container list, outer
// CUDA_VISIBLE_DEVICES), resolved on the whole snapshot; nullopt when there is none.
std::optional<render::StatusAllocation> FindAllocation(const model::MachineSnapshot& snap, Context& ctx) {
  const visibility::Environment& env = ctx.env().vars;
  const auto node = SlurmNodeForJob(env, snap);
  auto uuids = visibility::AllowedGpus(env, snap.gpus, node ? &*node : nullptr);
  if (!uuids) return std::nullopt;
  std::string source;
  if (const auto slurm = visibility::ParseSlurmGpus(env, snap.gpus, node ? &*node : nullptr)) {
    source = "Slurm job " + (node && node->job_id ? *node->job_id : std::string("?")) + " (" + slurm->variable + "=" +
             slurm->value + ")";
  } else if (const auto nvd = visibility::GetVar(env, "NVIDIA_VISIBLE_DEVICES"); nvd && !nvd->empty()) {
    source = "container (NVIDIA_VISIBLE_DEVICES=" + std::string(*nvd) + ")";
  } else {
    source = "CUDA_VISIBLE_DEVICES=" + std::string(visibility::GetVar(env, "CUDA_VISIBLE_DEVICES").value_or(""));
  }
  return render::StatusAllocation{EscapeControl(source), std::move(*uuids)};
}

// One look at the machine (the daemon's sample, or NVML), filtered by --allocation and
// --gpus, and the allocation it runs in. Errors as from DeviceSource and ResolveGpuIds;
// --allocation outside any allocation is kInvalidArgument.
Result<MachineView> Collect(const StatusArgs& args, Context& ctx,
                            std::optional<render::StatusAllocation>& allocation) {
  // What this output shows when NVML is read here (the text view needs fewer fields than
  // JSON); a watch is a monitor: health and settings at most a minute old.
  devices::SnapshotOptions fields = devices::FieldOptions(args.json ? devices::kStatusJsonFields
                                                                    : devices::kStatusTextFields);
  if (args.watch_seconds > 0) fields.slow_max_age = devices::kMonitorSlowAge;
  MachineView view = ReadMachine(ctx, !args.no_processes, fields);
  if (!view.snapshot) return view.snapshot.error();
  allocation = FindAllocation(*view.snapshot, ctx);
  if (args.allocation) {
    if (!allocation) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "--allocation: not inside an allocation (no Slurm job GPUs, container device list or "
                       "CUDA_VISIBLE_DEVICES)");
    }
    std::erase_if(view.snapshot->gpus, [&](const model::DeviceSnapshot& d) {
      return !d.uuid || std::find(allocation->uuids.begin(), allocation->uuids.end(), *d.uuid) == allocation->uuids.end();
    });
  }
  if (args.gpus) {
    auto& snap = *view.snapshot;
    auto picked = devices::ResolveGpuIds(*args.gpus, snap.gpus);
    if (!picked) return picked.error();
    std::vector<model::DeviceSnapshot> kept;
    for (size_t i : *picked) kept.push_back(std::move(snap.gpus[i]));
    snap.gpus = std::move(kept);
  }
  return view;
}

// Leases for the "lease" lines: from the daemon when one answers (with idle marks), else
// from the per-user lease db when it exists (status never creates one). Unreadable: none.
// Locally it only reads (no write transaction to reclaim stale leases, which `leases`
// and every acquire do anyway): a lease counts while one of its processes lives.
std::optional<std::vector<model::Lease>> StatusLeases(Context& ctx) {
  auto daemon = ctx.ExpectedDaemon();
  if (!daemon) {  // expected but silent: the holders are unknown, not "none"
    static bool warned = false;
    if (!warned) ctx.err() << "gpuman: warning: lease holders unknown: " << daemon.error().message << "\n";
    warned = true;
    return std::nullopt;
  }
  if (*daemon) {
    auto live = LiveLeases(ctx);
    if (!live) return std::nullopt;
    return std::move(*live);
  }
  if (access((ctx.lease_dir() + "/leases.db").c_str(), F_OK) != 0) return std::vector<model::Lease>{};
  auto store = ctx.Leases();
  if (!store) return std::nullopt;
  auto recorded = (*store)->ListRecorded();
  if (!recorded) return std::nullopt;
  const store::LivenessCheck alive = store::ProcLivenessCheck();
  std::erase_if(*recorded, [&](const model::Lease& l) { return std::none_of(l.processes.begin(), l.processes.end(), alive); });
  return std::move(*recorded);
}

// Drains from the daemon; one that cannot list them costs a warning, not the view.
std::vector<model::GpuDrain> StatusDrains(Context& ctx) {
  auto drains = MachineDrains(ctx);
  if (drains) return std::move(*drains);
  ctx.err() << "gpuman: warning: " << drains.error().message << "\n";
  return {};
}

// What the view needs beside the GPUs: from the daemon's snapshot reply when it came with
// one, else asked for separately (the machine lease table without a daemon).
void SetHolders(const MachineView& view, bool with_leases, Context& ctx, render::StatusOptions& opts) {
  if (view.has_holders) {
    opts.leases = view.leases;
    opts.drains = view.drains;
    return;
  }
  if (with_leases) opts.leases = StatusLeases(ctx);
  opts.drains = StatusDrains(ctx);
}

void SetSimulated(const MachineView& view, Context& ctx, render::StatusOptions& opts) {
  opts.simulated = ctx.is_simulated() || view.scenario.has_value();
  if (ctx.simulation()) opts.scenario = ctx.simulation()->scenario_name;
  else if (view.scenario) opts.scenario = *view.scenario;
}

// status --json: the view plus where it came from (docs/json.md).
std::string StatusJson(const MachineView& view, const render::StatusOptions& opts, render::JsonWriter::Style style) {
  const render::StatusJsonSource source{view.source(), view.snapshot->taken_at_unix_ms, view.note};
  return render::StatusJsonText(*view.snapshot, opts, style, &source);
}

}  // namespace

int RunStatus(const StatusArgs& args, Context& ctx) {
  render::StatusOptions opts;
  opts.show_processes = !args.no_processes;
  const render::TerminalInfo term = ctx.Terminal(args.no_color);

  if (args.watch_seconds <= 0) {
    auto view = Collect(args, ctx, opts.allocation);
    if (!view) {
      return ctx.Fail(view.error());
    }
    SetSimulated(*view, ctx, opts);
    SetHolders(*view, true, ctx, opts);
    if (args.json) {
      ctx.out() << StatusJson(*view, opts, render::JsonWriter::Style::kPretty) << "\n";
    } else {
      ctx.out() << render::RenderStatusText(*view->snapshot, opts, term) << SourceLine(*view, ctx.clock().NowUnixMs())
                << "\n";
    }
    return ctx.out().good() ? kExitOk : kExitError;
  }

  g_watch_stop = 0;
  std::signal(SIGINT, OnStopSignal);
  std::signal(SIGTERM, OnStopSignal);
  const bool clear_screen = !args.json && ctx.stdout_is_tty();
  const auto period = std::chrono::duration<double>(args.watch_seconds);
  int last_error_exit = kExitOk;
  for (int n = 0; !g_watch_stop && (args.iterations == 0 || n < args.iterations); ++n) {
    auto started = std::chrono::steady_clock::now();
    auto view = Collect(args, ctx, opts.allocation);
    if (!view) {
      // Bad arguments will not get better; a driver hiccup might.
      if (view.error().code == ErrorCode::kInvalidArgument || n == 0) {
        return ctx.Fail(view.error());
      }
      ctx.err() << "gpuman: warning: " << view.error().message << "\n";
      last_error_exit = ExitCodeFor(view.error().code);
    } else {
      last_error_exit = kExitOk;
      SetSimulated(*view, ctx, opts);
      // JSON lines carry leases only from the daemon's reply (as before: none otherwise).
      SetHolders(*view, !args.json || n == 0, ctx, opts);
      if (args.json) {
        ctx.out() << StatusJson(*view, opts, render::JsonWriter::Style::kCompact) << "\n";
      } else {
        if (clear_screen) ctx.out() << "\x1b[H\x1b[2J";
        else if (n > 0) ctx.out() << "\n";
        ctx.out() << render::RenderStatusText(*view->snapshot, opts, term) << SourceLine(*view, ctx.clock().NowUnixMs())
                  << "\n";
      }
      ctx.out().flush();
      if (!ctx.out().good()) return kExitError;  // e.g. the reader of a pipe went away
    }
    if (args.iterations != 0 && n + 1 >= args.iterations) break;
    auto deadline = started + period;
    while (!g_watch_stop && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  return last_error_exit;
}

}  // namespace gpuman::cli
