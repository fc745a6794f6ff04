#include "sched/child_process.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <string>

#include "base/unique_fd.h"

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
  if (spec.processes < 1) return MakeError(ErrorCode::kInvalidArgument, "a job needs at least one process");
  if (!spec.outputs.empty() && spec.outputs.size() != static_cast<size_t>(spec.processes)) {
    return MakeError(ErrorCode::kInvalidArgument, "one output per process");
  }
  // Block the signals we forward before the children start, so none is lost between their
  // start and the wait loop. The children keep them blocked until exec, then get our old mask.
  sigset_t runner = RunnerSignals(), old_mask;
  sigprocmask(SIG_BLOCK, &runner, &old_mask);

  // Orphans of the job (daemonized workers) are re-parented to us rather than to PID 1, so
  // we can see them, end them with the job and reap them.
  prctl(PR_SET_CHILD_SUBREAPER, 1);

  std::unique_ptr<ChildProcess> child(new ChildProcess());
  // The terminal goes to the job only at Start(): while it waits at its barrier (for GPUs,
  // maybe for hours), Ctrl-C must reach us, who hold it blocked and end the wait.
  child->take_terminal_ = spec.foreground_tty && isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp();
  for (int i = 0; i < spec.processes; ++i) {
    SpawnSpec child_spec;
    child_spec.argv = spec.argv;
    child_spec.env = spec.env;  // the job's own PATH finds the program, never this process's
    if (i == 0) {
      child_spec.group = SpawnSpec::Group::kNewProcessGroup;
    } else {
      child_spec.group = SpawnSpec::Group::kJoinProcessGroup;
      child_spec.process_group = child->pid();
    }
    if (!spec.outputs.empty()) {
      const auto [out, err] = spec.outputs[static_cast<size_t>(i)];
      if (out >= 0) child_spec.stdout_fd = SpawnFd::Fd(out);
      if (err >= 0) child_spec.stderr_fd = SpawnFd::Fd(err);
    }
    child_spec.default_signals = {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGPIPE};
    child_spec.signal_mask = old_mask;
    child_spec.start_barrier = true;
    auto process = Spawn(child_spec);
    if (!process) {
      child.reset();  // the ones already forked see their barrier close, and are reaped
      sigprocmask(SIG_SETMASK, &old_mask, nullptr);
      return process.error();
    }
    Member member;
    member.pid = process->pid();
    member.process = std::move(*process);
    child->members_.push_back(std::move(member));
  }
  return child;
}

std::vector<pid_t> ChildProcess::pids() const {
  std::vector<pid_t> out;
  for (const auto& m : members_) out.push_back(m.pid);
  return out;
}

Status ChildProcess::Start(const StartInfo& info) {
  std::vector<StartInfo> infos(members_.size(), info);
  return Start(infos);
}

Status ChildProcess::Start(std::span<const StartInfo> infos) {
  GPUMAN_CHECK(infos.size() == members_.size());
  if (take_terminal_) {
    signal(SIGTTOU, SIG_IGN);
    took_terminal_ = tcsetpgrp(STDIN_FILENO, pid()) == 0;
  }
  started_ = true;
  for (size_t i = 0; i < members_.size(); ++i) {
    Member& m = members_[i];
    SpawnFailure failure;
    Status started = m.process.Release(infos[i], &failure);
    // Gone before it got the go (killed): the wait says how it ended.
    if (started || failure.step == SpawnStep::kEnded) continue;
    // It did not run, and neither will the job: the ones not yet let go never run, the
    // ones that run already are ended (they all run the same program, so this is the first
    // one in practice).
    for (size_t j = i + 1; j < members_.size(); ++j) members_[j].process.Abandon();  // all before any wait (~ChildProcess)
    if (i > 0) kill(-pid(), SIGKILL);
    for (auto& other : members_) {
      int status = 0;
      waitpid(other.pid, &status, 0);
      other.reaped = true;
    }
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

JobEnd ChildProcess::Wait(const WaitOptions& options) {
  using Clock = std::chrono::steady_clock;
  sigset_t runner = RunnerSignals();
  // Readable while one of the (blocked) signals is pending: wakes the poll below, and
  // sigtimedwait takes them. Without it the poll's timeout is the fallback.
  UniqueFd signals(signalfd(-1, &runner, SFD_CLOEXEC | SFD_NONBLOCK));
  const pid_t group = pid();
  JobEnd end;
  std::optional<Clock::time_point> kill_at;
  size_t running = 0;
  for (const auto& m : members_) running += m.reaped ? 0 : 1;
  while (running > 0) {
    for (size_t i = 0; i < members_.size(); ++i) {
      Member& m = members_[i];
      int status = 0;
      if (m.reaped || waitpid(m.pid, &status, WNOHANG) != m.pid) continue;
      m.reaped = true;
      --running;
      const int code = TranslateStatus(status);
      if (code == 0 || end.failed) continue;
      end.failed = static_cast<int>(i);
      end.exit_code = code;
      // The others cannot finish without it (a collective waits for every rank): stop
      // them, as torchrun does, unless a signal we forwarded is ending them already, or
      // it was Ctrl-C at the terminal, which reached every one of them itself (a TERM now
      // would cut short what they do on SIGINT, such as saving a checkpoint).
      if (running > 0 && end.forwarded_signal == 0 && code != 128 + SIGINT) {
        kill(-group, SIGTERM);
        end.stopped_others = true;
        kill_at = Clock::now() + std::chrono::milliseconds(options.stop_grace_ms);
      }
    }
    if (running == 0) break;
    if (kill_at && Clock::now() >= *kill_at) {
      kill(-group, SIGKILL);
      kill_at.reset();
    }

    std::vector<pollfd> fds;
    if (signals) fds.push_back({signals.get(), POLLIN, 0});
    if (options.output) {
      for (int fd : options.output->Fds()) fds.push_back({fd, POLLIN, 0});
    }
    int timeout_ms = 200;
    if (kill_at) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*kill_at - Clock::now()).count();
      timeout_ms = static_cast<int>(std::clamp<int64_t>(left + 1, 0, timeout_ms));
    }
    if (poll(fds.data(), fds.size(), timeout_ms) > 0 && options.output) {
      for (const auto& p : fds) {
        if (p.fd != signals.get() && p.revents != 0) options.output->Drain(p.fd);
      }
    }
    siginfo_t info;
    const timespec now{0, 0};
    for (int sig; (sig = sigtimedwait(&runner, &info, &now)) > 0;) {
      if (sig == SIGCHLD) continue;
      kill(-group, sig);
      if (end.forwarded_signal == 0) end.forwarded_signal = sig;
    }
  }
  if (took_terminal_) tcsetpgrp(STDIN_FILENO, getpgrp());
  EndLeftovers(options.leftover_grace_ms);
  if (options.output) options.output->Finish();
  return end;
}

void ChildProcess::EndLeftovers(int grace_ms) {
  // Whatever is left of the job's process group ends with it.
  const pid_t group = pid();
  auto group_alive = [group] {
    int ignored = 0;
    while (waitpid(-group, &ignored, WNOHANG) > 0) {  // reap adopted orphans
    }
    return kill(-group, 0) == 0;
  };
  if (!group_alive()) return;
  kill(-group, SIGTERM);
  for (int waited = 0; waited < grace_ms && group_alive(); waited += 50) {
    timespec ts{0, 50 * 1000 * 1000};
    nanosleep(&ts, nullptr);
  }
  if (group_alive()) kill(-group, SIGKILL);
  group_alive();
}

int ChildProcess::WaitForwardingSignals(int grace_ms) {
  WaitOptions options;
  options.leftover_grace_ms = grace_ms;
  return Wait(options).exit_code;
}

ChildProcess::~ChildProcess() {
  // Every barrier first: a child waiting at its barrier holds the barriers of the ones
  // forked before it open (inherited, closed at its exec), so it must go before they see
  // EOF; the last one's is ours alone.
  for (auto& m : members_) m.process.Abandon();  // an unstarted child reads EOF and exits
  bool killed = false;
  for (auto& m : members_) {
    if (m.reaped) continue;
    if (started_ && !killed) {
      kill(-pid(), SIGKILL);
      killed = true;
    }
    int status = 0;
    waitpid(m.pid, &status, 0);
  }
  sigset_t runner = RunnerSignals();
  sigprocmask(SIG_UNBLOCK, &runner, nullptr);
}

}  // namespace gpuman::sched
