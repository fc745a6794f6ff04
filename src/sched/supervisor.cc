// How a queued job runs.
//
//   daemon --fork--> intermediate --fork--> supervisor --fork--> job
//                    (setsid; exits at once)   |                  (own process group;
//                                              |                   setgroups, setgid, setuid,
//   the daemon reaps the intermediate;         |                   chdir, open log, find argv[0]
//   the supervisor is re-parented to init      |                   on the job's PATH, report
//                                              |                   ready or why not, wait at a
//                                              |                   barrier, exec argv)
// Both starts go through base/spawn.h: the first with `detached` (the double fork), the
// second with a start barrier; Spawn reports each set-up step that fails.
//   (or a subreaper), so it outlives the       waits for the job; SIGTERM = cancel;
//   daemon.                                    time limit; writes the outcome to the db
//
// Two barriers keep every process that may touch a GPU named in the job's lease before it
// runs. The supervisor sends its pid back over a pipe and waits until the daemon has put it
// in a lease (Go()); if the daemon dies first, the barrier closes and the supervisor exits
// without starting the job: a job that never started can be queued again safely. The
// supervisor then forks the job, which waits at a second barrier while the supervisor adds
// its pid and start time to the lease (LeaseStore::AddProcesses) and moves the job to
// "running"; only then may the job exec. If the supervisor dies before that, the job reads
// EOF and exits without running. From then on the lease lives as long as the supervisor or
// the job's leader lives: kill -9 of the supervisor leaves the GPUs taken by the job, and
// the daemon adopts it (daemon.cc, Reconcile). Once the supervisor has moved the job to
// "running", it owns the outcome while it lives: the daemon never starts that job again
// (compare-and-set on the job's state, checked against sched::CheckTransition's table).
#include "sched/supervisor.h"

#include "store/state_db.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <chrono>
#include <utility>

#include "base/posix_error.h"
#include "base/spawn.h"
#include "base/unique_fd.h"
#include "confine/cgroup.h"

#include "sched/child_process.h"
#include "sched/job_state.h"
#include "store/job_store.h"
#include "store/lease_store.h"
#include "store/proc_liveness.h"
#include "visibility/child_env.h"

namespace gpuman::sched {
namespace {

volatile sig_atomic_t g_cancel = 0;
void OnCancel(int) { g_cancel = 1; }
volatile sig_atomic_t g_gpu_lost = 0;  // SIGUSR1 from the daemon: one of the job's GPUs failed
void OnGpuLost(int) { g_gpu_lost = 1; }

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool ReadAll(int fd, void* data, size_t n) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    ssize_t r = read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

bool WriteAll(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// Why the job's process could not start, as the job's failure kind and reason.
constexpr char kNotFound = 'n';     // model::JobFailure::kCommandNotFound
constexpr char kCannotExec = 'x';   // model::JobFailure::kCannotExecute
constexpr char kCannotStart = 's';  // model::JobFailure::kCannotStart

// The job's process, as Spawn starts it: in its own process group, as its owner (groups,
// gid, uid dropped for good), in its directory, with its log opened as the owner (so it is
// theirs and cannot be used to write where they may not) on stdout and stderr, its program
// found on its own PATH; then held at the start barrier until the supervisor has recorded
// it in the lease and the job as running. A failure of any step is reported back; a
// missing or unrunnable program is also noted in the log.
SpawnSpec JobSpawnSpec(const SupervisorSpec& spec, const std::vector<gid_t>& groups) {
  const model::Job& job = spec.job;
  std::vector<std::string> env;
  for (const auto& [k, v] : job.env) env.push_back(k + "=" + v);
  for (const auto& e : spec.extra_env) {
    std::string key = e.substr(0, e.find('='));
    std::erase_if(env, [&](const std::string& x) { return x.compare(0, key.size() + 1, key + "=") == 0; });
    env.push_back(e);
  }
  SpawnSpec s;
  s.argv = job.argv;
  s.env = std::move(env);  // the job's own PATH, in the job's directory, as its owner
  s.cwd = job.cwd;
  s.group = SpawnSpec::Group::kNewProcessGroup;
  s.default_signals = {SIGTERM, SIGUSR1, SIGINT, SIGPIPE};
  if (getuid() == 0 && job.uid != 0) {
    s.groups = groups;
    s.gid = job.gid;
    s.uid = job.uid;
  }
  const std::string log = job.output_path.empty() ? DefaultLogPath(job) : job.output_path;
  s.stdin_fd = SpawnFd::Null();
  s.stdout_fd = SpawnFd::File(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
  s.stderr_fd = SpawnFd::SameAsStdout();
  s.start_barrier = true;
  s.note_failure_on_stderr = true;
  return s;
}

// A failed step of the job's start, in the words a job's reason uses.
std::pair<char, std::string> WhyNotStarted(const model::Job& job, const SpawnFailure& failure) {
  const std::string uid = std::to_string(job.uid);
  switch (failure.step) {
    case SpawnStep::kGroups:
    case SpawnStep::kGid:
    case SpawnStep::kUid:
      return {kCannotStart, "could not become its owner (uid " + uid + "): " + PosixErrorText(failure.err)};
    case SpawnStep::kKeepsRoot:
      return {kCannotStart, "could not drop root privileges"};
    case SpawnStep::kChdir:
      return {kCannotStart, "cannot enter its working directory " + job.cwd + ": " + PosixErrorText(failure.err)};
    case SpawnStep::kStdout:
      if (!failure.subject.empty()) {
        return {kCannotStart, "cannot open its output file " + failure.subject + ": " + PosixErrorText(failure.err)};
      }
      break;
    case SpawnStep::kFindProgram:
    case SpawnStep::kExec: {
      Error error = failure.ToError();
      return {error.code == ErrorCode::kNotFound ? kNotFound : kCannotExec, error.message};
    }
    case SpawnStep::kEnded:
      return {kCannotStart, "the job's process ended before it started"};
    default:
      break;
  }
  return {kCannotStart, "could not start the job: " + failure.ToError().message};
}

model::JobFailure FailureOf(char kind) {
  switch (kind) {
    case kNotFound: return model::JobFailure::kCommandNotFound;
    case kCannotExec: return model::JobFailure::kCannotExecute;
    default: return model::JobFailure::kCannotStart;
  }
}

void SleepMs(int64_t ms) {
  timespec ts{static_cast<time_t>(ms / 1000), static_cast<long>(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

// Records a transition the supervisor owns, retrying with backoff (50 ms doubling to 5 s)
// for as long as the state db cannot take it (disk full, I/O error, locked), so that a
// job's outcome is never thrown away: it lives in this process until it lands. Gives up
// only when the job is no longer ours to move (kConflict, kNotFound) or after `max_tries`
// (0: no limit). Returns whether it landed.
bool RecordPersistently(store::JobStore& jobs, int64_t id, model::JobState from, model::JobState to,
                        const store::JobStore::Update& update, int max_tries = 0) {
  int64_t delay_ms = 50;
  for (int tries = 1;; ++tries) {
    auto moved = jobs.Transition(id, from, to, update);
    if (moved) return true;
    const ErrorCode code = moved.error().code;
    if (code == ErrorCode::kConflict || code == ErrorCode::kNotFound || code == ErrorCode::kInvalidArgument) {
      return false;
    }
    if (max_tries > 0 && tries >= max_tries) return false;
    SleepMs(delay_ms);
    delay_ms = std::min<int64_t>(delay_ms * 2, 5000);
  }
}

// The same for the writes after the outcome (usage, releasing the lease): a few tries,
// since a lease whose processes are gone is reclaimed anyway.
template <typename F>
void RetryFew(F write) {
  int64_t delay_ms = 50;
  for (int tries = 0; tries < 12; ++tries) {
    if (write()) return;
    SleepMs(delay_ms);
    delay_ms = std::min<int64_t>(delay_ms * 2, 5000);
  }
}

}  // namespace

// The supplementary groups of the job's owner (initgroups' list), looked up here: the
// child may only make system calls.
std::vector<gid_t> GroupsOfOwner(const model::Job& job) {
  std::vector<gid_t> groups(64);
  for (int tries = 0; tries < 8; ++tries) {
    int n = static_cast<int>(groups.size());
    if (getgrouplist(job.user.c_str(), job.gid, groups.data(), &n) >= 0) {
      groups.resize(static_cast<size_t>(n));
      return groups;
    }
    groups.resize(static_cast<size_t>(n) > groups.size() ? static_cast<size_t>(n) : groups.size() * 2);
  }
  return {job.gid};
}


// The supervisor process (a freshly exec'd gpuman: SQLite state must never cross a fork).
int RunSupervisor(const std::string& state_db, int64_t job_id, int go_read, std::vector<std::string> extra_env,
                  int grace_ms) {
  signal(SIGTERM, OnCancel);
  signal(SIGUSR1, OnGpuLost);
  signal(SIGINT, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  signal(SIGPIPE, SIG_IGN);
  // What the job leaves behind (a double-forked server) is re-parented to us, so that we
  // can end it with the job and reap it (confine::EndCgroupProcesses).
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  int64_t lease_id = 0;
  UniqueFd go(go_read);
  if (!ReadAll(go.get(), &lease_id, sizeof lease_id)) _exit(0);  // the daemon gave up on us
  uint32_t cgroup_length = 0;
  if (!ReadAll(go.get(), &cgroup_length, sizeof cgroup_length) || cgroup_length > 4096) _exit(0);
  std::string cgroup(cgroup_length, '\0');
  if (cgroup_length > 0 && !ReadAll(go.get(), cgroup.data(), cgroup_length)) _exit(0);
  go.reset();

  store::JobStoreOptions options;
  options.busy_timeout = std::chrono::milliseconds(60000);
  options.check_transition = CheckTransition;  // the same table as the daemon's
  // One connection for both tables, as the daemon has (store/state_db.h).
  auto state = store::OpenStateDb(state_db, options);
  if (!state) _exit(1);  // the job would run unrecorded; the daemon queues it again
  std::unique_ptr<store::JobStore>* jobs = &state->jobs;
  std::unique_ptr<store::LeaseStore>* leases = &state->leases;
  auto stored = (*jobs)->Get(job_id);
  if (!stored || !*stored) _exit(1);
  SupervisorSpec spec;
  spec.job = **stored;
  spec.state_db = state_db;
  spec.extra_env = std::move(extra_env);
  // A `gpuman run` or `select` inside the job works within the job's GPUs (a nested lease).
  spec.extra_env.push_back("GPUMAN_LEASE_ID=" + std::to_string(lease_id));
  // Its rendezvous port, chosen with the lease (docs/python.md, "Rendezvous").
  if (auto lease = (*leases)->Get(lease_id); lease && *lease && (*lease)->master_port) {
    for (const auto& var : visibility::LaunchEnv(*(*lease)->master_port, (*lease)->gpu_uuids.size())) {
      spec.extra_env.push_back(visibility::EnvEntry(var));
    }
  }
  spec.grace_ms = grace_ms;
  const model::Job& job = spec.job;
  // A job that cannot start ends failed, with the reason, and never runs.
  auto give_up = [&](const std::string& why, model::JobFailure failure = model::JobFailure::kCannotStart,
                     model::JobState from = model::JobState::kStarting) {
    store::JobStore::Update failed;
    failed.ended_unix_ms = NowMs();
    failed.reason = why;
    failed.failure = failure;
    (void)RecordPersistently(**jobs, job.id, from, model::JobState::kFailed, failed);
    RetryFew([&] { return static_cast<bool>((*leases)->Release(lease_id)); });
    _exit(1);
  };

  // The job is started first and held at its own barrier until its pid is in the lease and
  // the job is running in the db. It must not inherit our cancel handler: hold SIGTERM
  // across the start; the job resets it to the default and unblocks it at exec (a pending
  // one then ends it, as it should).
  if (getuid() != 0 && getuid() != job.uid) {
    give_up("this daemon runs as uid " + std::to_string(getuid()) + " and cannot run a job of uid " +
            std::to_string(job.uid));
  }
  SpawnSpec job_spec = JobSpawnSpec(spec, getuid() == 0 && job.uid != 0 ? GroupsOfOwner(job) : std::vector<gid_t>{});
  // Confined (docs/enforce.md): the job is created inside its lease's cgroup where the
  // kernel can (cgroup v2), so it and everything it starts can open only its GPUs' device
  // nodes, and no move (a write lock on the kernel's cgroup state) delays its start.
  UniqueFd cgroup_dir;
  if (!cgroup.empty()) {
    cgroup_dir.reset(open(cgroup.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    job_spec.cgroup_fd = cgroup_dir.get();
  }
  sigset_t term, old;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  sigaddset(&term, SIGUSR1);
  sigprocmask(SIG_BLOCK, &term, &old);
  auto spawned = Spawn(job_spec);
  sigprocmask(SIG_SETMASK, &old, nullptr);
  if (!spawned) give_up("could not start the job: " + spawned.error().message);
  SpawnedProcess& process = *spawned;
  const pid_t child = process.pid();
  // SIGCHLD stays blocked so the wait below wakes the moment the job exits.
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, nullptr);
  auto abandon = [&]() {  // the job reads EOF at its barrier and exits without running
    process.Abandon();
    int ignored = 0;
    waitpid(child, &ignored, 0);
  };
  // The job's process does, as the owner, all that can fail before it may run.
  SpawnFailure failure;
  if (!process.WaitReady(&failure)) {
    abandon();
    auto [kind, why] = WhyNotStarted(job, failure);
    give_up(why, FailureOf(kind));
  }
  // Otherwise (a v1 hierarchy, an older kernel) it is moved there before it may run.
  if (!cgroup.empty() && !process.in_cgroup()) {
    if (Status moved = confine::MoveIntoCgroup(cgroup, child); !moved) {
      abandon();
      give_up("could not confine the job to its GPUs: " + moved.error().message);
    }
  }
  auto job_process = store::CurrentLeaseProcess(child);
  if (!job_process) {
    abandon();
    give_up("the job's process vanished before it started");
  }
  if (Status added = (*leases)->AddProcesses(lease_id, {*job_process}); !added) {
    abandon();
    give_up("could not record the job's process in its lease: " + added.error().message);
  }
  auto self = store::CurrentLeaseProcess(getpid());
  store::JobStore::Update running;
  running.lease_id = lease_id;
  running.supervisor_pid = getpid();
  if (self) running.supervisor_start_ticks = self->start_time_ticks;
  running.started_unix_ms = NowMs();
  running.reason = "";
  auto moved = (*jobs)->Transition(job.id, model::JobState::kStarting, model::JobState::kRunning, running);
  if (!moved) {
    // Cancelled or taken over meanwhile: never start it.
    abandon();
    (void)(*leases)->Release(lease_id);
    _exit(0);
  }
  const int64_t started = NowMs();
  // Usage is measured on the monotonic clock in microseconds: a job shorter than a
  // millisecond still ran, and wall time may step meanwhile.
  const auto started_steady = std::chrono::steady_clock::now();
  // Exec'd, or gone (then the wait below says how it ended). A failure: exec itself
  // failed, so the command never ran.
  if (Status exec = process.Release({}, &failure); !exec && failure.step != SpawnStep::kEnded) {
    int ignored = 0;
    waitpid(child, &ignored, 0);
    auto [kind, why] = WhyNotStarted(job, failure);
    give_up(why, FailureOf(kind), model::JobState::kRunning);
  }
  int status = 0;
  bool cancelled = false, timed_out = false, gpu_lost = false, signalled = false;
  int64_t kill_at = 0;
  while (true) {
    pid_t done = waitpid(child, &status, WNOHANG);
    if (done == child) break;
    int64_t now = NowMs();
    if (!signalled && g_cancel) {
      cancelled = true;
      signalled = true;
      kill(-child, SIGTERM);
      kill_at = now + spec.grace_ms;
    }
    if (!signalled && g_gpu_lost) {
      gpu_lost = true;
      signalled = true;
      kill(-child, SIGTERM);
      kill_at = now + spec.grace_ms;
    }
    if (!signalled && job.time_limit_ms && now - started > *job.time_limit_ms) {
      timed_out = true;
      signalled = true;
      kill(-child, SIGTERM);
      kill_at = now + spec.grace_ms;
    }
    if (signalled && now >= kill_at) kill(-child, SIGKILL);
    timespec ts{0, 20 * 1000 * 1000};
    siginfo_t info;
    sigtimedwait(&chld, &info, &ts);  // SIGCHLD, or 20 ms to look at cancel/time limit again
  }
  kill(-child, SIGKILL);  // what is left of the job's process group ends with it
  const int64_t ended = NowMs();  // the job's end: its main command's
  // And whatever else it left in its cgroup (a setsid'ed or double-forked child): TERM, the
  // grace period, KILL. The outcome is recorded and the GPUs go back only once it is empty.
  if (!cgroup.empty()) {
    confine::EndCgroupProcesses(cgroup, spec.grace_ms);
    (void)confine::RemoveCgroup(cgroup);
  }
  store::JobStore::Update outcome;
  outcome.ended_unix_ms = ended;
  model::JobState final_state;
  std::optional<int> signal_number;
  if (WIFEXITED(status)) {
    outcome.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    outcome.exit_code = 128 + WTERMSIG(status);
    signal_number = WTERMSIG(status);
  }
  if (gpu_lost && job.requeue) {
    final_state = model::JobState::kQueued;  // runs again, on healthy GPUs
    outcome = store::JobStore::Update{};
    outcome.clear_run = true;
    outcome.reason = "requeued: one of its GPUs failed while it ran";
  } else if (gpu_lost) {
    final_state = model::JobState::kFailed;
    outcome.reason = model::kGpuLostReason;
  } else if (cancelled) {
    final_state = model::JobState::kCancelled;
    outcome.reason = "cancelled while running";
  } else if (timed_out) {
    final_state = model::JobState::kTimedOut;
    outcome.reason = "ran past its time limit";
  } else if (outcome.exit_code == 0) {
    final_state = model::JobState::kSucceeded;
  } else {
    final_state = model::JobState::kFailed;
    if (signal_number) {  // "killed by signal 9 (KILL)", not a made-up "exit code 137"
      const char* abbrev = sigabbrev_np(*signal_number);
      outcome.reason = "killed by signal " + std::to_string(*signal_number) +
                       (abbrev ? std::string(" (") + abbrev + ")" : std::string());
    } else {
      outcome.reason = "exit code " + std::to_string(outcome.exit_code.value_or(-1));
    }
    // Why the daemon ended it, recorded on the running job before its signal (the slice
    // watch's over_limit = "kill"; docs/share.md) comes first: "over its GPU memory slice:
    // ...; killed by signal 15 (TERM)".
    if (auto now_stored = (*jobs)->Get(job.id); now_stored && *now_stored &&
                                                (*now_stored)->state == model::JobState::kRunning &&
                                                !(*now_stored)->reason.empty()) {
      outcome.reason = (*now_stored)->reason + "; " + *outcome.reason;
    }
  }
  const double ran_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started_steady).count();
  // The outcome is the one thing that must land: retried until the state db takes it (a
  // full disk that frees up later), while the lease keeps this process and the job's
  // GPUs recorded. Cancelling now changes nothing: the job has ended already.
  (void)RecordPersistently(**jobs, job.id, model::JobState::kRunning, final_state, outcome);
  double gpu_seconds = ran_s * static_cast<double>(std::max<size_t>(1, job.gpu_uuids.size()));
  RetryFew([&] { return static_cast<bool>((*jobs)->AddUsage(job.uid, gpu_seconds, ended)); });
  RetryFew([&] { return static_cast<bool>((*leases)->Release(lease_id)); });
  return 0;
}

std::string DefaultLogPath(const model::Job& job) {
  std::string dir = job.cwd.empty() ? "/tmp" : job.cwd;
  return dir + "/gpuman-" + model::JobName(job) + ".log";  // gpuman-12.log, gpuman-12_7.log
}

PendingSupervisor::~PendingSupervisor() = default;  // closing the barrier ends a supervisor never let go

Status PendingSupervisor::Go(int64_t lease_id, const std::string& cgroup) {
  // The go: the lease id, then the cgroup's path (its length first; 0: none).
  const uint32_t length = static_cast<uint32_t>(cgroup.size());
  bool ok = WriteAll(go_fd_.get(), &lease_id, sizeof lease_id) && WriteAll(go_fd_.get(), &length, sizeof length) &&
            WriteAll(go_fd_.get(), cgroup.data(), cgroup.size());
  go_fd_.reset();
  if (!ok) return MakeError(ErrorCode::kIo, "supervisor " + std::to_string(pid_) + " is gone");
  return {};
}

Result<std::unique_ptr<PendingSupervisor>> LaunchSupervisor(const SupervisorSpec& spec, const std::string& gpuman_exe) {
  SpawnSpec s;
  s.argv = {gpuman_exe, "__supervise", "--db", spec.state_db, "--job", std::to_string(spec.job.id),
            "--grace-ms", std::to_string(spec.grace_ms), "--go-fd", "3"};
  for (const auto& e : spec.extra_env) {
    s.argv.push_back("--env");
    s.argv.push_back(e);
  }
  s.program = gpuman_exe;
  auto go = MakePipe();
  if (!go) return go.error();
  s.stdin_fd = SpawnFd::Null();
  s.stdout_fd = SpawnFd::Null();
  s.stderr_fd = SpawnFd::Null();
  s.keep_fds = {{3, go->read.get()}};  // the supervisor's barrier
  // Everything else the daemon had open (listening socket, clients, db) stays here.
  s.close_other_fds = true;
  s.default_signals = {SIGTERM, SIGINT, SIGHUP, SIGCHLD, SIGPIPE};
  s.detached = true;
  auto process = Spawn(s);
  if (!process) return process.error();
  go->read.reset();
  if (Status exec = process->ExecOutcome(); !exec) return MakeError(ErrorCode::kIo, "supervisor did not start: " + exec.error().message);
  std::unique_ptr<PendingSupervisor> pending(new PendingSupervisor());
  pending->pid_ = process->pid();
  pending->go_fd_ = std::move(go->write);
  return pending;
}

}  // namespace gpuman::sched
