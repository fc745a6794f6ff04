// The machine lease table read with Debian's stock `sqlite3` shell (docs/state.md, "Reading the
// databases with sqlite3"): `sqlite3 -readonly` leaves the table usable by every user; the
// shell without it, closing the table last, deletes its -wal and -shm (SQLite's default, which
// gpuman's own connections turn off), and users, who cannot create files in root's directory,
// are then told in one line what happened and how to recover; root's next gpuman recreates
// them. While the system daemon runs it holds the table open, so nothing is deleted.
// Real binaries, the stand-in NVML, two Unix users: root only; skipped without /usr/bin/sqlite3.
#include <sys/stat.h>
#include <unistd.h>

#include "e2e/e2e_util.h"
#include "e2e/users.h"

namespace gpuman::e2e {
namespace {

using testing::TempDir;

constexpr const char* kSqlite3 = "/usr/bin/sqlite3";

class LeaseTableSqlite3E2E : public ::testing::Test {
 protected:
  void SetUp() override {
    if (getuid() != 0) GTEST_SKIP() << "needs root (a root-owned table and two test users)";
    if (access(kSqlite3, X_OK) != 0) GTEST_SKIP() << "needs the sqlite3 shell: apt install sqlite3";
    alice_ = EnsureTestUser("gpumanta");
    bob_ = EnsureTestUser("gpumantb");
    if (!alice_ || !bob_) GTEST_SKIP() << "useradd is not available";
    chmod(dir_.path().c_str(), 0755);  // test users reach the scenario and the lease table
    lease_dir_ = dir_.Join("leases");
    db_ = lease_dir_ + "/leases.db";
    scenario_ = IdleScenario(dir_, "h100-8");
    chmod(scenario_.c_str(), 0644);
    if (RunAsUser(*alice_, {kGpuman, "--version"}, Env()).exit_code != 0) GTEST_SKIP() << "test users cannot run gpuman";
    // Root sets the table up (as the daemon, scripts/setup.sh or gpuman-leases.service would).
    ASSERT_EQ(Gpuman({"leases"}).exit_code, 0);
    ASSERT_TRUE(WalFilesExist());
  }
  void TearDown() override { daemon_.Stop(); }

  std::map<std::string, std::string> Env() {
    auto env = CleanEnv(lease_dir_);
    env["GPUMAN_LEASE_DIR"] = lease_dir_;
    env["GPUMAN_SIMULATE"] = scenario_;
    env["PATH"] = "/usr/bin:/bin";
    env["HOME"] = "/nonexistent";
    return env;
  }
  testing::RunResult Gpuman(std::vector<std::string> args) {
    args.insert(args.begin(), kGpuman);
    return testing::Run(args, Env());
  }
  // `gpuman run -n 1 -- /bin/true` as `user`: takes a lease in the table and gives it back.
  testing::RunResult RunAs(const passwd& user) {
    return RunAsUser(user, {kGpuman, "run", "-n", "1", "--", "/bin/true"}, Env());
  }
  testing::RunResult Sqlite3(std::vector<std::string> args) {
    args.insert(args.begin(), kSqlite3);
    return testing::Run(args);
  }
  bool WalFilesExist() {
    struct stat st {};
    return stat((db_ + "-wal").c_str(), &st) == 0 && stat((db_ + "-shm").c_str(), &st) == 0;
  }

  TempDir dir_;
  std::string lease_dir_, db_, scenario_;
  std::optional<passwd> alice_, bob_;
  PrivateDaemon daemon_;
};

TEST_F(LeaseTableSqlite3E2E, ReadOnlyShellLeavesTheTableToEveryone) {
  auto first = RunAs(*alice_);
  ASSERT_EQ(first.exit_code, 0) << first.err;

  auto tables = Sqlite3({"-readonly", db_, ".tables"});
  ASSERT_EQ(tables.exit_code, 0) << tables.err;
  EXPECT_NE(tables.out.find("lease_gpus"), std::string::npos) << tables.out;
  auto events = Sqlite3({"-readonly", db_, "SELECT count(*) FROM events WHERE kind = 'acquired'"});
  ASSERT_EQ(events.exit_code, 0) << events.err;
  EXPECT_EQ(events.out, "1\n") << "alice's lease, read by the shell";
  const std::string copy = dir_.Join("copy.db");
  auto backup = Sqlite3({"-readonly", db_, ".backup " + copy});
  ASSERT_EQ(backup.exit_code, 0) << backup.err;
  EXPECT_EQ(Sqlite3({copy, "SELECT count(*) FROM leases"}).out, "0\n") << "the backup has the tables";

  EXPECT_TRUE(WalFilesExist()) << "a read-only shell deletes nothing";
  for (const passwd* user : {&*alice_, &*bob_}) {
    auto r = RunAs(*user);
    EXPECT_EQ(r.exit_code, 0) << user->pw_name << ": " << r.err;
  }
}

TEST_F(LeaseTableSqlite3E2E, ShellWithoutReadOnlyDeletesTheWalUsersAreToldAndRootsGpumanRepairs) {
  auto tables = Sqlite3({db_, ".tables"});
  ASSERT_EQ(tables.exit_code, 0) << tables.err;
  // SQLite's default, which the docs warn of: the last connection to close checkpoints and
  // deletes the WAL files.
  ASSERT_FALSE(WalFilesExist()) << "the stock shell no longer deletes the WAL files; docs/state.md says it does";

  for (const passwd* user : {&*alice_, &*bob_}) {
    auto r = RunAs(*user);
    EXPECT_EQ(r.exit_code, 125) << user->pw_name;  // run: gpuman's own failure
    EXPECT_EQ(r.err, "gpuman: error: the machine lease table " + lease_dir_ + " lacks " + db_ +
                         "-wal: another program removed it when it closed the table (the sqlite3 shell does, unless "
                         "run with -readonly); run any gpuman command once as root to recreate it (e.g. `sudo "
                         "gpuman leases`)\n")
        << user->pw_name;
  }
  ASSERT_EQ(Gpuman({"leases"}).exit_code, 0) << "root's gpuman";
  EXPECT_TRUE(WalFilesExist());
  for (const passwd* user : {&*alice_, &*bob_}) {
    auto r = RunAs(*user);
    EXPECT_EQ(r.exit_code, 0) << user->pw_name << ": " << r.err;
  }
}

TEST_F(LeaseTableSqlite3E2E, WhileTheDaemonRunsTheShellDeletesNothing) {
  auto env = Env();
  env["GPUMAN_SIMULATE"] = "";  // the daemon gets the scenario from the spec
  ASSERT_TRUE(daemon_.Start({.scenario = scenario_, .socket = dir_.Join("gpuman.sock"), .state_dir = dir_.Join("state"),
                             .env = env}));
  auto tables = Sqlite3({db_, ".tables"});
  ASSERT_EQ(tables.exit_code, 0) << tables.err;
  EXPECT_TRUE(WalFilesExist()) << "the daemon holds the machine lease table open: the shell is not its last reader";
  daemon_.Stop();
  for (const passwd* user : {&*alice_, &*bob_}) {
    auto r = RunAs(*user);
    EXPECT_EQ(r.exit_code, 0) << user->pw_name << ": " << r.err;
  }
}

}  // namespace
}  // namespace gpuman::e2e
