// The store recognises its own files (application_id + user_version, or an older gpuman's
// tables) and refuses anything else before writing a byte: truncated, corrupt, foreign,
// text and newer-schema files keep their checksum after the refusal. docs/state.md,
// "Which files gpuman opens".
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <functional>

#include "store/history_store.h"
#include "store/lease_store.h"
#include "store/migrations.h"
#include "store/sqlite.h"
#include "store/state_db.h"
#include "support/broken_files.h"
#include "support/sha256.h"
#include "support/temp_dir.h"

namespace gpuman::store {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using gpuman::testing::Damage;
using gpuman::testing::FileSha256;

// One kind of gpuman file: how to create a good one and how to open it again.
struct Kind {
  const char* name;
  std::function<Status(const std::string&)> open;
  const char* description;
};

Status OpenState(const std::string& path) {
  auto s = OpenStateDb(path);
  if (!s) return s.error();
  return {};
}
Status OpenLeases(const std::string& path) {
  auto s = LeaseStore::Open(path);
  if (!s) return s.error();
  return {};
}
Status OpenHistory(const std::string& path) {
  auto s = HistoryStore::Open(path, /*read_only=*/false);
  if (!s) return s.error();
  return {};
}
Status OpenHistoryReadOnly(const std::string& path) {
  auto s = HistoryStore::Open(path, /*read_only=*/true);
  if (!s) return s.error();
  return {};
}

const Kind kKinds[] = {
    {"state.db", OpenState, "gpuman state database"},
    {"leases.db", OpenLeases, "gpuman state database"},
    {"history.db", OpenHistory, "gpuman history database"},
};

// Sha-256 of the file and of its -wal/-shm ("missing" when absent), which a refusal
// must not change either.
std::string Fingerprint(const std::string& path) {
  return FileSha256(path) + "/" + FileSha256(path + "-wal") + "/" + FileSha256(path + "-shm") + "/" +
         FileSha256(path + "-journal");
}

class StateFilesTest : public ::testing::TestWithParam<std::tuple<int, Damage>> {};

TEST_P(StateFilesTest, IsRefusedWithOneLineAndLeftUnchanged) {
  const Kind& kind = kKinds[std::get<0>(GetParam())];
  const Damage damage = std::get<1>(GetParam());
  testing::TempDir dir;
  const std::string path = dir.Join(kind.name);
  ASSERT_TRUE(kind.open(path)) << "a good file first";
  ASSERT_EQ(gpuman::testing::DamageFile(path, damage), "");
  const std::string before = Fingerprint(path);

  std::vector<std::function<Status(const std::string&)>> opens = {kind.open};
  if (std::string(kind.name) == "history.db") opens.push_back(OpenHistoryReadOnly);
  for (const auto& open : opens) {
    Status refused = open(path);
    ASSERT_FALSE(refused.has_value()) << kind.name << " " << DamageName(damage);
    const std::string& msg = refused.error().message;
    EXPECT_EQ(refused.error().code, ErrorCode::kIo) << msg;
    EXPECT_THAT(msg, HasSubstr(path));
    EXPECT_THAT(msg, Not(HasSubstr("\n")));
    switch (damage) {
      case Damage::kTruncated:
        EXPECT_THAT(msg, HasSubstr("truncated")) << msg;
        break;
      case Damage::kCorruptBytes:
        EXPECT_THAT(msg, HasSubstr("corrupt")) << msg;
        break;
      case Damage::kForeignSqlite:
        EXPECT_THAT(msg, HasSubstr(std::string("is not a ") + kind.description + " (it has table 'foo')")) << msg;
        break;
      case Damage::kPlainText:
        EXPECT_THAT(msg, HasSubstr(std::string("is not a ") + kind.description + " (not an SQLite file)")) << msg;
        break;
      case Damage::kNewerSchema:
        EXPECT_THAT(msg, HasSubstr("was written by a newer gpuman (schema 999; this one knows up to ")) << msg;
        EXPECT_THAT(msg, HasSubstr("upgrade gpuman")) << msg;
        break;
    }
    EXPECT_THAT(msg, HasSubstr("move it aside")) << msg;
    EXPECT_EQ(Fingerprint(path), before) << kind.name << " " << DamageName(damage) << " was changed";
  }
}

INSTANTIATE_TEST_SUITE_P(EveryFileAndDamage, StateFilesTest,
                         ::testing::Combine(::testing::Values(0, 1, 2),
                                            ::testing::ValuesIn(gpuman::testing::AllDamages())),
                         [](const auto& param_info) {
                           std::string name = kKinds[std::get<0>(param_info.param)].name;
                           name = name.substr(0, name.find('.'));
                           return name + "_" + DamageName(std::get<1>(param_info.param));
                         });

int64_t Pragma(const std::string& path, const char* pragma) {
  auto db = Database::Open(path);
  if (!db) return -1;
  auto stmt = (*db)->Prepare("read", std::string("PRAGMA ") + pragma);
  if (!stmt) return -1;
  auto use = stmt->Use();
  auto row = stmt->Step();
  return row && *row ? stmt->ColumnInt64(0) : -1;
}

TEST(StateFilesTest, NewFilesCarryGpumansApplicationIds) {
  testing::TempDir dir;
  ASSERT_TRUE(OpenState(dir.Join("state.db")));
  ASSERT_TRUE(OpenLeases(dir.Join("leases.db")));
  ASSERT_TRUE(OpenHistory(dir.Join("history.db")));
  EXPECT_EQ(Pragma(dir.Join("state.db"), "application_id"), kStateApplicationId);
  EXPECT_EQ(Pragma(dir.Join("leases.db"), "application_id"), kStateApplicationId);
  EXPECT_EQ(Pragma(dir.Join("history.db"), "application_id"), kHistoryApplicationId);
}

// A file of a gpuman older than application ids: recognised by its tables, then stamped.
TEST(StateFilesTest, FilesOfAnOlderGpumanWithoutApplicationIdStillOpen) {
  for (const Kind& kind : kKinds) {
    testing::TempDir dir;
    const std::string path = dir.Join(kind.name);
    ASSERT_TRUE(kind.open(path));
    ASSERT_EQ(gpuman::testing::RawSql(path, "PRAGMA application_id = 0"), "");
    ASSERT_EQ(gpuman::testing::Consolidate(path), "");
    ASSERT_EQ(Pragma(path, "application_id"), 0);
    Status opened = kind.open(path);
    EXPECT_TRUE(opened) << kind.name << ": " << opened.error().message;
    EXPECT_NE(Pragma(path, "application_id"), 0) << kind.name << " is stamped once recognised";
  }
}

TEST(StateFilesTest, AnOlderVersionWithoutApplicationIdIsMigrated) {
  testing::TempDir dir;
  const std::string path = dir.Join("state.db");
  {
    auto db = Database::Open(path);
    ASSERT_TRUE(db.has_value());
    ASSERT_TRUE(Migrate(**db, AllMigrations().first(1)));
    ASSERT_TRUE((*db)->ExecScript("as gpuman 1 left it", "PRAGMA application_id = 0"));
  }
  auto state = OpenStateDb(path);
  ASSERT_TRUE(state.has_value()) << state.error().message;
  EXPECT_EQ(Pragma(path, "user_version"), AllMigrations().back().version);
  EXPECT_EQ(Pragma(path, "application_id"), kStateApplicationId);
}

TEST(StateFilesTest, AReaderNeverStampsAnOlderFile) {
  testing::TempDir dir;
  const std::string path = dir.Join("history.db");
  ASSERT_TRUE(OpenHistory(path));
  ASSERT_EQ(gpuman::testing::RawSql(path, "PRAGMA application_id = 0"), "");
  ASSERT_EQ(gpuman::testing::Consolidate(path), "");
  const std::string before = FileSha256(path);
  Status read = OpenHistoryReadOnly(path);
  EXPECT_TRUE(read) << read.error().message;
  EXPECT_EQ(FileSha256(path), before);
}

TEST(StateFilesTest, TablesThatDoNotMatchItsVersionAreRefused) {
  testing::TempDir dir;
  const std::string path = dir.Join("state.db");
  // user_version 1 and no application id, but the tables of something else.
  ASSERT_EQ(gpuman::testing::RawSql(path, "CREATE TABLE leases (x); PRAGMA user_version = 1"), "");
  const std::string before = FileSha256(path);
  Status refused = OpenState(path);
  ASSERT_FALSE(refused.has_value());
  EXPECT_THAT(refused.error().message, HasSubstr(path + " is not a gpuman state database (it has no table '"));
  EXPECT_EQ(FileSha256(path), before);
}

TEST(StateFilesTest, AnotherProgramsApplicationIdIsRefused) {
  testing::TempDir dir;
  const std::string path = dir.Join("leases.db");
  ASSERT_EQ(gpuman::testing::RawSql(path, "PRAGMA application_id = 1179603789; CREATE TABLE leases (x)"), "");
  const std::string before = FileSha256(path);
  Status refused = OpenLeases(path);
  ASSERT_FALSE(refused.has_value());
  EXPECT_THAT(refused.error().message,
              HasSubstr(path + " is not a gpuman state database (its application id is 0x464f534d, another program's)"));
  EXPECT_EQ(FileSha256(path), before);
  EXPECT_FALSE(std::filesystem::exists(path + "-wal")) << "not switched to WAL";
}

TEST(StateFilesTest, AForeignFileWithAHotJournalIsNotReplayed) {
  testing::TempDir dir;
  const std::string path = dir.Join("state.db");
  ASSERT_EQ(gpuman::testing::RawSql(path, "CREATE TABLE foo (x); INSERT INTO foo VALUES (1)"), "");
  gpuman::testing::WriteBytes(path + "-journal", std::string(1024, 'j'));
  const std::string before = Fingerprint(path);
  Status refused = OpenState(path);
  ASSERT_FALSE(refused.has_value());
  EXPECT_THAT(refused.error().message, HasSubstr("-journal of another program"));
  EXPECT_EQ(Fingerprint(path), before);
}

TEST(StateFilesTest, ATruncationAtAPageBoundaryIsSeenInTheHeader) {
  testing::TempDir dir;
  const std::string path = dir.Join("state.db");
  ASSERT_TRUE(OpenState(path));
  ASSERT_EQ(gpuman::testing::Consolidate(path), "");
  std::string bytes = gpuman::testing::ReadBytes(path);
  ASSERT_GE(bytes.size(), 3 * 4096u);
  bytes.resize(2 * 4096);
  gpuman::testing::WriteBytes(path, bytes);
  const std::string before = FileSha256(path);
  Status refused = OpenState(path);
  ASSERT_FALSE(refused.has_value());
  EXPECT_THAT(refused.error().message, HasSubstr(path + " is truncated (8192 bytes; its header says "));
  EXPECT_EQ(FileSha256(path), before);
}

TEST(StateFilesTest, AnEmptyFileIsANewDatabase) {
  testing::TempDir dir;
  const std::string path = dir.Write("state.db", "");
  Status opened = OpenState(path);
  EXPECT_TRUE(opened) << opened.error().message;
  EXPECT_EQ(Pragma(path, "application_id"), kStateApplicationId);
}

TEST(StateFilesTest, DiskFullErrorsSayNoSpaceLeftOnDevice) {
  EXPECT_TRUE(IsDiskFull(MakeError(ErrorCode::kIo, "state db /x: commit: no space left on device")));
  EXPECT_TRUE(IsDiskFull(MakeError(ErrorCode::kIo, "state db /x: commit: disk quota exceeded")));
  EXPECT_FALSE(IsDiskFull(MakeError(ErrorCode::kIo, "state db /x: commit: disk i/o error")));
  EXPECT_FALSE(IsDiskFull(MakeError(ErrorCode::kBusy, "no space left on device")));
}

}  // namespace
}  // namespace gpuman::store
