#include "store/history_store.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "support/temp_dir.h"

namespace gpuman::store {
namespace {

using model::GpuSample;
using model::HolderKind;
using model::UsageKey;
using ::testing::HasSubstr;

constexpr int64_t kT0 = 1'700'000'040'000;  // a multiple of a minute
constexpr int64_t kSecond = 1000, kMinute = 60 * kSecond, kHour = 60 * kMinute;

GpuSample Sample(int64_t t, int index, double util, std::string user = "",
                 std::optional<int64_t> job = std::nullopt) {
  GpuSample s;
  s.t_unix_ms = t;
  s.gpu_uuid = "GPU-" + std::to_string(index) + "0000000-1111-2222-3333-444444444444";
  s.gpu_index = index;
  s.utilization_percent = util;
  s.memory_utilization_percent = util / 2;
  s.memory_used_bytes = static_cast<int64_t>(util) * 1'000'000'000;
  s.memory_total_bytes = 80'000'000'000;
  s.temperature_c = 40.5;
  s.power_w = 123.456;
  s.holder_kind = user.empty() ? HolderKind::kFree : job ? HolderKind::kJob : HolderKind::kLease;
  s.user = std::move(user);
  s.job_id = job;
  return s;
}

// A sample of processes running outside gpuman, split equally between their users.
GpuSample Outside(int64_t t, int index, double util, std::vector<std::string> users) {
  GpuSample s = Sample(t, index, util);
  s.holder_kind = HolderKind::kOutside;
  s.user = users.front();
  if (users.size() > 1) {
    for (const auto& u : users) s.holders.push_back({HolderKind::kOutside, u, 1.0 / users.size()});
  }
  return s;
}

double ShareOf(const GpuSample& s, HolderKind kind, const std::string& user) {
  for (const auto& h : model::SharesOf(s)) {
    if (h.kind == kind && h.user == user) return h.share;
  }
  return 0;
}

std::unique_ptr<HistoryStore> OpenOrDie(const std::string& path, bool read_only = false,
                                        HistoryRetention retention = {}) {
  auto store = HistoryStore::Open(path, read_only, retention);
  EXPECT_TRUE(store.has_value()) << store.error().message;
  return store ? std::move(*store) : nullptr;
}

int64_t CountRows(HistoryStore& store, const char* table) {
  auto q = store.DatabaseForTesting().Prepare("count", std::string("SELECT count(*) FROM ") + table);
  EXPECT_TRUE(q.has_value());
  auto use = q->Use();
  auto row = q->Step();
  EXPECT_TRUE(row.has_value() && *row);
  return q->ColumnInt64(0);
}

TEST(HistoryStoreTest, RecordsAndReadsBackFineSamples) {
  testing::TempDir dir;
  auto store = OpenOrDie(dir.Join("history.db"));
  ASSERT_TRUE(store);
  for (int i = 0; i < 10; ++i) {
    auto a = Sample(kT0 + i * kSecond, 0, 37.25, "alice", 12);
    auto b = Sample(kT0 + i * kSecond, 1, 0.0);
    b.temperature_c.reset();
    b.power_w.reset();
    ASSERT_TRUE(store->Record({b, a}).has_value());
  }
  auto rows = store->Samples({});
  ASSERT_TRUE(rows.has_value()) << rows.error().message;
  ASSERT_EQ(rows->size(), 20u);
  const GpuSample& first = (*rows)[0];
  EXPECT_EQ(first.t_unix_ms, kT0);
  EXPECT_EQ(first.gpu_index, 0);  // ordered by time, then index
  EXPECT_EQ(first.gpu_uuid, Sample(0, 0, 0).gpu_uuid);
  EXPECT_DOUBLE_EQ(*first.utilization_percent, 37.25);
  EXPECT_DOUBLE_EQ(*first.memory_utilization_percent, 18.63);  // hundredths of a percent
  EXPECT_EQ(*first.memory_used_bytes, 37'000'000'000);
  EXPECT_EQ(*first.memory_total_bytes, 80'000'000'000);
  EXPECT_DOUBLE_EQ(*first.temperature_c, 40.5);
  EXPECT_DOUBLE_EQ(*first.power_w, 123.456);
  EXPECT_EQ(first.user, "alice");
  EXPECT_EQ(first.job_id, 12);
  EXPECT_EQ(first.holder_kind, HolderKind::kJob);
  EXPECT_TRUE(first.holders.empty());
  const GpuSample& second = (*rows)[1];
  EXPECT_EQ(second.gpu_index, 1);
  EXPECT_EQ(second.user, "");
  EXPECT_EQ(second.holder_kind, HolderKind::kFree);
  EXPECT_FALSE(second.temperature_c.has_value());
  EXPECT_FALSE(second.power_w.has_value());
  EXPECT_FALSE(second.job_id.has_value());

  GpuSample no_uuid = Sample(kT0, 3, 1);
  no_uuid.gpu_uuid.clear();
  auto refused = store->Record({no_uuid});
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, ErrorCode::kInvalidArgument);
}

TEST(HistoryStoreTest, FiltersByGpuAndWindow) {
  testing::TempDir dir;
  auto store = OpenOrDie(dir.Join("history.db"));
  ASSERT_TRUE(store);
  for (int i = 0; i < 30; ++i) {
    ASSERT_TRUE(store->Record({Sample(kT0 + i * kSecond, 0, i), Sample(kT0 + i * kSecond, 1, i)}));
  }
  HistoryStore::Query q;
  q.since_unix_ms = kT0 + 10 * kSecond;
  q.until_unix_ms = kT0 + 19 * kSecond;
  q.gpu_uuids = {Sample(0, 1, 0).gpu_uuid};
  auto rows = store->Samples(q);
  ASSERT_TRUE(rows.has_value());
  ASSERT_EQ(rows->size(), 10u);
  for (const auto& s : *rows) EXPECT_EQ(s.gpu_index, 1);
  EXPECT_EQ(rows->front().t_unix_ms, kT0 + 10 * kSecond);
  EXPECT_EQ(rows->back().t_unix_ms, kT0 + 19 * kSecond);

  q.step_ms = 10 * kSecond;  // re-bucketed: means of 10..19
  rows = store->Samples(q);
  ASSERT_TRUE(rows.has_value());
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_DOUBLE_EQ(*(*rows)[0].utilization_percent, 14.5);

  auto gpus = store->Gpus();
  ASSERT_TRUE(gpus.has_value());
  ASSERT_EQ(gpus->size(), 2u);
  EXPECT_EQ((*gpus)[1].index, 1);
  auto range = store->TimeRange();
  ASSERT_TRUE(range.has_value() && range->has_value());
  EXPECT_EQ((*range)->first, kT0);
  EXPECT_EQ((*range)->second, kT0 + 29 * kSecond);
}

TEST(HistoryStoreTest, RollsFinishedStepsUpIntoMeans) {
  testing::TempDir dir;
  auto store = OpenOrDie(dir.Join("history.db"));
  ASSERT_TRUE(store);
  // Minute 0: util 0..59, alice then bob from second 30 on. Minute 1: util 100, carol.
  for (int i = 0; i < 60; ++i) {
    ASSERT_TRUE(store->Record({Sample(kT0 + i * kSecond, 0, i, i < 30 ? "alice" : "bob", i < 30 ? 1 : 2)}));
  }
  EXPECT_EQ(CountRows(*store, "coarse_samples"), 0);  // minute 0 is not over yet
  for (int i = 60; i < 120; ++i) {
    ASSERT_TRUE(store->Record({Sample(kT0 + i * kSecond, 0, 100, "carol")}));
  }
  EXPECT_EQ(CountRows(*store, "coarse_samples"), 1);
  ASSERT_TRUE(store->Record({Sample(kT0 + 120 * kSecond, 0, 50)}));
  EXPECT_EQ(CountRows(*store, "coarse_samples"), 2);

  HistoryStore::Query q;
  q.step_ms = kMinute;  // asks for coarse rows
  auto rows = store->Samples(q);
  ASSERT_TRUE(rows.has_value());
  ASSERT_EQ(rows->size(), 3u);  // two rolled-up minutes and the unfinished third
  EXPECT_EQ((*rows)[0].t_unix_ms, kT0);
  EXPECT_DOUBLE_EQ(*(*rows)[0].utilization_percent, 29.5);
  // Half each: a tie goes to the holder seen last, with its job; both keep their share.
  EXPECT_EQ((*rows)[0].user, "bob");
  EXPECT_EQ((*rows)[0].job_id, 2);
  EXPECT_EQ((*rows)[0].holder_kind, HolderKind::kJob);
  ASSERT_EQ((*rows)[0].holders.size(), 2u);
  EXPECT_DOUBLE_EQ(ShareOf((*rows)[0], HolderKind::kJob, "alice"), 0.5);
  EXPECT_DOUBLE_EQ(ShareOf((*rows)[0], HolderKind::kJob, "bob"), 0.5);
  EXPECT_EQ(CountRows(*store, "coarse_shares"), 2);  // only the mixed minute has share rows
  EXPECT_DOUBLE_EQ(*(*rows)[0].temperature_c, 40.5);
  EXPECT_EQ(*(*rows)[0].memory_used_bytes, 29'500'000'000);
  EXPECT_EQ((*rows)[1].t_unix_ms, kT0 + kMinute);
  EXPECT_DOUBLE_EQ(*(*rows)[1].utilization_percent, 100);
  EXPECT_EQ((*rows)[1].user, "carol");
  EXPECT_TRUE((*rows)[1].holders.empty());
  EXPECT_EQ((*rows)[2].t_unix_ms, kT0 + 2 * kMinute);
  EXPECT_DOUBLE_EQ(*(*rows)[2].utilization_percent, 50);

  // A restarted writer continues where the file left off (no double roll-up).
  store.reset();
  store = OpenOrDie(dir.Join("history.db"));
  ASSERT_TRUE(store);
  ASSERT_TRUE(store->Record({Sample(kT0 + 180 * kSecond, 0, 10)}));
  EXPECT_EQ(CountRows(*store, "coarse_samples"), 3);
  rows = store->Samples(q);
  ASSERT_TRUE(rows.has_value());
  ASSERT_EQ(rows->size(), 4u);
  EXPECT_DOUBLE_EQ(*(*rows)[0].utilization_percent, 29.5);
}

TEST(HistoryStoreTest, PrunesRowsOlderThanTheRetention) {
  testing::TempDir dir;
  HistoryRetention retention;
  retention.fine_keep_ms = 5 * kMinute;
  retention.coarse_step_ms = kMinute;
  retention.coarse_keep_ms = 30 * kMinute;
  auto store = OpenOrDie(dir.Join("history.db"), false, retention);
  ASSERT_TRUE(store);
  int64_t now = kT0;
  for (int i = 0; i <= 360; ++i) {  // one hour of 10 s samples for two GPUs
    now = kT0 + i * 10 * kSecond;
    ASSERT_TRUE(store->Record({Sample(now, 0, 10), Sample(now, 1, 20)}));
    ASSERT_TRUE(store->RecordJobWait({i, "u", now - kSecond, now, 1}));
  }
  auto range = [&](const char* table) {
    auto q = store->DatabaseForTesting().Prepare(
        "range", std::string("SELECT min(t_unix_ms), max(t_unix_ms) FROM ") + table);
    EXPECT_TRUE(q.has_value());
    auto use = q->Use();
    auto row = q->Step();
    EXPECT_TRUE(row.has_value() && *row);
    return std::pair{q->ColumnInt64(0), q->ColumnInt64(1)};
  };
  // Pruning runs at most once a minute, so up to one step more than the retention stays.
  auto [fine_min, fine_max] = range("fine_samples");
  EXPECT_EQ(fine_max, now);
  EXPECT_GE(fine_min, now - retention.fine_keep_ms - kMinute);
  EXPECT_LE(fine_min, now - retention.fine_keep_ms);
  auto [coarse_min, coarse_max] = range("coarse_samples");
  EXPECT_GE(coarse_min, now - retention.coarse_keep_ms - kMinute);
  EXPECT_LE(coarse_min, now - retention.coarse_keep_ms);
  EXPECT_EQ(coarse_max, now - kMinute);  // the step before the current one
  EXPECT_LE(CountRows(*store, "coarse_samples"), 2 * 32);
  auto waits = store->JobWaits(std::nullopt);
  ASSERT_TRUE(waits.has_value());
  EXPECT_GE(waits->front().started_unix_ms, now - retention.coarse_keep_ms - kMinute);
}

TEST(HistoryStoreTest, PicksFineOrCoarseRowsForTheWindow) {
  testing::TempDir dir;
  HistoryRetention retention;
  retention.fine_keep_ms = 5 * kMinute;
  retention.coarse_step_ms = kMinute;
  retention.coarse_keep_ms = 30 * kMinute;
  auto store = OpenOrDie(dir.Join("history.db"), false, retention);
  ASSERT_TRUE(store);
  int64_t now = kT0;
  for (int i = 0; i <= 240; ++i) {  // 40 minutes of 10 s samples
    now = kT0 + i * 10 * kSecond;
    ASSERT_TRUE(store->Record({Sample(now, 0, i % 2 ? 100 : 0)}));
  }
  auto spacing = [](const std::vector<GpuSample>& rows) {
    return rows.size() < 2 ? 0 : rows[1].t_unix_ms - rows[0].t_unix_ms;
  };
  HistoryStore::Query recent;
  recent.since_unix_ms = now - 2 * kMinute;  // within fine retention
  auto rows = store->Samples(recent);
  ASSERT_TRUE(rows.has_value());
  EXPECT_EQ(spacing(*rows), 10 * kSecond);
  EXPECT_EQ(rows->size(), 13u);

  HistoryStore::Query older;
  older.since_unix_ms = now - 20 * kMinute;  // beyond it: coarse rows, plus the newest minute
  rows = store->Samples(older);
  ASSERT_TRUE(rows.has_value());
  EXPECT_EQ(spacing(*rows), kMinute);
  EXPECT_EQ(rows->size(), 21u);
  EXPECT_EQ(rows->back().t_unix_ms, now);  // the unfinished step, averaged from fine rows
  EXPECT_DOUBLE_EQ(*(*rows)[0].utilization_percent, 50);

  HistoryStore::Query everything;
  rows = store->Samples(everything);
  ASSERT_TRUE(rows.has_value());
  EXPECT_EQ(spacing(*rows), kMinute);
  EXPECT_EQ(rows->front().t_unix_ms, now - 30 * kMinute);  // pruned at 30 minutes

  HistoryStore::Query coarse_step;
  coarse_step.since_unix_ms = now - 2 * kMinute;
  coarse_step.step_ms = 5 * kMinute;
  rows = store->Samples(coarse_step);
  ASSERT_TRUE(rows.has_value());
  ASSERT_FALSE(rows->empty());
  for (const auto& s : *rows) EXPECT_EQ(s.t_unix_ms % (5 * kMinute), 0);
}

TEST(HistoryStoreTest, AttributesGpuHoursToHolders) {
  testing::TempDir dir;
  auto store = OpenOrDie(dir.Join("history.db"));
  ASSERT_TRUE(store);
  // 600 s: GPU 0 alice throughout; GPU 1 free for 300 s, then bob.
  for (int i = 0; i < 600; ++i) {
    int64_t t = kT0 + i * kSecond;
    ASSERT_TRUE(store->Record({Sample(t, 0, 90, "alice"), Sample(t, 1, 50, i < 300 ? "" : "bob")}));
  }
  auto hours = store->GpuHoursByUser(std::nullopt, std::nullopt);
  ASSERT_TRUE(hours.has_value()) << hours.error().message;
  EXPECT_DOUBLE_EQ((*hours)[{"alice"}], 600.0 / 3600);
  EXPECT_DOUBLE_EQ((*hours)[{"bob"}], 300.0 / 3600);
  EXPECT_DOUBLE_EQ((*hours)[{}], 300.0 / 3600);

  // A window counts only its samples.
  hours = store->GpuHoursByUser(kT0 + 300 * kSecond, std::nullopt);
  ASSERT_TRUE(hours.has_value());
  EXPECT_DOUBLE_EQ((*hours)[{"alice"}], 300.0 / 3600);
  EXPECT_EQ(hours->count({}), 0u);
}

TEST(HistoryStoreTest, HeldTimeDoesNotBridgeOutages) {
  std::vector<GpuSample> rows;
  for (int i = 0; i < 10; ++i) rows.push_back(Sample(kT0 + i * kSecond, 0, 1, "alice"));
  rows.push_back(Sample(kT0 + 12 * kSecond, 0, 1, "alice"));  // two samples missed: bridged
  rows.push_back(Sample(kT0 + 500 * kSecond, 0, 1, "alice"));  // daemon down: one period
  auto held = HeldMsByUser(rows, std::nullopt);
  EXPECT_DOUBLE_EQ(held[{"alice"}], 9 * kSecond + 3 * kSecond + kSecond + kSecond);
}

TEST(HistoryStoreTest, RebucketsToMeansAndLastHolder) {
  std::vector<GpuSample> rows = {Sample(kT0, 0, 10, "a"), Sample(kT0 + kSecond, 0, 30, "b"),
                                 Sample(kT0 + 2 * kSecond, 1, 70, "c")};
  rows[1].temperature_c.reset();
  auto out = RebucketSamples(rows, kMinute);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].gpu_index, 0);
  EXPECT_EQ(out[0].t_unix_ms, kT0);
  EXPECT_DOUBLE_EQ(*out[0].utilization_percent, 20);
  EXPECT_DOUBLE_EQ(*out[0].temperature_c, 40.5);  // the one row that had it
  EXPECT_EQ(out[0].user, "b");
  EXPECT_EQ(out[1].gpu_index, 1);
  EXPECT_EQ(out[1].user, "c");
}

TEST(HistoryStoreTest, AForeignProcessCountsToItsUserOutsideGpuman) {
  testing::TempDir dir;
  auto store = OpenOrDie(dir.Join("history.db"));
  ASSERT_TRUE(store);
  // 60 s: GPU 0 used outside gpuman by carol, and from second 30 on by carol and dave
  // together; GPU 1 leased to alice (a process of hers there is hers through the lease).
  for (int i = 0; i < 60; ++i) {
    const int64_t t = kT0 + i * kSecond;
    ASSERT_TRUE(store->Record({i < 30 ? Outside(t, 0, 80, {"carol"}) : Outside(t, 0, 80, {"carol", "dave"}),
                               Sample(t, 1, 50, "alice")}));
  }
  HistoryStore::Query q;
  q.gpu_uuids = {Sample(0, 0, 0).gpu_uuid};
  auto rows = store->Samples(q);
  ASSERT_TRUE(rows.has_value()) << rows.error().message;
  ASSERT_EQ(rows->size(), 60u);
  EXPECT_EQ((*rows)[0].holder_kind, HolderKind::kOutside);
  EXPECT_EQ((*rows)[0].user, "carol");
  EXPECT_TRUE((*rows)[0].holders.empty());
  const GpuSample& shared = (*rows)[40];
  EXPECT_EQ(shared.holder_kind, HolderKind::kOutside);
  ASSERT_EQ(shared.holders.size(), 2u);
  EXPECT_DOUBLE_EQ(ShareOf(shared, HolderKind::kOutside, "carol"), 0.5);
  EXPECT_DOUBLE_EQ(ShareOf(shared, HolderKind::kOutside, "dave"), 0.5);
  EXPECT_EQ(CountRows(*store, "fine_shares"), 60);  // 30 shared samples, 2 users each

  auto hours = store->GpuHoursByUser(std::nullopt, kT0 + kMinute);
  ASSERT_TRUE(hours.has_value()) << hours.error().message;
  EXPECT_DOUBLE_EQ((*hours)[(UsageKey{"carol", true})], 45.0 / 3600);  // 30 s + half of 30 s
  EXPECT_DOUBLE_EQ((*hours)[(UsageKey{"dave", true})], 15.0 / 3600);
  EXPECT_DOUBLE_EQ((*hours)[{"alice"}], 60.0 / 3600);
  EXPECT_EQ(hours->count({"carol"}), 0u);  // never through gpuman
  EXPECT_EQ(hours->count({}), 0u);         // never free: somebody used both GPUs throughout

  // A sample recorded again replaces the old one, shares included.
  ASSERT_TRUE(store->Record({Outside(kT0 + 40 * kSecond, 0, 80, {"dave"})}));
  EXPECT_EQ(CountRows(*store, "fine_shares"), 58);
}

TEST(HistoryStoreTest, AMixedMinuteIsSplitByShareInTheCoarseTier) {
  testing::TempDir dir;
  HistoryRetention retention;
  retention.fine_keep_ms = 5 * kMinute;
  retention.coarse_step_ms = kMinute;
  retention.coarse_keep_ms = 30 * kMinute;
  auto store = OpenOrDie(dir.Join("history.db"), false, retention);
  ASSERT_TRUE(store);
  // Minute 0: alice's lease for 30 s, bob outside gpuman for 20 s, free for 10 s. Then
  // ten quiet minutes, so that minute 0 is only left in the coarse tier.
  for (int i = 0; i < 60; ++i) {
    const int64_t t = kT0 + i * kSecond;
    ASSERT_TRUE(store->Record({i < 30 ? Sample(t, 0, 90, "alice")
                               : i < 50 ? Outside(t, 0, 60, {"bob"})
                                        : Sample(t, 0, 0)}));
  }
  for (int i = 60; i <= 660; ++i) ASSERT_TRUE(store->Record({Sample(kT0 + i * kSecond, 0, 0)}));
  EXPECT_EQ(CountRows(*store, "coarse_shares"), 3);  // minute 0 only; the others were all free

  HistoryStore::Query q;
  q.since_unix_ms = kT0;
  q.until_unix_ms = kT0 + kMinute - 1;
  auto rows = store->Samples(q);
  ASSERT_TRUE(rows.has_value()) << rows.error().message;
  ASSERT_EQ(rows->size(), 1u);  // the roll-up: fine rows of minute 0 are gone
  const GpuSample& minute = (*rows)[0];
  EXPECT_EQ(minute.t_unix_ms, kT0);
  EXPECT_DOUBLE_EQ(*minute.utilization_percent, (30 * 90 + 20 * 60) / 60.0);
  EXPECT_EQ(minute.user, "alice");  // the largest share
  EXPECT_EQ(minute.holder_kind, HolderKind::kLease);
  ASSERT_EQ(minute.holders.size(), 3u);
  EXPECT_DOUBLE_EQ(ShareOf(minute, HolderKind::kLease, "alice"), 0.5);
  EXPECT_NEAR(ShareOf(minute, HolderKind::kOutside, "bob"), 1.0 / 3, 1e-9);
  EXPECT_NEAR(ShareOf(minute, HolderKind::kFree, ""), 1.0 / 6, 1e-9);

  // GPU-hours sum the shares, not the minute's last holder (which was nobody).
  auto hours = store->GpuHoursByUser(kT0, kT0 + kMinute);
  ASSERT_TRUE(hours.has_value()) << hours.error().message;
  EXPECT_NEAR((*hours)[{"alice"}] * 3600, 30, 1e-6);
  EXPECT_NEAR((*hours)[(UsageKey{"bob", true})] * 3600, 20, 1e-6);
  EXPECT_NEAR((*hours)[{}] * 3600, 10, 1e-6);

  // A coarser step averages the minutes' shares: minute 0 and the free minute 1.
  q.until_unix_ms = kT0 + 2 * kMinute - 1;
  q.step_ms = 2 * kMinute;
  rows = store->Samples(q);
  ASSERT_TRUE(rows.has_value());
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_DOUBLE_EQ(ShareOf((*rows)[0], HolderKind::kLease, "alice"), 0.25);
  EXPECT_NEAR(ShareOf((*rows)[0], HolderKind::kFree, ""), 0.5 + 1.0 / 12, 1e-9);
  EXPECT_EQ((*rows)[0].user, "");  // free for most of the two minutes
  EXPECT_EQ((*rows)[0].holder_kind, HolderKind::kFree);
}

TEST(HistoryStoreTest, GpuHoursSumTheSharesOfEachRow) {
  // Two coarse rows of one GPU: alice alone, then alice and bob half each.
  GpuSample first = Sample(kT0, 0, 1, "alice");
  GpuSample second = Sample(kT0 + kMinute, 0, 1, "alice");
  second.holders = {{HolderKind::kLease, "alice", 0.5}, {HolderKind::kLease, "bob", 0.5}};
  auto held = HeldMsByUser({first, second}, std::nullopt);
  EXPECT_DOUBLE_EQ(held[{"alice"}], 90 * kSecond);
  EXPECT_DOUBLE_EQ(held[{"bob"}], 30 * kSecond);
  EXPECT_EQ(held.size(), 2u);
}

TEST(HistoryStoreTest, RefusesAHolderKindThatDoesNotMatchTheUser) {
  testing::TempDir dir;
  auto store = OpenOrDie(dir.Join("history.db"));
  ASSERT_TRUE(store);
  GpuSample named_but_free = Sample(kT0, 0, 1);
  named_but_free.user = "alice";
  GpuSample leased_to_nobody = Sample(kT0, 0, 1);
  leased_to_nobody.holder_kind = HolderKind::kLease;
  GpuSample bad_share = Outside(kT0, 0, 1, {"a", "b"});
  bad_share.holders[1].user = "";
  for (const auto& s : {named_but_free, leased_to_nobody, bad_share}) {
    auto refused = store->Record({s});
    ASSERT_FALSE(refused.has_value());
    EXPECT_EQ(refused.error().code, ErrorCode::kInvalidArgument);
    EXPECT_THAT(refused.error().message, HasSubstr("holder kind"));
  }
  EXPECT_EQ(CountRows(*store, "fine_samples"), 0);
}

// A history db as schema 1 wrote it (before holder kinds and shares): readers read it
// as it is, and the daemon's writable open migrates it without losing a row.
constexpr const char* kSchema1 = R"sql(
CREATE TABLE gpus (id INTEGER PRIMARY KEY, uuid TEXT NOT NULL UNIQUE, gpu_index INTEGER NOT NULL);
CREATE TABLE fine_samples (
  t_unix_ms INTEGER NOT NULL, gpu INTEGER NOT NULL, gpu_index INTEGER NOT NULL,
  util_cpct INTEGER, mem_util_cpct INTEGER, mem_used_bytes INTEGER, mem_total_bytes INTEGER,
  temp_ccel INTEGER, power_mw INTEGER, user TEXT NOT NULL, job_id INTEGER,
  PRIMARY KEY (t_unix_ms, gpu)) WITHOUT ROWID;
CREATE TABLE coarse_samples (
  t_unix_ms INTEGER NOT NULL, gpu INTEGER NOT NULL, gpu_index INTEGER NOT NULL,
  util_cpct INTEGER, mem_util_cpct INTEGER, mem_used_bytes INTEGER, mem_total_bytes INTEGER,
  temp_ccel INTEGER, power_mw INTEGER, user TEXT NOT NULL, job_id INTEGER,
  PRIMARY KEY (t_unix_ms, gpu)) WITHOUT ROWID;
CREATE TABLE job_waits (
  started_unix_ms INTEGER NOT NULL, job_id INTEGER NOT NULL, user TEXT NOT NULL,
  submitted_unix_ms INTEGER NOT NULL, gpus INTEGER NOT NULL,
  PRIMARY KEY (started_unix_ms, job_id)) WITHOUT ROWID;
INSERT INTO gpus VALUES (1, 'GPU-00000000-1111-2222-3333-444444444444', 0);
-- Two old minutes (carol's job, then free) and three seconds (bob's lease, alice's job, free).
INSERT INTO coarse_samples VALUES (1699999920000, 1, 0, 5000, 2500, 5000000000, 80000000000, 4050, 123456, 'carol', 9);
INSERT INTO coarse_samples VALUES (1699999980000, 1, 0, 0, 0, 0, 80000000000, 4050, 123456, '', NULL);
INSERT INTO fine_samples VALUES (1700000040000, 1, 0, 7000, 3500, 7000000000, 80000000000, 4050, 123456, 'bob', NULL);
INSERT INTO fine_samples VALUES (1700000041000, 1, 0, 7000, 3500, 7000000000, 80000000000, 4050, 123456, 'alice', 7);
INSERT INTO fine_samples VALUES (1700000042000, 1, 0, 0, 0, 0, 80000000000, 4050, 123456, '', NULL);
INSERT INTO job_waits VALUES (1700000041000, 7, 'alice', 1700000000000, 1);
PRAGMA user_version = 1;
)sql";

TEST(HistoryStoreTest, RowsOfSchemaOneStillRead) {
  testing::TempDir dir;
  const std::string path = dir.Join("history.db");
  {
    auto db = Database::Open(path);
    ASSERT_TRUE(db.has_value()) << db.error().message;
    ASSERT_TRUE((*db)->ExecScript("schema 1", kSchema1));
  }
  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  auto check = [&](HistoryStore& store, const char* when) {
    SCOPED_TRACE(when);
    auto rows = store.Samples({});  // coarse rows, then the newest minute from fine rows
    ASSERT_TRUE(rows.has_value()) << rows.error().message;
    ASSERT_EQ(rows->size(), 3u);
    EXPECT_EQ((*rows)[0].user, "carol");
    EXPECT_EQ((*rows)[0].holder_kind, HolderKind::kJob);
    EXPECT_EQ((*rows)[0].job_id, 9);
    EXPECT_TRUE((*rows)[0].holders.empty());  // an old minute: its holder held all of it
    EXPECT_DOUBLE_EQ(*(*rows)[0].utilization_percent, 50);
    EXPECT_EQ((*rows)[1].holder_kind, HolderKind::kFree);
    EXPECT_EQ((*rows)[2].holders.size(), 3u);  // bob, alice and nobody a second each
    EXPECT_NEAR(ShareOf((*rows)[2], HolderKind::kLease, "bob"), 1.0 / 3, 1e-9);
    EXPECT_NEAR(ShareOf((*rows)[2], HolderKind::kJob, "alice"), 1.0 / 3, 1e-9);

    HistoryStore::Query fine;
    fine.since_unix_ms = kT0;
    rows = store.Samples(fine);
    ASSERT_TRUE(rows.has_value()) << rows.error().message;
    ASSERT_EQ(rows->size(), 3u);
    EXPECT_EQ((*rows)[0].holder_kind, HolderKind::kLease);
    EXPECT_EQ((*rows)[1].holder_kind, HolderKind::kJob);
    EXPECT_EQ((*rows)[2].holder_kind, HolderKind::kFree);

    auto hours = store.GpuHoursByUser(std::nullopt, kT0 + 3 * kSecond);
    ASSERT_TRUE(hours.has_value()) << hours.error().message;
    EXPECT_NEAR((*hours)[{"carol"}] * 3600, 60, 1e-6);
    EXPECT_GT((*hours)[{"alice"}], 0);
    auto waits = store.JobWaits(std::nullopt);
    ASSERT_TRUE(waits.has_value());
    EXPECT_EQ(waits->size(), 1u);
  };
  {
    auto reader = OpenOrDie(path, /*read_only=*/true);  // never migrates
    ASSERT_TRUE(reader);
    check(*reader, "schema 1, read-only");
  }
  {
    auto writer = OpenOrDie(path);  // the daemon: migrates to the current schema
    ASSERT_TRUE(writer);
    check(*writer, "migrated");
    auto q = writer->DatabaseForTesting().Prepare("version", "PRAGMA user_version");
    ASSERT_TRUE(q.has_value());
    auto use = q->Use();
    auto row = q->Step();
    ASSERT_TRUE(row.has_value() && *row);
    EXPECT_EQ(q->ColumnInt64(0), 5);
  }
  auto writer = OpenOrDie(path);
  ASSERT_TRUE(writer);
  GpuSample next = Outside(kT0 + 60 * kSecond, 0, 10, {"erin", "frank"});
  next.gpu_uuid = "GPU-00000000-1111-2222-3333-444444444444";
  ASSERT_TRUE(writer->Record({next}));  // rolls minute kT0 up from its schema 1 rows
  EXPECT_EQ(CountRows(*writer, "coarse_samples"), 3);
  EXPECT_EQ(CountRows(*writer, "coarse_shares"), 3);  // bob, alice, free
  auto reader = OpenOrDie(path, /*read_only=*/true);
  ASSERT_TRUE(reader);
  HistoryStore::Query last;
  last.since_unix_ms = kT0 + 60 * kSecond;
  auto rows = reader->Samples(last);
  ASSERT_TRUE(rows.has_value()) << rows.error().message;
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_DOUBLE_EQ(ShareOf((*rows)[0], HolderKind::kOutside, "frank"), 0.5);
}

TEST(HistoryStoreTest, StoresJobWaits) {
  testing::TempDir dir;
  auto store = OpenOrDie(dir.Join("history.db"));
  ASSERT_TRUE(store);
  ASSERT_TRUE(store->RecordJobWait({7, "alice", kT0, kT0 + 90 * kSecond, 2}));
  ASSERT_TRUE(store->RecordJobWait({8, "bob", kT0 + kSecond, kT0 + 5 * kSecond, 1}));
  ASSERT_TRUE(store->RecordJobWait({7, "alice", kT0, kT0 + 300 * kSecond, 2}));  // requeued
  auto all = store->JobWaits(std::nullopt);
  ASSERT_TRUE(all.has_value());
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].job_id, 8);  // by start time
  EXPECT_EQ((*all)[0].user, "bob");
  EXPECT_EQ((*all)[1].job_id, 7);
  EXPECT_EQ((*all)[1].started_unix_ms - (*all)[1].submitted_unix_ms, 90 * kSecond);
  EXPECT_EQ((*all)[1].gpus, 2);
  auto recent = store->JobWaits(kT0 + 100 * kSecond);
  ASSERT_TRUE(recent.has_value());
  ASSERT_EQ(recent->size(), 1u);
  EXPECT_EQ((*recent)[0].started_unix_ms, kT0 + 300 * kSecond);
}

// Issue 23: the intruder watch's steps, read back in order within a window.
TEST(HistoryStoreTest, StoresIntruderEvents) {
  testing::TempDir dir;
  auto store = OpenOrDie(dir.Join("history.db"));
  ASSERT_TRUE(store);
  model::IntruderEvent seen{kT0, "seen", "GPU-a", 2, 4242, "bob", "python x.py", 7, "alice"};
  model::IntruderEvent term = seen;
  term.t_unix_ms = kT0 + kSecond;
  term.event = "term";
  model::IntruderEvent unseen{kT0 + 2 * kSecond, "seen", "GPU-a", 2, 99, "", "", 7, "alice"};
  for (const auto& e : {seen, term, unseen}) ASSERT_TRUE(store->RecordIntruder(e));
  auto all = store->IntruderEvents(std::nullopt, std::nullopt);
  ASSERT_TRUE(all.has_value());
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].event, "seen");
  EXPECT_EQ((*all)[0].pid, 4242u);
  EXPECT_EQ((*all)[0].user, "bob");
  EXPECT_EQ((*all)[0].command, "python x.py");
  EXPECT_EQ((*all)[0].lease_id, 7);
  EXPECT_EQ((*all)[0].lease_user, "alice");
  EXPECT_EQ((*all)[1].event, "term");
  EXPECT_EQ((*all)[2].user, "");
  auto later = store->IntruderEvents(kT0 + kSecond, kT0 + kSecond);
  ASSERT_TRUE(later.has_value());
  ASSERT_EQ(later->size(), 1u);
  EXPECT_EQ((*later)[0].event, "term");
}

// Issue 25: the slice watch's steps, read back in order within a window, a job's id or
// none, and the signalled pids.
TEST(HistoryStoreTest, StoresSliceEvents) {
  testing::TempDir dir;
  auto store = OpenOrDie(dir.Join("history.db"));
  ASSERT_TRUE(store);
  const int64_t gib = int64_t{1} << 30;
  model::SliceEvent over{kT0, "over", "GPU-a", 3, "alice", 7, 12, 30 * gib, 20 * gib, {}};
  model::SliceEvent term = over;
  term.t_unix_ms = kT0 + kSecond;
  term.event = "term";
  term.pids = {4242, 4243};
  model::SliceEvent of_run{kT0 + 2 * kSecond, "over", "GPU-b", 1, "bob", 9, std::nullopt, 11 * gib, 10 * gib, {}};
  for (const auto& e : {over, term, of_run}) ASSERT_TRUE(store->RecordSlice(e));
  auto all = store->SliceEvents(std::nullopt, std::nullopt);
  ASSERT_TRUE(all.has_value());
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].event, "over");
  EXPECT_EQ((*all)[0].gpu_index, 3);
  EXPECT_EQ((*all)[0].user, "alice");
  EXPECT_EQ((*all)[0].lease_id, 7);
  EXPECT_EQ((*all)[0].job_id, std::optional<int64_t>(12));
  EXPECT_EQ((*all)[0].used_bytes, 30 * gib);
  EXPECT_EQ((*all)[0].declared_bytes, 20 * gib);
  EXPECT_TRUE((*all)[0].pids.empty());
  EXPECT_EQ((*all)[1].pids, (std::vector<uint32_t>{4242, 4243}));
  EXPECT_EQ((*all)[2].job_id, std::nullopt);
  auto later = store->SliceEvents(kT0 + kSecond, kT0 + kSecond);
  ASSERT_TRUE(later.has_value());
  ASSERT_EQ(later->size(), 1u);
  EXPECT_EQ((*later)[0].event, "term");
}

TEST(HistoryStoreTest, FileIsReadableByEveryone) {
  testing::TempDir dir;
  const std::string path = dir.Join("state/history.db");
  const mode_t old_umask = ::umask(077);
  auto store = OpenOrDie(path);
  ::umask(old_umask);
  ASSERT_TRUE(store);
  ASSERT_TRUE(store->Record({Sample(kT0, 0, 1)}));
  for (const char* suffix : {"", "-wal", "-shm"}) {
    struct stat st {};
    ASSERT_EQ(::stat((path + suffix).c_str(), &st), 0) << suffix;
    EXPECT_EQ(st.st_mode & 0777, 0644u) << suffix;
  }
}

TEST(HistoryStoreTest, ReadOnlyOpenWhileTheWriterHasItOpen) {
  testing::TempDir dir;
  const std::string path = dir.Join("history.db");
  auto writer = OpenOrDie(path);
  ASSERT_TRUE(writer);
  ASSERT_TRUE(writer->Record({Sample(kT0, 0, 5)}));
  auto reader = OpenOrDie(path, /*read_only=*/true);
  ASSERT_TRUE(reader);
  ASSERT_TRUE(writer->Record({Sample(kT0 + kSecond, 0, 6)}));  // after the reader opened
  auto rows = reader->Samples({});
  ASSERT_TRUE(rows.has_value()) << rows.error().message;
  EXPECT_EQ(rows->size(), 2u);
  auto refused = reader->Record({Sample(kT0 + 2 * kSecond, 0, 7)});
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, ErrorCode::kPermissionDenied);
  EXPECT_FALSE(reader->RecordJobWait({1, "x", 0, 1, 1}).has_value());
}

// Another user (not root, not the owner) reads the file through the read-only -shm.
TEST(HistoryStoreTest, ReadOnlyOpenByAnotherUser) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to become another user";
  testing::TempDir dir;
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
  const std::string path = dir.Join("history.db");
  auto writer = OpenOrDie(path);
  ASSERT_TRUE(writer);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(writer->Record({Sample(kT0 + i * kSecond, 0, i)}));

  // 0: read 5 rows; 10+: open failed; 20+: read failed; 30: wrong count; 40: could write.
  auto read_as_nobody = [&]() {
    pid_t pid = ::fork();
    if (pid == 0) {
      if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(99);
      auto store = HistoryStore::Open(path, true);
      if (!store) {
        std::fprintf(stderr, "open: %s\n", store.error().message.c_str());
        ::_exit(10);
      }
      auto rows = (*store)->Samples({});
      if (!rows) {
        std::fprintf(stderr, "read: %s\n", rows.error().message.c_str());
        ::_exit(20);
      }
      if ((*store)->Record({Sample(kT0 + kHour, 0, 1)})) ::_exit(40);
      ::_exit(rows->size() == 5 ? 0 : 30);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  };
  EXPECT_EQ(read_as_nobody(), 0) << "while the writer has it open";
  writer.reset();
  EXPECT_EQ(read_as_nobody(), 0) << "after the writer closed it";
}

TEST(HistoryStoreTest, ReadOnlyOpenNeverCreates) {
  testing::TempDir dir;
  auto missing = HistoryStore::Open(dir.Join("history.db"), true);
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_THAT(missing.error().message, HasSubstr(dir.Join("history.db")));
  EXPECT_FALSE(std::filesystem::exists(dir.Join("history.db")));
}

TEST(HistoryStoreTest, RefusesANewerSchemaAndBadRetention) {
  testing::TempDir dir;
  const std::string path = dir.Join("history.db");
  {
    auto store = OpenOrDie(path);
    ASSERT_TRUE(store);
    ASSERT_TRUE(store->DatabaseForTesting().ExecScript("bump", "PRAGMA user_version = 99"));
  }
  for (bool read_only : {false, true}) {
    auto newer = HistoryStore::Open(path, read_only);
    ASSERT_FALSE(newer.has_value());
    EXPECT_EQ(newer.error().code, ErrorCode::kIo);
    EXPECT_THAT(newer.error().message, HasSubstr(path + " was written by a newer gpuman (schema 99"));
  }
  HistoryRetention bad;
  bad.fine_keep_ms = 1000;  // shorter than a coarse step
  auto refused = HistoryStore::Open(dir.Join("other.db"), false, bad);
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code, ErrorCode::kInvalidArgument);
}

// Measures the file for docs/history.md: a month of 1 min rows and an hour of 1 s rows for
// 8 GPUs; `shared`: every minute of the held GPUs split between two holders (the worst
// case for the share tables). Slow (tens of seconds each).
void MeasureAFullMonthOfEightGpus(bool shared) {
  testing::TempDir dir;
  const std::string path = dir.Join("history.db");
  auto store = OpenOrDie(path);
  ASSERT_TRUE(store);
  HistoryRetention r;
  auto eight = [shared](int64_t t, int k) {
    std::vector<GpuSample> v;
    for (int g = 0; g < 8; ++g) {
      v.push_back(Sample(t, g, (k * 7 + g * 13) % 101, g % 3 ? "user" + std::to_string(g) : "",
                         g % 3 ? std::optional<int64_t>(1000 + k / 600) : std::nullopt));
      v.back().temperature_c = 30 + (k + g) % 50 + 0.25;
      v.back().power_w = 100 + (k * 3 + g) % 300 + 0.5;
      if (shared && g % 3) {
        v.back().holders = {{v.back().holder_kind, v.back().user, 0.75},
                            {HolderKind::kOutside, "other" + std::to_string(g), 0.25}};
      }
    }
    return v;
  };
  const int64_t start = kT0;
  const int64_t fine_from = start + r.coarse_keep_ms - r.fine_keep_ms;
  int k = 0;
  for (int64_t t = start; t < fine_from; t += kMinute, ++k) ASSERT_TRUE(store->Record(eight(t, k)));
  for (int64_t t = fine_from; t <= start + r.coarse_keep_ms; t += kSecond, ++k) {
    ASSERT_TRUE(store->Record(eight(t, k)));
  }
  ASSERT_TRUE(store->DatabaseForTesting().ExecScript("checkpoint", "PRAGMA wal_checkpoint(TRUNCATE)"));
  std::printf("fine rows %lld (+%lld shares), coarse rows %lld (+%lld shares), file %lld bytes\n",
              static_cast<long long>(CountRows(*store, "fine_samples")),
              static_cast<long long>(CountRows(*store, "fine_shares")),
              static_cast<long long>(CountRows(*store, "coarse_samples")),
              static_cast<long long>(CountRows(*store, "coarse_shares")),
              static_cast<long long>(std::filesystem::file_size(path)));
}

// Run with --gtest_also_run_disabled_tests.
TEST(HistoryStoreTest, DISABLED_SizeOfAFullMonthOfEightGpus) { MeasureAFullMonthOfEightGpus(false); }
TEST(HistoryStoreTest, DISABLED_SizeOfAFullMonthOfEightSharedGpus) { MeasureAFullMonthOfEightGpus(true); }

}  // namespace
}  // namespace gpuman::store
