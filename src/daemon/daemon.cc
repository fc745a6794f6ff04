#include "daemon/daemon.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>

#include "base/strings.h"
#include "devices/gpu_ids.h"
#include "policy/selection.h"
#include "protocol/framing.h"
#include "sched/job_state.h"
#include "sched/process_group.h"
#include "sched/supervisor.h"
#include "store/machine_lease_table.h"
#include "store/state_db.h"
#include "store/proc_liveness.h"

namespace gpuman::daemon {
namespace {

constexpr size_t kMaxClients = 256;
constexpr int64_t kIdleTimeoutMs = 120000;    // a connection that says nothing this long goes
constexpr int64_t kPartialFrameMs = 10000;    // a frame must arrive within this once begun
constexpr size_t kMaxOutputBuffer = 8 << 20;  // a client that does not read its replies goes

using protocol::MakeErrorReply;
using protocol::MakeReply;
using protocol::Reply;
using protocol::WireCode;
using protocol::WireError;

WireError Wire(WireCode code, std::string message) { return WireError{code, std::move(message)}; }

std::string UserName(uint32_t uid) {
  passwd* pw = getpwuid(uid);
  return pw ? pw->pw_name : std::to_string(uid);
}

// A process a client names must be its own (per the kernel), alive with that start time.
std::optional<WireError> CheckOwnProcess(const Peer& peer, const model::LeaseProcess& p) {
  struct stat st{};
  if (p.pid <= 0 || stat(("/proc/" + std::to_string(p.pid)).c_str(), &st) != 0 || !store::IsProcessAlive(p)) {
    return Wire(WireCode::kInvalidArgument, "process " + std::to_string(p.pid) + " does not exist");
  }
  if (st.st_uid != peer.uid && peer.uid != 0) {
    return Wire(WireCode::kPermissionDenied, "process " + std::to_string(p.pid) + " is not yours");
  }
  return std::nullopt;
}

bool IsSameLiveProcess(std::optional<int32_t> pid, std::optional<int64_t> ticks) {
  if (!pid || *pid <= 0) return false;
  if (!ticks) return kill(*pid, 0) == 0;
  return store::IsProcessAlive(model::LeaseProcess{*pid, *ticks});
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

struct Daemon::Connection {
  int fd = -1;
  Peer peer;
  protocol::FrameDecoder decoder;
  std::string out;
  bool said_hello = false;
  bool closing = false;  // close once `out` is flushed
  int64_t last_activity_ms = 0;
  int64_t frame_started_ms = 0;
};

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
  return (home != env.end() ? home->second : std::string("/tmp")) + "/.local/state/gpuman/daemon";
}

Daemon::Daemon(DaemonOptions options, devices::DeviceSource& devices, const Clock& clock)
    : options_(std::move(options)), devices_(devices), clock_(clock) {}

Daemon::~Daemon() {
  for (auto& [fd, c] : clients_) close(fd);
  if (listen_fd_ >= 0) {
    close(listen_fd_);
    unlink(options_.socket_path.c_str());
  }
  if (inotify_fd_ >= 0) close(inotify_fd_);
}

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

Status Daemon::Start() {
  std::error_code ec;
  std::filesystem::create_directories(options_.state_dir, ec);
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
    if (table) machine_leases_ = std::move(table->store);
    else std::fprintf(stderr, "gpuman: warning: machine lease table: %s\n", table.error().message.c_str());
  }

  // The socket: never replace one that a live daemon still answers on.
  const std::string& path = options_.socket_path;
  if (path.size() >= sizeof(sockaddr_un::sun_path)) {
    return MakeError(ErrorCode::kInvalidArgument, "socket path " + path + " is too long");
  }
  auto parent = std::filesystem::path(path).parent_path();
  std::filesystem::create_directories(parent, ec);
  chmod(parent.c_str(), options_.system_mode ? 0755 : 0700);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (probe >= 0 && connect(probe, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    close(probe);
    return MakeError(ErrorCode::kConflict, "another gpuman daemon is already serving " + path);
  }
  if (probe >= 0) close(probe);
  unlink(path.c_str());
  listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (listen_fd_ < 0) return MakeError(ErrorCode::kIo, std::string("socket: ") + std::strerror(errno));
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(listen_fd_, 64) != 0) {
    int err = errno;
    return MakeError(err == EACCES ? ErrorCode::kPermissionDenied : ErrorCode::kIo,
                     "listen on " + path + ": " + std::strerror(err));
  }
  // Anyone may connect in system mode; every request is authorised by SO_PEERCRED.
  chmod(path.c_str(), options_.system_mode ? 0666 : 0600);

  // Supervisors write job outcomes into the db: its directory changing wakes us.
  inotify_fd_ = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  if (inotify_fd_ >= 0) {
    inotify_add_watch(inotify_fd_, options_.state_dir.c_str(), IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO);
  }
  Reconcile();
  collector_ = std::make_unique<Collector>(options_.monitor, devices_, *jobs_, *leases_, clock_);
  if (auto started = collector_->Start(); !started) return started.error();
  return {};
}

// Jobs an earlier daemon (or a crashed supervisor) left behind; runs at start and every pass.
// A job in starting whose supervisor and job process are gone never ran: it is queued
// again. A running job whose supervisor died is adopted (WatchOrphan): its GPUs stay taken
// while any process of the job lives.
void Daemon::Reconcile() {
  auto active = jobs_->Active();
  if (!active) return;
  const int64_t now = clock_.NowUnixMs();
  std::erase_if(orphans_, [&](const auto& entry) {
    return std::none_of(active->begin(), active->end(), [&](const model::Job& j) {
      return j.id == entry.first && j.state == model::JobState::kRunning;
    });
  });
  for (const auto& job : *active) {
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
  if (!moved) return;  // busy: the next pass tries again; changed meanwhile: not ours
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
  if (!starting) return starting.error();

  sched::SupervisorSpec spec;
  spec.job = *starting;
  spec.state_db = options_.state_dir + "/state.db";
  std::string list;
  for (const auto& g : gpus) list += (list.empty() ? "" : ",") + g;
  spec.extra_env = {"CUDA_VISIBLE_DEVICES=" + list, "NVIDIA_VISIBLE_DEVICES=" + list, "CUDA_DEVICE_ORDER=PCI_BUS_ID",
                    "GPUMAN_JOB_ID=" + std::to_string(job.id)};
  spec.grace_ms = options_.grace_ms;
  auto requeue = [&](const std::string& why) {
    store::JobStore::Update back;
    back.clear_run = true;
    back.reason = why;
    (void)jobs_->Transition(job.id, model::JobState::kStarting, model::JobState::kQueued, back);
  };
  auto pending = sched::LaunchSupervisor(spec, options_.gpuman_exe);
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
  draft.command = "job " + std::to_string(job.id) + (job.name.empty() ? "" : " (" + job.name + ")");
  draft.created_unix_ms = clock_.NowUnixMs();
  draft.processes = {*holder};
  auto lease = leases_->Acquire(
      draft, [&](const std::vector<model::Lease>&) -> Result<std::vector<std::string>> { return gpus; },
      store::ProcLivenessCheck());
  if (!lease) {
    requeue("GPUs were taken meanwhile: " + lease.error().message);
    return lease.error();  // the pending supervisor exits when its barrier closes
  }
  store::JobStore::Update with_lease;
  with_lease.lease_id = lease->id;
  with_lease.supervisor_pid = holder->pid;
  with_lease.supervisor_start_ticks = holder->start_time_ticks;
  (void)jobs_->Transition(job.id, model::JobState::kStarting, model::JobState::kStarting, with_lease);
  Status go = (*pending)->Go(lease->id);
  if (go && collector_) collector_->OnJobStarted(*starting, clock_.NowUnixMs());
  return go;
}

void Daemon::WatchRunningJobs() {
  auto active = jobs_->Active();
  if (!active) return;
  bool any_running = std::any_of(active->begin(), active->end(),
                                 [](const model::Job& j) { return j.state == model::JobState::kRunning; });
  if (!any_running) return;
  auto snap = devices_.Snapshot();
  if (!snap) return;
  std::set<std::string> failed;
  for (const auto& g : snap->gpus) {
    if (g.uuid) uuid_by_index_[g.index] = *g.uuid;
    auto known = uuid_by_index_.find(g.index);
    if (!g.is_healthy && known != uuid_by_index_.end()) failed.insert(known->second);
  }
  const int64_t now = clock_.NowUnixMs();
  std::erase_if(told_gpu_lost_, [&](int64_t id) {
    return std::none_of(active->begin(), active->end(), [&](const model::Job& j) {
      return j.id == id && j.state == model::JobState::kRunning;
    });
  });
  for (const auto& job : *active) {
    if (job.state != model::JobState::kRunning || told_gpu_lost_.count(job.id)) continue;
    bool hit = std::any_of(job.gpu_uuids.begin(), job.gpu_uuids.end(), [&](const std::string& u) { return failed.count(u) > 0; });
    if (!hit) continue;
    if (IsSameLiveProcess(job.supervisor_pid, job.supervisor_start_ticks)) {
      kill(*job.supervisor_pid, SIGUSR1);  // it ends the job and records failed (or requeues it)
      told_gpu_lost_.insert(job.id);
    } else if (orphans_.count(job.id)) {  // adopted: the daemon ends it instead
      if (job.requeue) {
        BeginEnding(job, model::JobState::kQueued, "requeued: one of its GPUs failed while it ran", now);
      } else {
        BeginEnding(job, model::JobState::kFailed, "one of its GPUs failed while it ran", now);
      }
      told_gpu_lost_.insert(job.id);
    }
  }
}

void Daemon::SchedulePass() {
  dirty_ = false;
  Reconcile();
  WatchRunningJobs();
  auto active = jobs_->Active();
  if (!active) return;
  // The scheduler treats a dependency it is not shown as succeeded: add the finished jobs
  // that active ones run after.
  std::set<int64_t> have;
  for (const auto& j : *active) have.insert(j.id);
  std::vector<model::Job> deps;
  for (const auto& j : *active) {
    for (int64_t dep : j.after) {
      if (have.insert(dep).second) {
        if (auto got = jobs_->Get(dep); got && *got) deps.push_back(**got);
      }
    }
  }
  active->insert(active->end(), deps.begin(), deps.end());
  const int64_t now = clock_.NowUnixMs();
  for (int64_t id : sched::JobsWithFailedDependencies(*active)) {
    // Like Slurm's DependencyNeverSatisfied: it can never run, so it is cancelled.
    store::JobStore::Update never;
    never.ended_unix_ms = now;
    never.reason = "a job it runs after did not succeed";
    (void)jobs_->Transition(id, model::JobState::kQueued, model::JobState::kCancelled, never);
  }
  bool any_queued = std::any_of(active->begin(), active->end(),
                                [](const model::Job& j) { return j.state == model::JobState::kQueued; });
  waiting_.clear();
  if (!any_queued) return;

  devices::SnapshotOptions snap_options;
  snap_options.topology = !topology_.has_value();
  auto snap = devices_.Snapshot(snap_options);
  if (!snap) return;
  if (topology_) snap->topology = topology_;
  else topology_ = snap->topology;

  sched::SchedulerInput input;
  input.now_unix_ms = now;
  input.snapshot = std::move(*snap);
  if (auto live = AllLiveLeases()) input.leases = *live;
  input.jobs = *active;
  if (auto drained = jobs_->Drained()) {
    for (const auto& [uuid, reason] : *drained) input.drained.insert(uuid);
  }
  input.config = options_.scheduler;
  if (auto usage = jobs_->Usage(now, options_.scheduler.usage_half_life_s)) {
    for (const auto& [uid, seconds] : *usage) input.usage.push_back({uid, seconds});
  }
  sched::SchedulerOutput out = sched::Schedule(input);
  for (const auto& w : out.waiting) waiting_[w.job_id] = w;
  for (const auto& start : out.start) {
    auto it = std::find_if(input.jobs.begin(), input.jobs.end(),
                           [&](const model::Job& j) { return j.id == start.job_id; });
    if (it != input.jobs.end()) (void)StartJob(*it, start.gpu_uuids);
  }
}

bool Daemon::MayActOn(const Peer& peer, const model::Job& job) const {
  return peer.is_admin || peer.uid == job.uid;
}

model::Job Daemon::WithWaitInfo(model::Job job) const {
  auto it = waiting_.find(job.id);
  if (it != waiting_.end() && (job.state == model::JobState::kQueued || job.state == model::JobState::kHeld)) {
    job.reason = it->second.reason;
  }
  return job;
}

Reply Daemon::Handle(const Peer& peer, const protocol::Request& request) {
  const int64_t id = request.id;
  auto fail = [&](const Error& e) { return MakeErrorReply(id, protocol::ToWireError(e)); };
  auto denied = [&](int64_t job_id) {
    return Wire(WireCode::kPermissionDenied, "job " + std::to_string(job_id) + " belongs to another user");
  };
  auto get_job = [&](int64_t job_id) -> Result<model::Job> {
    auto job = jobs_->Get(job_id);
    if (!job) return job.error();
    if (!*job) return MakeError(ErrorCode::kNotFound, "no job " + std::to_string(job_id));
    return **job;
  };

  switch (request.op()) {
    case protocol::Op::kHello: {
      const auto& args = std::get<protocol::HelloArgs>(request.args);
      if (auto bad = protocol::CheckHello(args)) return MakeErrorReply(id, *bad);
      protocol::HelloResult result;
      result.uid = peer.uid;
      result.user = peer.user;
      result.daemon = "gpumand";
      return MakeReply(id, result);
    }
    case protocol::Op::kSubmit: {
      const auto& args = std::get<protocol::SubmitArgs>(request.args);
      if (!options_.system_mode && peer.uid != getuid()) {
        return MakeErrorReply(id, Wire(WireCode::kPermissionDenied, "this daemon runs jobs of " + UserName(getuid()) + " only"));
      }
      if (auto ok = CheckSubmitFor(peer, args); !ok) return fail(ok.error());
      if (args.cwd.empty() || args.cwd[0] != '/') {
        return MakeErrorReply(id, Wire(WireCode::kInvalidArgument, "args.cwd: must be an absolute path"));
      }
      for (int64_t dep : args.after) {
        auto job = jobs_->Get(dep);
        if (!job || !*job) return MakeErrorReply(id, Wire(WireCode::kInvalidArgument, "--after: no job " + std::to_string(dep)));
      }
      model::Job draft;
      draft.name = args.name.empty() ? std::filesystem::path(args.argv[0]).filename().string() : args.name;
      draft.uid = peer.uid;
      draft.gid = peer.gid;
      if (passwd* pw = getpwuid(peer.uid)) draft.gid = pw->pw_gid;
      draft.user = peer.user;
      draft.argv = args.argv;
      draft.env = args.env;
      draft.cwd = args.cwd;
      if (args.output) draft.output_path = (*args.output)[0] == '/' ? *args.output : args.cwd + "/" + *args.output;
      draft.request = args.request;
      draft.priority = args.priority;
      draft.time_limit_ms = args.time_limit_ms ? args.time_limit_ms : std::optional<int64_t>(options_.scheduler.default_time_limit_ms);
      draft.requeue = args.requeue;
      draft.after = args.after;
      draft.submitted_unix_ms = clock_.NowUnixMs();
      auto job = jobs_->Submit(draft);
      if (!job) return fail(job.error());
      dirty_ = true;
      return MakeReply(id, protocol::SubmitResult{job->id});
    }
    case protocol::Op::kQueue: {
      const auto& args = std::get<protocol::QueueArgs>(request.args);
      auto jobs = jobs_->List(args.all, std::nullopt);
      if (!jobs) return fail(jobs.error());
      protocol::QueueResult result;
      for (auto& j : *jobs) result.jobs.push_back(WithWaitInfo(std::move(j)));
      if (collector_) collector_->Annotate(result.jobs);
      return MakeReply(id, result);
    }
    case protocol::Op::kShow: {
      auto job = get_job(std::get<protocol::ShowArgs>(request.args).id);
      if (!job) return fail(job.error());
      protocol::ShowResult result;
      result.job = WithWaitInfo(*job);
      if (collector_) {
        std::vector<model::Job> one{result.job};
        collector_->Annotate(one);
        result.job = std::move(one[0]);
      }
      result.include_private = MayActOn(peer, *job);
      return MakeReply(id, result);
    }
    case protocol::Op::kWait: {
      auto job = get_job(std::get<protocol::WaitArgs>(request.args).id);
      if (!job) return fail(job.error());
      return MakeReply(id, protocol::WaitResult{job->state, job->exit_code});
    }
    case protocol::Op::kCancel:
    case protocol::Op::kHold:
    case protocol::Op::kResume: {
      std::vector<int64_t> ids;
      if (auto* a = std::get_if<protocol::CancelArgs>(&request.args)) ids = a->ids;
      if (auto* a = std::get_if<protocol::HoldArgs>(&request.args)) ids = a->ids;
      if (auto* a = std::get_if<protocol::ResumeArgs>(&request.args)) ids = a->ids;
      protocol::IdsResult result;
      for (int64_t job_id : ids) {
        protocol::IdOutcome outcome{job_id, std::nullopt};
        auto job = get_job(job_id);
        if (!job) {
          outcome.error = protocol::ToWireError(job.error());
        } else if (!MayActOn(peer, *job)) {
          outcome.error = denied(job_id);
        } else {
          store::JobStore::Update update;
          update.reason = "by " + peer.user;
          Result<model::Job> changed = *job;
          if (request.op() == protocol::Op::kHold) {
            changed = jobs_->Transition(job_id, model::JobState::kQueued, model::JobState::kHeld, update);
          } else if (request.op() == protocol::Op::kResume) {
            changed = jobs_->Transition(job_id, model::JobState::kHeld, model::JobState::kQueued, update);
          } else if (job->state == model::JobState::kQueued || job->state == model::JobState::kHeld) {
            update.ended_unix_ms = clock_.NowUnixMs();
            update.reason = "cancelled by " + peer.user;
            changed = jobs_->Transition(job_id, job->state, model::JobState::kCancelled, update);
          } else if (job->state == model::JobState::kRunning || job->state == model::JobState::kStarting) {
            // The supervisor ends the job and records "cancelled"; without one, the daemon does.
            if (Status ended = EndOrphanedJob(*job, peer.user); !ended) changed = ended.error();
          } else {
            changed = MakeError(ErrorCode::kConflict, "job " + std::to_string(job_id) + " is already " +
                                                          model::JobStateName(job->state));
          }
          if (!changed) outcome.error = protocol::ToWireError(changed.error());
        }
        result.results.push_back(outcome);
      }
      dirty_ = true;
      return MakeReply(id, result);
    }
    case protocol::Op::kLogs: {
      const auto& args = std::get<protocol::LogsArgs>(request.args);
      auto job = get_job(args.id);
      if (!job) return fail(job.error());
      if (!MayActOn(peer, *job)) return MakeErrorReply(id, denied(args.id));
      std::string path = job->output_path.empty() ? sched::DefaultLogPath(*job) : job->output_path;
      protocol::LogsResult result;
      result.next_offset = args.offset;
      int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
      if (fd >= 0) {
        struct stat st{};
        // Only a file the job's owner owns: the daemon is root and must not read others' files.
        if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == job->uid) {
          std::string buf(static_cast<size_t>(protocol::kMaxLogChunkBytes), '\0');
          ssize_t n = pread(fd, buf.data(), buf.size(), args.offset);
          if (n > 0) {
            buf.resize(static_cast<size_t>(n));
            result.data = std::move(buf);
            result.next_offset = args.offset + n;
          }
          result.eof = model::IsFinal(job->state) && result.next_offset >= st.st_size;
        } else {
          close(fd);
          return MakeErrorReply(id, Wire(WireCode::kPermissionDenied, "log " + path + " is not owned by the job's user"));
        }
        close(fd);
      } else {
        result.eof = model::IsFinal(job->state);
      }
      return MakeReply(id, result);
    }
    case protocol::Op::kDrain:
    case protocol::Op::kUndrain: {
      bool drain = request.op() == protocol::Op::kDrain;
      std::string gpu = drain ? std::get<protocol::DrainArgs>(request.args).gpu : std::get<protocol::UndrainArgs>(request.args).gpu;
      std::string reason = drain ? std::get<protocol::DrainArgs>(request.args).reason : "";
      if (!peer.is_admin) return MakeErrorReply(id, Wire(WireCode::kPermissionDenied, "only root or the admin group may drain GPUs"));
      auto snap = devices_.Snapshot();
      if (!snap) return fail(snap.error());
      auto picked = devices::ResolveGpuIds(gpu, snap->gpus);
      if (!picked) return fail(picked.error());
      if (picked->size() != 1 || !snap->gpus[picked->front()].uuid) {
        return MakeErrorReply(id, Wire(WireCode::kInvalidArgument, "name exactly one GPU"));
      }
      std::string uuid = *snap->gpus[picked->front()].uuid;
      Status done = drain ? jobs_->Drain(uuid, reason.empty() ? "drained by " + peer.user : reason, peer.uid, clock_.NowUnixMs())
                          : jobs_->Undrain(uuid);
      if (!done) return fail(done.error());
      dirty_ = true;
      return MakeReply(id, protocol::DrainResult{uuid});
    }
    case protocol::Op::kLeases: {
      auto live = AllLiveLeases();
      if (!live) return fail(live.error());
      if (collector_) collector_->Annotate(*live);
      return MakeReply(id, protocol::LeasesResult{*live});
    }
    case protocol::Op::kRelease: {
      const auto& args = std::get<protocol::ReleaseArgs>(request.args);
      auto lease = leases_->Get(args.lease_id);
      if (!lease) return fail(lease.error());
      if (!*lease) return MakeErrorReply(id, Wire(WireCode::kNotFound, "no lease " + std::to_string(args.lease_id)));
      if (auto ok = CheckReleaseFor(peer, **lease); !ok) return fail(ok.error());
      if (auto r = leases_->Release(args.lease_id); !r) return fail(r.error());
      dirty_ = true;
      return MakeReply(id, protocol::EmptyResult{});
    }
    case protocol::Op::kAcquire: {
      // `gpuman run` / `select --lease` while a daemon runs: one lease table for everyone.
      auto got = AcquireFor(peer, std::get<protocol::AcquireArgs>(request.args));
      if (!got) return fail(got.error());
      return MakeReply(id, *got);
    }
    case protocol::Op::kAddProcesses: {
      const auto& a = std::get<protocol::AddProcessesArgs>(request.args);
      auto lease = leases_->Get(a.lease_id);
      if (!lease) return fail(lease.error());
      if (!*lease) return MakeErrorReply(id, Wire(WireCode::kNotFound, "no lease " + std::to_string(a.lease_id)));
      if ((*lease)->uid != peer.uid && !peer.is_admin) {
        return MakeErrorReply(id, Wire(WireCode::kPermissionDenied, "lease " + std::to_string(a.lease_id) + " belongs to another user"));
      }
      for (const auto& p : a.processes) {
        if (auto bad = CheckOwnProcess(peer, p)) return MakeErrorReply(id, *bad);
      }
      if (auto r = leases_->AddProcesses(a.lease_id, a.processes); !r) return fail(r.error());
      return MakeReply(id, protocol::EmptyResult{});
    }
    case protocol::Op::kHealth: {
      protocol::HealthResult result;
      if (collector_) result.report = collector_->HealthJson();
      return MakeReply(id, result);
    }
    case protocol::Op::kDrains: {
      // Anyone may ask: a drain names a GPU and who drained it, nothing private.
      auto drained = jobs_->DrainedDetails();
      if (!drained) return fail(drained.error());
      protocol::DrainsResult result;
      for (const auto& d : *drained) {
        result.drains.push_back(model::GpuDrain{d.uuid, d.reason, d.by_uid, UserName(d.by_uid), d.since_unix_ms});
      }
      return MakeReply(id, result);
    }
    case protocol::Op::kStatus: {
      protocol::StatusResult result;
      auto active = jobs_->Active();
      int queued = 0, running = 0;
      if (active) {
        for (const auto& j : *active) {
          queued += j.state == model::JobState::kQueued;
          running += j.state == model::JobState::kRunning || j.state == model::JobState::kStarting;
        }
      }
      result.status = {{"queued", queued}, {"running", running}, {"system_mode", options_.system_mode}};
      return MakeReply(id, result);
    }
  }
  return MakeErrorReply(id, Wire(WireCode::kUnknownOp, "unknown op"));
}

void Daemon::AcceptClients() {
  while (true) {
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;
    if (clients_.size() >= kMaxClients) {
      close(fd);
      continue;
    }
    ucred cred{};
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
      close(fd);
      continue;
    }
    auto c = std::make_unique<Connection>();
    c->fd = fd;
    c->peer = MakePeer(cred.uid, cred.gid, cred.pid);
    c->last_activity_ms = clock_.NowUnixMs();
    clients_[fd] = std::move(c);
  }
}

bool Daemon::ServeClient(Connection& c) {
  char buf[65536];
  while (true) {
    ssize_t n = read(c.fd, buf, sizeof buf);
    if (n > 0) {
      if (c.decoder.at_frame_boundary()) c.frame_started_ms = clock_.NowUnixMs();
      c.last_activity_ms = clock_.NowUnixMs();
      (void)c.decoder.Feed(std::string_view(buf, static_cast<size_t>(n)));
      continue;
    }
    if (n == 0) return false;  // the client closed
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
    return false;
  }
  while (true) {
    auto frame = c.decoder.Next();
    if (!frame) {
      // Oversized or zero-length frame: the stream cannot be trusted any more.
      WireCode code = c.decoder.error_code().value_or(WireCode::kBadMessage);
      c.out += protocol::EncodeReplyFrame(MakeErrorReply(std::nullopt, Wire(code, frame.error().message)));
      c.closing = true;
      break;
    }
    if (!*frame) break;
    auto parsed = protocol::ParseRequest(**frame);
    if (auto* err = std::get_if<protocol::RequestError>(&parsed)) {
      c.out += protocol::EncodeReplyFrame(MakeErrorReply(*err));
      continue;
    }
    const auto& request = std::get<protocol::Request>(parsed);
    if (!c.said_hello && request.op() != protocol::Op::kHello) {
      c.out += protocol::EncodeReplyFrame(MakeErrorReply(request.id, Wire(WireCode::kHelloRequired, "say hello first")));
      c.closing = true;
      break;
    }
    Reply reply = Handle(c.peer, request);
    if (request.op() == protocol::Op::kHello && reply.ok()) c.said_hello = true;
    c.out += protocol::EncodeReplyFrame(reply);
    if (c.out.size() > kMaxOutputBuffer) return false;
  }
  while (!c.out.empty()) {
    ssize_t w = send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL);
    if (w > 0) {
      c.out.erase(0, static_cast<size_t>(w));
      continue;
    }
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    return false;
  }
  return !(c.closing && c.out.empty());
}

int Daemon::Run(const volatile std::sig_atomic_t* stop) {
  int64_t last_pass = 0;
  while (!*stop) {
    std::vector<pollfd> fds;
    fds.push_back({listen_fd_, POLLIN, 0});
    if (inotify_fd_ >= 0) fds.push_back({inotify_fd_, POLLIN, 0});
    const int wake_fd = collector_ ? collector_->wake_fd() : -1;
    if (wake_fd >= 0) fds.push_back({wake_fd, POLLIN, 0});
    for (auto& [fd, c] : clients_) {
      short events = POLLIN;
      if (!c->out.empty()) events |= POLLOUT;
      fds.push_back({fd, events, 0});
    }
    int timeout = dirty_ ? 0 : 500;
    if (collector_) timeout = static_cast<int>(std::min<int64_t>(timeout, collector_->MsUntilDue(clock_.NowUnixMs())));
    int ready = poll(fds.data(), fds.size(), timeout);
    if (ready < 0 && errno != EINTR) break;
    const int64_t now = clock_.NowUnixMs();
    for (const auto& p : fds) {
      if (p.revents == 0) continue;
      if (p.fd == listen_fd_) {
        AcceptClients();
      } else if (p.fd == wake_fd) {
        collector_->DrainWake();  // Xid events: the collector takes them below
      } else if (p.fd == inotify_fd_) {
        char drain[4096];
        while (read(inotify_fd_, drain, sizeof drain) > 0) {
        }
        dirty_ = true;
      } else {
        auto it = clients_.find(p.fd);
        if (it == clients_.end()) continue;
        if ((p.revents & (POLLERR | POLLNVAL)) || !ServeClient(*it->second)) {
          close(p.fd);
          clients_.erase(it);
        }
      }
    }
    // Slow or silent clients must not hold a slot forever.
    for (auto it = clients_.begin(); it != clients_.end();) {
      const Connection& c = *it->second;
      bool stale = now - c.last_activity_ms > kIdleTimeoutMs ||
                   (!c.decoder.at_frame_boundary() && now - c.frame_started_ms > kPartialFrameMs);
      if (stale) {
        close(it->first);
        it = clients_.erase(it);
      } else {
        ++it;
      }
    }
    if (collector_ && collector_->MsUntilDue(now) == 0 && collector_->Tick(now)) dirty_ = true;
    if (dirty_ || now - last_pass >= 1000) {
      last_pass = now;
      SchedulePass();
    }
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
  if (auto drained = jobs_->Drained()) rules.drained = *drained;
  return rules;
}

Result<std::vector<model::Lease>> Daemon::AllLiveLeases() {
  const auto alive = store::ProcLivenessCheck();
  auto live = leases_->List(alive);
  if (!live) return live.error();
  if (machine_leases_) {
    // Read only: their holders (no daemon then) gave them back themselves, or they go stale.
    if (auto recorded = machine_leases_->ListRecorded()) {
      for (auto& l : *recorded) {
        if (std::none_of(l.processes.begin(), l.processes.end(), alive)) continue;
        l.command += " (taken without the daemon)";
        l.id = -l.id;  // not a lease of this daemon's table: never released or joined here
        live->push_back(std::move(l));
      }
    }
  }
  return live;
}

Result<protocol::AcquireResult> Daemon::AcquireFor(const Peer& peer, const protocol::AcquireArgs& a) {
  model::LeaseProcess holder{a.pid, a.start_time_ticks};
  if (auto bad = CheckOwnProcess(peer, holder)) return MakeError(protocol::ToErrorCode(bad->code), bad->message);
  devices::SnapshotOptions snap_options;
  snap_options.topology = !topology_.has_value();
  auto snap = devices_.Snapshot(snap_options);
  if (!snap) return snap.error();
  if (topology_) snap->topology = topology_;
  else topology_ = snap->topology;
  const policy::SelectionRequest req = policy::FromGpuRequest(a.request);
  const policy::MachineRules rules = Rules();
  const policy::Caller caller = CallerOf(peer);
  const int machine_gpus = static_cast<int>(snap->gpus.size());
  auto live = AllLiveLeases();
  if (!live) return live.error();
  auto ruled = policy::ApplyLeaseRules(req, caller, a.within_lease_id, *live, rules, machine_gpus);
  if (!ruled) return ruled.error();
  if (ruled->within) {
    // Inside the caller's own lease (a run in a `select --lease` shell or in a job): the
    // runner joins it, so the lease lives as long as the runner too.
    auto chosen = policy::Select(*snap, ruled->leases, ruled->request);
    if (!chosen) return chosen.error();
    if (auto added = leases_->AddProcesses(*ruled->within, {holder}); !added) return added.error();
    return protocol::AcquireResult{*ruled->within, chosen->uuids, true};
  }
  std::vector<model::Lease> foreign;  // machine-table leases the store does not know of
  for (const auto& l : *live) {
    if (l.id < 0) foreign.push_back(l);
  }
  model::Lease draft;
  draft.uid = peer.uid;
  draft.user = peer.user;
  draft.kind = "run";
  draft.command = a.command;
  draft.created_unix_ms = clock_.NowUnixMs();
  draft.processes = {holder};
  auto lease = leases_->Acquire(
      draft,
      [&](const std::vector<model::Lease>& current) -> Result<std::vector<std::string>> {
        std::vector<model::Lease> all = current;
        all.insert(all.end(), foreign.begin(), foreign.end());
        auto again = policy::ApplyLeaseRules(req, caller, std::nullopt, all, rules, machine_gpus);
        if (!again) return again.error();
        auto chosen = policy::Select(*snap, again->leases, again->request);
        if (!chosen) return chosen.error();
        return chosen->uuids;
      },
      store::ProcLivenessCheck());
  if (!lease) return lease.error();
  return protocol::AcquireResult{lease->id, lease->gpu_uuids, false};
}

Status Daemon::CheckReleaseFor(const Peer& peer, const model::Lease& lease) {
  std::optional<policy::LeaseJob> job;
  if (auto active = jobs_->Active()) {
    for (const auto& j : *active) {
      if (j.lease_id == lease.id) job = policy::LeaseJob{j.id, j.name};
    }
  }
  return policy::CheckRelease(lease, CallerOf(peer), job);
}

Status Daemon::CheckSubmitFor(const Peer& peer, const protocol::SubmitArgs& args) {
  int machine_gpus = std::numeric_limits<int>::max();  // unknown when NVML does not answer now
  devices::SnapshotOptions who;
  who.processes_only = true;
  if (auto snap = devices_.Snapshot(who)) machine_gpus = static_cast<int>(snap->gpus.size());
  return policy::CheckSatisfiable(args.request.count, args.request.gpus, CallerOf(peer), Rules(), machine_gpus);
}

}  // namespace gpuman::daemon
