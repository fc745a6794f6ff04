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
#include "base/spawn.h"

namespace gpuman::sched {

struct JobSpec {
  std::vector<std::string> argv;  // argv[0] is looked up in the PATH of `env` (FindProgram)
  std::vector<std::string> env;   // the job's environment, "KEY=VALUE"
  bool foreground_tty = false;    // give the job the controlling terminal (interactive use)
};

/// What is only known once the job's GPUs are chosen, handed to the waiting child by Start():
/// environment entries added to / replacing JobSpec::env, CPU affinity, NUMA node.
using StartInfo = LateStart;

class ChildProcess {
 public:
  /// Starts the child (base/spawn.h). It puts itself in a new process group and blocks at
  /// its start barrier until Start(), so it can be recorded in a lease before it may run.
  /// If the parent dies first, the child exits without running the job. From here on this
  /// process holds SIGINT, SIGTERM and SIGHUP blocked: before Start() they stay pending
  /// (TakePendingInterrupt, base/interrupts.h, ends a wait for GPUs), after it they are
  /// forwarded. With spec.foreground_tty the child gets the terminal at Start(), not here.
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
  SpawnedProcess process_;  // the barrier and the exec-error pipe
  bool started_ = false;
  bool reaped_ = false;
  bool take_terminal_ = false;  // foreground_tty, and ours to give
  bool took_terminal_ = false;
};

}  // namespace gpuman::sched
