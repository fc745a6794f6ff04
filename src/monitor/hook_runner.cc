// The daemon may have other threads (metrics server, NVML reader): Spawn (base/spawn.h)
// makes only async-signal-safe calls between fork and exec.
#include "monitor/hook_runner.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include <nlohmann/json.hpp>

#include "base/duration.h"
#include "base/posix_error.h"
#include "base/spawn.h"

namespace gpuman::monitor {
namespace {

// Finds the program by FindProgram's rule (base/spawn.h), in `search_path` and before the
// child starts, so that a hook that is not there is an error of Run.
Result<std::string> Resolve(const std::string& label, const std::string& program, const std::string& search_path) {
  ProgramSearch search = SearchProgram(program, search_path);
  if (search.err == 0) return search.path;
  if (program.find('/') == std::string::npos && search.err == ENOENT) {
    return MakeError(ErrorCode::kNotFound, label + " " + program + ": not found in " + search_path);
  }
  return PosixError(label + " " + search.path, search.err);
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
  }
}

int64_t HookRunner::NowMs() const {
  if (options_.clock) return options_.clock->NowUnixMs();
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

Status HookRunner::Run(const std::vector<std::string>& argv, const std::string& payload) {
  HookCommand command;
  command.argv = argv;
  command.payload = payload;
  return Start(command);
}

Status HookRunner::Start(const HookCommand& command) {
  const std::vector<std::string>& argv = command.argv;
  const std::string& label = options_.label;
  if (argv.empty() || argv[0].empty()) return MakeError(ErrorCode::kInvalidArgument, label + ": no command given");
  if (running() >= options_.max_concurrent) {
    ++stats_.dropped;
    return MakeError(ErrorCode::kBusy, label + " " + argv[0] + ": dropped, " + std::to_string(running()) + " " +
                                           label + "s still running");
  }
  auto path = Resolve(label, argv[0], options_.search_path);
  if (!path) return path.error();

  std::optional<Pipe> in;
  if (command.payload) {
    auto made = MakePipe();
    if (!made) return MakeError(ErrorCode::kIo, label + " " + argv[0] + ": " + made.error().message);
    // Only our end is non-blocking; the hook reads its stdin the ordinary way.
    if (fcntl(made->write.get(), F_SETFL, O_NONBLOCK) != 0) {
      return PosixError(ErrorCode::kIo, label + " " + argv[0] + ": fcntl", errno);
    }
    in = std::move(*made);
  }

  SpawnSpec spec;
  spec.argv = argv;
  spec.program = *path;
  spec.env = command.env ? *command.env : options_.env;
  spec.cwd = command.cwd;
  spec.uid = command.uid;
  spec.gid = command.gid;
  spec.groups = command.groups;
  spec.stdin_fd = in ? SpawnFd::Fd(in->read.get()) : SpawnFd::Null();
  if (!command.output_file.empty()) {
    // Opened by the child, as its user: never a file the user could not write.
    spec.stdout_fd = SpawnFd::FileOrNull(command.output_file, O_WRONLY | O_APPEND | O_NOCTTY | O_NONBLOCK);
  } else {
    spec.stdout_fd = options_.output_fd >= 0 ? SpawnFd::Fd(options_.output_fd) : SpawnFd::Null();
  }
  spec.stderr_fd = SpawnFd::SameAsStdout();
  spec.close_other_fds = true;
  spec.group = SpawnSpec::Group::kNewProcessGroup;
  // Ignored signals survive exec: give the hook default dispositions and an empty mask.
  spec.all_signals_default = true;
  auto process = Spawn(spec);
  if (!process) return MakeError(ErrorCode::kIo, label + " " + argv[0] + ": " + process.error().message);

  Hook hook;
  hook.pid = process->pid();
  hook.program = argv[0];
  hook.started_ms = NowMs();
  if (in) hook.stdin_fd = std::move(in->write);
  hook.pending = command.payload.value_or("");
  hook.process = std::move(*process);
  hook.tag = command.tag;
  ++stats_.started;
  Feed(hook);
  hooks_.push_back(std::move(hook));
  return {};
}

void HookRunner::Feed(Hook& hook) {
  while (hook.stdin_fd && !hook.pending.empty()) {
    ssize_t w = WriteNoSigpipe(hook.stdin_fd.get(), hook.pending.data(), hook.pending.size());
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;  // the rest on a later tick
    if (w < 0) {  // EPIPE: the hook does not read its stdin; that is its business
      hook.pending.clear();
      break;
    }
    hook.pending.erase(0, static_cast<size_t>(w));
  }
  hook.stdin_fd.reset();  // EOF tells the hook the payload is complete
}

std::vector<HookOutcome> HookRunner::Reap() {
  std::vector<HookOutcome> done;
  const int64_t now = NowMs();
  for (auto it = hooks_.begin(); it != hooks_.end();) {
    Hook& hook = *it;
    Feed(hook);
    const int64_t age = now - hook.started_ms;
    if (options_.kill_grace_ms > 0 && !hook.terminated && age >= options_.timeout_ms) {
      kill(-hook.pid, SIGTERM);
      kill(hook.pid, SIGTERM);
      hook.terminated = true;
      hook.stdin_fd.reset();
    }
    if (!hook.killed && age >= options_.timeout_ms + options_.kill_grace_ms) {
      kill(-hook.pid, SIGKILL);
      kill(hook.pid, SIGKILL);
      hook.killed = true;
      hook.stdin_fd.reset();
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
  out.tag = hook.tag;
  out.timed_out = hook.killed || hook.terminated;
  // Reaped already, so the exec-error pipe answers at once.
  SpawnFailure failure;
  const bool exec_failed = !hook.process.ExecOutcome(&failure);
  hook.stdin_fd.reset();
  std::string what;
  if (exec_failed) {
    what = "cannot run: " + PosixErrorText(failure.err);
  } else if (status == -1) {
    what = "exit status unknown (reaped elsewhere)";
  } else if (WIFEXITED(status)) {
    out.exit_code = WEXITSTATUS(status);
    out.ok = *out.exit_code == 0 && !hook.killed && !hook.terminated;
    what = "exited with status " + std::to_string(*out.exit_code);
  } else if (WIFSIGNALED(status)) {
    out.signal = WTERMSIG(status);
    what = std::string("killed by signal ") + std::to_string(*out.signal);
  }
  if (hook.killed) {
    what = "timed out after " + FormatDurationMs(options_.timeout_ms) + ", killed";
  } else if (hook.terminated) {
    what = "timed out after " + FormatDurationMs(options_.timeout_ms) + ", terminated";
  }
  out.message = options_.label + " " + hook.program + ": " + what;
  if (out.ok) ++stats_.succeeded;
  else ++stats_.failed;
  if (out.timed_out) ++stats_.timed_out;
  return out;
}

}  // namespace gpuman::monitor
