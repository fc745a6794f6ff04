#include "cli/acquire.h"

#include <poll.h>
#include <pwd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <chrono>
#include <random>
#include <set>
#include <thread>

#include "base/duration.h"
#include "cli/daemon_client.h"
#include "store/proc_liveness.h"

namespace gpuman::cli {
namespace {

// Wakes on writes in the state directory (a lease released or taken), or after `ms`.
class ChangeWaiter {
 public:
  explicit ChangeWaiter(const std::string& dir) {
    fd_ = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    if (fd_ >= 0) inotify_add_watch(fd_, dir.c_str(), IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO | IN_DELETE);
  }
  ~ChangeWaiter() {
    if (fd_ >= 0) close(fd_);
  }
  void Wait(int ms) {
    if (fd_ < 0) {
      usleep(static_cast<useconds_t>(ms) * 1000);
      return;
    }
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, ms) > 0) {
      char buf[4096];
      while (read(fd_, buf, sizeof buf) > 0) {
      }
    }
  }

 private:
  int fd_ = -1;
};

}  // namespace

Result<model::Lease> DraftLease(Context& ctx, int holder_pid, std::string kind, std::string command) {
  model::Lease draft;
  draft.uid = getuid();
  passwd* pw = getpwuid(draft.uid);
  draft.user = pw ? pw->pw_name : std::to_string(draft.uid);
  draft.kind = std::move(kind);
  draft.command = std::move(command);
  draft.created_unix_ms = ctx.clock().NowUnixMs();
  auto holder = store::CurrentLeaseProcess(holder_pid);
  if (!holder) {
    return MakeError(ErrorCode::kNotFound, "cannot read the start time of process " + std::to_string(holder_pid));
  }
  draft.processes.push_back(*holder);
  return draft;
}

Result<std::vector<model::Lease>> LiveLeases(Context& ctx) {
  if (DaemonClient* d = ctx.Daemon()) {
    auto r = d->Call<protocol::LeasesResult>(protocol::LeasesArgs{});
    if (!r) return r.error();
    return r->leases;
  }
  auto leases = ctx.Leases();
  if (!leases) return leases.error();
  return (*leases)->List(store::ProcLivenessCheck());
}

Status AddLeaseProcesses(Context& ctx, int64_t lease_id, const std::vector<model::LeaseProcess>& processes) {
  if (DaemonClient* d = ctx.Daemon()) {
    auto r = d->Call<protocol::EmptyResult>(protocol::AddProcessesArgs{lease_id, processes});
    if (!r) return r.error();
    return {};
  }
  auto leases = ctx.Leases();
  if (!leases) return leases.error();
  return (*leases)->AddProcesses(lease_id, processes);
}

Status ReleaseLease(Context& ctx, int64_t lease_id) {
  if (DaemonClient* d = ctx.Daemon()) {
    auto r = d->Call<protocol::EmptyResult>(protocol::ReleaseArgs{lease_id});
    if (!r) return r.error();
    return {};
  }
  auto leases = ctx.Leases();
  if (!leases) return leases.error();
  return (*leases)->Release(lease_id);
}

namespace {

// The daemon decides: one lease table for interactive runs and queued jobs. It answers at
// once; waiting is a retry loop here (the daemon's state directory is not ours to watch).
Result<Acquired> AcquireThroughDaemon(Context& ctx, DaemonClient& daemon, const SelectionArgs& args,
                                      const model::Lease& draft, const AcquireOptions& options) {
  auto source = ctx.Devices();
  if (!source) return source.error();
  const auto started = std::chrono::steady_clock::now();
  auto next_note = started;
  while (true) {
    auto snap = (*source)->Snapshot();
    if (!snap) return snap.error();
    auto req = BuildSelectionRequest(args, *snap, ctx.env().vars);
    if (!req) return req.error();
    protocol::AcquireArgs a;
    std::vector<std::string> machine;
    for (const auto& g : snap->gpus) {
      if (g.uuid) machine.push_back(*g.uuid);
    }
    // The enclosing allocation (Slurm, container, outer CUDA_VISIBLE_DEVICES) travels as exclusions.
    a.request = policy::ToGpuRequest(*req, machine);
    a.command = draft.command;
    a.pid = draft.processes.front().pid;
    a.start_time_ticks = draft.processes.front().start_time_ticks;
    auto got = daemon.Call<protocol::AcquireResult>(a);
    if (got) {
      Acquired out;
      out.lease = draft;
      out.lease.id = got->lease_id;
      out.lease.gpu_uuids = got->gpu_uuids;
      if (draft.processes.size() > 1) {
        std::vector<model::LeaseProcess> rest(draft.processes.begin() + 1, draft.processes.end());
        if (auto added = AddLeaseProcesses(ctx, got->lease_id, rest); !added) {
          (void)ReleaseLease(ctx, got->lease_id);
          return added.error();
        }
      }
      out.selection.uuids = got->gpu_uuids;
      for (const auto& u : got->gpu_uuids) {
        for (const auto& g : snap->gpus) {
          if (g.uuid == u) out.selection.indices.push_back(g.index);
        }
      }
      out.selection.placement = "chosen by the daemon";
      out.snapshot = std::move(*snap);
      return out;
    }
    const Error& err = got.error();
    if (err.code != ErrorCode::kBusy || !options.wait_ms) return err;
    auto now = std::chrono::steady_clock::now();
    int64_t waited_ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - started).count();
    if (*options.wait_ms >= 0 && waited_ms >= *options.wait_ms) {
      return MakeError(ErrorCode::kBusy, "gave up after " + FormatDurationMs(waited_ms) + ": " + err.message);
    }
    if (now >= next_note) {
      ctx.err() << "gpuman: " << (waited_ms < 1000 ? "waiting" : "still waiting (" + FormatDurationMs(waited_ms) + ")")
                << " for " << options.waiting_for << ": " << err.message << "\n";
      next_note = now + std::chrono::seconds(10);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

}  // namespace

Result<Acquired> AcquireLease(Context& ctx, const SelectionArgs& args, model::Lease draft,
                              const AcquireOptions& options) {
  if (DaemonClient* d = ctx.Daemon()) return AcquireThroughDaemon(ctx, *d, args, draft, options);
  auto source = ctx.Devices();
  if (!source) return source.error();
  auto leases = ctx.Leases();
  if (!leases) return leases.error();
  const auto alive = store::ProcLivenessCheck();

  const auto started = std::chrono::steady_clock::now();
  auto next_note = started;
  std::unique_ptr<ChangeWaiter> waiter;
  std::mt19937 jitter(static_cast<unsigned>(getpid()));
  std::optional<model::Topology> topology;  // does not change while we wait
  std::set<std::string> leased_before;       // GPUs leased at our last full look
  auto last_full_look = started;
  bool first = true;
  auto last_look = started;
  while (true) {
    // At most ~10 looks a second: a burst of lease changes wakes us once, not per write.
    auto since = std::chrono::steady_clock::now() - last_look;
    if (!first && since < std::chrono::milliseconds(100)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100) - since);
    }
    last_look = std::chrono::steady_clock::now();
    // A read-only look at the leases first (WAL readers never wait for writers). When we
    // are woken only because someone else took GPUs, nothing got free for us: skip the
    // NVML snapshot and selection, except for a full look every second (a foreign
    // process may have exited, which the state directory does not tell us).
    std::vector<model::Lease> live;
    std::set<std::string> leased_now;
    if (auto recorded = (*leases)->ListRecorded()) {
      for (auto& l : *recorded) {
        bool is_live = false;
        for (const auto& p : l.processes) is_live = is_live || alive(p);
        if (!is_live) continue;
        leased_now.insert(l.gpu_uuids.begin(), l.gpu_uuids.end());
        live.push_back(std::move(l));
      }
    }
    auto now = std::chrono::steady_clock::now();
    bool nothing_freed = std::includes(leased_now.begin(), leased_now.end(), leased_before.begin(), leased_before.end());
    if (!first && nothing_freed && now - last_full_look < std::chrono::milliseconds(900)) {
      waiter->Wait(200);
      continue;
    }
    first = false;
    last_full_look = now;
    leased_before = leased_now;

    devices::SnapshotOptions snap_options;
    // Even one GPU is placed by topology: it should come from a group already in use.
    snap_options.topology = !topology.has_value();
    auto snap = (*source)->Snapshot(snap_options);
    if (!snap) return snap.error();
    if (topology) snap->topology = topology;
    else topology = snap->topology;
    auto req = BuildSelectionRequest(args, *snap, ctx.env().vars);
    if (!req) return req.error();

    // Only ask for the write lock when the read-only look says something fits: many
    // waiters woken by one release would otherwise queue for it to find nothing.
    std::optional<Error> precheck;
    if (auto selection = policy::Select(*snap, live, *req); !selection) precheck = selection.error();
    std::optional<policy::Selection> chosen;
    auto lease = precheck ? Result<model::Lease>(*precheck) : (*leases)->Acquire(
        draft,
        [&](const std::vector<model::Lease>& current) -> Result<std::vector<std::string>> {
          auto selection = policy::Select(*snap, current, *req);
          if (!selection) return selection.error();
          chosen = *selection;
          return selection->uuids;
        },
        alive);
    if (lease) return Acquired{std::move(*lease), std::move(*chosen), std::move(*snap)};

    const Error& err = lease.error();
    bool retryable = err.code == ErrorCode::kBusy || err.code == ErrorCode::kConflict;
    if (!retryable || !options.wait_ms) return err;
    now = std::chrono::steady_clock::now();
    int64_t waited_ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - started).count();
    if (*options.wait_ms >= 0 && waited_ms >= *options.wait_ms) {
      return MakeError(ErrorCode::kBusy, "gave up after " + FormatDurationMs(waited_ms) + ": " + err.message);
    }
    if (now >= next_note) {
      if (waited_ms < 1000) {
        ctx.err() << "gpuman: waiting for " << options.waiting_for << ": " << err.message << "\n";
      } else {
        ctx.err() << "gpuman: still waiting (" << FormatDurationMs(waited_ms) << ") for "
                  << options.waiting_for << ": " << err.message << "\n";
      }
      next_note = now + std::chrono::seconds(10);
    }
    if (!waiter) waiter = std::make_unique<ChangeWaiter>(ctx.state_dir());
    int budget = 1000;
    if (*options.wait_ms >= 0) budget = static_cast<int>(std::min<int64_t>(budget, *options.wait_ms - waited_ms));
    waiter->Wait(std::max(budget, 1));
    // A little jitter so that many waiters woken by one release do not all collide.
    usleep(std::uniform_int_distribution<int>(0, 20000)(jitter));
  }
}

}  // namespace gpuman::cli
