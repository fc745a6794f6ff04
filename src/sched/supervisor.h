// The job supervisor: a small process of its own per queued job, detached from the daemon
// (double fork + setsid), so that stopping, upgrading or kill -9 of the daemon neither
// kills nor loses a running job. It drops privileges to the job's owner before opening the
// log or exec'ing, enforces the time limit, forwards cancellation (SIGTERM to the
// supervisor), and writes the job's outcome into the state db itself (every state change
// through JobStore::Transition, checked against sched::CheckTransition). The job's own pid
// goes into the job's lease before the job may run, so the job's GPUs stay taken while the
// job lives even if the supervisor is killed (the daemon then adopts the job).
// LaunchSupervisor is called from the daemon's single thread.
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"
#include "model/job.h"

namespace gpuman::sched {

struct SupervisorSpec {
  model::Job job;                // id, uid, gid, user, argv, env, cwd, output_path, time limit
  std::string state_db;          // where the supervisor records the outcome
  std::vector<std::string> extra_env;  // CUDA_VISIBLE_DEVICES=..., GPUMAN_JOB_ID=..., ...
  int grace_ms = 10000;          // SIGTERM -> SIGKILL when cancelled or over time
};

/// A launched supervisor waiting at its barrier: it has not touched the job yet.
class PendingSupervisor {
 public:
  ~PendingSupervisor();  // without Go(): the supervisor exits, the job never starts
  pid_t pid() const { return pid_; }
  /// Lets the supervisor record `lease_id` and the running state and start the job, moved
  /// into `cgroup` first unless it is empty.
  Status Go(int64_t lease_id, const std::string& cgroup);

 private:
  friend Result<std::unique_ptr<PendingSupervisor>> LaunchSupervisor(const SupervisorSpec& spec,
                                                                     const std::string& gpuman_exe);
  pid_t pid_ = -1;
  UniqueFd go_fd_;
};

/// Starts a detached supervisor for `spec.job` (which must be stored, in state starting) by
/// exec'ing `gpuman_exe __supervise ...`, and returns it held at its barrier, so the caller
/// can put its pid into a lease first. Errors: kIo when fork/pipe fails.
Result<std::unique_ptr<PendingSupervisor>> LaunchSupervisor(const SupervisorSpec& spec,
                                                            const std::string& gpuman_exe);

/// The supplementary groups of a job's owner (initgroups' list for job.user and job.gid;
/// {job.gid} when they cannot be read), for whatever runs as the owner: the job, its
/// end-of-job notification.
std::vector<gid_t> GroupsOfOwner(const model::Job& job);

/// The body of `gpuman __supervise`: waits at the barrier (`go_fd`), forks the job held at a
/// barrier of its own, adds the job's pid and start time to the lease, records the running
/// state, lets the job exec as its owner, waits, records the outcome and releases the
/// lease. Returns the process exit code.
int RunSupervisor(const std::string& state_db, int64_t job_id, int go_fd, std::vector<std::string> extra_env,
                  int grace_ms);

/// The path of the default log file of a job: <cwd>/gpuman-<id>.log.
std::string DefaultLogPath(const model::Job& job);

}  // namespace gpuman::sched
