// Broken and full state files, end to end (docs/state.md, "Which files gpuman opens" and
// "A full disk"): the real binary and daemon, the stand-in NVML.
//  - state.db, history.db and leases.db, each truncated, scribbled over, replaced by
//    another program's database or by text, or left by a newer gpuman: the daemon and a
//    command that opens the file print one line naming it, exit 1, and leave its bytes
//    as they were.
//  - A state directory on a full tmpfs (root only): commands that write fail with one
//    line, read-only ones work, and the daemon refuses new work while it cannot write,
//    keeps its running job, and takes work again once space is freed.
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <regex>
#include <thread>

#include "e2e/e2e_util.h"
#include "store/history_store.h"
#include "store/machine_lease_table.h"
#include "store/state_db.h"
#include "support/broken_files.h"
#include "support/sha256.h"

namespace gpuman::e2e {
namespace {

using nlohmann::json;
using testing::Damage;
using testing::TempDir;

std::string Fingerprint(const std::string& path) {
  return testing::FileSha256(path) + "/" + testing::FileSha256(path + "-wal") + "/" +
         testing::FileSha256(path + "-shm");
}

int CountLines(const std::string& text) {
  return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

// Lines of `text` that contain `needle`.
int CountMatches(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = 0; (at = text.find(needle, at)) != std::string::npos; at += needle.size()) ++n;
  return n;
}

struct Layout {
  std::string state_dir, lease_dir, socket, scenario;
};

Layout MakeLayout(const TempDir& dir, const std::string& root) {
  Layout l;
  l.state_dir = root + "/state";
  l.lease_dir = root + "/leases";
  l.socket = dir.Join("gpuman.sock");
  l.scenario = IdleScenario(dir, "a100-4");
  return l;
}

// The daemon in the foreground under `timeout`: it should refuse to start.
testing::RunResult DaemonOnce(const Layout& l, int seconds) {
  auto env = CleanEnv(l.lease_dir);
  return testing::Run({"/usr/bin/timeout", std::to_string(seconds), kGpuman, "--simulate", l.scenario, "daemon",
                       "--socket", l.socket, "--state-dir", l.state_dir},
                      env);
}

class StateFilesE2E : public ::testing::TestWithParam<std::tuple<std::string, Damage>> {};

TEST_P(StateFilesE2E, DaemonAndCommandsRefuseWithOneLineAndLeaveTheFileAlone) {
  const std::string file = std::get<0>(GetParam());
  const Damage damage = std::get<1>(GetParam());
  TempDir dir;
  const Layout l = MakeLayout(dir, dir.path());
  // Good files first, as a daemon and a command leave them.
  {
    auto state = store::OpenStateDb(l.state_dir + "/state.db");
    ASSERT_TRUE(state.has_value()) << state.error().message;
    auto history = store::HistoryStore::Open(l.state_dir + "/history.db", false);
    ASSERT_TRUE(history.has_value()) << history.error().message;
    auto table = store::OpenMachineLeaseTable(l.lease_dir, getuid());
    ASSERT_TRUE(table.has_value()) << table.error().message;
  }
  const std::string path = (file == "leases.db" ? l.lease_dir : l.state_dir) + "/" + file;
  ASSERT_EQ(testing::DamageFile(path, damage), "");
  const std::string before = Fingerprint(path);

  auto check = [&](const testing::RunResult& r, const std::string& who) {
    // `run` exits with a job's code, so its own failures are 125 (docs/cli.md).
    EXPECT_EQ(r.exit_code, who == "--simulate" ? 125 : 1) << who << ": " << r.err;
    EXPECT_EQ(CountLines(r.err), 1) << who << ": " << r.err;
    EXPECT_EQ(r.err.rfind("gpuman: error: ", 0), 0u) << who << ": " << r.err;
    EXPECT_NE(r.err.find(path), std::string::npos) << who << " names the file: " << r.err;
    EXPECT_NE(r.err.find(damage == Damage::kNewerSchema ? "upgrade gpuman" : "move it aside"), std::string::npos)
        << who << " says what to do: " << r.err;
    EXPECT_EQ(Fingerprint(path), before) << who << " changed " << file;
  };
  check(DaemonOnce(l, 60), "the daemon");
  EXPECT_FALSE(DaemonAnswers(l.socket));

  // The commands that open the file themselves.
  std::vector<std::vector<std::string>> commands;
  std::map<std::string, std::string> env;
  if (file == "leases.db") {
    commands = {{"leases"}, {"--simulate", l.scenario, "run", "-n", "1", "--", "true"}};
  } else if (file == "history.db") {
    env["GPUMAN_HISTORY_DB"] = path;
    commands = {{"history"}};
  }
  for (const auto& args : commands) check(RunGpuman(l.lease_dir, args, env), args.front());
}

INSTANTIATE_TEST_SUITE_P(EveryFileAndDamage, StateFilesE2E,
                         ::testing::Combine(::testing::Values("state.db", "history.db", "leases.db"),
                                            ::testing::ValuesIn(testing::AllDamages())),
                         [](const auto& param_info) {
                           std::string name = std::get<0>(param_info.param);
                           name = name.substr(0, name.find('.'));
                           return name + "_" + testing::DamageName(std::get<1>(param_info.param));
                         });

// ---- A full file system

class FullDiskE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "mounting a tmpfs needs root";
    mount_ = dir_.Join("full");
    std::filesystem::create_directories(mount_);
    if (mount("tmpfs", mount_.c_str(), "tmpfs", 0, "size=4m,mode=0755") != 0) {
      GTEST_SKIP() << "cannot mount a tmpfs here: " << std::strerror(errno);
    }
    mounted_ = true;
    layout_ = MakeLayout(dir_, mount_);
  }
  void TearDown() override {
    StopDaemon();
    if (mounted_) umount2(mount_.c_str(), MNT_DETACH);
  }

  // Fills the file system to the last byte.
  void Fill() {
    int fd = open((mount_ + "/fill").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    ASSERT_GE(fd, 0);
    static const char kBlock[4096] = {};
    while (write(fd, kBlock, sizeof kBlock) > 0) {
    }
    while (write(fd, kBlock, 1) > 0) {
    }
    close(fd);
  }
  void Free() { std::filesystem::remove(mount_ + "/fill"); }

  testing::RunResult Gpuman(std::vector<std::string> args, bool with_daemon) {
    std::map<std::string, std::string> env;
    if (with_daemon) env["GPUMAN_SOCKET"] = layout_.socket;
    args.insert(args.begin(), {"--simulate", layout_.scenario});
    return RunGpuman(layout_.lease_dir, std::move(args), env);
  }

  void StartDaemon() {
    log_ = dir_.Join("daemon.log");
    ASSERT_TRUE(daemon_.Start({.scenario = layout_.scenario,
                               .socket = layout_.socket,
                               .state_dir = layout_.state_dir,
                               .env = CleanEnv(layout_.lease_dir),
                               .stderr_path = log_}));
  }
  void StopDaemon() { daemon_.Stop(); }
  std::string JobState(int64_t id) {
    auto r = Gpuman({"show", std::to_string(id), "--json"}, true);
    if (r.exit_code != 0) return "show failed: " + r.err;
    return json::parse(r.out)["state"].get<std::string>();
  }

  TempDir dir_;
  std::string mount_, log_;
  bool mounted_ = false;
  Layout layout_;
  PrivateDaemon daemon_;
};

TEST_F(FullDiskE2E, CommandsWithoutADaemon) {
  auto made = Gpuman({"leases"}, false);  // sets the lease table up
  ASSERT_EQ(made.exit_code, 0) << made.err;
  // A lease held by this test process (gpuman's parent), to release while the disk is full.
  auto held = Gpuman({"select", "-n", "1", "--lease", "--format", "env"}, false);
  ASSERT_EQ(held.exit_code, 0) << held.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(held.out, m, std::regex("GPUMAN_LEASE_ID=['\"]?(\\d+)"))) << held.out;
  const std::string lease_id = m[1].str();
  Fill();
  const std::string leases_db = layout_.lease_dir + "/leases.db";
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"run", "-n", "1", "--", "true"},
        std::vector<std::string>{"select", "-n", "1", "--lease", "--format", "env"},
        std::vector<std::string>{"release", lease_id}}) {
    auto r = Gpuman(args, false);
    EXPECT_EQ(r.exit_code, args.front() == "run" ? 125 : 1) << args.front() << ": " << r.err;
    EXPECT_EQ(CountLines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find(leases_db), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("no space left on device"), std::string::npos) << r.err;
  }
  for (const std::vector<std::string>& args : {std::vector<std::string>{"leases"}, std::vector<std::string>{"status"}}) {
    auto r = Gpuman(args, false);
    EXPECT_EQ(r.exit_code, 0) << args.front() << " reads only: " << r.err;
  }
  Free();
  auto r = Gpuman({"run", "-n", "1", "--", "true"}, false);
  EXPECT_EQ(r.exit_code, 0) << "once space is back: " << r.err;
  auto released = Gpuman({"release", lease_id}, false);
  EXPECT_EQ(released.exit_code, 0) << released.err;
}

TEST_F(FullDiskE2E, TheDaemonRefusesNewWorkWhileFullKeepsItsJobAndRecovers) {
  StartDaemon();
  const std::string out = dir_.Join("job.log");  // outside the full file system
  auto submitted = Gpuman({"submit", "--output", out, "-n", "1", "--", "sleep", "60"}, true);
  ASSERT_EQ(submitted.exit_code, 0) << submitted.err;
  const int64_t id = std::stoll(submitted.out);
  for (int i = 0; i < 600 && JobState(id) != "running"; ++i) usleep(50000);
  ASSERT_EQ(JobState(id), "running");

  Fill();
  // The daemon notices within a second or two (or at the first write that fails).
  testing::RunResult refused;
  for (int i = 0; i < 100; ++i) {
    refused = Gpuman({"submit", "--output", out, "-n", "1", "--", "true"}, true);
    if (refused.exit_code != 0) break;
    usleep(100000);
  }
  EXPECT_EQ(refused.exit_code, 1) << refused.err;
  EXPECT_EQ(CountLines(refused.err), 1) << refused.err;
  EXPECT_NE(refused.err.find("no space left on device"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find(layout_.state_dir), std::string::npos) << refused.err;
  auto run = Gpuman({"run", "-n", "1", "--", "true"}, true);
  EXPECT_EQ(run.exit_code, 125) << "run through the daemon: " << run.err;
  EXPECT_NE(run.err.find("no space left on device"), std::string::npos) << run.err;
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"status"}, std::vector<std::string>{"queue"}, std::vector<std::string>{"leases"},
        std::vector<std::string>{"show", std::to_string(id)}}) {
    auto r = Gpuman(args, true);
    EXPECT_EQ(r.exit_code, 0) << args.front() << " reads only: " << r.err;
  }
  usleep(2500000);  // a few passes of the daemon while full
  EXPECT_EQ(JobState(id), "running") << "the running job is still supervised";

  Free();
  testing::RunResult accepted;
  for (int i = 0; i < 100; ++i) {
    accepted = Gpuman({"submit", "--output", out, "-n", "1", "--", "true"}, true);
    if (accepted.exit_code == 0) break;
    usleep(100000);
  }
  ASSERT_EQ(accepted.exit_code, 0) << "takes work again once space is freed: " << accepted.err;
  const int64_t later = std::stoll(accepted.out);
  for (int i = 0; i < 600 && JobState(later) != "succeeded"; ++i) usleep(50000);
  EXPECT_EQ(JobState(later), "succeeded");
  EXPECT_EQ(JobState(id), "running");

  const std::string log = Slurp(log_);
  EXPECT_EQ(CountMatches(log, "cannot write its state"), 1) << "one line per episode:\n" << log;
  EXPECT_EQ(CountMatches(log, "can be written again"), 1) << log;
  EXPECT_EQ(Gpuman({"cancel", std::to_string(id)}, true).exit_code, 0);
}


// SQLite is dlopen()ed on first use (store/sqlite_library.h): the binary does not link it,
// a command that needs no database runs without it, and one that needs it says so in one
// line (exit 1; `run` 125, its own failure) instead of failing to start.
TEST(SqliteLibraryE2E, LoadedOnlyByCommandsThatOpenADatabase) {
  TempDir dir;
  const Layout l = MakeLayout(dir, dir.path());
  auto needed = testing::Run({"/bin/sh", "-c", std::string("readelf -d '") + kGpuman + "' | grep NEEDED"}, {});
  if (needed.exit_code == 0) {
    EXPECT_EQ(needed.out.find("libsqlite3"), std::string::npos) << needed.out;
    EXPECT_NE(needed.out.find("libc.so"), std::string::npos) << needed.out;
  }
  const std::map<std::string, std::string> missing = {{"GPUMAN_SQLITE_LIBRARY", dir.Join("no-such-libsqlite3.so.0")},
                                                      {"GPUMAN_LEASE_DIR", l.lease_dir}};
  auto version = RunGpuman(l.state_dir, {"--version"}, missing);
  EXPECT_EQ(version.exit_code, 0) << version.err;
  auto status = RunGpuman(l.state_dir, {"--simulate", l.scenario, "status", "--json"}, missing);
  EXPECT_EQ(status.exit_code, 0) << "no lease table yet, so no database to open: " << status.err;
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--simulate", l.scenario, "leases"},
        std::vector<std::string>{"--simulate", l.scenario, "run", "-n", "1", "--", "true"}}) {
    auto r = RunGpuman(l.state_dir, args, missing);
    EXPECT_EQ(r.exit_code, args[2] == "run" ? 125 : 1) << args[2] << ": " << r.err;
    EXPECT_EQ(CountLines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find("cannot load SQLite (" + dir.Join("no-such-libsqlite3.so.0") + ")"), std::string::npos)
        << r.err;
  }
  EXPECT_FALSE(std::filesystem::exists(l.lease_dir + "/leases.db")) << "nothing written without SQLite";
  auto works = RunGpuman(l.state_dir, {"--simulate", l.scenario, "run", "-n", "1", "--", "true"},
                         {{"GPUMAN_LEASE_DIR", l.lease_dir}});
  EXPECT_EQ(works.exit_code, 0) << "with the system's SQLite: " << works.err;
}

}  // namespace
}  // namespace gpuman::e2e
