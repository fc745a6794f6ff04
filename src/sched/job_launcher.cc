#include "sched/job_launcher.h"

#include "sched/supervisor.h"

namespace gpuman::sched {
namespace {

class LaunchedSupervisor final : public LaunchedJob {
 public:
  explicit LaunchedSupervisor(std::unique_ptr<PendingSupervisor> pending) : pending_(std::move(pending)) {}
  pid_t pid() const override { return pending_->pid(); }
  Status Go(int64_t lease_id, const std::string& cgroup) override { return pending_->Go(lease_id, cgroup); }

 private:
  std::unique_ptr<PendingSupervisor> pending_;
};

}  // namespace

Result<std::unique_ptr<LaunchedJob>> SupervisorLauncher::Launch(const JobLaunchSpec& spec) {
  SupervisorSpec supervisor;
  supervisor.job = spec.job;
  supervisor.state_db = spec.state_db;
  supervisor.extra_env = spec.gpu_env;
  supervisor.grace_ms = spec.grace_ms;
  auto pending = LaunchSupervisor(supervisor, gpuman_exe_);
  if (!pending) return pending.error();
  return std::unique_ptr<LaunchedJob>(std::make_unique<LaunchedSupervisor>(std::move(*pending)));
}

}  // namespace gpuman::sched
