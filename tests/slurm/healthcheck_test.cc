// The Slurm hooks' decisions with a fake scontrol (NodeControl): when the healthcheck
// drains and resumes, whose drains it leaves alone, the prolog's and epilog's verdicts and
// reasons, and parsing `scontrol show node -o`.
#include "slurm/healthcheck.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "slurm/capture.h"
#include "slurm/job_gpus.h"
#include "slurm/node_control.h"

namespace gpuman::slurm {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class FakeControl : public NodeControl {
 public:
  NodeState state;
  bool fail_get = false;
  std::vector<std::string> calls;
  Result<NodeState> Get(const std::string& node) override {
    calls.push_back("get " + node);
    if (fail_get) return MakeError(ErrorCode::kUnavailable, "scontrol: no answer within 10s (killed)");
    return state;
  }
  Status Drain(const std::string& node, const std::string& reason) override {
    calls.push_back("drain " + node + " " + reason);
    state.drained = true;
    state.reason = reason;
    return {};
  }
  Status Resume(const std::string& node) override {
    calls.push_back("resume " + node);
    state.drained = false;
    state.reason.clear();
    return {};
  }
};

model::Finding Fatal(int gpu, const std::string& code) {
  model::Finding f;
  f.code = code;
  f.severity = model::Severity::kFatal;
  f.gpu_uuid = "GPU-" + std::to_string(gpu);
  f.gpu_index = gpu;
  f.message = code + " on GPU " + std::to_string(gpu);
  return f;
}

model::Finding Warning(int gpu) {
  model::Finding f = Fatal(gpu, "throttle_thermal");
  f.severity = model::Severity::kWarning;
  return f;
}

TEST(HealthcheckTest, ReasonNamesFatalFindingsOnly) {
  EXPECT_EQ(HealthcheckReason({Warning(1)}), std::nullopt);
  EXPECT_EQ(HealthcheckReason({Warning(1), Fatal(2, "gpu_lost")}), "gpuman: GPU 2 gpu_lost");
  model::Finding xid = Fatal(0, "xid");
  xid.xid = 79;
  EXPECT_EQ(HealthcheckReason({xid, Fatal(1, "a"), Fatal(2, "b"), Fatal(3, "c"), Fatal(4, "d")}),
            "gpuman: GPU 0 xid 79, GPU 1 a, GPU 2 b +2 more");
  model::Finding driver;
  driver.code = "driver";
  driver.severity = model::Severity::kFatal;
  driver.message = "NVML could not be loaded";
  EXPECT_EQ(HealthcheckReason({driver}), "gpuman: driver: NVML could not be loaded");
}

TEST(HealthcheckTest, DrainsOnFatalThenResumesWhenHealthy) {
  FakeControl control;
  control.state.state = "IDLE";
  auto r = RunHealthcheck({Fatal(2, "gpu_lost")}, "node1", control);
  EXPECT_TRUE(r.unhealthy);
  EXPECT_EQ(r.action.kind, HealthcheckAction::kDrain);
  EXPECT_THAT(control.calls, ElementsAre("get node1", "drain node1 gpuman: GPU 2 gpu_lost"));
  ASSERT_EQ(r.lines.size(), 1u);
  EXPECT_THAT(r.lines[0], HasSubstr("node node1 drained: gpuman: GPU 2 gpu_lost"));

  // Still lost: the drain stays, no second drain call.
  control.calls.clear();
  r = RunHealthcheck({Fatal(2, "gpu_lost")}, "node1", control);
  EXPECT_EQ(r.action.kind, HealthcheckAction::kStillDrained);
  EXPECT_THAT(control.calls, ElementsAre("get node1"));

  // Healthy again (warnings do not count): resumed.
  control.calls.clear();
  r = RunHealthcheck({Warning(0)}, "node1", control);
  EXPECT_FALSE(r.unhealthy);
  EXPECT_EQ(r.action.kind, HealthcheckAction::kResume);
  EXPECT_THAT(control.calls, ElementsAre("get node1", "resume node1"));
  EXPECT_FALSE(control.state.drained);

  // Healthy and not drained: nothing, and nothing printed.
  control.calls.clear();
  r = RunHealthcheck({}, "node1", control);
  EXPECT_EQ(r.action.kind, HealthcheckAction::kNone);
  EXPECT_TRUE(r.lines.empty());
  EXPECT_THAT(control.calls, ElementsAre("get node1"));
}

TEST(HealthcheckTest, NeverLiftsAnotherDrain) {
  for (const std::string reason : {"disk replaced, ticket 42", "gpuman-epilog: job 12 GPU 1 user alice pid 4242",
                                   "gpuman-prolog: job 13 GPU 0 pid 7 user bob", "Prolog error", "gpuman:x"}) {
    FakeControl control;
    control.state = NodeState{"IDLE+DRAIN", true, reason};
    auto r = RunHealthcheck({}, "n", control);
    EXPECT_EQ(r.action.kind, HealthcheckAction::kNotOurs) << reason;
    EXPECT_THAT(control.calls, ElementsAre("get n")) << reason;
    ASSERT_EQ(r.lines.size(), 1u);
    EXPECT_THAT(r.lines[0], HasSubstr("stays"));
    // A fatal finding on a node an admin drained: no second drain over the admin's reason.
    r = RunHealthcheck({Fatal(1, "gpu_lost")}, "n", control);
    EXPECT_EQ(r.action.kind, HealthcheckAction::kStillDrained) << reason;
    EXPECT_EQ(control.state.reason, reason);
  }
}

TEST(HealthcheckTest, ScontrolFailureIsAnErrorAndChangesNothing) {
  FakeControl control;
  control.fail_get = true;
  auto r = RunHealthcheck({Fatal(0, "gpu_lost")}, "n", control);
  ASSERT_TRUE(r.error.has_value());
  EXPECT_EQ(r.error->message,
            "node n is unhealthy (gpuman: GPU 0 gpu_lost); reading its state: scontrol: no answer within 10s (killed)");
  EXPECT_TRUE(r.lines.empty());
  EXPECT_TRUE(r.unhealthy);
  EXPECT_THAT(control.calls, ElementsAre("get n"));
}

TEST(NodeControlTest, ParsesScontrolShowNodeOneLine) {
  auto n = ParseScontrolNode(
      "NodeName=vm Arch=x86_64 CoresPerSocket=8  CPUAlloc=0 OS=Linux 6.1 #1 SMP  State=MIXED+DRAIN ThreadsPerCore=1 "
      "SlurmdStartTime=2026-12-01T15:14:15 Reason=gpuman: GPU 2 gpu_lost [root@2026-12-01T15:14:16]\n");
  ASSERT_TRUE(n) << n.error().message;
  EXPECT_EQ(n->state, "MIXED+DRAIN");
  EXPECT_TRUE(n->drained);
  EXPECT_EQ(n->reason, "gpuman: GPU 2 gpu_lost");
  n = ParseScontrolNode("NodeName=vm State=IDLE ThreadsPerCore=1 ExtSensorsTemp=n/s\n");
  ASSERT_TRUE(n);
  EXPECT_FALSE(n->drained);
  EXPECT_EQ(n->reason, "");
  n = ParseScontrolNode("NodeName=vm State=DOWN+DRAIN+NOT_RESPONDING Reason=Not responding [slurm@2026-12-01T10:00:00]");
  ASSERT_TRUE(n);
  EXPECT_TRUE(n->drained);
  EXPECT_EQ(n->reason, "Not responding");
  EXPECT_EQ(ParseScontrolNode("Node vm2 not found\n").error().code, ErrorCode::kNotFound);
}

TEST(CaptureTest, ATimeoutKillsTheTool) {
  auto r = RunCapture({"sleep", "60"}, 200);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kUnavailable);
  EXPECT_THAT(r.error().message, HasSubstr("sleep: no answer within"));
  auto ok = RunCapture({"echo", "hi"}, 10000);
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->output, "hi\n");
}

model::MachineSnapshot Snap() {
  model::MachineSnapshot snap;
  for (int i = 0; i < 3; ++i) {
    model::DeviceSnapshot g;
    g.index = i;
    g.uuid = "GPU-" + std::to_string(i);
    g.memory_used_bytes = 5 << 20;
    snap.gpus.push_back(g);
  }
  model::GpuProcess p;
  p.pid = 4242;
  p.user = "bob";
  p.used_memory_bytes = 3LL << 30;
  snap.gpus[1].processes.push_back(p);
  snap.gpus[1].memory_used_bytes = 3LL << 30;
  snap.gpus[2].memory_used_bytes = 2LL << 30;  // memory, no process
  return snap;
}

TEST(JobGpusTest, LeftoversAreProcessesAndMemoryWithoutProcess) {
  const auto snap = Snap();
  EXPECT_TRUE(FindLeftovers(snap, {"GPU-0"}, 256 << 20).empty());
  auto left = FindLeftovers(snap, {"GPU-0", "GPU-1", "GPU-2"}, 256 << 20);
  ASSERT_EQ(left.size(), 2u);
  EXPECT_EQ(left[0].pid, 4242u);
  EXPECT_EQ(DescribeLeftover(left[0]), "GPU 1 pid 4242 user bob (3.0 GiB)");
  EXPECT_FALSE(left[1].pid);
  EXPECT_EQ(DescribeLeftover(left[1]), "GPU 2 2.0 GiB used, no process");
  EXPECT_EQ(FindLeftovers(snap, {"GPU-2"}, 4LL << 30).size(), 0u);  // under --idle-memory
}

TEST(JobGpusTest, PrologRefusesBusyOrUnhealthyGpusOfTheJobOnly) {
  const auto snap = Snap();
  auto ok = CheckPrologGpus("12", {"GPU-0"}, {}, {Fatal(1, "gpu_lost")}, FindLeftovers(snap, {"GPU-0"}, 256 << 20));
  EXPECT_FALSE(ok.reason);  // GPU 1's finding is not this job's
  auto busy = CheckPrologGpus("12", {"GPU-1"}, {}, {}, FindLeftovers(snap, {"GPU-1"}, 256 << 20));
  EXPECT_EQ(busy.reason, "gpuman-prolog: job 12 GPU 1 pid 4242 user bob");
  auto sick = CheckPrologGpus("13", {"GPU-0", "GPU-1"}, {}, {Fatal(0, "gpu_lost")},
                              FindLeftovers(snap, {"GPU-0", "GPU-1"}, 256 << 20));
  EXPECT_EQ(sick.reason, "gpuman-prolog: job 13 GPU 0 gpu_lost +1 more");
  EXPECT_EQ(sick.problems.size(), 2u);
  auto unmapped = CheckPrologGpus("14", {}, {"SLURM_JOB_GPUS: no GPU has minor number 5 (/dev/nvidia5)"}, {}, {});
  EXPECT_THAT(*unmapped.reason, HasSubstr("gpuman-prolog: job 14 SLURM_JOB_GPUS: no GPU has minor number 5"));
}

TEST(JobGpusTest, EpilogReasonNamesJobGpuUserPid) {
  const auto snap = Snap();
  EXPECT_EQ(EpilogReason("12", "alice", FindLeftovers(snap, {"GPU-1"}, 256 << 20)),
            "gpuman-epilog: job 12 GPU 1 user bob pid 4242");
  EXPECT_EQ(EpilogReason("12", "alice", FindLeftovers(snap, {"GPU-2", "GPU-1"}, 256 << 20)),
            "gpuman-epilog: job 12 GPU 1 user bob pid 4242 +1 more");
  EXPECT_EQ(EpilogReason("12", "alice", FindLeftovers(snap, {"GPU-2"}, 256 << 20)),
            "gpuman-epilog: job 12 GPU 2 user alice 2.0 GiB used, no process");
}

TEST(JobGpusTest, GracePeriodPollsUntilTheProcessesLeave) {
  // A fake clock: each sleep advances it. The process leaves after the third look.
  int64_t now = 0;
  int looks = 0;
  Poller poller{[&]() -> Result<model::MachineSnapshot> {
                  auto s = Snap();
                  if (++looks > 3) s.gpus[1].processes.clear(), s.gpus[1].memory_used_bytes = 0;
                  return s;
                },
                [&] { return now; }, [&](int64_t ms) { now += ms; }};
  auto left = WaitForLeftovers(poller, {"GPU-1"}, 256 << 20, 10000, 500);
  ASSERT_TRUE(left);
  EXPECT_TRUE(left->empty());
  EXPECT_EQ(looks, 4);
  EXPECT_EQ(now, 1500);

  // Never leaves: the grace period ends, the leftovers are returned.
  looks = -1000;
  now = 0;
  left = WaitForLeftovers(poller, {"GPU-1"}, 256 << 20, 2000, 500);
  ASSERT_TRUE(left);
  ASSERT_EQ(left->size(), 1u);
  EXPECT_EQ(now, 2000);
  EXPECT_EQ(looks, -1000 + 5);
}

}  // namespace
}  // namespace gpuman::slurm
