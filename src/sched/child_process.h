// ChildProcess: a job started by `gpuman run`, as forked children in one process group of
// their own (one process for a plain job; one per rank for `run --per-gpu`) that wait at a
// barrier until the parent has recorded them (so no job runs without a lease), then exec
// argv directly (never through a shell). Owned by the runner's main thread.
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "base/result.h"
#include "base/spawn.h"

namespace gpuman::sched {

struct JobSpec {
  std::vector<std::string> argv;  // argv[0] is looked up in the PATH of `env` (FindProgram)
  std::vector<std::string> env;   // the job's environment, "KEY=VALUE"
  bool foreground_tty = false;    // give the job the controlling terminal (interactive use)
  /// How many processes run argv: 1 for a job, one per rank for `run --per-gpu`. They share
  /// one process group, the first one's, so that Ctrl-C at the terminal and the signals
  /// forwarded to the job reach every one.
  int processes = 1;
  /// Per process, {stdout, stderr}: descriptors of ours the process gets a copy of (-1:
  /// inherited). Empty: every process inherits both.
  std::vector<std::pair<int, int>> outputs;
};

/// What is only known once the job's GPUs are chosen, handed to a waiting child by Start():
/// environment entries added to / replacing JobSpec::env, CPU affinity, NUMA node.
using StartInfo = LateStart;

/// Descriptors to read while the job runs (the ranks' output of `run --per-gpu`): Wait
/// polls Fds() together with the job's signals, calls Drain(fd) for each that is readable
/// or hung up, and Finish() once the job's processes have ended.
class OutputPump {
 public:
  virtual ~OutputPump() = default;
  virtual std::vector<int> Fds() const = 0;
  virtual void Drain(int fd) = 0;
  virtual void Finish() = 0;
};

struct WaitOptions {
  /// What is left of the job's process group once its processes ended: SIGTERM, this long,
  /// SIGKILL (as Slurm ends a step).
  int leftover_grace_ms = 5000;
  /// The other processes, when one fails while they run: SIGTERM, this long, SIGKILL.
  int stop_grace_ms = 10000;
  OutputPump* output = nullptr;
};

/// How a job ended.
struct JobEnd {
  /// The first process that failed: its exit code, or 128+N when signal N killed it; 0 when
  /// every process exited 0.
  int exit_code = 0;
  std::optional<int> failed;     // which process that was (0-based), when one failed
  bool stopped_others = false;   // others still ran then, and were stopped (TERM, grace, KILL)
  int forwarded_signal = 0;      // the first SIGINT/SIGTERM/SIGHUP forwarded to the job, or 0
};

class ChildProcess {
 public:
  /// Starts the children (base/spawn.h). The first puts itself in a new process group, the
  /// others join it; each blocks at its start barrier until Start(), so it can be recorded
  /// in a lease before it may run. If the parent dies first, they exit without running the
  /// job. From here on this process holds SIGINT, SIGTERM and SIGHUP blocked: before
  /// Start() they stay pending (TakePendingInterrupt, base/interrupts.h, ends a wait for
  /// GPUs), after it they are forwarded. With spec.foreground_tty the group gets the
  /// terminal at Start(), not here. Errors: kInvalidArgument for an empty argv or a count
  /// below 1 (or outputs not one per process); kIo when fork or pipe fails.
  static Result<std::unique_ptr<ChildProcess>> Fork(const JobSpec& spec);

  ~ChildProcess();  // children that never started are killed and reaped
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  /// The first process: also the id of the job's process group.
  pid_t pid() const { return members_.front().pid; }
  /// Every process, in order.
  std::vector<pid_t> pids() const;

  /// Lets every child apply `info` (the same for all) and exec the job. Errors: kNotFound
  /// ("cannot run the command: no such file or directory") or kPermissionDenied when exec
  /// fails; every child is then ended and reaped.
  Status Start(const StartInfo& info = {});
  /// The same with one StartInfo per process (their rank's environment and CPUs).
  Status Start(std::span<const StartInfo> infos);

  /// Waits for every process, forwarding SIGINT, SIGTERM and SIGHUP that reach this
  /// process to the job's process group. When one process fails while others run, they
  /// are stopped (WaitOptions::stop_grace_ms), unless a forwarded signal is already ending
  /// them or SIGINT ended it (Ctrl-C at the terminal reaches the whole group). Then what
  /// remains of the group ends (leftover_grace_ms).
  JobEnd Wait(const WaitOptions& options = {});

  /// Wait for a one-process job: its exit code, or 128+N if signal N killed it.
  int WaitForwardingSignals(int grace_ms = 5000);

 private:
  struct Member {
    pid_t pid = -1;
    SpawnedProcess process;  // the barrier and the exec-error pipe
    bool reaped = false;
  };
  ChildProcess() = default;
  void EndLeftovers(int grace_ms);
  std::vector<Member> members_;
  bool started_ = false;
  bool take_terminal_ = false;  // foreground_tty, and ours to give
  bool took_terminal_ = false;
};

}  // namespace gpuman::sched
