#include "cli/top_command.h"

#include <langinfo.h>
#include <unistd.h>

#include <clocale>
#include <cstring>
#include <filesystem>


#include "base/strings.h"

#include "cli/acquire.h"
#include "cli/daemon_client.h"
#include "cli/daemon_pages.h"
#include "cli/drains.h"
#include "cli/exit_codes.h"
#include "cli/machine_view.h"
#include "devices/process_inspector.h"
#include "protocol/messages.h"
#include "tui/daemon_holders.h"
#include "tui/host_process.h"
#include "tui/layout.h"
#include "tui/sampler.h"
#include "tui/top_app.h"

namespace gpuman::cli {
namespace {

// The daemon's part of top's frames (leases, jobs, drains), across a daemon restart: while
// the connection is down, the last good part is shown with "daemon reconnecting for Ns" in
// its header (tui::DaemonHolders), and the sampler tries again with the backoff of the one
// reconnect loop (Reconnector, step-wise: the GPUs keep updating meanwhile). After the
// reconnect time the header says the daemon is gone; top keeps looking (it is a view; q
// quits). The last good answer is remembered whichever way it came: the daemon's snapshot
// reply (Answered) or the one-by-one requests here.
class DaemonPart {
 public:
  explicit DaemonPart(Context& ctx)
      : ctx_(ctx),
        reconnect_(ReconnectOptions{ctx.config().client.reconnect_timeout_ms}, ctx.clock(), [](int64_t) {},
                   [](const std::string&) {}),
        holders_(reconnect_.options().timeout_ms, FormatReconnectTimeout(reconnect_.options().timeout_ms)) {}

  // The daemon's snapshot reply carried the holders: the last good answer, outage over.
  void Answered(const tui::Frame& f) {
    reconnect_.Record(Status{});
    refusal_.clear();
    holders_.Answered(f, ctx_.clock().NowUnixMs());
  }

  // Returns false when no daemon is expected (the caller then reads the lease table).
  bool Fill(tui::Frame& f) {
    DaemonClient* d = ctx_.Daemon();
    if (!d) return false;
    f.has_daemon = true;
    if (d->broken()) {
      // The outage starts when the break is first seen, wherever it was seen (the snapshot
      // request breaks it first when the daemon serves the GPUs): Record measures the
      // reconnect time from Lost(), so without it the first failed attempt gave up at once.
      reconnect_.Lost();
      if (reconnect_.Due()) {
        Reconnector::Step step = reconnect_.Record(d->Reopen());
        // A daemon that refuses us (not kUnavailable) is not coming back: said at once.
        const bool refused =
            step == Reconnector::Step::kGaveUp && reconnect_.last_error().code != ErrorCode::kUnavailable;
        refusal_ = refused ? reconnect_.last_error().message : "";
      }
    }
    if (!d->broken()) {
      tui::Frame got;
      // Every page of both (not only the first 500): the panel's rows and its "+N more"
      // count, and HELD BY for every running job, need them all.
      if (auto leases = FetchAllLeases(*d)) {
        got.leases = std::move(*leases);
      } else {
        got.holders_error = leases.error().message;
      }
      if (auto jobs = FetchAllJobs(*d, false)) {
        got.jobs = std::move(*jobs);
      } else if (got.holders_error.empty()) {
        got.holders_error = jobs.error().message;
      }
      if (auto drains = MachineDrains(ctx_)) {
        got.drains = std::move(*drains);
      } else if (got.holders_error.empty()) {
        got.holders_error = drains.error().message;
      }
      if (!d->broken()) {
        Answered(got);
        f.leases = std::move(got.leases);
        f.jobs = std::move(got.jobs);
        f.drains = std::move(got.drains);
        f.holders_error = std::move(got.holders_error);
        return true;
      }
      reconnect_.Lost();
    }
    holders_.Unanswered(f, ctx_.clock().NowUnixMs(), refusal_);
    return true;
  }

 private:
  Context& ctx_;
  Reconnector reconnect_;
  tui::DaemonHolders holders_;
  std::string refusal_;  // a lasting refusal from the last attempt, else ""
};

// One sample: the daemon's snapshot reply (GPUs with owners, leases, jobs, drains in one
// round trip) when a daemon serves it, else NVML, and the holders from the daemon one by
// one (DaemonPart, which also reconnects) or from the lease table. Runs on the sampler
// thread (the first one on the main thread, before the sampler starts). `scenario` (when
// given) gets the daemon's --simulate scenario, if it serves one.
tui::Frame CollectFrame(Context& ctx, DaemonPart& daemon, std::optional<std::string>* scenario = nullptr) {
  tui::Frame f;
  const auto started = ctx.clock().NowUnixMs();
  MachineView view = ReadMachine(ctx, true, devices::MonitorOptions(devices::kTopFields));
  if (scenario) *scenario = view.scenario;
  if (!view.snapshot) {
    f.snapshot_error = view.snapshot.error().message;
  } else {
    f.snapshot = std::move(*view.snapshot);
  }
  // The title says "via daemon", or why NVML although a daemon is expected; plain NVML
  // (no daemon) is the default and says nothing.
  f.source = view.from_daemon ? "daemon" : (view.note.empty() ? "" : "NVML: " + view.note);
  if (view.has_holders) {
    f.has_daemon = true;
    f.leases = std::move(view.leases);
    f.jobs = std::move(view.jobs);
    f.drains = std::move(view.drains);
    daemon.Answered(f);
  } else if (!daemon.Fill(f)) {
    // Without a daemon only this user's store has leases; do not create one just to look.
    std::error_code ec;
    if (std::filesystem::exists(ctx.lease_dir() + "/leases.db", ec)) {
      if (auto leases = LiveLeases(ctx)) {
        f.leases = std::move(*leases);
      } else {
        f.holders_error = leases.error().message;
      }
    }
  }
  // Host CPU time and RSS of the GPU processes we can see (tui/host_process.h).
  if (f.snapshot) {
    static const int64_t page_bytes = sysconf(_SC_PAGESIZE);
    f.clock_ticks_per_s = sysconf(_SC_CLK_TCK);
    for (const auto& gpu : f.snapshot->gpus) {
      for (const auto& p : gpu.processes) {
        if (!p.is_visible || f.host.count(p.pid)) continue;
        if (auto st = tui::ReadHostProcessStat("/proc", p.pid, page_bytes)) f.host[p.pid] = *st;
      }
    }
  }
  f.taken_at_unix_ms = ctx.clock().NowUnixMs();
  f.took_ms = f.taken_at_unix_ms - started;
  return f;
}

bool Utf8Locale() {
  std::setlocale(LC_ALL, "");
  const char* codeset = nl_langinfo(CODESET);
  return codeset && (std::strcmp(codeset, "UTF-8") == 0 || std::strcmp(codeset, "utf8") == 0);
}

}  // namespace

int RunTop(const TopArgs& args, Context& ctx) {
  // The first sample on this thread, so a missing driver is one line and exit 3, as in status.
  DaemonPart daemon(ctx);
  std::optional<std::string> daemon_scenario;
  tui::Frame first = CollectFrame(ctx, daemon, &daemon_scenario);
  if (!first.snapshot) {
    auto source = ctx.Nvml();
    const ErrorCode code = source ? ErrorCode::kUnavailable : source.error().code;
    return ctx.Fail(MakeError(code, first.snapshot_error));
  }
  const bool unicode = !args.ascii && Utf8Locale();
  tui::Identity me{static_cast<uint32_t>(geteuid()), geteuid() == 0};
  std::string note;
  if (ctx.simulation()) note = "simulated: " + ctx.simulation()->scenario_name;
  // The daemon's scenario, when it serves a simulated machine (its reply says so).
  else if (daemon_scenario) note = "simulated: " + *daemon_scenario;

  if (args.once) {
    tui::TopModel model;
    model.Ingest(std::make_shared<const tui::Frame>(std::move(first)));
    tui::UiState ui;
    tui::LayoutOptions lo;
    lo.now_unix_ms = ctx.clock().NowUnixMs();
    lo.utc_offset_s = tui::LocalUtcOffsetSeconds(lo.now_unix_ms);
    lo.unicode = unicode;
    lo.interactive = false;
    lo.interval_s = args.interval_seconds;
    lo.note = note;
    lo.me = me;
    auto rows = tui::VisibleRows(model.rows(), ui, me);
    // Tall enough for every GPU at two lines, every process and holder; the blank lines
    // that pad the process table are then dropped.
    const int height = 10 + 4 * static_cast<int>(model.snapshot()->gpus.size()) + static_cast<int>(rows.size()) +
                       2 * static_cast<int>(model.frame()->leases.size() + model.frame()->jobs.size());
    auto laid = tui::RenderTop(model, ui, rows, lo, std::max(80, ctx.Terminal(true).width), height);
    std::string text;
    for (int r = 0; r < laid.grid.height(); ++r) {
      std::string line = laid.grid.RowText(r);
      if (!line.empty()) text += line + "\n";
    }
    ctx.out() << text;
    return ctx.out().good() ? kExitOk : kExitError;
  }

  if (!ctx.stdout_is_tty() || isatty(STDIN_FILENO) != 1) {
    ctx.err() << "gpuman: error: top needs a terminal (try 'gpuman top --once' or 'gpuman status --watch 1')\n";
    return kExitUsage;
  }
  // A terminal that cannot move the cursor (Emacs' shell, some CI logs) is no terminal for
  // a full-screen view: refused the same way, naming why (issue 26).
  if (auto term = ctx.env().Get("TERM"); term && *term == "dumb") {
    ctx.err() << "gpuman: error: top needs a terminal that can move the cursor, and TERM=dumb cannot (try 'gpuman "
                 "top --once' or 'gpuman status --watch 1')\n";
    return kExitUsage;
  }
  const auto interval = std::chrono::milliseconds(static_cast<int64_t>(args.interval_seconds * 1000));
  tui::Sampler sampler([&ctx, &daemon] { return CollectFrame(ctx, daemon); }, interval);
  if (Status started = sampler.Start(std::make_shared<const tui::Frame>(std::move(first))); !started) {
    return ctx.Fail(started.error());
  }
  tui::TopAppOptions options;
  options.me = me;
  options.use_color = ctx.Terminal(args.no_color).use_color;
  options.unicode = unicode;
  options.interval_s = args.interval_seconds;
  options.note = note;
  options.layout = ctx.layout();
  Status ran = tui::RunTopApp(sampler, options);
  sampler.Stop();
  if (!ran) {
    ctx.err() << "gpuman: error: " << ran.error().message << "\n";
    return kExitError;  // the terminal, not the driver: never the "no driver" code
  }
  return kExitOk;
}

}  // namespace gpuman::cli
