#include "slurm/slurm_tools.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>

#include "base/strings.h"

namespace gpuman::slurm {
namespace {

Error Errno(const std::string& what, int err) {
  return MakeError(ErrorCode::kIo, what + ": " + ToLower(std::strerror(err)));
}

// The PATH lookup of execvpe, done before fork so that the child only calls execve.
std::string FindProgram(const std::string& name, const std::map<std::string, std::string>& env) {
  if (name.find('/') != std::string::npos) return name;
  auto it = env.find("PATH");
  const std::string path = it != env.end() ? it->second : "/usr/local/bin:/usr/bin:/bin";
  for (const std::string& dir : Split(path, ':')) {
    const std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

}  // namespace

Result<ToolOutput> ExecSlurmTools::Run(const std::vector<std::string>& argv, const std::string& input) {
  if (argv.empty()) return MakeError(ErrorCode::kInvalidArgument, "nothing to run");
  const std::string program = FindProgram(argv[0], env_);
  if (program.empty()) return MakeError(ErrorCode::kNotFound, argv[0] + ": not found (is Slurm's client installed and on PATH?)");
  int in[2], out[2], err[2];
  if (pipe2(in, O_CLOEXEC) != 0) return Errno("pipe", errno);
  if (pipe2(out, O_CLOEXEC) != 0) {
    close(in[0]), close(in[1]);
    return Errno("pipe", errno);
  }
  if (pipe2(err, O_CLOEXEC) != 0) {
    close(in[0]), close(in[1]), close(out[0]), close(out[1]);
    return Errno("pipe", errno);
  }
  std::vector<std::string> args_copy = argv;
  std::vector<char*> args;
  for (std::string& a : args_copy) args.push_back(a.data());
  args.push_back(nullptr);
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : env_) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);

  const pid_t pid = fork();
  if (pid < 0) {
    const int e = errno;
    for (int fd : {in[0], in[1], out[0], out[1], err[0], err[1]}) close(fd);
    return Errno("fork", e);
  }
  if (pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    dup2(err[1], 2);
    execve(program.c_str(), args.data(), envp.data());
    const char msg[] = "gpuman: could not execute the Slurm command\n";
    (void)!write(2, msg, sizeof msg - 1);
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  close(err[1]);
  // The command may write before it has read all of its input: feed and drain together.
  std::signal(SIGPIPE, SIG_IGN);
  ToolOutput result;
  size_t written = 0;
  int in_fd = in[1];
  if (input.empty()) {
    close(in_fd);
    in_fd = -1;
  }
  bool out_open = true, err_open = true;
  char buf[65536];
  while (out_open || err_open || in_fd >= 0) {
    pollfd fds[3];
    int n = 0;
    if (out_open) fds[n++] = {out[0], POLLIN, 0};
    if (err_open) fds[n++] = {err[0], POLLIN, 0};
    if (in_fd >= 0) fds[n++] = {in_fd, POLLOUT, 0};
    if (poll(fds, static_cast<nfds_t>(n), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < n; ++i) {
      if (fds[i].revents == 0) continue;
      if (fds[i].fd == in_fd) {
        const ssize_t w = write(in_fd, input.data() + written, input.size() - written);
        if (w > 0) written += static_cast<size_t>(w);
        if (w < 0 && errno != EINTR && errno != EAGAIN) written = input.size();  // the reader went away
        if (written >= input.size()) {
          close(in_fd);
          in_fd = -1;
        }
        continue;
      }
      const bool is_out = fds[i].fd == out[0];
      const ssize_t r = read(fds[i].fd, buf, sizeof buf);
      if (r > 0) {
        std::string& sink = is_out ? result.out : result.err;
        if (sink.size() < (is_out ? (16u << 20) : (1u << 20))) sink.append(buf, static_cast<size_t>(r));
      } else if (r == 0 || (errno != EINTR && errno != EAGAIN)) {
        (is_out ? out_open : err_open) = false;
      }
    }
  }
  if (in_fd >= 0) close(in_fd);
  close(out[0]);
  close(err[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

}  // namespace gpuman::slurm
