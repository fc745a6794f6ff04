// The daemon may have other threads (metrics server, NVML reader), so the child runs only
// async-signal-safe calls between fork and exec: everything it needs (argv, envp, fds, the
// program's path) is prepared in the parent.
#include "monitor/hook_runner.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include <nlohmann/json.hpp>

#include "base/duration.h"
#include "base/strings.h"

namespace gpuman::monitor {
namespace {

std::string ErrnoText(int err) { return ToLower(std::strerror(err)); }

ErrorCode CodeOf(int err) {
  switch (err) {
    case ENOENT:
    case ENOTDIR:
      return ErrorCode::kNotFound;
    case EACCES:
    case EPERM:
      return ErrorCode::kPermissionDenied;
    default:
      return ErrorCode::kIo;
  }
}

// Finds the program like execvp would, but in `search_path` and before fork.
Result<std::string> Resolve(const std::string& program, const std::string& search_path) {
  if (program.find('/') != std::string::npos) {
    if (access(program.c_str(), X_OK) != 0) {
      int err = errno;
      return MakeError(CodeOf(err), "hook " + program + ": " + ErrnoText(err));
    }
    return program;
  }
  for (const std::string& dir : Split(search_path, ':')) {
    if (dir.empty()) continue;
    std::string candidate = dir + "/" + program;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return MakeError(ErrorCode::kNotFound, "hook " + program + ": not found in " + search_path);
}

void CloseFd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

// Writes to a pipe whose reader may be gone without taking SIGPIPE: the signal is blocked
// for this thread during the write, and a SIGPIPE the write raised is consumed.
ssize_t WriteNoSigpipe(int fd, const char* data, size_t n) {
  sigset_t pipe_set, old_set, pending;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  sigpending(&pending);
  const bool was_pending = sigismember(&pending, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old_set);
  ssize_t w;
  do {
    w = write(fd, data, n);
  } while (w < 0 && errno == EINTR);
  int err = errno;
  if (w < 0 && err == EPIPE && !was_pending) {
    struct timespec zero = {0, 0};
    sigtimedwait(&pipe_set, nullptr, &zero);
  }
  pthread_sigmask(SIG_SETMASK, &old_set, nullptr);
  errno = err;
  return w;
}

[[noreturn]] void ChildExec(const char* path, char* const* argv, char* const* envp, int stdin_fd,
                            int out_fd, int err_fd, int max_fd) {
  setpgid(0, 0);
  // Ignored signals survive exec: give the hook default dispositions and an empty mask.
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) sigaction(sig, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  // Move our three fds out of the way first, so the dup2s below cannot clobber them.
  int in = fcntl(stdin_fd, F_DUPFD, 10);
  int out = fcntl(out_fd, F_DUPFD, 10);
  int err = fcntl(err_fd, F_DUPFD, 10);
  if (in < 0 || out < 0 || err < 0) _exit(127);
  if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0 || dup3(err, 3, O_CLOEXEC) < 0) _exit(127);
  if (syscall(SYS_close_range, 4U, ~0U, 0U) != 0) {
    for (int fd = 4; fd < max_fd; ++fd) close(fd);
  }
  execve(path, argv, envp);
  int e = errno;
  ssize_t ignored = write(3, &e, sizeof e);
  (void)ignored;
  _exit(127);
}

}  // namespace

std::string SerializePayload(const nlohmann::json& payload) {
  return payload.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

HookRunner::HookRunner(HookRunnerOptions options) : options_(std::move(options)) {}

HookRunner::~HookRunner() {
  for (Hook& hook : hooks_) {
    kill(-hook.pid, SIGKILL);
    kill(hook.pid, SIGKILL);
    int status = 0;
    while (waitpid(hook.pid, &status, 0) < 0 && errno == EINTR) {
    }
    CloseFd(hook.stdin_fd);
    CloseFd(hook.exec_err_fd);
  }
}

int64_t HookRunner::NowMs() const {
  if (options_.clock) return options_.clock->NowUnixMs();
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

Status HookRunner::Run(const std::vector<std::string>& argv, const std::string& payload) {
  if (argv.empty() || argv[0].empty()) return MakeError(ErrorCode::kInvalidArgument, "hook: no command given");
  if (running() >= options_.max_concurrent) {
    ++stats_.dropped;
    return MakeError(ErrorCode::kBusy, "hook " + argv[0] + ": dropped, " + std::to_string(running()) +
                                           " hooks still running");
  }
  auto path = Resolve(argv[0], options_.search_path);
  if (!path) return path.error();

  std::vector<char*> cargv, cenv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  for (const auto& e : options_.env) cenv.push_back(const_cast<char*>(e.c_str()));
  cenv.push_back(nullptr);
  struct rlimit rl;
  int max_fd = 1024;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    max_fd = static_cast<int>(std::min<rlim_t>(rl.rlim_cur, 65536));
  }

  int in[2] = {-1, -1}, ex[2] = {-1, -1};
  int null_fd = -1;
  auto cleanup = [&] {
    for (int* fd : {&in[0], &in[1], &ex[0], &ex[1], &null_fd}) CloseFd(*fd);
  };
  auto io_error = [&](const char* what) {
    int err = errno;
    cleanup();
    return MakeError(ErrorCode::kIo, "hook " + argv[0] + ": " + what + ": " + ErrnoText(err));
  };
  if (pipe2(in, O_CLOEXEC) != 0) return io_error("pipe");
  if (pipe2(ex, O_CLOEXEC | O_NONBLOCK) != 0) return io_error("pipe");
  // Only our end is non-blocking; the hook reads its stdin the ordinary way.
  if (fcntl(in[1], F_SETFL, O_NONBLOCK) != 0) return io_error("fcntl");
  int out_fd = options_.output_fd;
  if (out_fd < 0) {
    null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null_fd < 0) return io_error("open /dev/null");
    out_fd = null_fd;
  }

  pid_t pid = fork();
  if (pid < 0) return io_error("fork");
  if (pid == 0) ChildExec(path->c_str(), cargv.data(), cenv.data(), in[0], out_fd, ex[1], max_fd);
  setpgid(pid, pid);  // also done by the child; whichever runs first wins
  CloseFd(in[0]);
  CloseFd(ex[1]);
  CloseFd(null_fd);

  Hook hook;
  hook.pid = pid;
  hook.program = argv[0];
  hook.started_ms = NowMs();
  hook.stdin_fd = in[1];
  hook.pending = payload;
  hook.exec_err_fd = ex[0];
  ++stats_.started;
  Feed(hook);
  hooks_.push_back(std::move(hook));
  return {};
}

void HookRunner::Feed(Hook& hook) {
  while (hook.stdin_fd >= 0 && !hook.pending.empty()) {
    ssize_t w = WriteNoSigpipe(hook.stdin_fd, hook.pending.data(), hook.pending.size());
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;  // the rest on a later tick
    if (w < 0) {  // EPIPE: the hook does not read its stdin; that is its business
      hook.pending.clear();
      break;
    }
    hook.pending.erase(0, static_cast<size_t>(w));
  }
  CloseFd(hook.stdin_fd);  // EOF tells the hook the payload is complete
}

std::vector<HookOutcome> HookRunner::Reap() {
  std::vector<HookOutcome> done;
  const int64_t now = NowMs();
  for (auto it = hooks_.begin(); it != hooks_.end();) {
    Hook& hook = *it;
    Feed(hook);
    if (!hook.killed && now - hook.started_ms >= options_.timeout_ms) {
      kill(-hook.pid, SIGKILL);
      kill(hook.pid, SIGKILL);
      hook.killed = true;
      CloseFd(hook.stdin_fd);
    }
    int status = 0;
    pid_t r;
    do {
      r = waitpid(hook.pid, &status, WNOHANG);
    } while (r < 0 && errno == EINTR);
    if (r == 0) {
      ++it;
      continue;
    }
    if (r < 0) status = -1;  // someone else reaped it (ECHILD): report it as failed
    done.push_back(Finish(hook, status));
    it = hooks_.erase(it);
  }
  return done;
}

HookOutcome HookRunner::Finish(Hook& hook, int status) {
  HookOutcome out;
  out.program = hook.program;
  out.pid = hook.pid;
  out.timed_out = hook.killed;
  int exec_errno = 0;
  bool exec_failed = read(hook.exec_err_fd, &exec_errno, sizeof exec_errno) == static_cast<ssize_t>(sizeof exec_errno);
  CloseFd(hook.stdin_fd);
  CloseFd(hook.exec_err_fd);
  std::string what;
  if (exec_failed) {
    what = "cannot run: " + ErrnoText(exec_errno);
  } else if (status == -1) {
    what = "exit status unknown (reaped elsewhere)";
  } else if (WIFEXITED(status)) {
    out.exit_code = WEXITSTATUS(status);
    out.ok = *out.exit_code == 0 && !hook.killed;
    what = "exited with status " + std::to_string(*out.exit_code);
  } else if (WIFSIGNALED(status)) {
    out.signal = WTERMSIG(status);
    what = std::string("killed by signal ") + std::to_string(*out.signal);
  }
  if (hook.killed) what = "timed out after " + FormatDurationMs(options_.timeout_ms) + ", killed";
  out.message = "hook " + hook.program + ": " + what;
  if (out.ok) ++stats_.succeeded;
  else ++stats_.failed;
  if (out.timed_out) ++stats_.timed_out;
  return out;
}

}  // namespace gpuman::monitor
