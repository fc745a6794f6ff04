// A daemon to call Handle() on, without a socket: a temp state dir, two fake GPUs, a fixed
// clock, and one Peer per role of the allow/deny matrix. Header-only test support for
// tests/daemon/.
#pragma once

#include <unistd.h>

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "daemon/access.h"
#include "daemon/daemon.h"
#include "devices/device_source.h"
#include "protocol/envelope.h"
#include "sched/job_launcher.h"
#include "store/lease_store.h"
#include "store/proc_liveness.h"
#include "support/fake_clock.h"
#include "support/fake_device_source.h"
#include "support/temp_dir.h"

namespace gpuman::daemon::testing {

using ::gpuman::testing::FakeClock;

inline constexpr uint32_t kOwnerUid = 1001;

/// Two idle, healthy GPUs with UUIDs.
inline model::MachineSnapshot TwoIdleGpus() {
  using ::gpuman::testing::SnapshotBuilder;
  return SnapshotBuilder().Uuids(::gpuman::testing::LongUuid).Model("Test GPU", "9.0").Add(2).Build();
}

/// The matrix's roles as callers. "owner" owns the objects World creates.
inline Peer PeerFor(Role role) {
  switch (role) {
    case Role::kOwner:
      return Peer{kOwnerUid, kOwnerUid, 0, "alice", false};
    case Role::kOtherUser:
      return Peer{1002, 1002, 0, "bob", false};
    case Role::kAdminGroup:
      return Peer{1003, 1003, 0, "carol", true};
    case Role::kRoot:
      return Peer{0, 0, 0, "root", true};
  }
  return {};
}

class World {
 public:
  /// Jobs start through `launcher` when given (a FakeJobLauncher), else through the real
  /// supervisor launcher (which no test here lets start a job). `scenario_path`: as a
  /// simulated daemon's.
  explicit World(bool system_mode = true, sched::JobLauncher* launcher = nullptr,
                 std::optional<std::string> scenario_path = std::nullopt) {
    DaemonOptions options;
    options.system_mode = system_mode;
    options.state_dir = dir_.Join("state");
    options.socket_path = dir_.Join("gpuman.sock");
    options.scenario_path = std::move(scenario_path);
    daemon_ = std::make_unique<Daemon>(options, devices_, clock_, launcher ? *launcher : supervisors_);
    Status opened = daemon_->OpenState();
    EXPECT_TRUE(opened) << opened.error().message;
  }

  Daemon& daemon() { return *daemon_; }
  const ::gpuman::testing::TempDir& dir() const { return dir_; }

  protocol::Reply Call(const Peer& peer, protocol::RequestArgs args) {
    return daemon_->Handle(peer, protocol::Request{++request_id_, std::move(args)});
  }

  /// A queued job of `peer` (the owner by default); its log file does not exist.
  int64_t SubmitJob(const Peer& peer = PeerFor(Role::kOwner), int priority = 0) {
    protocol::SubmitArgs s;
    s.argv = {"sleep", "60"};
    s.cwd = dir_.path();
    s.output = dir_.Join("no-such-" + std::to_string(request_id_ + 1) + ".log");
    s.priority = priority;
    auto reply = Call(peer, s);
    EXPECT_TRUE(reply.ok()) << (reply.error ? reply.error->message : "");
    return reply.ok() ? reply.result["id"].get<int64_t>() : -1;
  }
  int64_t HeldJob() {
    int64_t id = SubmitJob();
    auto reply = Call(PeerFor(Role::kOwner), protocol::HoldArgs{{id}});
    EXPECT_TRUE(reply.ok());
    return id;
  }
  /// The job's state as its owner's `show` tells it.
  std::string StateOf(int64_t job_id) {
    auto reply = Call(PeerFor(Role::kRoot), protocol::ShowArgs{job_id});
    return reply.ok() ? reply.result["job"]["state"].get<std::string>() : "?";
  }

  /// A lease of the owner, kept alive by this test process.
  int64_t OwnerLease() {
    if (!leases_) {
      auto opened = store::LeaseStore::Open(dir_.Join("state") + "/state.db", {});
      EXPECT_TRUE(opened);
      if (!opened) return -1;
      leases_ = std::move(*opened);
    }
    model::Lease draft;
    draft.uid = kOwnerUid;
    draft.user = "alice";
    // A select --lease shell's lease, held by this live process: who may release it is
    // ownership alone (a `run` lease is not released while its command runs, by anyone).
    draft.kind = "select";
    draft.command = "test";
    auto me = store::CurrentLeaseProcess(getpid());
    EXPECT_TRUE(me.has_value());
    if (me) draft.processes = {*me};
    auto lease = leases_->Acquire(
        draft,
        [&](const std::vector<model::Lease>& live) -> Result<std::vector<std::string>> {
          for (int i = 0; i < 2; ++i) {  // the first GPU no live lease holds
            std::string gpu = "GPU-0000000" + std::to_string(i) + "-0000-0000-0000-000000000000";
            bool taken = false;
            for (const auto& l : live) {
              for (const auto& u : l.gpu_uuids) taken = taken || u == gpu;
            }
            if (!taken) return std::vector{gpu};
          }
          return MakeError(ErrorCode::kBusy, "both test GPUs are leased");
        },
        store::ProcLivenessCheck());
    EXPECT_TRUE(lease) << (lease ? "" : lease.error().message);
    return lease ? lease->id : -1;
  }

 private:
  ::gpuman::testing::TempDir dir_;
  ::gpuman::testing::FakeDeviceSource devices_{TwoIdleGpus()};
  FakeClock clock_;
  sched::SupervisorLauncher supervisors_{""};
  std::unique_ptr<Daemon> daemon_;
  std::unique_ptr<store::LeaseStore> leases_;
  int64_t request_id_ = 0;
};

}  // namespace gpuman::daemon::testing
