// ChildProcess: a job started by `gpuman run`, as a forked child in its own process group
// that waits at a barrier until the parent has recorded it (so no job runs without a lease),
// then execs argv directly (never through a shell). Owned by the runner's main thread.
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"

namespace gpuman::sched {

/// Finds the program `name` would run as argv[0], as execvp(3) does but against `path_var`
/// (the job's own PATH, not this process's; unset: "/bin:/usr/bin", glibc's default) and
/// never falling back to a shell: a name with a '/' is used as it is; otherwise each PATH
/// directory in turn (an empty entry is the current directory) and the first regular file
/// this process may execute wins. Checks with the caller's credentials and working
/// directory, so call it as the job's owner, in the job's directory.
/// Errors: kNotFound "command not found: NAME" (nowhere on PATH, or no such file);
/// kPermissionDenied "could not execute PATH: permission denied" (found, but not
/// executable: mode bits, a directory, a noexec mount).
Result<std::string> ResolveCommand(const std::string& name, const std::optional<std::string>& path_var);

/// The value of NAME in an environment of "NAME=VALUE" strings (the last one wins).
std::optional<std::string> EnvValue(const std::vector<std::string>& env, const std::string& name);

/// What execve's errno means for a program that ResolveCommand found ("permission denied";
/// ENOEXEC: "not an executable format (a script needs a #! line)"), in lower case.
std::string ExecErrorText(int err);

struct JobSpec {
  std::vector<std::string> argv;  // argv[0] is looked up in the PATH of `env` (ResolveCommand)
  std::vector<std::string> env;   // the job's environment, "KEY=VALUE"
  bool foreground_tty = false;    // give the job the controlling terminal (interactive use)
};

/// What is only known once the job's GPUs are chosen, handed to the waiting child by Start().
struct StartInfo {
  std::vector<std::string> env;            // "KEY=VALUE", added to / replacing JobSpec::env
  std::vector<int> cpu_affinity;           // empty: inherit
  std::optional<int> preferred_numa_node;  // set_mempolicy(MPOL_PREFERRED) before exec
};

class ChildProcess {
 public:
  /// Forks the child. It puts itself in a new process group and blocks until Start(), so it
  /// can be recorded in a lease before it may run. If the parent dies first, the child exits
  /// without running the job. The caller must be single-threaded (the child allocates).
  /// Errors: kInvalidArgument for an empty argv; kIo when fork or pipe fails.
  static Result<std::unique_ptr<ChildProcess>> Fork(const JobSpec& spec);

  ~ChildProcess();  // a child that never started is killed and reaped
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }

  /// Lets the child apply `info` and exec the job. Errors: kNotFound ("cannot run the
  /// command: no such file or directory") or kPermissionDenied when exec fails; the child
  /// is then reaped.
  Status Start(const StartInfo& info = {});

  /// Waits for the job, forwarding SIGINT, SIGTERM and SIGHUP that reach this process to the
  /// job's process group. Returns the job's exit code, or 128+N if signal N killed it.
  /// When the main process ends, what remains of its process group gets SIGTERM and, after
  /// `grace_ms`, SIGKILL (as Slurm ends a step).
  int WaitForwardingSignals(int grace_ms = 5000);

 private:
  ChildProcess() = default;
  pid_t pid_ = -1;
  int go_fd_ = -1;    // parent's end of the barrier pipe
  int exec_fd_ = -1;  // CLOEXEC pipe: the child writes errno here if exec fails
  bool started_ = false;
  bool reaped_ = false;
  bool took_terminal_ = false;
};

}  // namespace gpuman::sched
