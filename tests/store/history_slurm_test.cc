// Slurm job tags in the history db (schema 3, docs/slurm.md "Accounting"): stored with a
// sample, carried into the coarse tier, found by job, and absent from files of schema 2.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "store/history_store.h"
#include "store/sqlite.h"
#include "support/temp_dir.h"

namespace gpuman::store {
namespace {

using model::GpuSample;
using ::testing::ElementsAre;

constexpr int64_t kT0 = 1'700'000'040'000;  // a multiple of a minute
constexpr int64_t kSecond = 1000, kMinute = 60 * kSecond;

std::string Uuid(int index) { return "GPU-" + std::to_string(index) + "0000000-1111-2222-3333-444444444444"; }

GpuSample Sample(int64_t t, int index, double util, std::string slurm_job = "", std::string slurm_user = "") {
  GpuSample s;
  s.t_unix_ms = t;
  s.gpu_uuid = Uuid(index);
  s.gpu_index = index;
  s.utilization_percent = util;
  s.memory_used_bytes = static_cast<int64_t>(util) * 1'000'000;
  s.slurm_job_id = std::move(slurm_job);
  s.slurm_user = std::move(slurm_user);
  return s;
}

std::unique_ptr<HistoryStore> Open(const std::string& path, bool read_only = false) {
  auto store = HistoryStore::Open(path, read_only);
  EXPECT_TRUE(store.has_value()) << store.error().message;
  return store ? std::move(*store) : nullptr;
}

TEST(HistorySlurmTest, TagsAreStoredAndFoundByJob) {
  testing::TempDir dir;
  auto store = Open(dir.Join("history.db"));
  ASSERT_TRUE(store);
  for (int i = 0; i < 10; ++i) {
    const int64_t t = kT0 + i * kSecond;
    // GPU 0: job 41 for 5 s, then job 42; GPU 1: job 42 throughout; GPU 2: no job.
    ASSERT_TRUE(store->Record({Sample(t, 0, 10 + i, i < 5 ? "41" : "42", i < 5 ? "alice" : "bob"),
                               Sample(t, 1, 50, "42", "bob"), Sample(t, 2, 0)}));
  }
  auto rows = store->Samples({});
  ASSERT_TRUE(rows) << rows.error().message;
  ASSERT_EQ(rows->size(), 30u);
  EXPECT_EQ((*rows)[0].slurm_job_id, "41");
  EXPECT_EQ((*rows)[0].slurm_user, "alice");
  EXPECT_EQ((*rows)[2].slurm_job_id, "");  // GPU 2: none
  EXPECT_EQ((*rows)[2].slurm_user, "");

  auto span = store->SlurmJob("42");
  ASSERT_TRUE(span) << span.error().message;
  ASSERT_TRUE(*span);
  EXPECT_EQ((*span)->first_unix_ms, kT0);
  EXPECT_EQ((*span)->last_unix_ms, kT0 + 9 * kSecond);
  EXPECT_EQ((*span)->user, "bob");
  EXPECT_THAT((*span)->gpu_uuids, ElementsAre(Uuid(0), Uuid(1)));
  auto one = store->SlurmJob("41");
  ASSERT_TRUE(one && *one);
  EXPECT_EQ((*one)->last_unix_ms, kT0 + 4 * kSecond);
  EXPECT_THAT((*one)->gpu_uuids, ElementsAre(Uuid(0)));
  auto none = store->SlurmJob("43");
  ASSERT_TRUE(none);
  EXPECT_FALSE(*none);

  HistoryStore::Query q;
  q.slurm_job_id = "41";
  rows = store->Samples(q);
  ASSERT_TRUE(rows);
  ASSERT_EQ(rows->size(), 5u);
  for (const auto& s : *rows) EXPECT_EQ(s.gpu_uuid, Uuid(0));
}

TEST(HistorySlurmTest, ACoarseRowCarriesTheJobThatTaggedMostOfItsRows) {
  testing::TempDir dir;
  auto store = Open(dir.Join("history.db"));
  ASSERT_TRUE(store);
  // Minute 0 of GPU 0: 20 untagged s, then 25 s of job 7, then 15 s of job 8. GPU 1: untagged.
  for (int i = 0; i < 60; ++i) {
    const std::string job = i < 20 ? "" : i < 45 ? "7" : "8";
    ASSERT_TRUE(store->Record({Sample(kT0 + i * kSecond, 0, 30, job, job.empty() ? "" : "u" + job),
                               Sample(kT0 + i * kSecond, 1, 30)}));
  }
  ASSERT_TRUE(store->Record({Sample(kT0 + kMinute, 0, 30, "8", "u8")}));  // closes minute 0
  HistoryStore::Query q;
  q.until_unix_ms = kT0 + kMinute - 1;
  q.step_ms = kMinute;
  auto rows = store->Samples(q);  // the coarse tier
  ASSERT_TRUE(rows) << rows.error().message;
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0].slurm_job_id, "7");
  EXPECT_EQ((*rows)[0].slurm_user, "u7");
  EXPECT_EQ((*rows)[1].slurm_job_id, "");
  // The roll-up is stored with the tag: a job query finds the coarse row.
  auto span = store->SlurmJob("7");
  ASSERT_TRUE(span && *span);
  EXPECT_EQ((*span)->first_unix_ms, kT0);

  // Pure rebucketing: a tie goes to the newest job.
  auto tie = RebucketSamples({Sample(kT0, 0, 1, "a", "x"), Sample(kT0 + kSecond, 0, 1, "b", "y")}, kMinute);
  ASSERT_EQ(tie.size(), 1u);
  EXPECT_EQ(tie[0].slurm_job_id, "b");
  EXPECT_EQ(tie[0].slurm_user, "y");
}

// A history.db as gpuman wrote it before the Slurm columns (schema 2).
constexpr const char* kSchema2 = R"sql(
CREATE TABLE gpus (id INTEGER PRIMARY KEY, uuid TEXT NOT NULL UNIQUE, gpu_index INTEGER NOT NULL);
CREATE TABLE fine_samples (
  t_unix_ms INTEGER NOT NULL, gpu INTEGER NOT NULL, gpu_index INTEGER NOT NULL,
  util_cpct INTEGER, mem_util_cpct INTEGER, mem_used_bytes INTEGER, mem_total_bytes INTEGER,
  temp_ccel INTEGER, power_mw INTEGER, user TEXT NOT NULL, job_id INTEGER,
  holder_kind INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (t_unix_ms, gpu)) WITHOUT ROWID;
CREATE TABLE coarse_samples (
  t_unix_ms INTEGER NOT NULL, gpu INTEGER NOT NULL, gpu_index INTEGER NOT NULL,
  util_cpct INTEGER, mem_util_cpct INTEGER, mem_used_bytes INTEGER, mem_total_bytes INTEGER,
  temp_ccel INTEGER, power_mw INTEGER, user TEXT NOT NULL, job_id INTEGER,
  holder_kind INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (t_unix_ms, gpu)) WITHOUT ROWID;
CREATE TABLE job_waits (
  started_unix_ms INTEGER NOT NULL, job_id INTEGER NOT NULL, user TEXT NOT NULL,
  submitted_unix_ms INTEGER NOT NULL, gpus INTEGER NOT NULL,
  PRIMARY KEY (started_unix_ms, job_id)) WITHOUT ROWID;
CREATE TABLE fine_shares (t_unix_ms INTEGER NOT NULL, gpu INTEGER NOT NULL, holder_kind INTEGER NOT NULL,
  user TEXT NOT NULL, weight INTEGER NOT NULL, PRIMARY KEY (t_unix_ms, gpu, holder_kind, user)) WITHOUT ROWID;
CREATE TABLE coarse_shares (t_unix_ms INTEGER NOT NULL, gpu INTEGER NOT NULL, holder_kind INTEGER NOT NULL,
  user TEXT NOT NULL, held_ms INTEGER NOT NULL, PRIMARY KEY (t_unix_ms, gpu, holder_kind, user)) WITHOUT ROWID;
INSERT INTO gpus VALUES (1, 'GPU-00000000-1111-2222-3333-444444444444', 0);
INSERT INTO fine_samples VALUES (1700000040000, 1, 0, 7000, 3500, 7000000000, 80000000000, 4050, 123456, 'bob', NULL, 1);
PRAGMA application_id = 1196447048;
PRAGMA user_version = 2;
)sql";

TEST(HistorySlurmTest, ASchemaTwoFileReadsWithoutJobsAndMigrates) {
  testing::TempDir dir;
  const std::string path = dir.Join("history.db");
  {
    auto db = Database::Open(path);
    ASSERT_TRUE(db.has_value()) << db.error().message;
    ASSERT_TRUE((*db)->ExecScript("schema 2", kSchema2));
  }
  {
    auto reader = Open(path, /*read_only=*/true);  // never migrates
    ASSERT_TRUE(reader);
    auto rows = reader->Samples({});
    ASSERT_TRUE(rows) << rows.error().message;
    ASSERT_EQ(rows->size(), 1u);
    EXPECT_EQ((*rows)[0].user, "bob");
    EXPECT_EQ((*rows)[0].slurm_job_id, "");
    auto span = reader->SlurmJob("1");
    ASSERT_TRUE(span);
    EXPECT_FALSE(*span);
  }
  auto writer = Open(path);  // the daemon migrates to schema 3
  ASSERT_TRUE(writer);
  GpuSample next = Sample(kT0 + kSecond, 0, 5, "99", "carol");
  next.gpu_uuid = "GPU-00000000-1111-2222-3333-444444444444";
  ASSERT_TRUE(writer->Record({next}));
  auto reader = Open(path, /*read_only=*/true);
  ASSERT_TRUE(reader);
  auto rows = reader->Samples({});
  ASSERT_TRUE(rows) << rows.error().message;
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0].slurm_job_id, "");  // the old row: no job
  EXPECT_EQ((*rows)[1].slurm_job_id, "99");
  EXPECT_EQ((*rows)[1].slurm_user, "carol");
  auto span = reader->SlurmJob("99");
  ASSERT_TRUE(span && *span);
  EXPECT_EQ((*span)->user, "carol");
}

}  // namespace
}  // namespace gpuman::store
