// The intruder watch (monitor/intruders.h) with a fake clock: what it reports, when it asks
// for SIGTERM and SIGKILL, whom it spares, and what it says when an intruder goes.
#include "monitor/intruders.h"

#include <gtest/gtest.h>

namespace gpuman::monitor {
namespace {

model::MachineSnapshot Machine(std::vector<model::GpuProcess> on_gpu1) {
  model::MachineSnapshot snap;
  for (int i = 0; i < 2; ++i) {
    model::DeviceSnapshot d;
    d.index = i;
    d.uuid = "GPU-" + std::to_string(i);
    if (i == 1) d.processes = on_gpu1;
    snap.gpus.push_back(d);
  }
  return snap;
}

model::GpuProcess Proc(uint32_t pid, std::optional<uint32_t> uid, std::string user = "bob") {
  model::GpuProcess p;
  p.pid = pid;
  p.uid = uid;
  p.is_visible = uid.has_value();
  if (uid) p.user = user;
  p.command = "python x.py";
  return p;
}

std::vector<model::Lease> AliceHoldsGpu1() {
  model::Lease l;
  l.id = 7;
  l.uid = 1000;
  l.user = "alice";
  l.gpu_uuids = {"GPU-1"};
  return {l};
}

std::vector<IntruderStep::Kind> Kinds(const std::vector<IntruderStep>& steps) {
  std::vector<IntruderStep::Kind> k;
  for (const auto& s : steps) k.push_back(s.kind);
  return k;
}

TEST(IntruderWatchTest, ReportOnlyReportsOnceAndWhenItIsGone) {
  IntruderWatch watch(IntruderPolicy{});
  const auto leases = AliceHoldsGpu1();
  auto first = watch.Update(Machine({Proc(50, 1001), Proc(51, 1000, "alice")}), leases, 1000);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].kind, IntruderStep::kSeen);
  EXPECT_EQ(first[0].pid, 50u);
  EXPECT_EQ(first[0].lease_id, 7);
  EXPECT_EQ(first[0].lease_user, "alice");
  EXPECT_EQ(first[0].gpu_index, 1);
  EXPECT_EQ(first[0].spared, "");
  EXPECT_TRUE(watch.Update(Machine({Proc(50, 1001)}), leases, 60000).empty()) << "reported once";
  ASSERT_EQ(watch.Findings().size(), 1u);
  EXPECT_EQ(watch.Findings()[0].code, "intruder");
  EXPECT_EQ(watch.Findings()[0].gpu_uuid, "GPU-1");
  EXPECT_EQ(watch.Findings()[0].message, "process 50 of bob uses GPU 1, leased to alice (lease 7)");
  EXPECT_EQ(Kinds(watch.Update(Machine({}), leases, 61000)), std::vector{IntruderStep::kGone});
  EXPECT_TRUE(watch.Findings().empty());
  // The lease ending makes it no intruder any more.
  watch.Update(Machine({Proc(50, 1001)}), leases, 62000);
  EXPECT_EQ(Kinds(watch.Update(Machine({Proc(50, 1001)}), {}, 63000)), std::vector{IntruderStep::kGone});
}

TEST(IntruderWatchTest, KillSendsTermAtOnceAndKillAfterTheGrace) {
  IntruderWatch watch(IntruderPolicy{.kill = true, .grace_ms = 10000});
  const auto leases = AliceHoldsGpu1();
  const auto m = Machine({Proc(50, 1001)});
  EXPECT_EQ(Kinds(watch.Update(m, leases, 1000)), (std::vector{IntruderStep::kSeen, IntruderStep::kTerm}));
  EXPECT_TRUE(watch.Update(m, leases, 10999).empty()) << "within the grace period";
  EXPECT_EQ(Kinds(watch.Update(m, leases, 11000)), std::vector{IntruderStep::kKill});
  EXPECT_TRUE(watch.Update(m, leases, 20000).empty()) << "killed once";
}

TEST(IntruderWatchTest, RootAndTheUnseenAreReportedNeverEnded) {
  IntruderWatch watch(IntruderPolicy{.kill = true, .grace_ms = 0});
  const auto leases = AliceHoldsGpu1();
  auto steps = watch.Update(Machine({Proc(60, 0, "root"), Proc(61, std::nullopt)}), leases, 1000);
  ASSERT_EQ(Kinds(steps), (std::vector{IntruderStep::kSeen, IntruderStep::kSeen}));
  EXPECT_EQ(steps[0].spared, "it is root's");
  EXPECT_EQ(steps[1].spared, "its owner is not visible in this PID namespace");
  EXPECT_TRUE(watch.Update(Machine({Proc(60, 0, "root"), Proc(61, std::nullopt)}), leases, 99000).empty());
}

// [enforce] unleased_processes: GPU use on a GPU no lease holds. "allow" (the default)
// says nothing; "report" reports once and when it goes; "kill" ends it as an intruder,
// sparing root's; a lease taken on that GPU later makes the same process an intruder.
TEST(IntruderWatchTest, UnleasedProcessesAreAllowedReportedOrEnded) {
  const auto bob_on_gpu1 = Machine({Proc(70, 1001), Proc(71, 0, "root")});
  IntruderWatch allow(IntruderPolicy{});
  EXPECT_TRUE(allow.Update(bob_on_gpu1, {}, 1000).empty());
  EXPECT_TRUE(allow.Findings().empty());

  IntruderWatch report(IntruderPolicy{.unleased = IntruderPolicy::Unleased::kReport});
  auto seen = report.Update(bob_on_gpu1, {}, 1000);
  ASSERT_EQ(Kinds(seen), (std::vector{IntruderStep::kSeen, IntruderStep::kSeen}));
  EXPECT_EQ(seen[0].lease_id, 0);
  EXPECT_EQ(seen[0].lease_user, "");
  EXPECT_TRUE(report.Update(bob_on_gpu1, {}, 90000).empty()) << "reported once, never ended";
  auto findings = report.Findings();
  ASSERT_EQ(findings.size(), 1u) << "one finding per GPU";
  EXPECT_EQ(findings[0].code, "unleased");
  EXPECT_NE(findings[0].message.find("process 70 of bob uses GPU 1, which no lease holds"), std::string::npos)
      << findings[0].message;
  // Alice leases GPU 1: bob's process is now an intruder (gone as unleased, seen as intruder).
  EXPECT_EQ(Kinds(report.Update(bob_on_gpu1, AliceHoldsGpu1(), 91000)),
            (std::vector{IntruderStep::kSeen, IntruderStep::kSeen, IntruderStep::kGone, IntruderStep::kGone}));
  EXPECT_EQ(report.Findings()[0].code, "intruder");

  IntruderWatch kill(IntruderPolicy{.grace_ms = 5000, .unleased = IntruderPolicy::Unleased::kKill});
  auto steps = kill.Update(bob_on_gpu1, {}, 1000);
  EXPECT_EQ(Kinds(steps), (std::vector{IntruderStep::kSeen, IntruderStep::kTerm, IntruderStep::kSeen}));
  EXPECT_EQ(steps[2].spared, "it is root's");
  EXPECT_EQ(Kinds(kill.Update(bob_on_gpu1, {}, 6000)), std::vector{IntruderStep::kKill});
  // A lease of one of GPU 1's MIG devices holds GPU 1: its tenant's process is not unleased.
  auto mig = Machine({Proc(70, 1001)});
  model::MigDevice m;
  m.uuid = "MIG-1a";
  m.parent_uuid = "GPU-1";
  mig.gpus[1].mig_devices = {m};
  model::Lease of_mig;
  of_mig.id = 9;
  of_mig.uid = 1001;
  of_mig.user = "bob";
  of_mig.gpu_uuids = {"MIG-1a"};
  IntruderWatch kill_mig(IntruderPolicy{.unleased = IntruderPolicy::Unleased::kKill});
  EXPECT_TRUE(kill_mig.Update(mig, {of_mig}, 1000).empty());
  // A process on a GPU someone leased is judged by foreign_processes, not unleased_processes.
  IntruderWatch kill_unleased_only(IntruderPolicy{.unleased = IntruderPolicy::Unleased::kKill});
  EXPECT_EQ(Kinds(kill_unleased_only.Update(Machine({Proc(70, 1001)}), AliceHoldsGpu1(), 1000)),
            std::vector{IntruderStep::kSeen});
}

}  // namespace
}  // namespace gpuman::monitor
