#include "slurm/slurm_tools.h"

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>

#include "base/posix_error.h"
#include "base/spawn.h"
#include "base/unique_fd.h"

namespace gpuman::slurm {

Result<ToolOutput> ExecSlurmTools::Run(const std::vector<std::string>& argv, const std::string& input) {
  if (argv.empty()) return MakeError(ErrorCode::kInvalidArgument, "nothing to run");
  // Looked up before the child starts (FindProgram's rule), on the PATH the command gets.
  std::optional<std::string> path;
  if (auto it = env_.find("PATH"); it != env_.end()) path = it->second;
  ProgramSearch program = SearchProgram(argv[0], path);
  if (program.err == ENOENT || program.err == ENOTDIR) {
    return MakeError(ErrorCode::kNotFound, argv[0] + ": not found (is Slurm's client installed and on PATH?)");
  }
  if (program.err != 0) return PosixError("could not execute " + program.path, program.err);
  auto in = MakePipe();
  if (!in) return in.error();
  auto out = MakePipe();
  if (!out) return out.error();
  auto err = MakePipe();
  if (!err) return err.error();
  SpawnSpec spec;
  spec.argv = argv;
  spec.program = program.path;
  spec.env.emplace();
  for (const auto& [k, v] : env_) spec.env->push_back(k + "=" + v);
  spec.stdin_fd = SpawnFd::Fd(in->read.get());
  spec.stdout_fd = SpawnFd::Fd(out->write.get());
  spec.stderr_fd = SpawnFd::Fd(err->write.get());
  auto process = Spawn(spec);
  if (!process) return process.error();
  const pid_t pid = process->pid();
  in->read.reset();
  out->write.reset();
  err->write.reset();
  // The command may write before it has read all of its input: feed and drain together.
  std::signal(SIGPIPE, SIG_IGN);
  ToolOutput result;
  size_t written = 0;
  UniqueFd in_fd = std::move(in->write);
  if (input.empty()) in_fd.reset();
  bool out_open = true, err_open = true;
  char buf[65536];
  while (out_open || err_open || in_fd) {
    pollfd fds[3];
    int n = 0;
    if (out_open) fds[n++] = {out->read.get(), POLLIN, 0};
    if (err_open) fds[n++] = {err->read.get(), POLLIN, 0};
    if (in_fd) fds[n++] = {in_fd.get(), POLLOUT, 0};
    if (poll(fds, static_cast<nfds_t>(n), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < n; ++i) {
      if (fds[i].revents == 0) continue;
      if (fds[i].fd == in_fd.get()) {
        const ssize_t w = write(in_fd.get(), input.data() + written, input.size() - written);
        if (w > 0) written += static_cast<size_t>(w);
        if (w < 0 && errno != EINTR && errno != EAGAIN) written = input.size();  // the reader went away
        if (written >= input.size()) in_fd.reset();
        continue;
      }
      const bool is_out = fds[i].fd == out->read.get();
      const ssize_t r = read(fds[i].fd, buf, sizeof buf);
      if (r > 0) {
        std::string& sink = is_out ? result.out : result.err;
        if (sink.size() < (is_out ? (16u << 20) : (1u << 20))) sink.append(buf, static_cast<size_t>(r));
      } else if (r == 0 || (errno != EINTR && errno != EAGAIN)) {
        (is_out ? out_open : err_open) = false;
      }
    }
  }
  in_fd.reset();
  out->read.reset();
  err->read.reset();
  SpawnFailure failure;
  const bool exec_failed = !process->ExecOutcome(&failure);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (exec_failed) return failure.ToError();
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

}  // namespace gpuman::slurm
