#include "sched/child_process.h"

#include <errno.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <string>

namespace gpuman::sched {
namespace {

constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP};

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

}  // namespace

Result<std::unique_ptr<ChildProcess>> ChildProcess::Fork(const JobSpec& spec) {
  if (spec.argv.empty()) return MakeError(ErrorCode::kInvalidArgument, "no command given");
  // Block the signals we forward before the child starts, so none is lost between its start
  // and the wait loop. The child keeps them blocked until its exec, then gets our old mask.
  sigset_t runner = RunnerSignals(), old_mask;
  sigprocmask(SIG_BLOCK, &runner, &old_mask);

  // Orphans of the job (daemonized workers) are re-parented to us rather than to PID 1, so
  // we can see them, end them with the job and reap them.
  prctl(PR_SET_CHILD_SUBREAPER, 1);

  bool take_terminal = spec.foreground_tty && isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp();
  SpawnSpec child_spec;
  child_spec.argv = spec.argv;
  child_spec.env = spec.env;  // the job's own PATH finds the program, never this process's
  child_spec.group = SpawnSpec::Group::kNewProcessGroup;
  child_spec.default_signals = {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGPIPE};
  child_spec.signal_mask = old_mask;
  child_spec.start_barrier = true;
  auto process = Spawn(child_spec);
  if (!process) {
    sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    return process.error();
  }
  std::unique_ptr<ChildProcess> child(new ChildProcess());
  child->pid_ = process->pid();
  child->process_ = std::move(*process);
  // The terminal goes to the child only at Start(): while it waits at its barrier (for GPUs,
  // maybe for hours), Ctrl-C must reach us, who hold it blocked and end the wait.
  child->take_terminal_ = take_terminal;
  return child;
}

Status ChildProcess::Start(const StartInfo& info) {
  if (take_terminal_) {
    signal(SIGTTOU, SIG_IGN);
    took_terminal_ = tcsetpgrp(STDIN_FILENO, pid_) == 0;
  }
  SpawnFailure failure;
  Status started = process_.Release(info, &failure);
  started_ = true;
  // Gone before it got the go (killed): the wait says how it ended.
  if (!started && failure.step == SpawnStep::kEnded) return {};
  if (!started) {
    int status = 0;
    waitpid(pid_, &status, 0);
    reaped_ = true;
    if (took_terminal_) tcsetpgrp(STDIN_FILENO, getpgrp());
    if (failure.step != SpawnStep::kExec && failure.step != SpawnStep::kFindProgram) return started;
    // A program found but not runnable reads as exec's "permission denied".
    int err = failure.err;
    if (failure.step == SpawnStep::kFindProgram) err = err == ENOENT || err == ENOTDIR ? ENOENT : EACCES;
    ErrorCode code = err == ENOENT ? ErrorCode::kNotFound : ErrorCode::kPermissionDenied;
    return MakeError(code, "cannot run the command: " + ExecErrorText(err));
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
  process_.Abandon();  // an unstarted child reads EOF and exits
  if (pid_ > 0 && !reaped_) {
    if (started_) kill(-pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
  sigset_t runner = RunnerSignals();
  sigprocmask(SIG_UNBLOCK, &runner, nullptr);
}

}  // namespace gpuman::sched
