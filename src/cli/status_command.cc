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
#include "policy/lease_rules.h"
#include "render/gpu_csv.h"
#include "render/json_text.h"
#include "devices/gpu_ids.h"
#include "visibility/allocation.h"
#include "store/proc_liveness.h"

namespace gpuman::cli {
namespace {

volatile std::sig_atomic_t g_watch_stop = 0;  // set by SIGINT/SIGTERM during --watch
void OnStopSignal(int) { g_watch_stop = 1; }

enum class StatusFormat { kText, kJson, kCsv };

// What --format, --json, --fields and --units ask for, checked together.
struct Output {
  StatusFormat format = StatusFormat::kText;
  render::GpuCsvOptions csv;                        // --format csv's modifiers
  std::vector<const render::GpuCsvField*> fields;  // the CSV columns
};

Error Usage(std::string message) { return MakeError(ErrorCode::kInvalidArgument, std::move(message)); }

// Errors: kInvalidArgument, one line naming the option (and the field) at fault.
Result<Output> ChooseOutput(const StatusArgs& args) {
  Output out;
  if (args.json) out.format = StatusFormat::kJson;
  if (args.format) {
    int named = 0;  // how many of text, json, csv the words name
    StatusFormat chosen = StatusFormat::kText;
    for (const std::string& item : Split(*args.format, ',')) {
      const std::string word = ToLower(Trim(item));
      if (word == "text" || word == "json" || word == "csv") {
        ++named;
        chosen = word == "csv" ? StatusFormat::kCsv : word == "json" ? StatusFormat::kJson : StatusFormat::kText;
      } else if (word == "noheader") {
        out.csv.header = false;
      } else if (word == "nounits") {
        out.csv.units = false;
      } else {
        return Usage("--format: unknown format '" + EscapeControl(Trim(item)) +
                     "' (text, json, or csv[,noheader][,nounits])");
      }
    }
    if (named != 1) {
      return Usage("--format: name one of text, json, csv (got '" + EscapeControl(*args.format) + "')");
    }
    if (chosen != StatusFormat::kCsv && (!out.csv.header || !out.csv.units)) {
      return Usage("--format: noheader and nounits go with csv, e.g. --format csv,noheader,nounits");
    }
    if (args.json && chosen != StatusFormat::kJson) {
      return Usage("--json and --format " + EscapeControl(*args.format) + " ask for different outputs: give one");
    }
    out.format = chosen;
  }
  if (args.fields && out.format != StatusFormat::kCsv) {
    return Usage(
        "--fields (--query-gpu) needs --format csv, e.g. gpuman status --format csv --fields index,memory.used");
  }
  if (args.compact && out.format != StatusFormat::kText) {
    return Usage("--compact is a text view (--json and --format csv have every GPU's users already)");
  }
  if (args.units && out.format != StatusFormat::kText) {
    return Usage("--units is for the text view (CSV gives memory in MiB, JSON in bytes)");
  }
  if (out.format == StatusFormat::kCsv) {
    auto fields = render::ParseGpuCsvFields(args.fields.value_or(std::string(render::kDefaultGpuCsvFields)));
    if (!fields) return fields.error();
    out.fields = std::move(*fields);
  }
  return out;
}

// Writes `text` to stdout and flushes it; false when the write failed (a full disk, a
// reader that went away): the command stops, and the command line's edge says why, once
// (cli/stdout_buffer.h).
int Emit(Context& ctx, const std::string& text) {
  ctx.out() << text;
  ctx.out().flush();
  return ctx.out().good() ? kExitOk : kExitError;
}

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
Result<MachineView> Collect(const StatusArgs& args, StatusFormat format, Context& ctx,
                            std::optional<render::StatusAllocation>& allocation) {
  // What this output shows when NVML is read here (the text view needs fewer fields than
  // JSON; CSV may ask for any); a watch is a monitor: health and settings at most a minute old.
  devices::SnapshotOptions fields = devices::FieldOptions(format == StatusFormat::kText ? devices::kStatusTextFields
                                                                                       : devices::kStatusJsonFields);
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

// The queue job behind each lease (the compact view says "job N"); none without leases.
void SetLeaseJobs(render::StatusOptions& opts) {
  opts.lease_jobs.clear();
  if (!opts.leases) return;
  for (const model::Lease& lease : *opts.leases) {
    if (auto job = policy::JobIdOfLease(lease)) opts.lease_jobs[lease.id] = *job;
  }
}

// The human view: the table, or one line per GPU with --compact. The source line ends the
// table; the compact view keeps only what a reader must know: why NVML was read although
// a daemon was expected.
std::string StatusText(const MachineView& view, const StatusArgs& args, render::StatusOptions& opts,
                       const render::TerminalInfo& term, int64_t now_unix_ms) {
  if (!args.compact) return render::RenderStatusText(*view.snapshot, opts, term) + SourceLine(view, now_unix_ms) + "\n";
  SetLeaseJobs(opts);
  std::string text = render::RenderStatusCompact(*view.snapshot, opts, term);
  if (!view.note.empty()) text += SourceLine(view, now_unix_ms) + "\n";
  return text;
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

// status --format csv: nvidia-smi's lines (render/gpu_csv.h); the header only when asked.
std::string StatusCsv(const MachineView& view, const render::StatusOptions& opts, const Output& output,
                      bool with_header) {
  render::GpuCsvOptions csv = output.csv;
  csv.header = csv.header && with_header;
  if (opts.leases) {
    for (const model::Lease& lease : *opts.leases) {
      if (auto job = policy::JobIdOfLease(lease)) csv.lease_jobs[lease.id] = *job;
    }
  }
  return render::RenderGpuCsvHeader(output.fields, csv) +
         render::RenderGpuCsvRows(*view.snapshot, opts, output.fields, csv);
}

}  // namespace

int RunStatus(const StatusArgs& args, Context& ctx) {
  auto output = ChooseOutput(args);
  if (!output) return ctx.Fail(output.error());
  const StatusFormat format = output->format;
  render::StatusOptions opts;
  opts.show_processes = !args.no_processes;
  opts.memory_in_mib = args.units == "mib";
  const render::TerminalInfo term = ctx.Terminal(args.no_color);

  if (args.watch_seconds <= 0) {
    auto view = Collect(args, format, ctx, opts.allocation);
    if (!view) {
      return ctx.Fail(view.error());
    }
    SetSimulated(*view, ctx, opts);
    SetHolders(*view, true, ctx, opts);
    if (format == StatusFormat::kJson) {
      return Emit(ctx, StatusJson(*view, opts, render::JsonWriter::Style::kPretty) + "\n");
    }
    if (format == StatusFormat::kCsv) return Emit(ctx, StatusCsv(*view, opts, *output, true));
    return Emit(ctx, StatusText(*view, args, opts, term, ctx.clock().NowUnixMs()));
  }

  g_watch_stop = 0;
  std::signal(SIGINT, OnStopSignal);
  std::signal(SIGTERM, OnStopSignal);
  const bool clear_screen = format == StatusFormat::kText && ctx.stdout_is_tty();
  const auto period = std::chrono::duration<double>(args.watch_seconds);
  int last_error_exit = kExitOk;
  bool header_written = false;  // CSV: one header, then rows per refresh (as nvidia-smi -l)
  for (int n = 0; !g_watch_stop && (args.iterations == 0 || n < args.iterations); ++n) {
    auto started = std::chrono::steady_clock::now();
    auto view = Collect(args, format, ctx, opts.allocation);
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
      SetHolders(*view, format != StatusFormat::kJson || n == 0, ctx, opts);
      std::string text;
      if (format == StatusFormat::kJson) {
        text = StatusJson(*view, opts, render::JsonWriter::Style::kCompact) + "\n";
      } else if (format == StatusFormat::kCsv) {
        text = StatusCsv(*view, opts, *output, !header_written);
        header_written = true;
      } else {
        if (clear_screen) text = "\x1b[H\x1b[2J";
        else if (n > 0) text = "\n";
        text += StatusText(*view, args, opts, term, ctx.clock().NowUnixMs());
      }
      if (int code = Emit(ctx, text); code != kExitOk) return code;  // e.g. the reader of a pipe went away
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
