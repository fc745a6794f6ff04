#include "model/history.h"

#include <gtest/gtest.h>

namespace gpuman::model {
namespace {

const std::string kUuid = "GPU-11111111-2222-3333-4444-555555555555";

GpuProcess Process(uint32_t pid, std::optional<std::string> user, std::optional<uint32_t> uid = 1000) {
  GpuProcess p;
  p.pid = pid;
  p.is_visible = user.has_value();
  p.user = std::move(user);
  p.uid = p.is_visible ? uid : std::nullopt;
  return p;
}

DeviceSnapshot Gpu(std::vector<GpuProcess> processes) {
  DeviceSnapshot d;
  d.index = 2;
  d.uuid = kUuid;
  d.processes = std::move(processes);
  return d;
}

Lease LeaseOf(int64_t id, std::string user, std::vector<std::string> gpus) {
  Lease l;
  l.id = id;
  l.user = std::move(user);
  l.gpu_uuids = std::move(gpus);
  return l;
}

TEST(AttributeHolderTest, AFreeGpuWithoutProcessesIsFree) {
  auto h = AttributeHolder(Gpu({}), {LeaseOf(1, "alice", {"GPU-other"})}, {});
  EXPECT_EQ(h.kind, HolderKind::kFree);
  EXPECT_EQ(h.user, "");
  EXPECT_FALSE(h.job_id.has_value());
  EXPECT_TRUE(h.holders.empty());
}

TEST(AttributeHolderTest, ALeaseHoldsItWhateverRunsOnIt) {
  auto h = AttributeHolder(Gpu({Process(10, "mallory")}), {LeaseOf(3, "alice", {"GPU-x", kUuid})}, {});
  EXPECT_EQ(h.kind, HolderKind::kLease);
  EXPECT_EQ(h.user, "alice");
  EXPECT_TRUE(h.holders.empty());

  Job job;
  job.id = 17;
  job.user = "alice";
  job.lease_id = 3;
  Job other;
  other.id = 18;
  other.lease_id = 4;
  h = AttributeHolder(Gpu({}), {LeaseOf(3, "alice", {kUuid})}, {other, job});
  EXPECT_EQ(h.kind, HolderKind::kJob);
  EXPECT_EQ(h.user, "alice");
  EXPECT_EQ(h.job_id, 17);
}

TEST(AttributeHolderTest, AForeignProcessGoesToItsUserOutsideGpuman) {
  auto h = AttributeHolder(Gpu({Process(10, "carol"), Process(11, "carol")}), {}, {});
  EXPECT_EQ(h.kind, HolderKind::kOutside);
  EXPECT_EQ(h.user, "carol");
  EXPECT_TRUE(h.holders.empty());  // one user holds all of it
  EXPECT_FALSE(h.job_id.has_value());
}

TEST(AttributeHolderTest, SeveralForeignUsersShareItEqually) {
  std::vector<GpuProcess> procs = {Process(10, "dave"), Process(11, "bob"), Process(12, "dave"),
                                   Process(13, std::nullopt)};
  procs[0].used_memory_bytes = 1 << 20;
  procs[1].used_memory_bytes = 3 << 20;
  procs[2].used_memory_bytes = 2 << 20;  // dave: 3 MiB in all, as much as bob
  auto h = AttributeHolder(Gpu(procs), {}, {});
  EXPECT_EQ(h.kind, HolderKind::kOutside);
  EXPECT_EQ(h.user, "bob");  // the most memory; a tie goes to the first by name
  ASSERT_EQ(h.holders.size(), 3u);
  double sum = 0;
  for (const auto& s : h.holders) {
    EXPECT_EQ(s.kind, HolderKind::kOutside);
    EXPECT_NEAR(s.share, 1.0 / 3, 1e-12);
    sum += s.share;
  }
  EXPECT_NEAR(sum, 1.0, 1e-12);
  EXPECT_EQ(h.holders[0].user, "(unknown)");  // a process in another PID namespace
  EXPECT_EQ(h.holders[1].user, "bob");
  EXPECT_EQ(h.holders[2].user, "dave");
}

TEST(AttributeHolderTest, NamesProcessesWithoutAUserName) {
  GpuProcess uid_only;
  uid_only.is_visible = true;
  uid_only.uid = 4321;
  EXPECT_EQ(ProcessUserLabel(uid_only), "uid 4321");
  EXPECT_EQ(ProcessUserLabel(GpuProcess{}), "(unknown)");
  EXPECT_EQ(ProcessUserLabel(Process(1, "erin")), "erin");
}

TEST(UsageKeyTest, LabelsAndSharesOf) {
  EXPECT_EQ(UsageLabel(UsageKeyOf(HolderKind::kLease, "alice")), "alice");
  EXPECT_EQ(UsageLabel(UsageKeyOf(HolderKind::kJob, "alice")), "alice");
  EXPECT_EQ(UsageKeyOf(HolderKind::kJob, "alice"), UsageKeyOf(HolderKind::kLease, "alice"));
  EXPECT_EQ(UsageLabel(UsageKeyOf(HolderKind::kOutside, "alice")), "alice (outside gpuman)");
  EXPECT_EQ(UsageLabel(UsageKeyOf(HolderKind::kFree, "")), "(free)");
  EXPECT_STREQ(HolderKindName(HolderKind::kOutside), "outside");

  GpuSample s;
  s.user = "bob";
  s.holder_kind = HolderKind::kLease;
  auto shares = SharesOf(s);
  ASSERT_EQ(shares.size(), 1u);
  EXPECT_EQ(shares[0], (HolderShare{HolderKind::kLease, "bob", 1.0}));
}

}  // namespace
}  // namespace gpuman::model
