#include "slurm/capture.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace gpuman::slurm {

Result<Captured> RunCapture(const std::vector<std::string>& argv) {
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
  Captured result;
  char buf[4096];
  for (ssize_t n; (n = read(out[0], buf, sizeof buf)) != 0;) {
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
  if (exec_failed) {
    return MakeError(exec_errno == ENOENT ? ErrorCode::kNotFound : ErrorCode::kIo,
                     argv[0] + ": " + (exec_errno == ENOENT ? std::string("not found") : std::strerror(exec_errno)));
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

}  // namespace gpuman::slurm
