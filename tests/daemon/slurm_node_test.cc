// On a Slurm node the daemon's per-GPU drains and idle-lease releases step aside: Slurm
// hands out the node's GPUs and can only drain the whole node, and it ends jobs itself
// (docs/slurm.md). Each case runs once with CollectorOptions::slurm_node saying "Slurm
// node" and once without (the control, where gpuman acts). The real tick, a real state db,
// two fake GPUs (one can be lost), a settable clock.
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>

#include "daemon/daemon.h"
#include "daemon_world.h"
#include "store/job_store.h"
#include "store/lease_store.h"
#include "store/proc_liveness.h"
#include "support/fake_clock.h"
#include "support/fake_device_source.h"
#include "support/temp_dir.h"

namespace gpuman::daemon {
namespace {

using ::gpuman::testing::FakeClock;

using ::testing::HasSubstr;
using testing::PeerFor;

std::string Uuid(int i) { return ::gpuman::testing::LongUuid(i); }

class SlurmNodeTest : public ::testing::TestWithParam<bool> {
 protected:
  bool slurm() const { return GetParam(); }
  void SetUp() override {
    DaemonOptions options;
    options.system_mode = true;
    options.state_dir = dir_.Join("state");
    options.socket_path = dir_.Join("gpuman.sock");
    options.monitor.kernel_log = "";
    options.monitor.sample_interval_ms = 1000;
    options.monitor.hostname = "node7.cluster";
    options.monitor.idle.idle_after_ms = 60'000;
    options.monitor.idle.release_after_ms = 60'000;
    const bool is_slurm = slurm();
    options.monitor.slurm_node = [is_slurm]() -> std::optional<std::string> {
      return is_slurm ? std::optional<std::string>("slurmd runs (pid 812)") : std::nullopt;
    };
    daemon_ = std::make_unique<Daemon>(options, devices_, clock_, supervisors_);
    ::testing::internal::CaptureStderr();
    Status started = daemon_->Start();
    start_log_ = ::testing::internal::GetCapturedStderr();
    ASSERT_TRUE(started) << started.error().message;
    auto jobs = store::JobStore::Open(dir_.Join("state") + "/state.db");
    ASSERT_TRUE(jobs);
    jobs_ = std::move(*jobs);
    auto leases = store::LeaseStore::Open(dir_.Join("state") + "/state.db", {});
    ASSERT_TRUE(leases);
    leases_ = std::move(*leases);
  }
  // The daemon's log lines of one tick.
  std::string Tick(int64_t advance_ms) {
    clock_.now += advance_ms;
    ::testing::internal::CaptureStderr();
    daemon_->Tick(clock_.now);
    return ::testing::internal::GetCapturedStderr();
  }
  protocol::Reply Call(const Peer& peer, protocol::RequestArgs args) {
    return daemon_->Handle(peer, protocol::Request{++request_id_, std::move(args)});
  }
  std::map<std::string, std::string> Drained() {
    auto drained = jobs_->Drained();
    EXPECT_TRUE(drained);
    return drained ? *drained : std::map<std::string, std::string>{};
  }

  ::gpuman::testing::TempDir dir_;
  // Two idle GPUs; one can be lost.
  ::gpuman::testing::FakeDeviceSource devices_{
      ::gpuman::testing::SnapshotBuilder().Uuids(::gpuman::testing::LongUuid).Add(2).Build()};
  FakeClock clock_;
  sched::SupervisorLauncher supervisors_{""};  // no job starts here
  std::unique_ptr<Daemon> daemon_;
  std::unique_ptr<store::JobStore> jobs_;
  std::unique_ptr<store::LeaseStore> leases_;
  std::string start_log_;
  int64_t request_id_ = 0;
};

TEST_P(SlurmNodeTest, StartSaysSo) {
  if (slurm()) {
    EXPECT_THAT(start_log_, HasSubstr("Slurm node (slurmd runs (pid 812)): per-GPU drains and idle-lease releases step aside"));
  } else {
    EXPECT_THAT(start_log_, ::testing::Not(HasSubstr("Slurm node")));
  }
}

TEST_P(SlurmNodeTest, HealthWatchDrainsNoGpu) {
  Tick(0);
  devices_.lost.insert(1);
  const std::string log = Tick(1000);
  if (slurm()) {
    EXPECT_TRUE(Drained().empty());
    EXPECT_THAT(log, HasSubstr("not draining " + Uuid(1)));
    EXPECT_THAT(log, HasSubstr("Slurm node (slurmd runs (pid 812)); Slurm cannot drain one GPU"));
    EXPECT_EQ(Tick(1000), "") << "one line, not one per sample";
  } else {
    EXPECT_EQ(Drained().count(Uuid(1)), 1u);
    EXPECT_THAT(log, HasSubstr("drained " + Uuid(1)));
  }
}

TEST_P(SlurmNodeTest, IdleLeaseIsNotReleased) {
  model::Lease draft;
  draft.uid = testing::kOwnerUid;
  draft.user = "alice";
  draft.kind = "run";
  draft.command = "test";
  auto me = store::CurrentLeaseProcess(getpid());
  ASSERT_TRUE(me.has_value());
  draft.processes = {*me};
  auto lease = leases_->Acquire(
      draft, [&](const std::vector<model::Lease>&) -> Result<std::vector<std::string>> { return std::vector{Uuid(0)}; },
      store::ProcLivenessCheck());
  ASSERT_TRUE(lease) << lease.error().message;
  Tick(0);
  const std::string log = Tick(61'000);  // idle past release_after
  auto live = leases_->List(store::ProcLivenessCheck());
  ASSERT_TRUE(live);
  if (slurm()) {
    EXPECT_EQ(live->size(), 1u) << "the lease stays";
    EXPECT_THAT(log, HasSubstr("not releasing idle lease " + std::to_string(lease->id) +
                               " of alice: Slurm node (slurmd runs (pid 812)); Slurm ends jobs, not gpuman"));
    EXPECT_EQ(Tick(1000), "") << "one line per idle episode";
  } else {
    EXPECT_TRUE(live->empty());
    EXPECT_THAT(log, HasSubstr("released idle lease"));
  }
}

TEST_P(SlurmNodeTest, DrainOpIsRefusedUndrainIsNot) {
  Tick(0);
  const Peer root = PeerFor(Role::kRoot);
  const auto drain = Call(root, protocol::DrainArgs{"0", "fan noise"});
  if (!slurm()) {
    EXPECT_TRUE(drain.ok());
    EXPECT_EQ(Drained().count(Uuid(0)), 1u);
    return;
  }
  ASSERT_FALSE(drain.ok());
  EXPECT_EQ(drain.error->message,
            "Slurm node (slurmd runs (pid 812)): Slurm cannot drain one GPU; drain the node: scontrol update "
            "nodename=node7 state=drain reason=\"...\" (undrain still lifts earlier drains)");
  EXPECT_TRUE(Drained().empty());
  // A drain from before the node ran slurmd can still be lifted.
  ASSERT_TRUE(jobs_->Drain(Uuid(1), "old", 0, clock_.now));
  EXPECT_TRUE(Call(root, protocol::UndrainArgs{"1", {}}).ok());
  EXPECT_TRUE(Drained().empty());
}

INSTANTIATE_TEST_SUITE_P(SlurmOrNot, SlurmNodeTest, ::testing::Bool(),
                         [](const auto& param_info) { return param_info.param ? "SlurmNode" : "NoSlurm"; });

}  // namespace
}  // namespace gpuman::daemon
