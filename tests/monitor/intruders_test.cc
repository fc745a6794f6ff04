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

}  // namespace
}  // namespace gpuman::monitor
