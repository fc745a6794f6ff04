#include "slurm/capture.h"

#include <poll.h>
#include <signal.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>

#include "base/duration.h"
#include "base/posix_error.h"
#include "base/spawn.h"

namespace gpuman::slurm {

namespace {

int64_t MonotonicMs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

}  // namespace

Result<Captured> RunCapture(const std::vector<std::string>& argv) { return RunCapture(argv, -1); }

Result<Captured> RunCapture(const std::vector<std::string>& argv, int64_t timeout_ms) {
  if (argv.empty()) return MakeError(ErrorCode::kInvalidArgument, "nothing to run");
  auto out = MakePipe();
  if (!out) return out.error();
  SpawnSpec spec;
  spec.argv = argv;  // argv[0] found on this process's PATH (FindProgram's rule)
  spec.stdin_fd = SpawnFd::Null();
  spec.stdout_fd = SpawnFd::Fd(out->write.get());
  spec.stderr_fd = SpawnFd::SameAsStdout();
  // So that a timeout kills what the tool started too.
  if (timeout_ms >= 0) spec.group = SpawnSpec::Group::kNewProcessGroup;
  auto process = Spawn(spec);
  if (!process) return process.error();
  out->write.reset();
  const pid_t pid = process->pid();
  Captured result;
  char buf[4096];
  const int64_t deadline = timeout_ms >= 0 ? MonotonicMs() + timeout_ms : -1;
  bool timed_out = false;
  for (;;) {
    if (deadline >= 0) {
      const int64_t left = deadline - MonotonicMs();
      pollfd pfd{out->read.get(), POLLIN, 0};
      const int ready = left > 0 ? poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left, 1 << 30))) : 0;
      if (ready < 0 && errno == EINTR) continue;
      if (ready == 0) {
        timed_out = true;
        kill(-pid, SIGKILL);
        kill(pid, SIGKILL);
        break;
      }
    }
    const ssize_t n = read(out->read.get(), buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (result.output.size() < (1u << 20)) result.output.append(buf, static_cast<size_t>(n));
  }
  out->read.reset();
  SpawnFailure failure;
  const bool exec_failed = !process->ExecOutcome(&failure);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    return MakeError(ErrorCode::kUnavailable,
                     argv[0] + ": no answer within " + FormatDurationMs(timeout_ms) + " (killed)");
  }
  if (exec_failed && failure.err == ENOENT) return MakeError(ErrorCode::kNotFound, argv[0] + ": not found");
  if (exec_failed) return MakeError(ErrorCode::kIo, argv[0] + ": " + ErrnoDescription(failure.err));
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

}  // namespace gpuman::slurm
