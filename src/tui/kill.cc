#include "tui/kill.h"

#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/posix_error.h"
#include "base/unique_fd.h"

namespace gpuman::tui {

KillDecision DecideKill(const Identity& me, const ProcessRow& target) {
  const std::string pid = "pid " + std::to_string(target.pid);
  if (!target.is_visible) {
    return {KillVerdict::kDenied, pid + " is not visible here (another PID namespace or gone)"};
  }
  if (target.uid && *target.uid == me.uid) return {KillVerdict::kAllowed, ""};
  const std::string owner = target.user.empty() ? (target.uid ? "uid " + std::to_string(*target.uid) : "") : target.user;
  if (me.is_root) {
    return {KillVerdict::kConfirm, pid + " belongs to " + (owner.empty() ? "an unknown user" : owner)};
  }
  if (!target.uid) return {KillVerdict::kDenied, pid + ": owner unknown; not signalled"};
  return {KillVerdict::kDenied, pid + " belongs to " + owner + "; only root may signal other users' processes"};
}

std::string SignalName(int signal) {
  if (signal == SIGTERM) return "TERM";
  if (signal == SIGKILL) return "KILL";
  if (signal == SIGINT) return "INT";
  return std::to_string(signal);
}

namespace {

Error ErrnoError(const std::string& context, int err) {
  return PosixError(err == ESRCH || err == EPERM ? ErrorCodeForErrno(err) : ErrorCode::kInternal, context, err);
}

// A descriptor for the process from before we check its identity, so the check and the
// signal refer to the same process even if the pid is recycled in between. -1 when the
// kernel has no pidfd_open (before 5.3): then kill(2), with the check just before it.
struct PidFd {
  explicit PidFd(pid_t pid) {
#ifdef SYS_pidfd_open
    fd.reset(static_cast<int>(syscall(SYS_pidfd_open, pid, 0)));
    if (!fd) err = errno;
#endif
  }
  UniqueFd fd;
  int err = 0;
};

}  // namespace

Status SignalProcess(const ProcessRow& target, int signal, devices::ProcessInspector& procfs) {
  const std::string context = "pid " + std::to_string(target.pid);
  if (target.pid == 0) return MakeError(ErrorCode::kInvalidArgument, context + ": not a process");
  const auto pid = static_cast<pid_t>(target.pid);
  PidFd pidfd(pid);
  if (!pidfd.fd && pidfd.err == ESRCH) return ErrnoError(context, ESRCH);
  auto now = procfs.Inspect(target.pid);
  if (!now) return ErrnoError(context, ESRCH);
  if ((target.uid && now->uid != *target.uid) || now->start_time_unix != target.start_time_unix) {
    return MakeError(ErrorCode::kConflict, context + ": is now a different process; not signalled");
  }
#if defined(SYS_pidfd_send_signal)
  if (pidfd.fd) {
    if (syscall(SYS_pidfd_send_signal, pidfd.fd.get(), signal, nullptr, 0) == 0) return {};
    if (errno != ENOSYS) return ErrnoError(context, errno);
  }
#endif
  if (kill(pid, signal) != 0) return ErrnoError(context, errno);
  return {};
}

}  // namespace gpuman::tui
