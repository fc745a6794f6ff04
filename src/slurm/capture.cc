#include "slurm/capture.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>

#include "base/duration.h"

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
  int out[2], err_pipe[2];
  if (pipe2(out, O_CLOEXEC) != 0) return MakeError(ErrorCode::kIo, std::string("pipe: ") + std::strerror(errno));
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    close(out[0]);
    close(out[1]);
    return MakeError(ErrorCode::kIo, std::string("pipe: ") + std::strerror(errno));
  }
  std::vector<std::string> copy = argv;
  std::vector<char*> args;
  for (std::string& a : copy) args.push_back(a.data());
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return MakeError(ErrorCode::kIo, std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    if (timeout_ms >= 0) setpgid(0, 0);  // so that a timeout kills what the tool started too
    const int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, 0);
    dup2(out[1], 1);
    dup2(out[1], 2);
    execvp(args[0], args.data());
    const int e = errno;
    (void)!write(err_pipe[1], &e, sizeof e);
    _exit(127);
  }
  close(out[1]);
  close(err_pipe[1]);
  if (timeout_ms >= 0) setpgid(pid, pid);  // either side may run first
  Captured result;
  char buf[4096];
  const int64_t deadline = timeout_ms >= 0 ? MonotonicMs() + timeout_ms : -1;
  bool timed_out = false;
  for (;;) {
    if (deadline >= 0) {
      const int64_t left = deadline - MonotonicMs();
      pollfd pfd{out[0], POLLIN, 0};
      const int ready = left > 0 ? poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left, 1 << 30))) : 0;
      if (ready < 0 && errno == EINTR) continue;
      if (ready == 0) {
        timed_out = true;
        kill(-pid, SIGKILL);
        kill(pid, SIGKILL);
        break;
      }
    }
    const ssize_t n = read(out[0], buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (result.output.size() < (1u << 20)) result.output.append(buf, static_cast<size_t>(n));
  }
  close(out[0]);
  int exec_errno = 0;
  const bool exec_failed = read(err_pipe[0], &exec_errno, sizeof exec_errno) == sizeof exec_errno;
  close(err_pipe[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    return MakeError(ErrorCode::kUnavailable,
                     argv[0] + ": no answer within " + FormatDurationMs(timeout_ms) + " (killed)");
  }
  if (exec_failed) {
    return MakeError(exec_errno == ENOENT ? ErrorCode::kNotFound : ErrorCode::kIo,
                     argv[0] + ": " + (exec_errno == ENOENT ? std::string("not found") : std::strerror(exec_errno)));
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

}  // namespace gpuman::slurm
