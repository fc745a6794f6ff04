// A JobLauncher (sched/job_launcher.h) that starts nothing and records everything, as
// ninja's FakeCommandRunner: each Launch keeps its spec (argv, env, cwd, owner, GPUs, the
// GPU environment), whether and with which lease the daemon let the job go, or that it
// dropped it at the barrier. The test decides outcomes: an error for the next launches,
// what Go returns, and the pid the launched job has (default: this test process, which is
// alive, so the daemon can record it in the job's lease). Header-only; single-threaded.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "base/result.h"
#include "sched/job_launcher.h"

namespace gpuman::testing {

class FakeJobLauncher final : public sched::JobLauncher {
 public:
  struct LaunchRecord {
    sched::JobLaunchSpec spec;
    std::optional<int64_t> went_with_lease;  // Go(lease id) was called
    bool dropped = false;                    // destroyed at its barrier, never let go
    std::string cgroup;                      // the cgroup Go was given ("": unconfined)
  };

  /// Every launch, in order (including the failed ones: their spec was asked for).
  std::vector<LaunchRecord> launches;
  /// Errors the next launches return, first one first; empty: launches succeed.
  std::deque<Error> fail_next;
  /// What Go returns.
  Status go_result;
  /// The pid of every launched job.
  pid_t pid = getpid();

  Result<std::unique_ptr<sched::LaunchedJob>> Launch(const sched::JobLaunchSpec& spec) override {
    launches.push_back({spec, std::nullopt, false, {}});
    if (!fail_next.empty()) {
      Error e = fail_next.front();
      fail_next.pop_front();
      return e;
    }
    return std::unique_ptr<sched::LaunchedJob>(std::make_unique<Held>(*this, launches.size() - 1));
  }

 private:
  class Held final : public sched::LaunchedJob {
   public:
    Held(FakeJobLauncher& owner, size_t index) : owner_(owner), index_(index) {}
    ~Held() override {
      if (!owner_.launches[index_].went_with_lease) owner_.launches[index_].dropped = true;
    }
    pid_t pid() const override { return owner_.pid; }
    Status Go(int64_t lease_id, const std::string& cgroup) override {
      owner_.launches[index_].went_with_lease = lease_id;
      owner_.launches[index_].cgroup = cgroup;
      return owner_.go_result;
    }

   private:
    FakeJobLauncher& owner_;
    size_t index_;
  };
};

}  // namespace gpuman::testing
