#include "sched/child_process.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <cstring>

namespace gpuman::sched {
namespace {

constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP};
constexpr int kMpolPreferred = 1;  // linux/mempolicy.h

sigset_t RunnerSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : kForwarded) sigaddset(&set, sig);
  sigaddset(&set, SIGCHLD);
  return set;
}

int TranslateStatus(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

void WriteAll(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    p += w;
    n -= static_cast<size_t>(w);
  }
}

// Runs in the child between fork and exec: async-signal-safe calls only.
[[noreturn]] void ChildMain(const JobSpec& spec, char* const* argv, char* const* envp, int go_read,
                            int exec_write, const sigset_t& old_mask) {
  setpgid(0, 0);
  for (int sig : kForwarded) signal(sig, SIG_DFL);
  signal(SIGCHLD, SIG_DFL);
  signal(SIGPIPE, SIG_DFL);
  if (!spec.cpu_affinity.empty()) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int cpu : spec.cpu_affinity) {
      if (cpu >= 0 && cpu < CPU_SETSIZE) CPU_SET(cpu, &set);
    }
    sched_setaffinity(0, sizeof set, &set);
  }
  if (spec.preferred_numa_node && *spec.preferred_numa_node >= 0 && *spec.preferred_numa_node < 64) {
    unsigned long mask = 1UL << *spec.preferred_numa_node;
    syscall(SYS_set_mempolicy, kMpolPreferred, &mask, sizeof(mask) * 8 + 1);
  }
  char go = 0;
  ssize_t r;
  do {
    r = read(go_read, &go, 1);
  } while (r < 0 && errno == EINTR);
  if (r != 1) _exit(125);  // the runner died before recording us: never run without a lease
  close(go_read);
  sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  execvpe(argv[0], argv, envp);
  int err = errno;
  WriteAll(exec_write, &err, sizeof err);
  _exit(127);
}

}  // namespace

Result<std::unique_ptr<ChildProcess>> ChildProcess::Fork(const JobSpec& spec) {
  if (spec.argv.empty()) return MakeError(ErrorCode::kInvalidArgument, "no command given");
  int go[2], ex[2];
  if (pipe2(go, O_CLOEXEC) != 0) return MakeError(ErrorCode::kIo, std::string("pipe: ") + std::strerror(errno));
  if (pipe2(ex, O_CLOEXEC) != 0) {
    close(go[0]);
    close(go[1]);
    return MakeError(ErrorCode::kIo, std::string("pipe: ") + std::strerror(errno));
  }
  // Everything the child needs is prepared before fork (no allocation after it).
  std::vector<char*> argv, envp;
  for (const auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : spec.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  // Block the signals we forward before fork, so none is lost between fork and the wait loop.
  sigset_t runner = RunnerSignals(), old_mask;
  sigprocmask(SIG_BLOCK, &runner, &old_mask);

  // Orphans of the job (daemonized workers) are re-parented to us rather than to PID 1, so
  // we can see them, end them with the job and reap them.
  prctl(PR_SET_CHILD_SUBREAPER, 1);

  bool take_terminal = spec.foreground_tty && isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp();
  pid_t pid = fork();
  if (pid < 0) {
    int err = errno;
    sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    for (int fd : {go[0], go[1], ex[0], ex[1]}) close(fd);
    return MakeError(ErrorCode::kIo, std::string("fork: ") + std::strerror(err));
  }
  if (pid == 0) {
    close(go[1]);
    close(ex[0]);
    ChildMain(spec, argv.data(), envp.data(), go[0], ex[1], old_mask);
  }
  setpgid(pid, pid);  // also done by the child; whichever runs first wins the race
  close(go[0]);
  close(ex[1]);
  std::unique_ptr<ChildProcess> child(new ChildProcess());
  child->pid_ = pid;
  child->go_fd_ = go[1];
  child->exec_fd_ = ex[0];
  if (take_terminal) {
    signal(SIGTTOU, SIG_IGN);
    child->took_terminal_ = tcsetpgrp(STDIN_FILENO, pid) == 0;
  }
  return child;
}

Status ChildProcess::Start() {
  char go = 'g';
  WriteAll(go_fd_, &go, 1);
  close(go_fd_);
  go_fd_ = -1;
  int err = 0;
  ssize_t r;
  do {
    r = read(exec_fd_, &err, sizeof err);
  } while (r < 0 && errno == EINTR);
  close(exec_fd_);
  exec_fd_ = -1;
  started_ = true;
  if (r == static_cast<ssize_t>(sizeof err)) {
    int status = 0;
    waitpid(pid_, &status, 0);
    reaped_ = true;
    if (took_terminal_) tcsetpgrp(STDIN_FILENO, getpgrp());
    ErrorCode code = (err == EACCES || err == EPERM) ? ErrorCode::kPermissionDenied : ErrorCode::kNotFound;
    std::string what = std::strerror(err);
    for (char& c : what) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return MakeError(code, "cannot run the command: " + what);
  }
  return {};
}

int ChildProcess::WaitForwardingSignals(int grace_ms) {
  sigset_t runner = RunnerSignals();
  int status = 0;
  while (true) {
    pid_t done = waitpid(pid_, &status, WNOHANG);
    if (done == pid_) break;
    siginfo_t info;
    timespec timeout{0, 200 * 1000 * 1000};
    int sig = sigtimedwait(&runner, &info, &timeout);
    if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) kill(-pid_, sig);
  }
  reaped_ = true;
  if (took_terminal_) tcsetpgrp(STDIN_FILENO, getpgrp());
  // Whatever is left of the job's process group ends with it.
  auto group_alive = [this] {
    int ignored = 0;
    while (waitpid(-pid_, &ignored, WNOHANG) > 0) {  // reap adopted orphans
    }
    return kill(-pid_, 0) == 0;
  };
  if (group_alive()) {
    kill(-pid_, SIGTERM);
    for (int waited = 0; waited < grace_ms && group_alive(); waited += 50) {
      timespec ts{0, 50 * 1000 * 1000};
      nanosleep(&ts, nullptr);
    }
    if (group_alive()) kill(-pid_, SIGKILL);
    group_alive();
  }
  return TranslateStatus(status);
}

ChildProcess::~ChildProcess() {
  if (go_fd_ >= 0) close(go_fd_);  // an unstarted child reads EOF and exits
  if (exec_fd_ >= 0) close(exec_fd_);
  if (pid_ > 0 && !reaped_) {
    if (started_) kill(-pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
  sigset_t runner = RunnerSignals();
  sigprocmask(SIG_UNBLOCK, &runner, nullptr);
}

}  // namespace gpuman::sched
