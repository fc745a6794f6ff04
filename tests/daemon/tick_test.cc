// The daemon's tick (Daemon::Tick): one device read per tick feeds the collector, the
// running-job watch and the placement; the pre-start check reads again before a job starts,
// so a GPU lost between two ticks never gets a job. A counting, scriptable DeviceSource
// and a real state db; jobs "start" under a stand-in supervisor that only sleeps.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <fstream>
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

using testing::PeerFor;

using ::gpuman::testing::FakeDeviceSource;
using ::gpuman::testing::SnapshotBuilder;

std::string Uuid(int i) { return ::gpuman::testing::LongUuid(i); }

// Two GPUs; counts every read; a GPU can be lost (as NVML reports one: unhealthy, with
// a problem) between reads.
model::MachineSnapshot TwoGpus() { return SnapshotBuilder().Uuids(::gpuman::testing::LongUuid).Add(2).Build(); }

class TickTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // A supervisor that never reports back: the job stays "starting" on the GPUs it got.
    supervisor_ = dir_.Join("supervisor.sh");
    std::ofstream(supervisor_) << "#!/bin/sh\nexec sleep 60\n";
    chmod(supervisor_.c_str(), 0755);
    DaemonOptions options;
    options.system_mode = true;
    options.state_dir = dir_.Join("state");
    options.socket_path = dir_.Join("gpuman.sock");
    options.monitor.kernel_log = "";  // no /dev/kmsg, no history, no metrics
    options.monitor.sample_interval_ms = 1000;
    launcher_ = std::make_unique<sched::SupervisorLauncher>(supervisor_);
    daemon_ = std::make_unique<Daemon>(options, devices_, clock_, *launcher_);
    Status started = daemon_->Start();  // the collector too: the real tick
    ASSERT_TRUE(started) << started.error().message;
    auto jobs = store::JobStore::Open(dir_.Join("state") + "/state.db");
    ASSERT_TRUE(jobs);
    jobs_ = std::move(*jobs);
    auto leases = store::LeaseStore::Open(dir_.Join("state") + "/state.db", {});
    ASSERT_TRUE(leases);
    leases_ = std::move(*leases);
  }
  void TearDown() override {
    // The stand-in supervisors of started jobs.
    if (!jobs_) return;
    if (auto active = jobs_->Active()) {
      for (const auto& j : *active) {
        if (j.supervisor_pid && *j.supervisor_pid > 1) kill(*j.supervisor_pid, SIGKILL);
      }
    }
  }

  protocol::Reply Call(protocol::RequestArgs args) {
    return daemon_->Handle(PeerFor(Role::kOwner), protocol::Request{++request_id_, std::move(args)});
  }
  int64_t Submit(int gpus) {
    protocol::SubmitArgs s;
    s.argv = {"sleep", "60"};
    s.cwd = dir_.path();
    s.output = dir_.Join("job.log");
    s.request.count = gpus;
    auto reply = Call(s);
    EXPECT_TRUE(reply.ok()) << (reply.error ? reply.error->message : "");
    return reply.ok() ? reply.result["id"].get<int64_t>() : -1;
  }
  model::Job Job(int64_t id) {
    auto job = jobs_->Get(id);
    EXPECT_TRUE(job && *job);
    return job && *job ? **job : model::Job{};
  }
  // A lease of this test process on `gpu`, as a `gpuman run` would hold it.
  void Lease(const std::string& gpu) {
    model::Lease draft;
    draft.uid = testing::kOwnerUid;
    draft.user = "alice";
    draft.kind = "run";
    draft.command = "test";
    auto me = store::CurrentLeaseProcess(getpid());
    ASSERT_TRUE(me.has_value());
    draft.processes = {*me};
    auto lease = leases_->Acquire(
        draft, [&](const std::vector<model::Lease>&) -> Result<std::vector<std::string>> { return std::vector{gpu}; },
        store::ProcLivenessCheck());
    ASSERT_TRUE(lease) << lease.error().message;
  }
  void Tick(int64_t advance_ms) {
    clock_.now += advance_ms;
    daemon_->Tick(clock_.now);
  }

  ::gpuman::testing::TempDir dir_;
  std::string supervisor_;
  FakeDeviceSource devices_{TwoGpus()};
  FakeClock clock_;
  std::unique_ptr<sched::SupervisorLauncher> launcher_;  // the real one, with a stand-in supervisor
  std::unique_ptr<Daemon> daemon_;
  std::unique_ptr<store::JobStore> jobs_;
  std::unique_ptr<store::LeaseStore> leases_;
  int64_t request_id_ = 0;
};

// A tick with everything that used to read the devices on its own: the collector's sample,
// a running job to watch, a queued job to place. One read.
TEST_F(TickTest, OneTickReadsTheDevicesOnce) {
  Tick(0);  // the first sample (and topology) and a pass with nothing to do
  const int64_t running = Submit(1);
  Tick(10);  // not due: no sample; the pass places it (the pre-start read) on a GPU
  ASSERT_EQ(Job(running).state, model::JobState::kStarting);
  ASSERT_EQ(Job(running).gpu_uuids.size(), 1u);
  // The supervisor said "running" (it would, had it been the real one).
  store::JobStore::Update go;
  ASSERT_TRUE(jobs_->Transition(running, model::JobState::kStarting, model::JobState::kRunning, go));
  // The other GPU is leased: a queued 1-GPU job must wait, placed on every pass.
  Lease(Job(running).gpu_uuids[0] == Uuid(0) ? Uuid(1) : Uuid(0));
  const int64_t queued = Submit(1);

  const int before = devices_.reads;
  Tick(1000);  // the collector is due: sample, watch, placement
  EXPECT_EQ(devices_.reads - before, 1) << "one read per tick feeds the collector, the watch and the placement";
  EXPECT_EQ(Job(queued).state, model::JobState::kQueued);
  EXPECT_EQ(Job(running).state, model::JobState::kRunning);

  // Ticks between samples (a pass every second) read nothing.
  const int mid = devices_.reads;
  Tick(400);
  EXPECT_EQ(devices_.reads, mid) << "no sample due, nothing to start: no read";
}

// The placement works on the tick's sample; a GPU lost after it must not get a job. The
// pre-start read catches it. Without the loss the same job starts there (the control).
TEST_F(TickTest, PreStartCheckCatchesAGpuLostBetweenTicks) {
  Lease(Uuid(0));  // only GPU 1 is free
  Tick(0);         // the sample: GPU 1 healthy
  devices_.lost.insert(1);  // ... and lost right after
  const int64_t id = Submit(1);
  const int before = devices_.reads;
  Tick(10);  // no sample due: the pass places on the old sample, then checks
  EXPECT_EQ(devices_.reads - before, 1) << "the pre-start check reads the devices";
  model::Job job = Job(id);
  EXPECT_EQ(job.state, model::JobState::kQueued) << "started on a lost GPU";
  EXPECT_TRUE(job.gpu_uuids.empty());

  // The control: the GPU comes back (a reset); the next pass starts the job there.
  devices_.lost.erase(1);
  Tick(1000);
  job = Job(id);
  EXPECT_EQ(job.state, model::JobState::kStarting);
  EXPECT_EQ(job.gpu_uuids, std::vector<std::string>{Uuid(1)});
}

// The snapshot op serves the tick's sample (no read of its own while it is fresh), and
// reads again when it is older than two periods.
TEST_F(TickTest, SnapshotOpServesTheTicksSample) {
  Tick(0);
  const int before = devices_.reads;
  clock_.now += 500;
  auto reply = Call(protocol::SnapshotArgs{});
  ASSERT_TRUE(reply.ok()) << reply.error->message;
  auto result = protocol::ResultOf<protocol::SnapshotResult>(reply);
  ASSERT_TRUE(result) << result.error().message;
  ASSERT_TRUE(result->snapshot.has_value());
  EXPECT_EQ(result->snapshot->gpus.size(), 2u);
  EXPECT_EQ(result->snapshot->taken_at_unix_ms, clock_.now - 500) << "the tick's sample";
  EXPECT_EQ(result->sample_interval_ms, 1000);
  EXPECT_FALSE(result->snapshot->topology.has_value()) << "topology stays in the daemon";
  EXPECT_EQ(devices_.reads, before);

  clock_.now += 2000;  // the loop was held up: the sample is 2.5 periods old
  auto again = protocol::ResultOf<protocol::SnapshotResult>(Call(protocol::SnapshotArgs{}));
  ASSERT_TRUE(again && again->snapshot);
  EXPECT_EQ(devices_.reads, before + 1);
  EXPECT_EQ(again->snapshot->taken_at_unix_ms, clock_.now);
}

// Calls between two samples are answered from one encoding of the sample per caller view
// (the same text again), with processes or without as each asks; a new sample is encoded
// anew: its values, not the last one's.
TEST_F(TickTest, SnapshotOpEncodesEachSampleOncePerView) {
  devices_.SetPids(0, {4242});
  Tick(0);
  clock_.now += 100;
  auto processes_of = [](const protocol::Reply& reply) {
    auto result = protocol::ResultOf<protocol::SnapshotResult>(reply);
    EXPECT_TRUE(result && result->snapshot) << (result ? "no snapshot" : result.error().message);
    std::vector<uint32_t> pids;
    if (result && result->snapshot) {
      for (const auto& p : result->snapshot->gpus.at(0).processes) pids.push_back(p.pid);
    }
    return pids;
  };
  const protocol::Reply first = Call(protocol::SnapshotArgs{});
  ASSERT_TRUE(first.ok()) << first.error->message;
  EXPECT_FALSE(first.result_text.empty()) << "an encoded reply";
  EXPECT_EQ(processes_of(first), std::vector<uint32_t>{4242});
  EXPECT_EQ(Call(protocol::SnapshotArgs{}).result_text, first.result_text);

  EXPECT_TRUE(processes_of(Call(protocol::SnapshotArgs{.processes = false})).empty());
  EXPECT_EQ(processes_of(Call(protocol::SnapshotArgs{})), std::vector<uint32_t>{4242});
  const protocol::Reply bob = daemon_->Handle(PeerFor(Role::kOtherUser), protocol::Request{++request_id_, protocol::SnapshotArgs{}});
  ASSERT_TRUE(bob.ok()) << bob.error->message;
  EXPECT_EQ(protocol::ResultOf<protocol::SnapshotResult>(bob)->snapshot->gpus.size(), 2u);

  devices_.SetPids(0, {4242, 4343});
  Tick(1000);
  clock_.now += 100;
  EXPECT_EQ(processes_of(Call(protocol::SnapshotArgs{})), (std::vector<uint32_t>{4242, 4343})) << "the new sample";
  EXPECT_TRUE(processes_of(Call(protocol::SnapshotArgs{.processes = false})).empty());
}

// A queued sweep costs nothing while nothing changes: the once-a-second pass places
// nothing anew (docs/scheduling.md), until something it reads changes: a submit, a
// process on a GPU, or ten seconds for the reasons' estimates.
TEST_F(TickTest, APassIsSkippedWhileNothingItReadsChanged) {
  Lease(Uuid(0));
  Lease(Uuid(1));  // both GPUs held by this test process: the jobs wait
  Tick(0);
  for (int i = 0; i < 3; ++i) Submit(1);
  Tick(10);
  const int64_t after_submits = daemon_->full_passes();
  EXPECT_GE(after_submits, 1);
  EXPECT_EQ(Job(1).state, model::JobState::kQueued);
  for (int i = 0; i < 5; ++i) Tick(1000);  // samples and passes, nothing new
  EXPECT_EQ(daemon_->full_passes(), after_submits) << "an unchanged queue was placed again";

  devices_.SetPids(1, {4242});  // a process appears on a GPU: placement may differ
  Tick(1000);
  EXPECT_EQ(daemon_->full_passes(), after_submits + 1);
  Tick(1000);
  EXPECT_EQ(daemon_->full_passes(), after_submits + 1);

  Submit(1);  // a new job
  Tick(10);
  EXPECT_EQ(daemon_->full_passes(), after_submits + 2);
  Tick(10'000);  // the estimates are brought up to date now and then
  EXPECT_EQ(daemon_->full_passes(), after_submits + 3);
}

// A `run` killed with -9 writes nothing: its lease goes stale when its holder dies. The
// queued job behind it must start at the next tick all the same.
TEST_F(TickTest, AHolderThatDiesFreesItsGpusForTheQueueWithoutAWrite) {
  Lease(Uuid(0));
  pid_t holder = fork();
  if (holder == 0) {
    pause();
    _exit(0);
  }
  ASSERT_GT(holder, 0);
  {
    model::Lease draft;
    draft.uid = testing::kOwnerUid;
    draft.user = "alice";
    draft.kind = "run";
    draft.command = "held by a child";
    auto process = store::CurrentLeaseProcess(holder);
    ASSERT_TRUE(process.has_value());
    draft.processes = {*process};
    auto lease = leases_->Acquire(
        draft, [&](const std::vector<model::Lease>&) -> Result<std::vector<std::string>> { return std::vector{Uuid(1)}; },
        store::ProcLivenessCheck());
    ASSERT_TRUE(lease) << lease.error().message;
  }
  Tick(0);
  const int64_t id = Submit(1);
  Tick(10);
  Tick(1000);
  ASSERT_EQ(Job(id).state, model::JobState::kQueued);
  kill(holder, SIGKILL);
  waitpid(holder, nullptr, 0);
  Tick(1000);
  model::Job job = Job(id);
  EXPECT_EQ(job.state, model::JobState::kStarting) << job.reason;
  EXPECT_EQ(job.gpu_uuids, std::vector<std::string>{Uuid(1)});
}

}  // namespace
}  // namespace gpuman::daemon
