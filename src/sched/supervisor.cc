// How a queued job runs.
//
//   daemon --fork--> intermediate --fork--> supervisor --fork--> job
//                    (setsid; exits at once)   |                  (own process group;
//                                              |                   waits at a barrier, then
//   the daemon reaps the intermediate;         |                   setgid, initgroups, setuid,
//   the supervisor is re-parented to init      |                   chdir, open log, find argv[0]
//                                              |                   on the job's PATH, report
//                                              |                   ready or why not, exec argv)
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
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "sched/child_process.h"
#include "sched/job_state.h"
#include "store/job_store.h"
#include "store/lease_store.h"
#include "store/proc_liveness.h"

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

// What the job's process tells the supervisor over its report pipe (CLOEXEC, so a
// successful exec closes it): 'R' once it is ready to run, or one of the kinds below and
// a one-line reason, then EOF, when it cannot.
constexpr char kReady = 'R';
constexpr char kNotFound = 'n';     // model::JobFailure::kCommandNotFound
constexpr char kCannotExec = 'x';   // model::JobFailure::kCannotExecute
constexpr char kCannotStart = 's';  // model::JobFailure::kCannotStart

std::string Lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

[[noreturn]] void ReportAndExit(int report, char kind, const std::string& why, int code) {
  std::string message(1, kind);
  message += why;
  WriteAll(report, message.data(), message.size());
  // Into the log too, when it is open already (stderr is the log by then).
  if (kind != kCannotStart) dprintf(2, "gpuman: %s\n", why.c_str());
  _exit(code);
}

// In the job's process. First, before anything may run, everything that can fail is done
// as the job's owner: drop privileges for good, enter the job's directory, open its log
// (so it is theirs and cannot be used to write where they may not), find the program on
// the job's own PATH. A failure is reported to the supervisor, which records it and never
// lets the job start. Then wait until the supervisor has recorded us in the lease and the
// job as running, and exec.
[[noreturn]] void JobMain(const SupervisorSpec& spec, int gate_read, int report) {
  const model::Job& job = spec.job;
  setpgid(0, 0);
  signal(SIGTERM, SIG_DFL);
  signal(SIGUSR1, SIG_DFL);
  signal(SIGINT, SIG_DFL);
  signal(SIGPIPE, SIG_DFL);
  const std::string uid = std::to_string(job.uid);
  if (getuid() == 0 && job.uid != 0) {
    if (initgroups(job.user.c_str(), job.gid) != 0 || setgid(job.gid) != 0 || setuid(job.uid) != 0) {
      ReportAndExit(report, kCannotStart, "could not become its owner (uid " + uid + "): " + Lower(strerror(errno)), 125);
    }
  } else if (getuid() != job.uid) {
    ReportAndExit(report, kCannotStart, "this daemon runs as uid " + std::to_string(getuid()) +
                                            " and cannot run a job of uid " + uid, 125);
  }
  if (job.uid != 0 && setuid(0) == 0) ReportAndExit(report, kCannotStart, "could not drop root privileges", 125);
  if (!job.cwd.empty() && chdir(job.cwd.c_str()) != 0) {
    ReportAndExit(report, kCannotStart, "cannot enter its working directory " + job.cwd + ": " + Lower(strerror(errno)), 125);
  }
  std::string log = job.output_path.empty() ? DefaultLogPath(job) : job.output_path;
  int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
  int out = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (out < 0) {
    ReportAndExit(report, kCannotStart, "cannot open its output file " + log + ": " + Lower(strerror(errno)), 125);
  }
  if (in >= 0) dup2(in, 0);
  dup2(out, 1);
  dup2(out, 2);
  std::vector<std::string> env;
  for (const auto& [k, v] : job.env) env.push_back(k + "=" + v);
  for (const auto& e : spec.extra_env) {
    std::string key = e.substr(0, e.find('='));
    std::erase_if(env, [&](const std::string& x) { return x.compare(0, key.size() + 1, key + "=") == 0; });
    env.push_back(e);
  }
  // The job's own PATH, in the job's directory, as its owner: what the owner's shell would run.
  auto program = ResolveCommand(job.argv[0], EnvValue(env, "PATH"));
  if (!program) {
    bool missing = program.error().code == ErrorCode::kNotFound;
    ReportAndExit(report, missing ? kNotFound : kCannotExec, program.error().message, missing ? 127 : 126);
  }
  WriteAll(report, &kReady, 1);

  char go = 0;
  ssize_t got;
  do {
    got = read(gate_read, &go, 1);
  } while (got < 0 && errno == EINTR);
  if (got != 1) _exit(125);  // the supervisor is gone or gave up: never run unrecorded
  close(gate_read);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  std::vector<char*> argv, envp;
  for (const auto& a : job.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  execve(program->c_str(), argv.data(), envp.data());  // never through a shell
  int err = errno;
  ReportAndExit(report, err == ENOENT ? kNotFound : kCannotExec,
                (err == ENOENT ? "command not found: " : "could not execute ") + *program + ": " + ExecErrorText(err),
                err == ENOENT ? 127 : 126);
}

model::JobFailure FailureOf(char kind) {
  switch (kind) {
    case kNotFound: return model::JobFailure::kCommandNotFound;
    case kCannotExec: return model::JobFailure::kCannotExecute;
    default: return model::JobFailure::kCannotStart;
  }
}

// Reads what the job's process reported until EOF (its exec, or its exit).
std::string ReadReport(int fd) {
  std::string text;
  char buf[4096];
  while (true) {
    ssize_t r = read(fd, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return text;
    text.append(buf, static_cast<size_t>(r));
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

// The supervisor process (a freshly exec'd gpuman: SQLite state must never cross a fork).
int RunSupervisor(const std::string& state_db, int64_t job_id, int go_read, std::vector<std::string> extra_env,
                  int grace_ms) {
  signal(SIGTERM, OnCancel);
  signal(SIGUSR1, OnGpuLost);
  signal(SIGINT, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  signal(SIGPIPE, SIG_IGN);
  int64_t lease_id = 0;
  if (!ReadAll(go_read, &lease_id, sizeof lease_id)) _exit(0);  // the daemon gave up on us
  close(go_read);

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

  // The job is forked first and held at its own barrier (`gate`) until its pid is in the
  // lease and the job is running in the db. It must not inherit our cancel handler: hold
  // SIGTERM across the fork; the job resets it to the default and unblocks it (a pending
  // one then ends it, as it should).
  int gate[2], report[2];
  if (pipe2(gate, O_CLOEXEC) != 0) give_up(std::string("could not start the job: pipe: ") + strerror(errno));
  if (pipe2(report, O_CLOEXEC) != 0) give_up(std::string("could not start the job: pipe: ") + strerror(errno));
  sigset_t term, old;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  sigaddset(&term, SIGUSR1);
  sigprocmask(SIG_BLOCK, &term, &old);
  pid_t child = fork();
  if (child == 0) {
    close(gate[1]);
    close(report[0]);
    JobMain(spec, gate[0], report[1]);
  }
  int fork_errno = errno;
  sigprocmask(SIG_SETMASK, &old, nullptr);
  close(gate[0]);
  close(report[1]);
  if (child < 0) {
    close(gate[1]);
    give_up(std::string("could not start the job: fork: ") + strerror(fork_errno));
  }
  // SIGCHLD stays blocked so the wait below wakes the moment the job exits.
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, nullptr);
  setpgid(child, child);  // also done by the child; signals below go to the whole group
  auto abandon = [&]() {  // the job reads EOF at its barrier and exits without running
    close(gate[1]);
    int ignored = 0;
    waitpid(child, &ignored, 0);
  };
  // The job's process does, as the owner, all that can fail before it may run.
  char ready = 0;
  if (!ReadAll(report[0], &ready, 1)) {
    abandon();
    give_up("the job's process ended before it started");
  }
  if (ready != kReady) {
    std::string why = ReadReport(report[0]);
    abandon();
    give_up(why.empty() ? "the job could not start" : why, FailureOf(ready));
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
  const char go = 'g';
  WriteAll(gate[1], &go, 1);  // if the job is gone already, the wait below says how it ended
  close(gate[1]);
  // EOF: exec'd (the pipe is CLOEXEC), or gone. A report: exec itself failed, so the
  // command never ran.
  if (std::string exec_report = ReadReport(report[0]); !exec_report.empty()) {
    close(report[0]);
    int ignored = 0;
    waitpid(child, &ignored, 0);
    give_up(exec_report.substr(1), FailureOf(exec_report[0]), model::JobState::kRunning);
  }
  close(report[0]);
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
  const int64_t ended = NowMs();
  store::JobStore::Update outcome;
  outcome.ended_unix_ms = ended;
  model::JobState final_state;
  if (WIFEXITED(status)) {
    outcome.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    outcome.exit_code = 128 + WTERMSIG(status);
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
    outcome.reason = "exit code " + std::to_string(outcome.exit_code.value_or(-1));
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
  return dir + "/gpuman-" + std::to_string(job.id) + ".log";
}

PendingSupervisor::~PendingSupervisor() {
  if (go_fd_ >= 0) close(go_fd_);
}

Status PendingSupervisor::Go(int64_t lease_id) {
  bool ok = WriteAll(go_fd_, &lease_id, sizeof lease_id);
  close(go_fd_);
  go_fd_ = -1;
  if (!ok) return MakeError(ErrorCode::kIo, "supervisor " + std::to_string(pid_) + " is gone");
  return {};
}

Result<std::unique_ptr<PendingSupervisor>> LaunchSupervisor(const SupervisorSpec& spec, const std::string& gpuman_exe) {
  // Everything the exec'd supervisor needs, prepared before fork.
  std::vector<std::string> args = {gpuman_exe, "__supervise", "--db", spec.state_db, "--job",
                                   std::to_string(spec.job.id), "--grace-ms", std::to_string(spec.grace_ms),
                                   "--go-fd", "3"};
  for (const auto& e : spec.extra_env) {
    args.push_back("--env");
    args.push_back(e);
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int go[2], report[2];
  if (pipe2(go, O_CLOEXEC) != 0) return MakeError(ErrorCode::kIo, std::string("pipe: ") + strerror(errno));
  if (pipe2(report, O_CLOEXEC) != 0) {
    close(go[0]);
    close(go[1]);
    return MakeError(ErrorCode::kIo, std::string("pipe: ") + strerror(errno));
  }
  pid_t intermediate = fork();
  if (intermediate < 0) {
    for (int fd : {go[0], go[1], report[0], report[1]}) close(fd);
    return MakeError(ErrorCode::kIo, std::string("fork: ") + strerror(errno));
  }
  if (intermediate == 0) {
    close(go[1]);
    close(report[0]);
    setsid();
    pid_t supervisor = fork();
    if (supervisor != 0) {
      pid_t pid = supervisor;
      WriteAll(report[1], &pid, sizeof pid);
      _exit(0);
    }
    close(report[1]);
    int devnull = open("/dev/null", O_RDWR);
    dup2(devnull, 0);
    dup2(devnull, 1);
    dup2(devnull, 2);
    dup2(go[0], 3);  // without CLOEXEC: the supervisor's barrier
    // Everything else the daemon had open (listening socket, clients, db) is closed by exec
    // (CLOEXEC) or here.
    for (int fd = 4; fd < 1024; ++fd) close(fd);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGCHLD, SIGPIPE}) signal(sig, SIG_DFL);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(go[0]);
  close(report[1]);
  pid_t pid = -1;
  bool got = ReadAll(report[0], &pid, sizeof pid);
  close(report[0]);
  int status = 0;
  waitpid(intermediate, &status, 0);
  if (!got || pid <= 0) {
    close(go[1]);
    return MakeError(ErrorCode::kIo, "supervisor did not start");
  }
  std::unique_ptr<PendingSupervisor> pending(new PendingSupervisor());
  pending->pid_ = pid;
  pending->go_fd_ = go[1];
  return pending;
}

}  // namespace gpuman::sched
