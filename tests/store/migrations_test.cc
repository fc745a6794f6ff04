#include "store/migrations.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "store/lease_store.h"
#include "support/temp_dir.h"

namespace gpuman::store {
namespace {

using ::testing::HasSubstr;

int64_t UserVersion(Database& db) {
  auto stmt = db.Prepare("version", "PRAGMA user_version");
  auto use = stmt->Use();
  auto row = stmt->Step();
  return (row && *row) ? stmt->ColumnInt64(0) : -1;
}

TEST(MigrationsTest, VersionsAreOneTwoThree) {
  auto all = AllMigrations();
  ASSERT_FALSE(all.empty());
  for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i].version, static_cast<int>(i) + 1);
}

// Fixture for schema version 0: the empty file SQLite (or an interrupted first open) leaves.
TEST(MigrationsTest, EmptyFileIsMigratedToTheLatestVersion) {
  testing::TempDir dir;
  std::string path = dir.Write("state/leases.db", "");
  auto db = Database::Open(path);
  ASSERT_TRUE(db.has_value()) << db.error().message;
  auto found = Migrate(**db);
  ASSERT_TRUE(found.has_value()) << found.error().message;
  EXPECT_EQ(*found, 0);
  EXPECT_EQ(UserVersion(**db), AllMigrations().back().version);
  auto again = Migrate(**db);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(*again, AllMigrations().back().version);
}

TEST(MigrationsTest, AppliesOnlyTheMissingOnes) {
  testing::TempDir dir;
  auto db = Database::Open(dir.Join("m.db"));
  ASSERT_TRUE(db.has_value());
  const Migration steps[] = {
      {1, "t", "CREATE TABLE t (a INTEGER)"},
      {2, "u", "CREATE TABLE u (b INTEGER); INSERT INTO t VALUES (7)"},
  };
  ASSERT_EQ(*Migrate(**db, std::span(steps, 1)), 0);
  EXPECT_EQ(UserVersion(**db), 1);
  ASSERT_EQ(*Migrate(**db, steps), 1);
  EXPECT_EQ(UserVersion(**db), 2);
}

TEST(MigrationsTest, AFailingMigrationLeavesTheOldVersion) {
  testing::TempDir dir;
  auto db = Database::Open(dir.Join("m.db"));
  ASSERT_TRUE(db.has_value());
  const Migration steps[] = {
      {1, "t", "CREATE TABLE t (a INTEGER)"},
      {2, "broken", "CREATE TABLE u (b INTEGER); INSERT INTO nowhere VALUES (1)"},
  };
  ASSERT_TRUE(Migrate(**db, std::span(steps, 1)).has_value());
  auto failed = Migrate(**db, steps);
  ASSERT_FALSE(failed.has_value());
  EXPECT_THAT(failed.error().message, HasSubstr("migrate to schema version 2"));
  EXPECT_EQ(UserVersion(**db), 1);
  EXPECT_FALSE((*db)->Prepare("u exists?", "SELECT * FROM u").has_value());
}

TEST(MigrationsTest, NewerSchemaIsRefusedWithAClearMessage) {
  testing::TempDir dir;
  std::string path = dir.Join("leases.db");
  {
    auto store = LeaseStore::Open(path);
    ASSERT_TRUE(store.has_value()) << store.error().message;
    ASSERT_TRUE((*store)->DatabaseForTesting().ExecScript("bump", "PRAGMA user_version = 99"));
  }
  auto store = LeaseStore::Open(path);
  ASSERT_FALSE(store.has_value());
  EXPECT_EQ(store.error().code, ErrorCode::kIo);
  EXPECT_EQ(store.error().message, path + " was written by a newer gpuman (schema 99; this one knows up to " +
                                       std::to_string(AllMigrations().back().version) +
                                       "); upgrade gpuman, or move it aside, with its -wal and -shm files, "
                                       "to start a new one");
}

}  // namespace
}  // namespace gpuman::store
