// The slice watch (issue 25): a holder over their memory slices is reported once, ended
// under "kill" after the grace period (TERM, then KILL), and reported back within.
#include "monitor/slice_watch.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpuman::monitor {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

model::MachineSnapshot Gpu(int64_t alice_gib) {
  model::MachineSnapshot snap;
  model::DeviceSnapshot g;
  g.index = 2;
  g.uuid = "GPU-a";
  model::GpuProcess p;
  p.pid = 77;
  p.uid = 1000;
  p.is_visible = true;
  p.used_memory_bytes = alice_gib * kGiB;
  g.processes.push_back(p);
  snap.gpus.push_back(g);
  return snap;
}

std::vector<model::Lease> Slice() {
  model::Lease l;
  l.id = 9;
  l.uid = 1000;
  l.user = "alice";
  l.gpu_uuids = {"GPU-a"};
  l.gpu_memory_bytes = 20 * kGiB;
  return {l};
}

std::vector<SliceStep::Kind> Kinds(const std::vector<SliceStep>& steps) {
  std::vector<SliceStep::Kind> out;
  for (const auto& s : steps) out.push_back(s.kind);
  return out;
}

TEST(SliceWatchTest, ReportOnlyTellsOnceAndWhenBackWithin) {
  SliceWatch watch(SlicePolicy{});
  EXPECT_TRUE(watch.Update(Gpu(10), Slice(), 0).empty());
  auto over = watch.Update(Gpu(25), Slice(), 1000);
  ASSERT_THAT(Kinds(over), ::testing::ElementsAre(SliceStep::kOver));
  EXPECT_EQ(over[0].lease_id, 9);
  EXPECT_EQ(over[0].user, "alice");
  EXPECT_EQ(over[0].gpu_index, 2);
  EXPECT_EQ(over[0].used_bytes, 25 * kGiB);
  ASSERT_EQ(watch.Findings().size(), 1u);
  EXPECT_EQ(watch.Findings()[0].code, "slice_over");
  EXPECT_TRUE(watch.Update(Gpu(26), Slice(), 999999).empty()) << "report: never ended";
  EXPECT_THAT(Kinds(watch.Update(Gpu(5), Slice(), 1000000)), ::testing::ElementsAre(SliceStep::kWithin));
  EXPECT_TRUE(watch.Findings().empty());
}

TEST(SliceWatchTest, KillEndsTheHoldersProcessesAfterTheGrace) {
  SliceWatch watch(SlicePolicy{true, 30000});
  EXPECT_THAT(Kinds(watch.Update(Gpu(25), Slice(), 0)), ::testing::ElementsAre(SliceStep::kOver));
  EXPECT_TRUE(watch.Update(Gpu(25), Slice(), 29999).empty());
  auto term = watch.Update(Gpu(25), Slice(), 30000);
  ASSERT_THAT(Kinds(term), ::testing::ElementsAre(SliceStep::kTerm));
  EXPECT_THAT(term[0].pids, ::testing::ElementsAre(77u));
  EXPECT_TRUE(watch.Update(Gpu(25), Slice(), 59999).empty());
  EXPECT_THAT(Kinds(watch.Update(Gpu(25), Slice(), 60000)), ::testing::ElementsAre(SliceStep::kKill));
  EXPECT_TRUE(watch.Update(Gpu(25), Slice(), 90000).empty()) << "KILL once";
  // Under its slice again before the grace ran out: nothing is ended.
  SliceWatch calm(SlicePolicy{true, 30000});
  calm.Update(Gpu(25), Slice(), 0);
  EXPECT_THAT(Kinds(calm.Update(Gpu(15), Slice(), 20000)), ::testing::ElementsAre(SliceStep::kWithin));
  EXPECT_THAT(Kinds(calm.Update(Gpu(25), Slice(), 40000)), ::testing::ElementsAre(SliceStep::kOver)) << "a new overrun, a new grace";
}

}  // namespace
}  // namespace gpuman::monitor
