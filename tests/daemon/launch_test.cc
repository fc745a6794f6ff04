// What a queued job is started with (sched/job_launcher.h): the daemon's handlers take a
// submit, a scheduling pass places it, and the recording launcher shows exactly the argv,
// environment, directory, owner, GPUs and GPU environment (visibility/child_env.h) the
// job gets, the lease it is let go in, and what happens when no process can be started.
#include <pwd.h>

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "daemon_world.h"
#include "support/fake_launcher.h"

namespace gpuman::daemon {
namespace {

using testing::PeerFor;

constexpr int64_t kNow = 1'700'000'000'000;  // World's clock
const std::string kGpu0 = "GPU-00000000-0000-0000-0000-000000000000";
const std::string kGpu1 = "GPU-00000001-0000-0000-0000-000000000000";

class LaunchTest : public ::testing::Test {
 protected:
  // alice, whose gid (as her peer credentials say) differs from her uid.
  Peer Alice() const { return Peer{testing::kOwnerUid, 2002, 0, "alice", false}; }
  uint32_t AliceGid() const {  // the daemon takes the primary group from passwd when it has one
    passwd* pw = getpwuid(testing::kOwnerUid);
    return pw ? pw->pw_gid : 2002;
  }
  protocol::SubmitArgs TrainJob(int gpus) {
    protocol::SubmitArgs s;
    s.argv = {"python", "train.py", "--lr", "0.1"};
    // A submitting shell inside another lease: its GPU variables are stale for the job.
    s.env = {{"PATH", "/usr/bin:/bin"}, {"HOME", "/home/alice"}, {"CUDA_VISIBLE_DEVICES", "GPU-stale"},
             {"GPUMAN_LEASE_ID", "99"}};
    s.cwd = world_->dir().path();
    s.output = "train.log";
    s.request.count = gpus;
    return s;
  }
  int64_t Submit(const protocol::SubmitArgs& s) {
    auto reply = world_->Call(Alice(), s);
    EXPECT_TRUE(reply.ok()) << (reply.error ? reply.error->message : "");
    return reply.ok() ? reply.result["id"].get<int64_t>() : -1;
  }
  nlohmann::json Show(int64_t id) {
    auto reply = world_->Call(PeerFor(Role::kRoot), protocol::ShowArgs{id});
    EXPECT_TRUE(reply.ok());
    return reply.ok() ? reply.result["job"] : nlohmann::json();
  }

  ::gpuman::testing::FakeJobLauncher launcher_;  // outlives the daemon
  std::unique_ptr<testing::World> world_ = std::make_unique<testing::World>(true, &launcher_);
};

TEST_F(LaunchTest, AQueuedJobStartsWithItsArgvEnvDirectoryOwnerAndGpus) {
  const int64_t id = Submit(TrainJob(2));
  ASSERT_TRUE(launcher_.launches.empty()) << "nothing starts before a scheduling pass";
  world_->daemon().Tick(kNow);

  ASSERT_EQ(launcher_.launches.size(), 1u);
  const auto& launch = launcher_.launches[0];
  const model::Job& job = launch.spec.job;
  EXPECT_EQ(job.id, id);
  EXPECT_EQ(job.state, model::JobState::kStarting);
  EXPECT_EQ(job.argv, (std::vector<std::string>{"python", "train.py", "--lr", "0.1"}));
  EXPECT_EQ(job.env, (std::map<std::string, std::string>{{"CUDA_VISIBLE_DEVICES", "GPU-stale"},
                                                         {"GPUMAN_LEASE_ID", "99"},
                                                         {"HOME", "/home/alice"},
                                                         {"PATH", "/usr/bin:/bin"}}))
      << "the environment as submitted; gpu_env replaces its GPU variables";
  EXPECT_EQ(job.cwd, world_->dir().path());
  EXPECT_EQ(job.output_path, world_->dir().path() + "/train.log");
  EXPECT_EQ(job.uid, testing::kOwnerUid);
  EXPECT_EQ(job.gid, AliceGid());
  EXPECT_EQ(job.user, "alice");
  EXPECT_EQ(job.gpu_uuids, (std::vector<std::string>{kGpu0, kGpu1}));
  EXPECT_EQ(launch.spec.gpu_env, (std::vector<std::string>{
                                     "CUDA_VISIBLE_DEVICES=" + kGpu0 + "," + kGpu1,
                                     "CUDA_DEVICE_ORDER=PCI_BUS_ID",
                                     "NVIDIA_VISIBLE_DEVICES=" + kGpu0 + "," + kGpu1,
                                     "GPUMAN_JOB_ID=" + std::to_string(id),
                                 }));
  EXPECT_EQ(launch.spec.state_db, world_->dir().Join("state") + "/state.db");
  EXPECT_EQ(launch.spec.grace_ms, 10000);

  // Let go inside the job's lease, which the launched process holds.
  const auto shown = Show(id);
  ASSERT_TRUE(shown["lease_id"].is_number()) << shown;
  ASSERT_TRUE(launch.went_with_lease.has_value());
  EXPECT_EQ(*launch.went_with_lease, shown["lease_id"].get<int64_t>());
  EXPECT_FALSE(launch.dropped);
  EXPECT_EQ(shown["state"], "starting");
  EXPECT_EQ(shown["supervisor_pid"], getpid());
  auto leases = world_->Call(PeerFor(Role::kRoot), protocol::LeasesArgs{});
  ASSERT_TRUE(leases.ok());
  ASSERT_EQ(leases.result["leases"].size(), 1u) << leases.result;
  EXPECT_EQ(leases.result["leases"][0]["kind"], "job");
  EXPECT_EQ(leases.result["leases"][0]["processes"][0]["pid"], getpid());
}

TEST_F(LaunchTest, OneGpuAndASimulatedNode) {
  launcher_.launches.clear();
  world_.reset();  // the launcher must outlive the daemon
  world_ = std::make_unique<testing::World>(true, &launcher_, "/scenarios/a100-4.json");
  const int64_t id = Submit(TrainJob(1));
  world_->daemon().Tick(kNow);
  ASSERT_EQ(launcher_.launches.size(), 1u);
  EXPECT_EQ(launcher_.launches[0].spec.gpu_env, (std::vector<std::string>{
                                                    "CUDA_VISIBLE_DEVICES=" + kGpu0,
                                                    "CUDA_DEVICE_ORDER=PCI_BUS_ID",
                                                    "NVIDIA_VISIBLE_DEVICES=" + kGpu0,
                                                    "GPUMAN_JOB_ID=" + std::to_string(id),
                                                    "GPUMAN_SIMULATE=/scenarios/a100-4.json",
                                                }));
}

TEST_F(LaunchTest, AJobThatCannotBeLaunchedIsQueuedAgainAndHoldsNoGpu) {
  launcher_.fail_next.push_back(MakeError(ErrorCode::kIo, "fork: resource temporarily unavailable"));
  const int64_t id = Submit(TrainJob(2));
  world_->daemon().Tick(kNow);
  ASSERT_EQ(launcher_.launches.size(), 1u);
  const auto shown = Show(id);
  EXPECT_EQ(shown["state"], "queued");
  EXPECT_EQ(shown["reason"], "could not start a supervisor: fork: resource temporarily unavailable");
  EXPECT_TRUE(shown["lease_id"].is_null());
  EXPECT_TRUE(shown["gpu_uuids"].empty());
  auto leases = world_->Call(PeerFor(Role::kRoot), protocol::LeasesArgs{});
  ASSERT_TRUE(leases.ok());
  EXPECT_TRUE(leases.result["leases"].empty()) << leases.result;

  // The next pass starts it.
  world_->daemon().Tick(kNow + 1000);
  ASSERT_EQ(launcher_.launches.size(), 2u);
  EXPECT_TRUE(launcher_.launches[1].went_with_lease.has_value());
  EXPECT_EQ(Show(id)["state"], "starting");
}

}  // namespace
}  // namespace gpuman::daemon
