#include "daemon/daemon.h"

#include <grp.h>
#include <malloc.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/inotify.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>

#include "base/posix_error.h"
#include "base/strings.h"
#include "base/unique_fd.h"
#include "devices/gpu_ids.h"
#include "lease/force_release.h"
#include "lease/ports.h"
#include "policy/selection.h"
#include "protocol/framing.h"
#include "daemon/call.h"
#include "daemon/server.h"
#include "sched/job_state.h"
#include "sched/process_group.h"
#include "visibility/child_env.h"
#include "store/machine_lease_table.h"
#include "store/state_db.h"
#include "store/proc_liveness.h"
#include "store/sqlite.h"

namespace gpuman::daemon {

std::string UserName(uint32_t uid) {
  passwd* pw = getpwuid(uid);
  return pw ? pw->pw_name : std::to_string(uid);
}

std::optional<protocol::WireError> CheckOwnProcess(const Peer& peer, const model::LeaseProcess& p,
                                                   const DaemonIdentity& self) {
  using protocol::WireCode;
  struct stat st{};
  if (p.pid <= 0 || stat(("/proc/" + std::to_string(p.pid)).c_str(), &st) != 0 || !store::IsProcessAlive(p)) {
    return Wire(WireCode::kInvalidArgument, "process " + std::to_string(p.pid) + " does not exist");
  }
  if (st.st_uid != peer.uid && !Permits(kNameOthersProcess, peer, std::nullopt, self)) {
    return Wire(WireCode::kPermissionDenied, "process " + std::to_string(p.pid) + " is not yours");
  }
  return std::nullopt;
}

bool IsSameLiveProcess(std::optional<int32_t> pid, std::optional<int64_t> ticks) {
  if (!pid || *pid <= 0) return false;
  if (!ticks) return kill(*pid, 0) == 0;
  return store::IsProcessAlive(model::LeaseProcess{*pid, *ticks});
}

namespace {

// The GPU a lease's unit is on: the GPU with this UUID, or the parent of the MIG device
// with it (docs/share.md, "MIG"); nullptr when `snap` has neither.
const model::DeviceSnapshot* GpuOfUnit(const model::MachineSnapshot& snap, const std::string& uuid) {
  const model::DeviceSnapshot* parent = nullptr;
  if (model::FindMigDevice(snap, uuid, &parent)) return parent;
  auto whole = std::find_if(snap.gpus.begin(), snap.gpus.end(), [&](const model::DeviceSnapshot& g) { return g.uuid == uuid; });
  return whole == snap.gpus.end() ? nullptr : &*whole;
}

// The reason of a job the daemon adopted starts with this (a restarted daemon sees it).
constexpr std::string_view kSupervisorDied = "its supervisor died";

// The live processes of a job, its supervisor aside: those its lease names (the supervisor
// adds the job's leader before the job runs) and every member of the process groups that
// processes the lease names lead (the job's own group first of all; never a group someone
// else leads, such as a login session's). Once a group's leader is gone, the members the
// lease does not name yet are added to it, so that the lease stays alive while any of them
// does.
struct JobProcesses {
  std::vector<model::LeaseProcess> live;
  std::set<int> groups;                      // led by a process the lease names
  std::vector<model::LeaseProcess> loners;   // named, alive, in a group of someone else's
};

JobProcesses FindJobProcesses(store::LeaseStore& leases, const model::Job& job) {
  JobProcesses out;
  if (!job.lease_id) return out;
  auto lease = leases.Get(*job.lease_id);
  if (!lease || !*lease) return out;
  std::set<int> named;  // alive or not: a dead leader's group lives on in its members
  std::vector<model::LeaseProcess> recorded;
  for (const auto& p : (*lease)->processes) {
    if (job.supervisor_pid && p.pid == *job.supervisor_pid) continue;
    named.insert(p.pid);
    if (store::IsProcessAlive(p)) recorded.push_back(p);
  }
  for (const auto& p : recorded) {
    auto group = sched::ProcessGroupOf(p.pid);
    if (group && named.count(*group)) out.groups.insert(*group);
    else out.loners.push_back(p);
  }
  std::vector<model::LeaseProcess> unrecorded;
  bool leaders_alive = true;
  for (int group : out.groups) {
    bool leader_alive = false;
    for (const auto& m : sched::ProcessesInGroup(group)) {
      bool known = std::find(recorded.begin(), recorded.end(), m) != recorded.end();
      if (known && m.pid == group) leader_alive = true;
      if (!known) unrecorded.push_back(m);
      out.live.push_back(m);
    }
    leaders_alive = leaders_alive && leader_alive;
  }
  out.live.insert(out.live.end(), out.loners.begin(), out.loners.end());
  if (!leaders_alive && !unrecorded.empty()) (void)leases.AddProcesses(*job.lease_id, unrecorded);
  return out;
}

void SignalJob(const JobProcesses& procs, int sig) {
  for (int group : procs.groups) {
    if (group > 1) kill(-group, sig);
  }
  for (const auto& p : procs.loners) {
    if (store::IsProcessAlive(p)) kill(p.pid, sig);
  }
}

}  // namespace

std::string DefaultSocketPath(bool system_mode, const std::map<std::string, std::string>& env) {
  if (system_mode) return "/run/gpuman/gpuman.sock";
  auto it = env.find("XDG_RUNTIME_DIR");
  if (it != env.end() && !it->second.empty()) return it->second + "/gpuman/gpuman.sock";
  return "/tmp/gpuman-" + std::to_string(getuid()) + "/gpuman.sock";
}

std::string DefaultDaemonStateDir(bool system_mode, const std::map<std::string, std::string>& env) {
  if (system_mode) return "/var/lib/gpuman";
  auto it = env.find("XDG_STATE_HOME");
  if (it != env.end() && !it->second.empty()) return it->second + "/gpuman/daemon";
  auto home = env.find("HOME");
  // No home: no default (once /tmp/.local/..., shared with whoever made it first).
  if (home == env.end() || home->second.empty() || home->second[0] != '/') return "";
  return home->second + "/.local/state/gpuman/daemon";
}

Daemon::Daemon(DaemonOptions options, devices::DeviceSource& devices, const Clock& clock, sched::JobLauncher& launcher)
    : options_(std::move(options)), devices_(devices), clock_(clock), launcher_(launcher) {}

Daemon::~Daemon() = default;  // the server closes its connections and removes the socket

Peer Daemon::MakePeer(uint32_t uid, uint32_t gid, int32_t pid) const {
  Peer peer{uid, gid, pid, UserName(uid), uid == 0};
  if (!peer.is_admin && options_.admin_gid) {
    if (gid == *options_.admin_gid) peer.is_admin = true;
    if (passwd* pw = getpwuid(uid)) {
      int n = 64;
      std::vector<gid_t> groups(static_cast<size_t>(n));
      if (getgrouplist(pw->pw_name, pw->pw_gid, groups.data(), &n) >= 0) {
        for (int i = 0; i < n; ++i) peer.is_admin = peer.is_admin || groups[static_cast<size_t>(i)] == *options_.admin_gid;
      }
    }
  }
  return peer;
}

Status Daemon::OpenState() {
  std::error_code ec;
  std::filesystem::create_directories(options_.state_dir, ec);
  // A directory others may write (/tmp) is shared, never the daemon's own: refused rather
  // than narrowed, which would take /tmp away from every other user of the machine.
  struct stat st {};
  if (stat(options_.state_dir.c_str(), &st) == 0 && (st.st_mode & S_IWOTH) != 0) {
    return MakeError(ErrorCode::kPermissionDenied,
                     "refusing the state directory " + options_.state_dir +
                         ": others may write to it; give the daemon a directory of its own");
  }
  // 0711 in system mode: users may reach history.db (0644, read by `gpuman history`) by
  // name but not list the directory; state.db and its WAL files are 0600.
  chmod(options_.state_dir.c_str(), options_.system_mode ? 0711 : 0700);
  const std::string db = options_.state_dir + "/state.db";
  store::JobStoreOptions job_options;
  job_options.check_transition = sched::CheckTransition;
  job_options.busy_timeout = std::chrono::milliseconds(30000);
  // One owner of state.db: one connection, migrated once, both tables on it.
  auto state = store::OpenStateDb(db, job_options);
  if (!state) return state.error();
  jobs_ = std::move(state->jobs);
  leases_ = std::move(state->leases);
  store::LeaseStoreOptions lease_options;
  lease_options.busy_timeout = std::chrono::milliseconds(30000);
  for (const char* suffix : {"", "-wal", "-shm"}) chmod((db + suffix).c_str(), 0600);
  if (!options_.machine_lease_dir.empty()) {
    // Leases taken while no daemon ran stay respected; as root this also sets the table up.
    auto table = store::OpenMachineLeaseTable(options_.machine_lease_dir, getuid(), lease_options);
    if (table && !options_.system_mode) {
      // A user's daemon is never a lease table of its own (issue 23): it takes its GPUs in
      // the machine's table, where every `run` without a daemon, and the machine's daemon
      // when it starts, see them, and it sees theirs. docs/design.md ("One authority").
      leases_ = std::move(table->store);
    } else if (table) {
      machine_leases_ = std::move(table->store);
    } else if (!options_.system_mode) {
      return table.error().WithContext("a daemon of yours takes its GPUs from the machine lease table");
    } else if (table.error().code == ErrorCode::kIo && !store::IsDiskFull(table.error())) {
      // A file there that is not a lease table (corrupt, another program's, newer): its
      // leases cannot be respected, and guessing could hand out GPUs that are in use.
      return table.error();
    } else {
      std::fprintf(stderr, "gpuman: warning: machine lease table: %s\n", table.error().message.c_str());
    }
  }
  MpsControlOptions mps;
  mps.program = options_.share.mps_control;
  mps.search_path = options_.mps_search_path;
  mps.run_dir = options_.share.mps_dir;
  mps_ = std::make_unique<MpsControls>(std::move(mps), *leases_);
  return {};
}

bool Daemon::WantsMps(const model::GpuRequest& request) const {
  return request.mps || (options_.share.mps_on && request.gpu_memory_bytes && request.count == 1);
}

Result<visibility::MpsClient> Daemon::MpsFor(const model::Lease& lease) {
  if (lease.gpu_uuids.size() != 1) {
    return MakeError(ErrorCode::kInvalidArgument, "--mps takes one GPU; lease " + std::to_string(lease.id) + " has " +
                                                      std::to_string(lease.gpu_uuids.size()));
  }
  auto where = mps_->Ensure(lease.gpu_uuids[0], lease.uid, lease.user, clock_.NowUnixMs());
  if (!where) return where.error();
  where->active_thread_percent = lease.gpu_share_percent;
  return where;
}

namespace {

// Less free space than this in the state directory's file system counts as full: the
// next commits would fail half-way through a request.
constexpr uint64_t kMinFreeBytes = 64 * 1024;
constexpr int64_t kWriteCheckMs = 1000;

// Why nothing can be written in `dir` now, or nullopt. `probe`: also write (and remove)
// 64 KiB there, which a quota or a file system that statvfs misjudges refuses too.
std::optional<std::string> WhyUnwritable(const std::string& dir, bool probe) {
  struct statvfs vfs {};
  if (statvfs(dir.c_str(), &vfs) == 0) {
    const uint64_t blocks = geteuid() == 0 ? vfs.f_bfree : vfs.f_bavail;  // root may use the reserve
    const uint64_t free_bytes = blocks * vfs.f_frsize;
    if (free_bytes < kMinFreeBytes) {
      return dir + ": no space left on device (" + std::to_string(free_bytes) + " bytes free)";
    }
  }
  if (!probe) return std::nullopt;
  const std::string path = dir + "/.write-probe";
  UniqueFd fd(open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd) return dir + ": " + PosixErrorText(errno);
  static const char kZeros[64 * 1024] = {};
  int err = 0;
  for (size_t done = 0; done < sizeof kZeros && err == 0;) {
    ssize_t n = write(fd.get(), kZeros + done, sizeof kZeros - done);
    if (n < 0 && errno != EINTR) err = errno;
    if (n > 0) done += static_cast<size_t>(n);
  }
  if (err == 0 && fsync(fd.get()) != 0) err = errno;
  fd.reset();
  unlink(path.c_str());
  if (err != 0) return dir + ": " + PosixErrorText(err);
  return std::nullopt;
}

}  // namespace

void Daemon::NoteStoreError(const Error& e) {
  if (unwritable_ || !store::IsDiskFull(e)) return;
  unwritable_ = e.message;
  next_write_check_ms_ = clock_.NowUnixMs() + kWriteCheckMs;
  std::fprintf(stderr,
               "gpuman: warning: the daemon cannot write its state: %s; refusing new work until space is freed "
               "(running jobs stay supervised)\n",
               e.message.c_str());
}

void Daemon::CheckWritable(int64_t now) {
  if (now < next_write_check_ms_) return;
  next_write_check_ms_ = now + kWriteCheckMs;
  auto why = WhyUnwritable(options_.state_dir, /*probe=*/unwritable_.has_value());
  if (why) {
    if (!unwritable_) NoteStoreError(MakeError(ErrorCode::kIo, *why));
    return;
  }
  if (!unwritable_) return;
  unwritable_.reset();
  dirty_ = true;  // queued jobs may start now
  std::fprintf(stderr, "gpuman: the daemon's state in %s can be written again; taking new work\n",
               options_.state_dir.c_str());
}

std::optional<Error> Daemon::RefusingNewWork() const {
  if (!unwritable_) return std::nullopt;
  return MakeError(ErrorCode::kIo, "the daemon cannot write its state (" + *unwritable_ +
                                       "); it takes no new work until space is freed there (running jobs go on)");
}

Status Daemon::Start() {
  // glibc gives free memory at the top of the heap back to the kernel as soon as it
  // exceeds the trim threshold (128 KiB at first). A sweep's submit builds and frees tens of
  // megabytes over and over, and each shrink of a threaded process's heap is a TLB
  // shootdown on every CPU: the first `submit --array 0-9999` of a fresh daemon took 2.1 s,
  // half of it in brk (perf), 0.35-0.45 s with this (docs/design.md). The memory goes back
  // once requests stop instead (Tick).
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's own dynamic ceiling; fixed, as setting one turns that off
  mallopt(M_TRIM_THRESHOLD, 64 << 20);  // twice the mmap threshold, as glibc's dynamic rule would set it
  if (auto opened = OpenState(); !opened) return opened.error();
  // Anyone may connect in system mode; every request is authorised by SO_PEERCRED.
  ServerLimits limits;
  limits.max_clients = std::max<size_t>(1, options_.max_connections);
  limits.admin_reserve = std::min(options_.admin_connection_reserve, limits.max_clients);
  limits.max_clients_per_user = std::max<size_t>(1, options_.max_connections_per_user);
  // Room for every connection the caps allow, plus the daemon's own files (state db,
  // history, inotify, metrics, supervisors being started).
  constexpr rlim_t kOwnFiles = 128;
  if (rlimit files{}; getrlimit(RLIMIT_NOFILE, &files) == 0) {
    const rlim_t want = static_cast<rlim_t>(limits.max_clients) + kOwnFiles;
    if (files.rlim_cur < want) {
      files.rlim_cur = files.rlim_max == RLIM_INFINITY ? want : std::min(want, files.rlim_max);
      (void)setrlimit(RLIMIT_NOFILE, &files);
      (void)getrlimit(RLIMIT_NOFILE, &files);
    }
    if (files.rlim_cur != RLIM_INFINITY && files.rlim_cur < want) {
      // The hard limit is lower: fewer connections rather than running out of fds.
      const size_t fit = files.rlim_cur > 2 * kOwnFiles ? static_cast<size_t>(files.rlim_cur - kOwnFiles) : kOwnFiles;
      limits.max_clients = std::min(limits.max_clients, fit);
      limits.admin_reserve = std::min(limits.admin_reserve, limits.max_clients / 4);
    }
  }
  server_ = std::make_unique<Server>([this](uint32_t uid, uint32_t gid, int32_t pid) { return MakePeer(uid, gid, pid); },
                                     [this](const Peer& peer, const protocol::Request& request) { return Handle(peer, request); },
                                     clock_, limits);
  if (auto listening = server_->Listen(options_.socket_path, options_.system_mode); !listening) {
    return listening.error();
  }

  // Device confinement (docs/enforce.md), once this daemon is the one serving.
  confinement_ = confine::PrepareConfinement(options_.devices, geteuid(), options_.state_dir);
  if (confinement_.on) {
    // A confined lease lives while its cgroup has processes, recorded or not (a daemonized
    // child of the job).
    leases_->SetHeld([this](int64_t id) { return confine::CgroupHasProcesses(confine::LeaseCgroup(confinement_, id)); });
  }

  // Supervisors write job outcomes into the db: its directory changing wakes us.
  inotify_fd_.reset(inotify_init1(IN_CLOEXEC | IN_NONBLOCK));
  if (inotify_fd_) {
    inotify_add_watch(inotify_fd_.get(), options_.state_dir.c_str(), IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO);
  }
  Reconcile();
  // MPS controls: those of leases still alive are found (or started again), the others
  // told to quit (a daemon killed while leases ended).
  if (auto live = AllLiveLeases()) mps_->Reconcile(*live, /*verify=*/true, clock_.NowUnixMs());
  // Notifications due from before (jobs that ended while no daemon ran) go at the first tick.
  notifier_ = std::make_unique<Notifier>(options_.notify, *jobs_, clock_);
  collector_ = std::make_unique<Collector>(options_.monitor, *jobs_, *leases_, clock_);
  if (auto started = collector_->Start(); !started) return started.error();
  return {};
}

// Jobs an earlier daemon (or a crashed supervisor) left behind; runs at start and every pass.
// A job in starting whose supervisor and job process are gone never ran: it is queued
// again. A running job whose supervisor died is adopted (WatchOrphan): its GPUs stay taken
// while any process of the job lives.
std::optional<Daemon::ActiveJobs> Daemon::CurrentJobs() {
  auto listed = jobs_->ActiveSummaries();
  if (!listed) return std::nullopt;
  ActiveJobs& a = active_jobs_;
  if (!active_jobs_known_ || a.generation != jobs_->summaries_generation()) {
    a.held.clear();
    a.any_queued = false;
    const std::vector<model::Job>& all = **listed;
    for (size_t i = 0; i < all.size(); ++i) {
      const model::JobState s = all[i].state;
      if (s == model::JobState::kStarting || s == model::JobState::kRunning) a.held.push_back(i);
      a.any_queued = a.any_queued || s == model::JobState::kQueued;
    }
    a.momentary = sched::AnyMomentaryFilters(all);
    a.generation = jobs_->summaries_generation();
    active_jobs_known_ = true;
  }
  ActiveJobs out = a;
  out.all = std::move(*listed);
  return out;
}

void Daemon::Reconcile() {
  const std::optional<ActiveJobs> jobs = CurrentJobs();  // kept alive through the transitions below
  if (!jobs) return;
  std::vector<const model::Job*> held;
  for (size_t i : jobs->held) held.push_back(&(*jobs->all)[i]);
  const int64_t now = clock_.NowUnixMs();
  std::erase_if(orphans_, [&](const auto& entry) {
    return std::none_of(held.begin(), held.end(), [&](const model::Job* j) {
      return j->id == entry.first && j->state == model::JobState::kRunning;
    });
  });
  for (const model::Job* held_job : held) {
    const model::Job& job = *held_job;
    bool supervisor_alive = IsSameLiveProcess(job.supervisor_pid, job.supervisor_start_ticks);
    if (job.state == model::JobState::kStarting) {
      // A supervisor that never got the go never ran the job: queue it again. One that
      // did is moving it to running right now; leave that to the next look.
      std::optional<model::Lease> lease;
      if (job.lease_id) {
        if (auto got = leases_->Get(*job.lease_id); got && *got) lease = **got;
      }
      bool holder_alive = false;
      if (lease) {
        for (const auto& p : lease->processes) holder_alive = holder_alive || store::IsProcessAlive(p);
      }
      if (!supervisor_alive && !holder_alive && now - job.submitted_unix_ms >= 0) {
        store::JobStore::Update requeue;
        requeue.clear_run = true;
        requeue.reason = "requeued: the daemon stopped before the job started";
        (void)jobs_->Transition(job.id, model::JobState::kStarting, model::JobState::kQueued, requeue);
        if (lease) (void)leases_->Release(lease->id);
      }
    } else if (job.state == model::JobState::kRunning && !supervisor_alive) {
      WatchOrphan(job, now);
    }
  }
}

// A running job without its supervisor. While a process of the job lives, the job keeps
// its GPUs: the daemon adopts it and watches it. Once none lives, it records the end
// (the exit status died with the supervisor) and releases the lease.
void Daemon::WatchOrphan(const model::Job& job, int64_t now) {
  JobProcesses procs = FindJobProcesses(*leases_, job);
  auto [it, fresh] = orphans_.try_emplace(job.id);
  Orphan& orphan = it->second;
  if (!procs.live.empty()) {
    orphan.last_seen_alive_ms = now;
    if (fresh && !std::string_view(job.reason).starts_with(kSupervisorDied)) {
      store::JobStore::Update adopted;
      adopted.reason = std::string(kSupervisorDied) +
                       " at about " + FormatIsoUtc(now / 1000) +
                       "; the daemon watches the job until it ends (its exit status will be unknown)";
      (void)jobs_->Transition(job.id, model::JobState::kRunning, model::JobState::kRunning, adopted);
    }
    if (!orphan.ending_as && job.time_limit_ms && job.started_unix_ms &&
        now - *job.started_unix_ms > *job.time_limit_ms) {
      BeginEnding(job, model::JobState::kTimedOut, "ran past its time limit", now);
    }
    if (orphan.ending_as && now >= orphan.kill_at_ms) SignalJob(procs, SIGKILL);
    return;
  }
  // Nothing of the job lives any more.
  store::JobStore::Update end;
  model::JobState to = model::JobState::kFailed;
  if (orphan.ending_as) {
    to = *orphan.ending_as;
    end.reason = orphan.ending_reason + " (its supervisor had died; exit status unknown)";
  } else if (orphan.last_seen_alive_ms) {
    end.reason = std::string(kSupervisorDied) + "; the job ran until " + FormatIsoUtc(now / 1000) +
                 ", exit status unknown";
  } else {
    end.reason = std::string(kSupervisorDied) + "; the job ended by " + FormatIsoUtc(now / 1000) +
                 ", exit status unknown";
  }
  if (to == model::JobState::kQueued) {
    end.clear_run = true;  // a GPU failed and the job asked for --requeue
  } else {
    end.ended_unix_ms = now;
  }
  auto moved = jobs_->Transition(job.id, model::JobState::kRunning, to, end);
  if (!moved) {  // busy or full: the next pass tries again; changed meanwhile: not ours
    NoteStoreError(moved.error());
    return;
  }
  if (job.started_unix_ms) {
    double gpu_seconds = static_cast<double>(now - *job.started_unix_ms) / 1000.0 *
                         static_cast<double>(std::max<size_t>(1, job.gpu_uuids.size()));
    if (gpu_seconds > 0) (void)jobs_->AddUsage(job.uid, gpu_seconds, now);
  }
  if (job.lease_id) (void)leases_->Release(*job.lease_id);
  orphans_.erase(job.id);
  dirty_ = true;
}

// Ends an adopted job: SIGTERM to its process groups now, SIGKILL once the grace period is
// over (WatchOrphan), and `as` recorded when nothing of it lives.
void Daemon::BeginEnding(const model::Job& job, model::JobState as, const std::string& reason, int64_t now) {
  Orphan& orphan = orphans_[job.id];
  if (orphan.ending_as) return;
  orphan.ending_as = as;
  orphan.ending_reason = reason;
  orphan.kill_at_ms = now + options_.grace_ms;
  JobProcesses procs = FindJobProcesses(*leases_, job);
  SignalJob(procs, SIGTERM);
  store::JobStore::Update ending;
  ending.reason = std::string(kSupervisorDied) + "; the daemon is ending the job (" + reason + ")";
  (void)jobs_->Transition(job.id, model::JobState::kRunning, model::JobState::kRunning, ending);
  dirty_ = true;
}

Status Daemon::EndOrphanedJob(const model::Job& job, const std::string& by_user) {
  const std::string id = std::to_string(job.id);
  if (job.state != model::JobState::kStarting && job.state != model::JobState::kRunning) {
    return MakeError(ErrorCode::kConflict, "job " + id + " is already " + model::JobStateName(job.state));
  }
  if (IsSameLiveProcess(job.supervisor_pid, job.supervisor_start_ticks)) {
    kill(*job.supervisor_pid, SIGTERM);  // the supervisor ends the job and records "cancelled"
    return {};
  }
  const int64_t now = clock_.NowUnixMs();
  if (job.state == model::JobState::kStarting) {
    // A supervisor that died before the go never ran the job; its child, if any, is
    // about to exit at its barrier.
    if (!FindJobProcesses(*leases_, job).live.empty()) {
      return MakeError(ErrorCode::kConflict, "job " + id + " is starting; try again");
    }
    store::JobStore::Update cancelled;
    cancelled.ended_unix_ms = now;
    cancelled.reason = "cancelled by " + by_user;
    auto moved = jobs_->Transition(job.id, model::JobState::kStarting, model::JobState::kCancelled, cancelled);
    if (!moved) return moved.error();
    if (job.lease_id) (void)leases_->Release(*job.lease_id);
    dirty_ = true;
    return {};
  }
  WatchOrphan(job, now);  // adopts it, or records its end if nothing of it lives
  if (orphans_.count(job.id)) BeginEnding(job, model::JobState::kCancelled, "cancelled by " + by_user, now);
  return {};
}

Status Daemon::StartJob(const model::Job& job, const std::vector<std::string>& gpus) {
  store::JobStore::Update update;
  update.gpu_uuids = gpus;
  update.reason = "";
  auto starting = jobs_->Transition(job.id, model::JobState::kQueued, model::JobState::kStarting, update);
  if (!starting) {
    NoteStoreError(starting.error());
    return starting.error();
  }

  sched::JobLaunchSpec spec;
  spec.job = *starting;
  spec.state_db = options_.state_dir + "/state.db";
  visibility::ChildGpuEnvRequest gpu_env;  // GPUMAN_LEASE_ID: the supervisor adds it at Go
  gpu_env.uuids = gpus;
  gpu_env.job_id = job.id;
  gpu_env.array_id = job.array_id;
  gpu_env.array_task = job.array_task;
  gpu_env.simulated_scenario = options_.scenario_path;
  if (job.request.gpu_memory_bytes) {
    gpu_env.slice_bytes = job.request.gpu_memory_bytes;
    if (latest_ && latest_->snapshot) gpu_env.slice_of_total_bytes = model::SmallestMemoryTotal(*latest_->snapshot, gpus);
  }
  if (job.request.mps && gpus.size() == 1) {
    // Where its GPU's control will be (started below, once the lease is recorded).
    gpu_env.mps = visibility::MpsDirectories(options_.share.mps_dir, gpus[0]);
    gpu_env.mps->active_thread_percent = job.request.gpu_share_percent;
  }
  for (const auto& var : visibility::ChildGpuEnv(gpu_env)) spec.gpu_env.push_back(visibility::EnvEntry(var));
  spec.grace_ms = options_.grace_ms;
  auto requeue = [&](const std::string& why) {
    store::JobStore::Update back;
    back.clear_run = true;
    back.reason = why;
    (void)jobs_->Transition(job.id, model::JobState::kStarting, model::JobState::kQueued, back);
  };
  auto pending = launcher_.Launch(spec);
  if (!pending) {
    requeue("could not start a supervisor: " + pending.error().message);
    return pending.error();
  }
  auto holder = store::CurrentLeaseProcess((*pending)->pid());
  if (!holder) {
    requeue("supervisor vanished");
    return MakeError(ErrorCode::kInternal, "supervisor vanished");
  }
  model::Lease draft;
  draft.uid = job.uid;
  draft.user = job.user;
  draft.kind = "job";
  draft.command = CutText("job " + model::JobName(job) + (job.name.empty() ? "" : " (" + job.name + ")"),
                          kMaxLeaseCommandBytes);
  draft.created_unix_ms = clock_.NowUnixMs();
  draft.processes = {*holder};
  draft.gpu_memory_bytes = job.request.gpu_memory_bytes;
  draft.mps = job.request.mps;
  draft.gpu_share_percent = job.request.gpu_share_percent;
  auto lease = leases_->Acquire(
      draft, [&](const std::vector<model::Lease>&) -> Result<std::vector<std::string>> { return gpus; },
      store::ProcLivenessCheck(),
      latest_ && latest_->snapshot ? lease::IndexIn(*latest_->snapshot) : store::GpuIndexOf(),
      lease::MasterPortChooser(Rules().launch_ports, MachineTableLeases()));
  if (!lease) {
    NoteStoreError(lease.error());
    requeue("GPUs were taken meanwhile: " + lease.error().message);
    return lease.error();  // the pending supervisor exits when its barrier closes
  }
  if (lease->mps) {
    // Its GPU's MPS control runs before the job does; one that cannot keeps it queued.
    if (auto where = MpsFor(*lease); !where) {
      (void)leases_->Release(lease->id);
      requeue("could not start MPS: " + where.error().message);
      return where.error();
    }
  }
  // Confined: the job's processes go into the lease's cgroup before it runs
  // (docs/enforce.md). A cgroup that cannot be made keeps the job queued, with why.
  std::string cgroup;
  if (confinement_.on) {
    auto made = ConfineLease(lease->id, gpus, job.request.gpu_memory_bytes);
    if (!made) {
      (void)leases_->Release(lease->id);
      requeue("could not confine it to its GPUs: " + made.error().message);
      return made.error();
    }
    cgroup = *made;
  }
  store::JobStore::Update with_lease;
  with_lease.lease_id = lease->id;
  with_lease.supervisor_pid = holder->pid;
  with_lease.supervisor_start_ticks = holder->start_time_ticks;
  (void)jobs_->Transition(job.id, model::JobState::kStarting, model::JobState::kStarting, with_lease);
  Status go = (*pending)->Go(lease->id, cgroup);
  if (go && collector_) collector_->OnJobStarted(*starting, clock_.NowUnixMs());
  return go;
}

const Daemon::Sample& Daemon::TakeSample(int64_t now, bool fresh) {
  // Every field (the collector's list is everything); a monitor's cache of the slow
  // groups (health, settings: a minute), unless something happened or a job is to start.
  devices::SnapshotOptions options = fresh ? devices::FieldOptions(devices::kAllFields)
                                           : devices::MonitorOptions(devices::kCollectorFields);
  options.topology = !topology_.has_value();
  auto snap = devices_.Snapshot(options);
  Sample sample;
  sample.at_unix_ms = now;
  if (snap) {
    if (snap->topology) {
      if (!topology_) topology_ = std::move(snap->topology);
      snap->topology.reset();
    }
    if (snap->taken_at_unix_ms == 0) snap->taken_at_unix_ms = now;
    if (options_.monitor.inspector) devices::EnrichProcesses(*snap, *options_.monitor.inspector);
    sample.snapshot = std::move(*snap);
  } else {
    sample.error = snap.error().message;
  }
  latest_ = std::move(sample);
  encoded_snapshots_.clear();  // of the sample just replaced
  next_sample_ms_ = now + options_.monitor.sample_interval_ms;
  return *latest_;
}

int64_t Daemon::MsUntilSample(int64_t now) const {
  if (collector_) return collector_->MsUntilDue(now);
  return std::max<int64_t>(0, next_sample_ms_ - now);
}

void Daemon::Tick(int64_t now) {
  if (MsUntilSample(now) == 0) {
    const bool xids = collector_ && collector_->GatherXids(now);  // an Xid: health read now
    const Sample& sample = TakeSample(now, xids);
    if (collector_ && collector_->Tick(now, sample.snapshot ? &*sample.snapshot : nullptr, sample.error)) dirty_ = true;
  }
  if ((dirty_ && now >= next_pass_ms_) || now - last_pass_ms_ >= 1000 || now < last_pass_ms_) {
    last_pass_ms_ = now;
    SchedulePass();
    // A stream of changes (a sweep's submits) must not keep the loop in passes: the next
    // one a change asks for waits nine times as long as this one took, so that passes take
    // at most a tenth of the daemon's time (and requests the rest). A pass over a short
    // queue takes well under a millisecond: then nothing waits.
    const int64_t end = clock_.NowUnixMs();
    next_pass_ms_ = end + std::clamp<int64_t>(9 * (end - now), 0, 250);
  }
  SweepLeaseCgroups(now);
  if (notifier_) notifier_->Tick(now);
  if (heap_used_since_trim_ && (now - last_request_ms_ >= 10'000 || now < last_request_ms_)) {
    malloc_trim(0);  // ten seconds without a request: give back what the last burst freed
    heap_used_since_trim_ = false;
  }
  if (mps_ && server_ && (now >= next_mps_check_ms_ || now < next_mps_check_ms_ - 1000)) {
    // A control whose last MPS lease ended is told to quit (within about a second).
    next_mps_check_ms_ = now + 1000;
    if (auto live = AllLiveLeases()) mps_->Reconcile(*live, /*verify=*/false, now);
  }
}

Result<std::string> Daemon::ConfineLease(int64_t lease_id, const std::vector<std::string>& gpus,
                                         std::optional<int64_t> slice_bytes) {
  // The GPUs' minor numbers (/dev/nvidiaN) from the latest sample, or a fresh read.
  std::optional<model::MachineSnapshot> fresh;
  const model::MachineSnapshot* snap = latest_ && latest_->snapshot ? &*latest_->snapshot : nullptr;
  if (!snap) {
    auto got = devices_.Snapshot();
    if (!got) return got.error();
    fresh = std::move(*got);
    snap = &*fresh;
  }
  confine::DeviceRule rule;
  for (const auto& uuid : gpus) {
    // A MIG device (docs/share.md, "MIG") opens through its parent GPU's node; the
    // nvidia-caps nodes that tell MIG instances apart stay open, as for every lease
    // (confine/device_rule.h), so the cgroup holds a MIG lease to its parent GPU.
    const model::DeviceSnapshot* g = GpuOfUnit(*snap, uuid);
    if (!g || !g->minor_number) {
      return MakeError(ErrorCode::kUnavailable, "the device node of GPU " + uuid + " is not known (NVML gave no minor number)");
    }
    const auto minor = static_cast<uint32_t>(*g->minor_number);
    if (std::find(rule.gpu_minors.begin(), rule.gpu_minors.end(), minor) == rule.gpu_minors.end()) {
      rule.gpu_minors.push_back(minor);
    }
  }
  auto dir = confine::CreateLeaseCgroup(confinement_, lease_id, rule);
  if (dir && slice_bytes && *slice_bytes > 0) {
    // A memory slice: the driver holds the cgroup to it where it can (newer drivers), so a
    // process cannot allocate past it between two samples; elsewhere the collector's check
    // alone holds it (docs/share.md). Not a reason to refuse the lease: said once.
    std::string said = "memory slices are held by the driver (nvmlDeviceSetMemoryLimits_v1) as well";
    for (const auto& uuid : gpus) {
      if (Status limited = devices_.LimitCgroupMemory(uuid, *dir, *slice_bytes); !limited) {
        said = "memory slices are held by the collector's check only: " + limited.error().message;
        break;
      }
    }
    if (said != memory_limit_said_) {
      memory_limit_said_ = said;
      std::fprintf(stderr, "gpuman: %s\n", said.c_str());
    }
  }
  return dir;
}

std::vector<pid_t> Daemon::LeaseCgroupProcesses(int64_t lease_id) const {
  if (!confinement_.on) return {};
  return confine::CgroupProcesses(confine::LeaseCgroup(confinement_, lease_id));
}

void Daemon::SweepLeaseCgroups(int64_t now) {
  if (!confinement_.on || now < next_cgroup_sweep_ms_) return;
  next_cgroup_sweep_ms_ = now + 5000;
  const auto ids = confine::LeaseCgroupIds(confinement_);
  if (ids.empty()) return;
  auto live = leases_->List(store::ProcLivenessCheck());
  if (!live) return;
  for (int64_t id : ids) {
    const bool leased = std::any_of(live->begin(), live->end(), [&](const model::Lease& l) { return l.id == id; });
    if (!leased) (void)confine::RemoveCgroup(confine::LeaseCgroup(confinement_, id));
  }
}

void Daemon::WatchRunningJobs() {
  const std::optional<ActiveJobs> jobs = CurrentJobs();  // as in Reconcile
  if (!jobs) return;
  std::vector<const model::Job*> running;
  for (size_t i : jobs->held) {
    if ((*jobs->all)[i].state == model::JobState::kRunning) running.push_back(&(*jobs->all)[i]);
  }
  if (running.empty()) {
    told_gpu_lost_.clear();
    return;
  }
  if (!latest_ || !latest_->snapshot) return;
  const model::MachineSnapshot* snap = &*latest_->snapshot;
  std::set<std::string> failed;
  for (const auto& g : snap->gpus) {
    if (g.uuid) uuid_by_index_[g.index] = *g.uuid;
    auto known = uuid_by_index_.find(g.index);
    if (!g.is_healthy && known != uuid_by_index_.end()) failed.insert(known->second);
  }
  const int64_t now = clock_.NowUnixMs();
  std::erase_if(told_gpu_lost_, [&](int64_t id) {
    return std::none_of(running.begin(), running.end(), [&](const model::Job* j) { return j->id == id; });
  });
  for (const model::Job* running_job : running) {
    const model::Job& job = *running_job;
    if (told_gpu_lost_.count(job.id)) continue;
    bool hit = std::any_of(job.gpu_uuids.begin(), job.gpu_uuids.end(), [&](const std::string& u) { return failed.count(u) > 0; });
    if (!hit) continue;
    if (IsSameLiveProcess(job.supervisor_pid, job.supervisor_start_ticks)) {
      kill(*job.supervisor_pid, SIGUSR1);  // it ends the job and records failed (or requeues it)
      told_gpu_lost_.insert(job.id);
    } else if (orphans_.count(job.id)) {  // adopted: the daemon ends it instead
      if (job.requeue) {
        BeginEnding(job, model::JobState::kQueued, "requeued: one of its GPUs failed while it ran", now);
      } else {
        BeginEnding(job, model::JobState::kFailed, model::kGpuLostReason, now);
      }
      told_gpu_lost_.insert(job.id);
    }
  }
}

void Daemon::SchedulePass() {
  dirty_ = false;
  Reconcile();
  if (!latest_) TakeSample(clock_.NowUnixMs(), false);  // a pass before the first tick (tests)
  WatchRunningJobs();
  std::optional<ActiveJobs> jobs = CurrentJobs();
  if (!jobs) return;
  const std::shared_ptr<const std::vector<model::Job>> listed = std::move(jobs->all);
  const bool momentary = jobs->momentary;
  // The scheduler treats a dependency it is not shown as succeeded: add the finished jobs
  // that active ones run after.
  std::vector<model::Job> deps;
  {
    std::set<int64_t> have;
    for (const auto& j : *listed) {
      for (int64_t dep : j.after) {
        if (!have.insert(dep).second) continue;
        auto at = std::lower_bound(listed->begin(), listed->end(), dep,
                                   [](const model::Job& x, int64_t id) { return x.id < id; });
        bool is_array = false;
        if (at != listed->end() && at->id == dep) {  // active: already shown
          is_array = model::IsArrayHead(*at);
        } else if (auto got = jobs_->Get(dep); got && *got) {
          is_array = model::IsArrayHead(**got);
          deps.push_back(std::move(**got));
        }
        // `after` an array is after all of its tasks: its finished ones that failed count.
        if (!is_array) continue;
        if (auto tasks = jobs_->ArrayTasks(dep)) {
          for (auto& task : *tasks) {
            if (task.id != dep && model::IsFinal(task.state) && task.state != model::JobState::kSucceeded) {
              deps.push_back(std::move(task));
            }
          }
        }
      }
    }
  }
  const std::vector<model::Job>* active = listed.get();
  std::vector<model::Job> with_deps;
  if (!deps.empty()) {
    with_deps = *listed;
    with_deps.insert(with_deps.end(), deps.begin(), deps.end());
    active = &with_deps;
  }
  const int64_t now = clock_.NowUnixMs();
  // Only a finished job fails a dependency, and only `deps` holds finished jobs.
  for (int64_t id : deps.empty() ? std::vector<int64_t>() : sched::JobsWithFailedDependencies(*active)) {
    // Like Slurm's DependencyNeverSatisfied: it can never run, so it is cancelled.
    store::JobStore::Update never;
    never.ended_unix_ms = now;
    never.reason = "a job it runs after did not succeed";
    (void)jobs_->Transition(id, model::JobState::kQueued, model::JobState::kCancelled, never);
  }
  if (!jobs->any_queued) {
    waiting_.clear();
    last_pass_inputs_.reset();
    return;
  }
  if (auto why = Superseded()) {
    waiting_.clear();
    last_pass_inputs_.reset();
    int position = 0;
    for (const auto& j : *active) {
      if (j.state == model::JobState::kQueued) waiting_[j.id] = sched::WaitReason{j.id, *why, ++position, std::nullopt};
    }
    return;
  }
  if (unwritable_) return;  // a job started now could not record its outcome

  if (!latest_->snapshot) return;  // the devices cannot be read: place nothing

  // Skip the pass when nothing it reads has changed since the last one (the state db,
  // the live leases, what the sample says about the GPUs), except once every
  // kFullPassEveryMs, which brings the reasons' estimates ("in ~5 min") up to date.
  // With a sweep queued, a pass is most of an idle daemon's work (docs/scheduling.md).
  auto live = AllLiveLeases();
  PassInputs inputs;
  if (auto version = jobs_->CurrentVersion()) inputs.state = *version;
  if (live) {
    for (const auto& l : *live) inputs.live_leases.push_back(l.id);
  }
  inputs.snapshot = sched::SnapshotKey(*latest_->snapshot, momentary);
  if (last_pass_inputs_ && *last_pass_inputs_ == inputs && now - last_full_pass_ms_ < kFullPassEveryMs &&
      now >= last_full_pass_ms_) {
    return;
  }
  last_pass_inputs_ = inputs;
  last_full_pass_ms_ = now;
  ++full_passes_;
  waiting_.clear();

  sched::SchedulerInput input;
  input.now_unix_ms = now;
  input.snapshot = *latest_->snapshot;
  input.snapshot.topology = topology_;
  if (live) input.leases = std::move(*live);
  input.jobs_view = active;  // `listed` (or `with_deps`) outlives the pass
  if (auto drained = jobs_->Drained()) {
    for (const auto& [uuid, reason] : *drained) input.drained.insert(uuid);
  }
  input.not_sliceable = policy::NotSliceable(input.snapshot, options_.share);
  input.config = options_.scheduler;
  if (auto usage = jobs_->Usage(now, options_.scheduler.usage_half_life_s)) {
    for (const auto& [uid, seconds] : *usage) input.usage.push_back({uid, seconds});
  }
  sched::SchedulerOutput out = sched::Schedule(input);
  if (!out.start.empty()) {
    // The pre-start check: the sample may be up to a period old, and a GPU lost since
    // must not get a job. Read the devices again and place on what they say now (the same
    // decision when nothing changed; none on a GPU that failed meanwhile).
    const Sample& fresh = TakeSample(now, /*fresh=*/true);
    if (!fresh.snapshot) {
      last_pass_inputs_.reset();
      return;
    }
    // This pass decided on the fresh read: what the next one compares with.
    last_pass_inputs_->snapshot = sched::SnapshotKey(*fresh.snapshot, momentary);
    input.snapshot = *fresh.snapshot;
    input.snapshot.topology = topology_;
    out = sched::Schedule(input);
  }
  for (const auto& w : out.waiting) waiting_[w.job_id] = w;
  for (const auto& start : out.start) {
    auto it = std::find_if(active->begin(), active->end(), [&](const model::Job& j) { return j.id == start.job_id; });
    if (it != active->end()) (void)StartJob(*it, start.gpu_uuids);
  }
}

model::Job Daemon::WithWaitInfo(model::Job job) const {
  auto it = waiting_.find(job.id);
  if (it != waiting_.end() && (job.state == model::JobState::kQueued || job.state == model::JobState::kHeld)) {
    job.reason = it->second.reason;
  }
  return job;
}

DaemonIdentity Daemon::identity() const { return DaemonIdentity{options_.system_mode, static_cast<uint32_t>(getuid())}; }

int Daemon::Run(const volatile std::sig_atomic_t* stop) {
  GPUMAN_CHECK(server_ != nullptr);  // Start() succeeded
  while (!*stop) {
    std::vector<pollfd> fds;
    if (inotify_fd_) fds.push_back({inotify_fd_.get(), POLLIN, 0});
    const int wake_fd = collector_ ? collector_->wake_fd() : -1;
    if (wake_fd >= 0) fds.push_back({wake_fd, POLLIN, 0});
    server_->AddPollFds(fds);
    // Requests read but not yet answered: look at the sockets without sleeping.
    int timeout = server_->has_pending_work() ? 0 : 500;
    if (dirty_) timeout = static_cast<int>(std::clamp<int64_t>(next_pass_ms_ - clock_.NowUnixMs(), 0, timeout));
    timeout = static_cast<int>(std::min<int64_t>(timeout, MsUntilSample(clock_.NowUnixMs())));
    int ready = poll(fds.data(), fds.size(), timeout);
    if (ready < 0 && errno != EINTR) break;
    const int64_t now = clock_.NowUnixMs();
    for (const auto& p : fds) {
      if (p.revents == 0) continue;
      if (p.fd == wake_fd) {
        collector_->DrainWake();  // Xid events: the collector takes them below
      } else if (p.fd == inotify_fd_.get()) {
        char drain[4096];
        while (read(inotify_fd_.get(), drain, sizeof drain) > 0) {
        }
        dirty_ = true;
      } else {
        (void)server_->OnReady(p);  // the listening socket or a client: accepts, reads, sends
      }
    }
    // A few requests per client, round-robin: one client's flood delays another's request
    // (and the scheduling pass below) by one turn at most.
    server_->ServeTurn();
    // Slow or silent clients must not hold a slot forever.
    server_->CloseStale(now);
    CheckWritable(now);
    Tick(now);
  }
  return 0;
}

policy::Caller Daemon::CallerOf(const Peer& peer) {
  return policy::Caller{peer.uid, peer.user, peer.is_admin};
}

policy::MachineRules Daemon::Rules() const {
  policy::MachineRules rules;
  rules.default_max_gpus_per_user = options_.scheduler.default_max_gpus_per_user;
  rules.max_gpus_per_user = options_.scheduler.max_gpus_per_user;
  rules.launch_ports = options_.launch_ports;
  rules.share = options_.share;
  if (auto drained = jobs_->Drained()) rules.drained = *drained;
  return rules;
}

std::vector<model::Lease> Daemon::MachineTableLeases() {
  std::vector<model::Lease> out;
  if (!machine_leases_) return out;
  // Read only: their holders (no daemon then) gave them back themselves, or they go stale.
  if (auto live = machine_leases_->ListLive(store::ProcLivenessCheck())) {
    for (auto& l : *live) {
      l.command += " (taken without the daemon)";
      l.id = -l.id;  // not a lease of this daemon's table: never released or joined here
      out.push_back(std::move(l));
    }
  }
  return out;
}

Result<std::vector<model::Lease>> Daemon::AllLiveLeases() {
  auto live = leases_->List(store::ProcLivenessCheck());
  if (!live) return live.error();
  auto foreign = MachineTableLeases();
  live->insert(live->end(), std::make_move_iterator(foreign.begin()), std::make_move_iterator(foreign.end()));
  return live;
}

std::optional<std::string> Daemon::Superseded() {
  if (!options_.machine_daemon) return std::nullopt;
  const int64_t now = clock_.NowUnixMs();
  if (superseded_at_ms_ < 0 || now - superseded_at_ms_ >= 2000 || now < superseded_at_ms_) {
    superseded_at_ms_ = now;
    superseded_ = options_.machine_daemon();
    if (superseded_) *superseded_ += ": this daemon of yours grants nothing beside it (stop it and use that one)";
  }
  return superseded_;
}

Result<lease::Grant> Daemon::AcquireStepFor(const Peer& peer, const lease::AcquireAsk& ask) {
  if (auto why = Superseded()) return MakeError(ErrorCode::kUnavailable, *why);
  const lease::Authority authority{*leases_, MachineTableLeases(), Rules(), store::ProcLivenessCheck(), clock_};
  // Chosen on the latest sample, the one every client was just shown, when it is at most
  // one period old and has the topology (docs/design.md, "One sample of the machine"): the
  // leases come from the table under its write lock either way; only processes outside
  // gpuman that began since the sample are not seen (as they would not be a moment after a
  // fresh read). Its processes that have ended since do not count. Otherwise read now.
  const int64_t now = clock_.NowUnixMs();
  if (latest_ && latest_->snapshot && topology_ && now - latest_->at_unix_ms <= options_.monitor.sample_interval_ms &&
      now >= latest_->at_unix_ms) {
    model::MachineSnapshot snap = lease::WithoutEndedProcesses(*latest_->snapshot, [](uint32_t pid) {
      return kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
    });
    snap.topology = topology_;
    return lease::AcquireStep(snap, ask, CallerOf(peer), authority);
  }
  auto snap = lease::SnapshotWithTopology(devices_, topology_);
  if (!snap) return snap.error();
  return lease::AcquireStep(*snap, ask, CallerOf(peer), authority);
}

Result<protocol::AcquireResult> Daemon::AcquireFor(const Peer& peer, const protocol::AcquireArgs& a) {
  model::LeaseProcess holder{a.pid, a.start_time_ticks};
  if (auto bad = CheckOwnProcess(peer, holder, identity())) return MakeError(protocol::ToErrorCode(bad->code), bad->message);
  for (const auto& p : a.processes) {
    if (auto bad = CheckOwnProcess(peer, p, identity())) return MakeError(protocol::ToErrorCode(bad->code), bad->message);
  }
  if (WantsMps(a.request) && !a.within_lease_id) {
    if (auto program = mps_->Program(); !program) return program.error();
  }
  lease::AcquireAsk ask;
  ask.request = a.request;
  ask.kind = a.kind;
  ask.command = a.command;
  ask.processes = {holder};  // and run's command, recorded in the same step
  ask.processes.insert(ask.processes.end(), a.processes.begin(), a.processes.end());
  ask.within = a.within_lease_id;
  auto got = AcquireStepFor(peer, ask);
  if (!got) return got.error();
  protocol::AcquireResult result;
  result.lease_id = got->lease_id;
  result.gpu_uuids = got->selection.uuids;
  result.nested = got->nested;
  result.processes_added = true;
  result.master_port = got->master_port;
  if (WantsMps(a.request) || got->nested) {
    // An MPS lease: its control runs before the command may (the client gets its
    // directories); a nested `run` inside one gets them too.
    auto lease = leases_->Get(got->lease_id);
    if (lease && *lease && (*lease)->mps) {
      auto where = MpsFor(**lease);
      if (!where) {
        if (!got->nested) (void)leases_->Release(got->lease_id);
        return where.error();
      }
      result.mps_pipe_directory = where->pipe_directory;
      result.mps_log_directory = where->log_directory;
    }
  }
  if (!a.processes.empty() && confinement_.on) {
    // Into the lease's cgroup before the command may run, as add_processes does.
    auto lease = leases_->Get(got->lease_id);
    Result<std::optional<std::string>> confined = std::optional<std::string>{};
    if (!lease) confined = lease.error();
    else if (!*lease) confined = MakeError(ErrorCode::kNotFound, "lease " + std::to_string(got->lease_id) + " ended at once");
    else confined = ConfineRunProcesses(**lease, a.processes, peer.pid);
    if (!confined) {
      if (!got->nested) (void)leases_->Release(got->lease_id);
      return confined.error();
    }
    result.cgroup = std::move(*confined);
  }
  if (a.describe) DescribeAcquired(result, a.request);
  return result;
}

void Daemon::DescribeAcquired(protocol::AcquireResult& result, const model::GpuRequest& request) {
  // What `select --lease --format json` prints from the same builder (cli/lease_commands.cc).
  std::optional<model::MachineSnapshot> fresh;
  const model::MachineSnapshot* snap = latest_ && latest_->snapshot ? &*latest_->snapshot : nullptr;
  if (!snap) {
    if (auto got = devices_.Snapshot(); got) snap = &fresh.emplace(std::move(*got));
  }
  for (const auto& uuid : result.gpu_uuids) {
    protocol::AcquiredGpu gpu;
    gpu.uuid = uuid;
    if (snap) {
      if (const model::DeviceSnapshot* g = GpuOfUnit(*snap, uuid)) {
        gpu.index = static_cast<int>(g->index);
        gpu.name = g->name;
      }
    }
    result.gpus.push_back(std::move(gpu));
  }
  visibility::ChildGpuEnvRequest env;
  env.uuids = result.gpu_uuids;
  env.lease_id = result.lease_id;
  env.master_port = result.master_port;
  if (request.gpu_memory_bytes) {
    env.slice_bytes = request.gpu_memory_bytes;
    env.slice_of_total_bytes = snap ? model::SmallestMemoryTotal(*snap, result.gpu_uuids) : 0;
  }
  if (result.mps_pipe_directory && result.mps_log_directory) {
    env.mps = visibility::MpsClient{*result.mps_pipe_directory, *result.mps_log_directory, request.gpu_share_percent};
  }
  for (auto& var : visibility::ChildGpuEnv(env)) result.env.emplace_back(std::move(var.name), std::move(var.value));
}

std::optional<policy::LeaseJob> Daemon::JobOfLease(const model::Lease& lease) {
  if (auto active = jobs_->ActiveSummaries()) {
    for (const auto& j : **active) {
      if (j.lease_id == lease.id) return policy::LeaseJob{model::RefOf(j), j.name};
    }
  }
  return std::nullopt;
}

std::vector<model::LeaseProcess> Daemon::LiveProcessesOf(const model::Lease& lease, const Peer& peer) {
  std::vector<model::LeaseProcess> live;
  for (const auto& p : lease.processes) {
    // The holder giving its own lease back (`run` once its command ended) is not in the way.
    if (static_cast<int32_t>(p.pid) != peer.pid && store::IsProcessAlive(p)) live.push_back(p);
  }
  // Nor is anything else left in its cgroup: a confined lease ends when that is empty.
  for (pid_t pid : LeaseCgroupProcesses(lease.id)) {
    const bool known = std::any_of(live.begin(), live.end(), [&](const auto& p) { return p.pid == pid; });
    if (pid != peer.pid && !known) live.push_back(model::LeaseProcess{static_cast<int32_t>(pid), 0});
  }
  return live;
}

Status Daemon::CheckReleaseFor(const Peer& peer, const model::Lease& lease) {
  return policy::CheckRelease(lease, CallerOf(peer), JobOfLease(lease), LiveProcessesOf(lease, peer));
}

Result<int64_t> Daemon::ForceEndFor(const Peer& peer, const model::Lease& lease) {
  if (auto ok = policy::CheckForceRelease(lease, CallerOf(peer), JobOfLease(lease)); !ok) return ok.error();
  std::vector<pid_t> pids;
  for (const auto& p : LiveProcessesOf(lease, peer)) pids.push_back(p.pid);
  const int64_t before = static_cast<int64_t>(force_ending_.count(lease.id));
  const int64_t left = lease::ForceEndStep(lease.id, pids, clock_.NowUnixMs(), force_ending_);
  if (left > 0 && before == 0) {
    std::fprintf(stderr, "gpuman: release --force of lease %lld (%s) by uid %u: ending %lld processes\n",
                 static_cast<long long>(lease.id), lease.user.c_str(), peer.uid, static_cast<long long>(left));
  }
  return left;
}

Status Daemon::CheckSubmitFor(const Peer& peer, const protocol::SubmitArgs& args) {
  int machine_gpus = std::numeric_limits<int>::max();  // unknown when NVML does not answer now
  std::optional<model::MachineSnapshot> fresh;
  const model::MachineSnapshot* snap = nullptr;
  if (latest_ && latest_->snapshot) {
    snap = &*latest_->snapshot;
  } else if (auto got = devices_.Snapshot()) {
    fresh = std::move(*got);
    snap = &*fresh;
  }
  if (snap) machine_gpus = policy::MachineUnits(*snap, args.request);  // MIG devices for a MIG request
  if (auto ok = policy::CheckSatisfiable(args.request.count, args.request.gpus, CallerOf(peer), Rules(), machine_gpus); !ok) {
    return ok;
  }
  // The filters no wait changes (model, --exclude, --gpus, compute capability, total memory
  // below --min-free-memory, the enclosing allocation): judged as `run` judges them, with no
  // lease or process counted, so only "can never" refuses. A job they refuse would queue
  // forever with a reason that is not the real one.
  if (args.request.gpu_memory_bytes) {
    if (auto ok = policy::CheckSlice(*args.request.gpu_memory_bytes, Rules().share); !ok) return ok;
  }
  if (WantsMps(args.request)) {
    if (args.request.count != 1) {
      return MakeError(ErrorCode::kInvalidArgument, "--mps takes one GPU (-n 1): an MPS client connects to one control daemon, and gpuman runs one per GPU");
    }
    if (auto program = mps_->Program(); !program) return program.error();
  }
  if (snap && args.request.count > 0) {
    model::GpuRequest request = args.request;
    if (request.gpu_memory_bytes) request.not_sliceable = policy::NotSliceable(*snap, Rules().share);
    auto never = policy::Select(*snap, {}, request);
    // A MIG request for a profile no MIG device has (or on a machine without MIG devices)
    // is refused with run's own line (kInvalidArgument): it could never start.
    if (!never && (never.error().code == ErrorCode::kNotFound ||
                   (never.error().code == ErrorCode::kInvalidArgument && model::IsMigRequest(request)))) {
      return never.error();
    }
  }
  return {};
}

}  // namespace gpuman::daemon
