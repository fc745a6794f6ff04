#include "cli/lease_broker.h"

#include <poll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <random>
#include <set>
#include <thread>

#include "base/duration.h"
#include "base/interrupts.h"
#include "base/unique_fd.h"
#include "cli/daemon_client.h"
#include "cli/daemon_pages.h"
#include "devices/device_source.h"
#include "lease/acquire_step.h"
#include "lease/force_release.h"
#include "protocol/json_io.h"
#include "protocol/model_json.h"
#include "store/lease_store.h"
#include "store/proc_liveness.h"

namespace gpuman::cli {

Error InterruptedWait(int signal, const std::string& waiting_for, const std::string& outcome) {
  return MakeError(ErrorCode::kBusy,
                   std::string("interrupted by ") + InterruptName(signal) + " while waiting for " + waiting_for + "; " + outcome);
}

Result<Granted> AcquireWaiting(LeaseBroker& broker, const LeaseAsk& ask, const WaitPolicy& policy,
                               const Clock& clock, const std::function<void(const std::string&)>& note) {
  const int64_t started = clock.NowUnixMs();
  int64_t next_note = started;
  while (true) {
    if (policy.interrupted) {
      if (int sig = policy.interrupted()) {
        return InterruptedWait(sig, policy.waiting_for, "no lease was taken");
      }
    }
    auto got = broker.TryAcquire(ask);
    if (got) return got;
    const Error& err = got.error();
    bool retryable = err.code == ErrorCode::kBusy || err.code == ErrorCode::kConflict;
    if (!retryable || !policy.wait_ms) return err;
    const int64_t now = clock.NowUnixMs();
    const int64_t waited = now - started;
    if (*policy.wait_ms >= 0 && waited >= *policy.wait_ms) {
      return MakeError(ErrorCode::kBusy, "gave up after " + FormatDurationMs(waited) + ": " + err.message);
    }
    if (now >= next_note) {
      note(waited < 1000 ? "waiting for " + policy.waiting_for + ": " + err.message
                         : "still waiting (" + FormatDurationMs(waited) + ") for " + policy.waiting_for + ": " +
                               err.message);
      next_note = now + policy.note_every_ms;
    }
    int64_t budget = 1000;
    if (*policy.wait_ms >= 0) budget = std::min<int64_t>(budget, *policy.wait_ms - waited);
    broker.WaitForChange(static_cast<int>(std::max<int64_t>(budget, 1)));
  }
}

namespace {

// Indices and placement of chosen UUIDs, looked up in a snapshot.
void FillIndices(Granted& g) {
  g.indices.clear();
  for (const auto& u : g.uuids) {
    // A MIG device (docs/share.md, "MIG") counts under its GPU's index.
    if (const int index = model::UnitIndex(g.snapshot, u); index >= 0) g.indices.push_back(index);
  }
}

// ---- the daemon

class DaemonBroker final : public LeaseBroker {
 public:
  DaemonBroker(DaemonClient& daemon, DeviceGetter devices, std::string socket)
      : daemon_(daemon), devices_(std::move(devices)), socket_(std::move(socket)) {}

  Result<Granted> TryAcquire(const LeaseAsk& ask) override {
    auto request = WireRequest(ask);
    if (!request) return request.error();
    protocol::AcquireArgs a;
    a.request = std::move(*request);
    a.kind = ask.draft.kind.empty() ? "run" : ask.draft.kind;
    a.command = ask.draft.command;
    a.pid = ask.draft.processes.front().pid;
    a.start_time_ticks = ask.draft.processes.front().start_time_ticks;
    a.within_lease_id = ask.within;
    a.processes.assign(ask.draft.processes.begin() + 1, ask.draft.processes.end());
    auto got = daemon_.Call<protocol::AcquireResult>(a);
    if (!got && daemon_.broken()) {
      // The daemon went away under the request (a restart): reconnect (the one loop, its
      // two notes), and since the request may have been granted before the connection
      // broke, give back any lease held for this very process before asking again: an
      // acquire is never granted twice.
      if (Status back = daemon_.Recover(); !back) return back.error();
      if (!ask.within) {
        if (auto live = List()) {
          const model::LeaseProcess me{a.pid, a.start_time_ticks};
          for (const auto& l : *live) {
            if (std::find(l.processes.begin(), l.processes.end(), me) != l.processes.end()) (void)Release(l.id);
          }
        }
      }
      got = daemon_.Call<protocol::AcquireResult>(a);
    }
    if (!got) return got.error();
    Granted g;
    if (got->processes_added) {
      g.cgroup = got->cgroup.value_or("");
    } else if (ask.draft.processes.size() > 1) {  // a daemon from before acquire took them
      std::vector<model::LeaseProcess> rest(ask.draft.processes.begin() + 1, ask.draft.processes.end());
      auto added = daemon_.Call<protocol::AddProcessesResult>(protocol::AddProcessesArgs{got->lease_id, rest});
      if (!added) {
        if (!got->nested) (void)Release(got->lease_id);
        return added.error();
      }
      g.cgroup = added->cgroup.value_or("");
    }
    g.lease_id = got->lease_id;
    g.uuids = got->gpu_uuids;
    g.nested = got->nested;
    g.master_port = got->master_port;
    if (got->mps_pipe_directory && got->mps_log_directory) {
      g.mps = visibility::MpsClient{*got->mps_pipe_directory, *got->mps_log_directory, ask.request.gpu_share_percent};
    }
    g.placement = got->nested ? "inside lease " + std::to_string(got->lease_id) : "chosen by the daemon";
    g.snapshot = *snapshot_;
    FillIndices(g);
    return g;
  }

  Result<Granted> Preview(const LeaseAsk& ask) override {
    auto request = WireRequest(ask);
    if (!request) return request.error();
    // Reads only: safe to ask again across a restart.
    auto got = daemon_.CallResuming<protocol::PreviewResult>(protocol::PreviewArgs{std::move(*request), ask.within});
    if (!got) {
      if (got.error().code == ErrorCode::kInvalidArgument && got.error().message.find("unknown op") != std::string::npos) {
        return MakeError(ErrorCode::kUnavailable, Describe() + " is older than this gpuman (it cannot preview a "
                                                  "selection): restart it");
      }
      return got.error();
    }
    Granted g;
    g.lease_id = got->lease_id.value_or(0);
    g.uuids = got->gpu_uuids;
    g.nested = got->nested;
    g.placement = got->placement;
    g.snapshot = *snapshot_;
    FillIndices(g);
    return g;
  }

  Status AddProcesses(int64_t lease_id, const std::vector<model::LeaseProcess>& processes) override {
    auto r = daemon_.Call<protocol::EmptyResult>(protocol::AddProcessesArgs{lease_id, processes});
    if (!r) return r.error();
    return {};
  }

  Status Release(int64_t lease_id) override {
    // Giving back is safe to repeat (a lease already gone is kNotFound): across a restart too.
    auto r = daemon_.CallResuming<protocol::ReleaseResult>(protocol::ReleaseArgs{lease_id});
    if (!r) return r.error();
    return {};
  }
  Result<int64_t> ForceReleaseStep(int64_t lease_id) override {
    auto r = daemon_.CallResuming<protocol::ReleaseResult>(protocol::ReleaseArgs{lease_id, /*force=*/true});
    if (!r) return r.error();
    return r->ending;
  }


  // Every page (docs/protocol.md, "leases"), across a restart too.
  Result<std::vector<model::Lease>> List() override { return FetchAllLeases(daemon_, /*resuming=*/true); }

  // The daemon's state directory is not ours to watch: poll.
  void WaitForChange(int ms) override { std::this_thread::sleep_for(std::chrono::milliseconds(std::min(ms, 200))); }

  std::string Describe() const override { return "the daemon at " + socket_; }

 private:
  // The request as the wire carries it. The snapshot only maps UUIDs to indices and CPUs
  // here (they do not change): one is enough.
  Result<model::GpuRequest> WireRequest(const LeaseAsk& ask) {
    if (!snapshot_ && ask.snapshot) snapshot_ = ask.snapshot;
    if (!snapshot_) {
      devices::SnapshotOptions options = devices::FieldOptions(devices::kSelectionFields);
      options.topology = true;
      auto source = devices_();
      if (!source) return source.error();
      auto snap = (*source)->Snapshot(options);
      if (!snap) return snap.error();
      snapshot_ = std::move(*snap);
    }
    std::vector<std::string> machine;
    for (const auto& g : snapshot_->gpus) {
      if (g.uuid) machine.push_back(*g.uuid);
    }
    return model::WithAllowedAsExclusions(ask.request, machine);  // the enclosing allocation travels as exclusions
  }

  DaemonClient& daemon_;
  DeviceGetter devices_;
  std::string socket_;
  std::optional<model::MachineSnapshot> snapshot_;
};

// ---- the machine lease table

// Wakes on writes in the table's directory (a lease released or taken), or after `ms`.
class ChangeWaiter {
 public:
  explicit ChangeWaiter(const std::string& dir) {
    fd_.reset(inotify_init1(IN_CLOEXEC | IN_NONBLOCK));
    if (fd_) inotify_add_watch(fd_.get(), dir.c_str(), IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO | IN_DELETE);
  }
  ChangeWaiter(const ChangeWaiter&) = delete;
  ChangeWaiter& operator=(const ChangeWaiter&) = delete;
  void Wait(int ms) {
    if (!fd_) {
      usleep(static_cast<useconds_t>(ms) * 1000);
      return;
    }
    pollfd p{fd_.get(), POLLIN, 0};
    if (poll(&p, 1, ms) > 0) {
      char buf[4096];
      while (read(fd_.get(), buf, sizeof buf) > 0) {
      }
    }
  }

 private:
  UniqueFd fd_;
};

class TableBroker final : public LeaseBroker {
 public:
  TableBroker(store::LeaseStore& table, DeviceGetter devices, policy::Caller caller, policy::MachineRules rules,
              std::string dir, const Clock& clock)
      : table_(table), devices_(std::move(devices)), caller_(std::move(caller)), rules_(std::move(rules)),
        dir_(std::move(dir)), clock_(clock), alive_(store::ProcLivenessCheck()),
        jitter_(static_cast<unsigned>(getpid())) {}

  Result<Granted> TryAcquire(const LeaseAsk& ask) override {
    // MPS needs someone to start and stop its control daemon: the gpuman daemon.
    const bool mps = ask.request.mps || (rules_.share.mps_on && ask.request.gpu_memory_bytes && ask.request.count == 1);
    if (mps && !ask.within) {
      return MakeError(ErrorCode::kNotFound,
                       std::string(ask.request.mps ? "--mps" : "a slice ([share] mps = \"on\")") +
                           " needs the gpuman daemon, which starts and stops the MPS control daemon; none runs here");
    }
    // A read-only look at the leases first (WAL readers never wait for writers). When we
    // were woken only because someone else took GPUs, nothing got free for us: skip the
    // NVML snapshot and selection, except for a full look every second (a foreign
    // process may have exited, which the lease table does not tell us).
    std::set<std::string> leased_now;
    if (auto live = table_.ListLive(alive_)) {
      for (const auto& l : *live) leased_now.insert(l.gpu_uuids.begin(), l.gpu_uuids.end());
    }
    const auto now = std::chrono::steady_clock::now();
    if (last_error_ && std::includes(leased_now.begin(), leased_now.end(), leased_before_.begin(), leased_before_.end()) &&
        now - last_full_look_ < std::chrono::milliseconds(900)) {
      return *last_error_;
    }
    last_full_look_ = now;
    leased_before_ = leased_now;
    auto result = Attempt(ask, /*preview=*/false);
    if (result) last_error_.reset();
    else last_error_ = result.error();
    return result;
  }

  Result<Granted> Preview(const LeaseAsk& ask) override { return Attempt(ask, /*preview=*/true); }

  Status AddProcesses(int64_t lease_id, const std::vector<model::LeaseProcess>& processes) override {
    auto lease = table_.Get(lease_id);
    if (!lease) return lease.error();
    if (!*lease) return MakeError(ErrorCode::kNotFound, "no lease " + std::to_string(lease_id));
    if (auto mine = policy::CheckYourLease(**lease, caller_, policy::LeaseAct::kManage); !mine) return mine;
    return table_.AddProcesses(lease_id, processes);
  }

  Status Release(int64_t lease_id) override {
    auto lease = table_.Get(lease_id);
    if (!lease) return lease.error();
    if (!*lease) return MakeError(ErrorCode::kNotFound, "no lease " + std::to_string(lease_id));
    // A stale lease (none of its processes lives) may be cleared by anyone.
    std::vector<model::LeaseProcess> live;
    for (const auto& p : (*lease)->processes) {
      // The holder giving its own lease back (`run` once its command ended) is not in the way.
      if (p.pid != getpid() && alive_(p)) live.push_back(p);
    }
    if (!live.empty()) {
      if (auto ok = policy::CheckRelease(**lease, caller_, std::nullopt, live); !ok) return ok;
    }
    return table_.Release(lease_id);
  }

  Result<int64_t> ForceReleaseStep(int64_t lease_id) override {
    auto lease = table_.Get(lease_id);
    if (!lease) return lease.error();
    if (!*lease) return MakeError(ErrorCode::kNotFound, "no lease " + std::to_string(lease_id));
    // The daemon checks ownership first (every lease op); so does this path.
    if (auto mine = policy::CheckYourLease(**lease, caller_, policy::LeaseAct::kManage); !mine) return mine.error();
    if (auto ok = policy::CheckForceRelease(**lease, caller_, std::nullopt); !ok) return ok.error();
    if (geteuid() != 0) {
      return MakeError(ErrorCode::kPermissionDenied,
                       "without the daemon only root may end another user's processes: run `release --force` as root");
    }
    std::vector<pid_t> live;
    for (const auto& p : (*lease)->processes) {
      if (p.pid != getpid() && alive_(p)) live.push_back(p.pid);
    }
    const int64_t left = lease::ForceEndStep(lease_id, live, clock_.NowUnixMs(), ending_);
    if (left > 0) return left;
    if (auto r = table_.Release(lease_id); !r) return r.error();
    return 0;
  }

  Result<std::vector<model::Lease>> List() override { return table_.List(alive_); }

  void WaitForChange(int ms) override {
    if (!waiter_) waiter_ = std::make_unique<ChangeWaiter>(dir_);
    waiter_->Wait(ms);
    // A little jitter so that many waiters woken by one release do not all collide.
    usleep(std::uniform_int_distribution<int>(0, 20000)(jitter_));
  }

  std::string Describe() const override { return "the machine lease table in " + dir_; }

 private:
  // One attempt through the acquire step, on the ask's own snapshot the first time.
  Result<Granted> Attempt(const LeaseAsk& ask, bool preview) {
    Result<model::MachineSnapshot> snap = MakeError(ErrorCode::kInternal, "no snapshot");
    const bool can_choose = (ask.snapshot_fields & devices::kSelectionFields) == devices::kSelectionFields;
    if (!used_first_ && ask.snapshot && can_choose) {
      snap = *ask.snapshot;  // the one the request was built on, a moment ago
    } else {
      auto source = devices_();
      if (!source) return source.error();
      snap = (*source)->Snapshot(devices::FieldOptions(devices::kSelectionFields));
      if (!snap) return snap.error();
    }
    used_first_ = true;
    if (!snap->topology) {
      if (Status known = KnowTopology(*snap); !known) return known.error();
      snap->topology = topology_;
    }
    lease::AcquireAsk step;
    step.request = ask.request;
    step.kind = ask.draft.kind;
    step.command = ask.draft.command;
    step.processes = ask.draft.processes;
    step.within = ask.within;
    step.preview = preview;
    const lease::Authority authority{table_, {}, rules_, alive_, clock_};
    auto got = lease::AcquireStep(*snap, step, caller_, authority);
    if (!got) return got.error();
    Granted g;
    g.lease_id = got->lease_id;
    g.nested = got->nested;
    g.master_port = got->master_port;
    g.uuids = got->selection.uuids;
    g.indices = got->selection.indices;
    g.placement = got->selection.placement;
    if (got->nested && !preview) g.placement += ", inside lease " + std::to_string(got->lease_id);
    g.snapshot = std::move(*snap);
    return g;
  }

  // The topology (static while the driver is loaded): kept once known; else the machine
  // table's record of it for these GPUs (machine_facts); else read from the driver once and
  // recorded there, so that the next command without a daemon does not read it again. A
  // record that does not parse or fit these GPUs is read again and replaced.
  Status KnowTopology(const model::MachineSnapshot& snap) {
    if (topology_ && topology_->size() == snap.gpus.size()) return {};
    std::vector<std::string> uuids;
    for (const auto& g : snap.gpus) uuids.push_back(g.uuid.value_or("?"));
    std::sort(uuids.begin(), uuids.end());
    std::string key = "topology";
    for (const auto& u : uuids) key += " " + u;
    if (auto fact = table_.Fact(key); fact && *fact) {
      auto parsed = protocol::ParseJson(**fact);
      if (parsed) {
        auto t = protocol::TopologyFromJson(*parsed, "topology");
        if (t && FitsGpus(*t, snap.gpus.size())) {
          topology_ = std::move(*t);
          return {};
        }
      }
    }
    auto source = devices_();
    if (!source) return source.error();
    devices::SnapshotOptions options = devices::FieldOptions(devices::kFieldIdentity);
    options.topology = true;
    auto read = (*source)->Snapshot(options);
    if (!read) return read.error();
    topology_ = read->topology;
    if (topology_) (void)table_.RecordFact(key, protocol::DumpJson(protocol::TopologyToJson(*topology_)));
    return {};
  }
  static bool FitsGpus(const model::Topology& t, size_t n) {
    if (t.pcie.size() != n || t.nvlinks.size() != n) return false;
    for (size_t i = 0; i < n; ++i) {
      if (t.pcie[i].size() != n || t.nvlinks[i].size() != n) return false;
    }
    return true;
  }

  store::LeaseStore& table_;
  DeviceGetter devices_;
  policy::Caller caller_;
  policy::MachineRules rules_;
  std::string dir_;
  const Clock& clock_;
  store::LivenessCheck alive_;
  std::mt19937 jitter_;
  lease::ForceEnding ending_;  // release --force in progress
  std::unique_ptr<ChangeWaiter> waiter_;
  std::optional<model::Topology> topology_;  // does not change while we wait
  std::set<std::string> leased_before_;      // GPUs leased at our last full look
  std::chrono::steady_clock::time_point last_full_look_{};
  std::optional<Error> last_error_;
  bool used_first_ = false;  // the ask's own snapshot serves the first attempt only
};

}  // namespace

std::unique_ptr<LeaseBroker> MakeDaemonBroker(DaemonClient& daemon, DeviceGetter devices, std::string socket_path) {
  return std::make_unique<DaemonBroker>(daemon, std::move(devices), std::move(socket_path));
}

std::unique_ptr<LeaseBroker> MakeTableBroker(store::LeaseStore& table, DeviceGetter devices, policy::Caller caller,
                                             policy::MachineRules rules, std::string table_dir, const Clock& clock) {
  return std::make_unique<TableBroker>(table, std::move(devices), std::move(caller), std::move(rules),
                                       std::move(table_dir), clock);
}

}  // namespace gpuman::cli
