// The seam between the daemon and the processes its queued jobs run in, as ninja's
// CommandRunner is Builder's: the daemon says what to start (JobLaunchSpec) and gets back a
// job held at a barrier, whose pid it puts into the job's lease before it lets it go. The
// real one (SupervisorLauncher) starts a detached `gpuman __supervise` (sched/supervisor.h);
// tests use a recording fake (tests/support/fake_launcher.h) and assert exactly what a job
// is started with. Only the start goes through here: cancel and the end of an adopted job
// signal processes by pid (daemon.cc), as they must also work for jobs an earlier daemon
// started.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "model/job.h"

namespace gpuman::sched {

/// Everything a queued job is started with.
struct JobLaunchSpec {
  /// As stored, in state starting: id, owner (uid, gid, user), argv, env as submitted, cwd,
  /// output path, time limit, and gpu_uuids (the GPUs it got).
  model::Job job;
  /// "NAME=VALUE" (visibility::ChildGpuEnv): each replaces the job's variable of that name.
  /// GPUMAN_LEASE_ID is not here: the lease exists only once the launched job's pid is in
  /// it; LaunchedJob::Go passes its id on.
  std::vector<std::string> gpu_env;
  std::string state_db;  // where the job's outcome is recorded
  int grace_ms = 10000;  // SIGTERM -> SIGKILL when cancelled or over time
};

/// A launched job waiting at its barrier: nothing of the job's command runs yet.
class LaunchedJob {
 public:
  virtual ~LaunchedJob() = default;  // without Go(): the job never starts
  /// The process to hold the job's lease until the job's own process joins it.
  virtual pid_t pid() const = 0;
  /// Lets the job start, inside lease `lease_id`, its processes in `cgroup` (the lease's
  /// device cgroup, confine/cgroup.h; empty: not confined). Errors: kIo when the process
  /// is gone.
  virtual Status Go(int64_t lease_id, const std::string& cgroup) = 0;
};

class JobLauncher {
 public:
  virtual ~JobLauncher() = default;
  /// Starts `spec.job` held at its barrier. Errors: kIo when no process could be started.
  virtual Result<std::unique_ptr<LaunchedJob>> Launch(const JobLaunchSpec& spec) = 0;
};

/// The real launcher: a detached supervisor per job, `gpuman_exe __supervise ...`.
class SupervisorLauncher final : public JobLauncher {
 public:
  explicit SupervisorLauncher(std::string gpuman_exe) : gpuman_exe_(std::move(gpuman_exe)) {}
  Result<std::unique_ptr<LaunchedJob>> Launch(const JobLaunchSpec& spec) override;

 private:
  std::string gpuman_exe_;
};

}  // namespace gpuman::sched
