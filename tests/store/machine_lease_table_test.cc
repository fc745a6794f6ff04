#include "store/machine_lease_table.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "support/temp_dir.h"

namespace gpuman::store {
namespace {

using testing::TempDir;

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

TEST(MachineLeaseTableTest, OwnDirectoryIsAPrivateTableCreatedOnDemand) {
  TempDir dir;
  const std::string place = dir.Join("a/b/leases");
  const uint32_t me = getuid();
  auto t = OpenMachineLeaseTable(place, me);
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(t->dir, place);
  if (me != 0) {
    EXPECT_FALSE(t->shared);
    EXPECT_EQ(ModeOf(place), 0700u);
    EXPECT_EQ(ModeOf(place + "/leases.db"), 0600u);
  }
}

TEST(MachineLeaseTableTest, RootSetsUpASharedTableEveryoneCanWrite) {
  if (getuid() != 0) GTEST_SKIP() << "needs root";
  TempDir dir;
  const std::string place = dir.Join("run/gpuman/leases");
  auto t = OpenMachineLeaseTable(place, 0);
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_TRUE(t->shared);
  EXPECT_EQ(ModeOf(place), 0755u) << "users can create nothing in it";
  for (const char* f : {"/leases.db", "/leases.db-wal", "/leases.db-shm"}) {
    EXPECT_EQ(ModeOf(place + f), 0666u) << f;
  }
  t->store.reset();
  // A user then opens root's files (never creates any).
  auto user = OpenMachineLeaseTable(place, 4242);
  ASSERT_TRUE(user) << user.error().message;
  EXPECT_TRUE(user->shared);
}

TEST(MachineLeaseTableTest, AnotherUsersDirectoryIsRefused) {
  if (getuid() != 0) GTEST_SKIP() << "needs root to chown";
  TempDir dir;
  const std::string place = dir.Join("planted");
  ASSERT_EQ(::mkdir(place.c_str(), 0755), 0);
  ASSERT_EQ(::chown(place.c_str(), 4343, 4343), 0);
  for (uint32_t caller : {0u, 4242u}) {
    auto t = OpenMachineLeaseTable(place, caller);
    ASSERT_FALSE(t);
    EXPECT_EQ(t.error().code, ErrorCode::kPermissionDenied);
    EXPECT_NE(t.error().message.find("it belongs to uid 4343, not to root or you"), std::string::npos)
        << t.error().message;
  }
  EXPECT_TRUE(OpenMachineLeaseTable(place, 4343)) << "the owner's own table";
}

TEST(MachineLeaseTableTest, SymlinksAndDirectoriesOthersMayWriteAreRefused) {
  TempDir dir;
  const std::string real = dir.Join("real");
  ASSERT_EQ(::mkdir(real.c_str(), 0700), 0);
  const std::string link = dir.Join("link");
  ASSERT_EQ(::symlink(real.c_str(), link.c_str()), 0);
  auto viaLink = OpenMachineLeaseTable(link, getuid());
  ASSERT_FALSE(viaLink);
  EXPECT_NE(viaLink.error().message.find("symbolic link"), std::string::npos);

  ASSERT_EQ(::chmod(real.c_str(), 0777), 0);
  auto open = OpenMachineLeaseTable(real, getuid());
  ASSERT_FALSE(open);
  EXPECT_EQ(open.error().code, ErrorCode::kPermissionDenied);
  EXPECT_NE(open.error().message.find("others may write to the directory (mode 777)"), std::string::npos)
      << open.error().message;
}

TEST(MachineLeaseTableTest, AUserFindsAnUnsetSharedTableWithOneLine) {
  if (getuid() != 0) GTEST_SKIP() << "needs root to make a root-owned empty table directory";
  TempDir dir;
  const std::string place = dir.Join("leases");
  ASSERT_EQ(::mkdir(place.c_str(), 0755), 0);
  auto t = OpenMachineLeaseTable(place, 4242);
  ASSERT_FALSE(t);
  EXPECT_EQ(t.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(t.error().message.find("is not set up"), std::string::npos) << t.error().message;
  EXPECT_FALSE(OpenMachineLeaseTable("relative/dir", 0));
}

// A table whose -wal and -shm another program removed (the sqlite3 shell without -readonly
// does, on closing it last): users are told what happened and how to recover, and root's
// next gpuman recreates them. (tests/e2e/lease_table_sqlite3_e2e_test.cc with the real shell.)
TEST(MachineLeaseTableTest, RemovedWalFilesAreNamedAndRootRecreatesThem) {
  if (getuid() != 0) GTEST_SKIP() << "needs root to set up a shared table";
  TempDir dir;
  const std::string place = dir.Join("leases");
  ASSERT_TRUE(OpenMachineLeaseTable(place, 0));
  ASSERT_EQ(::unlink((place + "/leases.db-wal").c_str()), 0);
  ASSERT_EQ(::unlink((place + "/leases.db-shm").c_str()), 0);
  auto user = OpenMachineLeaseTable(place, 4242);
  ASSERT_FALSE(user);
  EXPECT_EQ(user.error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(user.error().message, "the machine lease table " + place + " lacks " + place +
                                      "/leases.db-wal: another program removed it when it closed the table (the "
                                      "sqlite3 shell does, unless run with -readonly); run any gpuman command once "
                                      "as root to recreate it (e.g. `sudo gpuman leases`)");
  ASSERT_TRUE(OpenMachineLeaseTable(place, 0)) << "root's gpuman";
  for (const char* f : {"/leases.db-wal", "/leases.db-shm"}) EXPECT_EQ(ModeOf(place + f), 0666u) << f;
  auto again = OpenMachineLeaseTable(place, 4242);
  EXPECT_TRUE(again) << again.error().message;
}

}  // namespace
}  // namespace gpuman::store
