#include "store/sqlite.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "support/temp_dir.h"

namespace gpuman::store {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<Database> MustOpen(const std::string& path, DatabaseOptions options = {}) {
  auto db = Database::Open(path, options);
  EXPECT_TRUE(db.has_value()) << db.error().message;
  return db ? std::move(*db) : nullptr;
}

std::string QueryText(Database& db, const char* sql) {
  auto stmt = db.Prepare("query", sql);
  EXPECT_TRUE(stmt.has_value()) << stmt.error().message;
  auto use = stmt->Use();
  auto row = stmt->Step();
  EXPECT_TRUE(row.has_value() && *row);
  return stmt->ColumnText(0);
}

int64_t CountRows(Database& db) {
  auto stmt = db.Prepare("count", "SELECT COUNT(*) FROM t");
  auto use = stmt->Use();
  auto row = stmt->Step();
  return (row && *row) ? stmt->ColumnInt64(0) : -1;
}

TEST(DatabaseTest, OpenCreatesPrivateDirectoriesAndAWalFile) {
  testing::TempDir dir;
  std::string path = dir.Join("a/b/state.db");
  auto db = MustOpen(path);
  ASSERT_NE(db, nullptr);
  EXPECT_EQ(QueryText(*db, "PRAGMA journal_mode"), "wal");
  EXPECT_EQ(QueryText(*db, "PRAGMA foreign_keys"), "1");
  EXPECT_EQ(QueryText(*db, "PRAGMA synchronous"), "1");  // NORMAL
  struct stat st {};
  ASSERT_EQ(stat(dir.Join("a").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(stat(dir.Join("a/b").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST(DatabaseTest, StatementsBindStepAndReset) {
  testing::TempDir dir;
  auto db = MustOpen(dir.Join("s.db"));
  ASSERT_TRUE(db->ExecScript("create", "CREATE TABLE t (a INTEGER, b TEXT)"));
  auto insert = db->Prepare("insert", "INSERT INTO t (a, b) VALUES (?1, ?2)");
  ASSERT_TRUE(insert.has_value());
  for (int i = 0; i < 3; ++i) {
    auto use = insert->Use();
    insert->Bind(1, int64_t{i}).Bind(2, "row " + std::to_string(i));
    ASSERT_TRUE(insert->Run());
    EXPECT_EQ(db->LastInsertRowId(), i + 1);
  }
  {
    auto use = insert->Use();
    insert->Bind(1, int64_t{9}).BindNull(2);
    ASSERT_TRUE(insert->Run());
  }
  auto select = db->Prepare("select", "SELECT a, b FROM t WHERE a >= ?1 ORDER BY a");
  ASSERT_TRUE(select.has_value());
  auto use = select->Use();
  select->Bind(1, int64_t{1});
  std::vector<std::string> got;
  while (true) {
    auto row = select->Step();
    ASSERT_TRUE(row.has_value());
    if (!*row) break;
    got.push_back(std::to_string(select->ColumnInt64(0)) + ":" +
                  (select->ColumnIsNull(1) ? "null" : select->ColumnText(1)));
  }
  EXPECT_EQ(got, (std::vector<std::string>{"1:row 1", "2:row 2", "9:null"}));
}

TEST(DatabaseTest, PrepareNamesTheStatementAndTheCause) {
  testing::TempDir dir;
  auto db = MustOpen(dir.Join("s.db"));
  auto bad = db->Prepare("read widgets", "SELECT * FROM widgets");
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code, ErrorCode::kInternal);
  EXPECT_THAT(bad.error().message, HasSubstr("read widgets: no such table: widgets"));
  EXPECT_THAT(bad.error().message, HasSubstr(dir.Join("s.db")));
}

TEST(DatabaseTest, PrepareLaterPreparesAtFirstUseAndReportsAFailureThere) {
  testing::TempDir dir;
  auto db = MustOpen(dir.Join("db"));
  ASSERT_TRUE(db->ExecScript("schema", "CREATE TABLE t (a INTEGER, b TEXT)"));
  // Neither is prepared yet: a bad one is no error until it is used.
  Statement bad = db->PrepareLater("read widgets", "SELECT * FROM widgets");
  Statement insert = db->PrepareLater("insert", "INSERT INTO t (a, b) VALUES (?1, ?2)");
  Statement moved = std::move(insert);  // a move keeps it unprepared
  {
    auto use = moved.Use();
    moved.Bind(1, 7).Bind(2, "seven");
    ASSERT_TRUE(moved.Run());
  }
  EXPECT_EQ(CountRows(*db), 1);
  {
    auto use = moved.Use();  // prepared once, used again
    moved.Bind(1, 8).BindNull(2);
    ASSERT_TRUE(moved.Run());
  }
  EXPECT_EQ(CountRows(*db), 2);
  auto use = bad.Use();
  bad.Bind(1, 1);  // ignored: nothing to bind to
  auto row = bad.Step();
  ASSERT_FALSE(row.has_value());
  EXPECT_EQ(row.error().code, ErrorCode::kInternal);
  EXPECT_THAT(row.error().message, HasSubstr("prepare read widgets"));
  EXPECT_THAT(row.error().message, HasSubstr("no such table: widgets"));
  EXPECT_FALSE(bad.Run().has_value());  // and again, the same error
}

TEST(TransactionTest, RollsBackUnlessCommitted) {
  testing::TempDir dir;
  auto db = MustOpen(dir.Join("t.db"));
  ASSERT_TRUE(db->ExecScript("create", "CREATE TABLE t (a INTEGER)"));
  {
    auto tx = Transaction::BeginWrite(*db);
    ASSERT_TRUE(tx.has_value());
    ASSERT_TRUE(db->ExecScript("insert", "INSERT INTO t VALUES (1)"));
    EXPECT_TRUE(db->InTransaction());
  }
  EXPECT_FALSE(db->InTransaction());
  EXPECT_EQ(CountRows(*db), 0);
  {
    auto tx = Transaction::BeginWrite(*db);
    ASSERT_TRUE(tx.has_value());
    ASSERT_TRUE(db->ExecScript("insert", "INSERT INTO t VALUES (1)"));
    ASSERT_TRUE(tx->Commit());
  }
  EXPECT_EQ(CountRows(*db), 1);
}

TEST(TransactionTest, SavepointUndoesOnlyItsOwnPart) {
  testing::TempDir dir;
  auto db = MustOpen(dir.Join("t.db"));
  ASSERT_TRUE(db->ExecScript("create", "CREATE TABLE t (a INTEGER)"));
  auto tx = Transaction::BeginWrite(*db);
  ASSERT_TRUE(db->ExecScript("insert", "INSERT INTO t VALUES (1)"));
  {
    auto sp = Savepoint::Begin(*db, "inner");
    ASSERT_TRUE(sp.has_value());
    ASSERT_TRUE(db->ExecScript("insert", "INSERT INTO t VALUES (2)"));
  }
  {
    auto sp = Savepoint::Begin(*db, "inner");
    ASSERT_TRUE(db->ExecScript("insert", "INSERT INTO t VALUES (3)"));
    ASSERT_TRUE(sp->Release());
  }
  ASSERT_TRUE(tx->Commit());
  EXPECT_EQ(CountRows(*db), 2);
}

TEST(TransactionTest, ASecondWriterGetsBusyAfterTheTimeout) {
  testing::TempDir dir;
  auto holder = MustOpen(dir.Join("b.db"));
  auto tx = Transaction::BeginWrite(*holder);
  ASSERT_TRUE(tx.has_value());

  DatabaseOptions quick;
  quick.busy_timeout = std::chrono::milliseconds(50);
  auto waiter = MustOpen(dir.Join("b.db"), quick);
  auto start = std::chrono::steady_clock::now();
  auto blocked = Transaction::BeginWrite(*waiter);
  auto waited = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(blocked.has_value());
  EXPECT_EQ(blocked.error().code, ErrorCode::kBusy);
  EXPECT_THAT(blocked.error().message, HasSubstr("more than 50 ms"));
  EXPECT_GE(waited, std::chrono::milliseconds(40));
  // Readers are not blocked by the writer in WAL mode.
  EXPECT_TRUE(Transaction::BeginRead(*waiter).has_value());
}

TEST(DatabaseTest, AFullDiskSaysSo) {
  testing::TempDir dir;
  auto db = MustOpen(dir.Join("f.db"));
  ASSERT_TRUE(db->ExecScript("create", "CREATE TABLE t (a TEXT)"));
  // max_page_count stands in for a full file system: SQLite reports SQLITE_FULL either way.
  std::string pages = QueryText(*db, "PRAGMA page_count");
  ASSERT_TRUE(db->ExecScript("cap", "PRAGMA max_page_count = " + pages));
  auto insert = db->Prepare("insert row", "INSERT INTO t VALUES (?1)");
  auto use = insert->Use();
  insert->Bind(1, std::string(100000, 'x'));
  auto s = insert->Run();
  ASSERT_FALSE(s.has_value());
  EXPECT_EQ(s.error().code, ErrorCode::kIo);
  EXPECT_THAT(s.error().message, HasSubstr("insert row: no space left on device"));
}

TEST(DatabaseTest, GarbageFileIsReportedAsCorruptNotACrash) {
  testing::TempDir dir;
  std::string path = dir.Write("junk.db", std::string(8192, '\x5a'));
  auto db = Database::Open(path);
  ASSERT_FALSE(db.has_value());
  EXPECT_EQ(db.error().code, ErrorCode::kIo);
  EXPECT_THAT(db.error().message,
              HasSubstr(path + " is not a gpuman state database (not an SQLite file)"));
}

TEST(DatabaseTest, PathUnderARegularFileFailsCleanly) {
  // Fails for root too (unlike permission tests).
  auto db = Database::Open("/etc/passwd/x.db");
  ASSERT_FALSE(db.has_value());
  EXPECT_EQ(db.error().code, ErrorCode::kIo);
  EXPECT_EQ(db.error().message,
            "open state db /etc/passwd/x.db: create directory /etc/passwd: not a directory");
}

TEST(DatabaseTest, ReadOnlyDirectoryIsPermissionDenied) {
  if (geteuid() == 0) GTEST_SKIP() << "root ignores directory permissions";
  testing::TempDir dir;
  ASSERT_EQ(mkdir(dir.Join("ro").c_str(), 0500), 0);
  auto db = Database::Open(dir.Join("ro/state/x.db"));
  ASSERT_FALSE(db.has_value());
  EXPECT_EQ(db.error().code, ErrorCode::kPermissionDenied);
  EXPECT_THAT(db.error().message, HasSubstr("permission denied"));
  chmod(dir.Join("ro").c_str(), 0700);
}

TEST(DatabaseTest, ReadOnlyFileIsPermissionDenied) {
  if (geteuid() == 0) GTEST_SKIP() << "root ignores file permissions";
  testing::TempDir dir;
  { MustOpen(dir.Join("x.db")); }
  ASSERT_EQ(chmod(dir.Join("x.db").c_str(), 0400), 0);
  auto db = Database::Open(dir.Join("x.db"));
  ASSERT_FALSE(db.has_value());
  EXPECT_EQ(db.error().code, ErrorCode::kPermissionDenied) << db.error().message;
  EXPECT_EQ(db.error().message, "open state db " + dir.Join("x.db") +
                                    ": permission denied (the file is read-only for this user)");
}

TEST(DatabaseTest, InMemoryDatabaseWorks) {
  auto db = MustOpen(":memory:");
  ASSERT_NE(db, nullptr);
  EXPECT_TRUE(db->ExecScript("create", "CREATE TABLE t (a INTEGER)"));
}

}  // namespace
}  // namespace gpuman::store
