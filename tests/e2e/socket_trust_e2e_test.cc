// End-to-end: a user who plants a socket where another user's client looks for its daemon
// (/tmp/gpuman-<uid>/gpuman.sock, used when XDG_RUNTIME_DIR is unset) gets nothing, and
// the victim gets one line naming the path and its owner (docs/protocol.md, "Which daemon
// a client trusts"). Needs root: it creates two throwaway users.
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "e2e/user_env.h"
#include "e2e/users.h"

namespace gpuman::e2e {
namespace {

using testing::TempDir;

// A listener run as `owner`: makes `dir` (0755) and a 0777 socket in it, then accepts and
// counts connections and bytes until Stop(), reading each connection until it is quiet
// for 300 ms and closing it (so a client that did send something fails instead of hanging).
class PlantedListener {
 public:
  PlantedListener(const passwd& owner, const std::string& dir) : socket_path_(dir + "/gpuman.sock") {
    // The directory is made here, as root, then given to `owner`: the state it would have
    // had `owner` made it in a world-writable /tmp (CI's /tmp is 0755, so `owner` cannot).
    if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return;
    if (chown(dir.c_str(), owner.pw_uid, owner.pw_gid) != 0 || chmod(dir.c_str(), 0755) != 0) return;
    int ready[2];
    if (pipe(ready) != 0 || pipe(stop_) != 0 || pipe(report_) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      close(ready[0]);
      close(stop_[1]);
      close(report_[0]);
      if (setgid(owner.pw_gid) != 0 || setuid(owner.pw_uid) != 0) _exit(2);
      int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_un addr{};
      addr.sun_family = AF_UNIX;
      std::strncpy(addr.sun_path, socket_path_.c_str(), sizeof addr.sun_path - 1);
      if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(fd, 8) != 0) _exit(3);
      chmod(socket_path_.c_str(), 0777);
      (void)!write(ready[1], "r", 1);
      int64_t counts[2] = {0, 0};  // connections, bytes
      while (true) {
        pollfd fds[2] = {{fd, POLLIN, 0}, {stop_[0], POLLIN, 0}};
        if (poll(fds, 2, -1) < 0) continue;
        if (fds[1].revents != 0) break;
        int conn = accept(fd, nullptr, nullptr);
        if (conn < 0) continue;
        ++counts[0];
        char buf[4096];
        pollfd c{conn, POLLIN, 0};
        while (poll(&c, 1, 300) > 0) {
          ssize_t n = read(conn, buf, sizeof buf);
          if (n <= 0) break;
          counts[1] += n;
        }
        close(conn);
      }
      (void)!write(report_[1], counts, sizeof counts);
      _exit(0);
    }
    // The parent keeps only its ends, so a child that died reads as end-of-file, not a hang.
    close(ready[1]);
    close(stop_[0]);
    close(report_[1]);
    stop_[0] = report_[1] = -1;
    char c;
    ready_ = read(ready[0], &c, 1) == 1;
    close(ready[0]);
  }
  ~PlantedListener() {
    if (pid_ > 0 && !stopped_) Stop();
    for (int fd : {stop_[0], stop_[1], report_[0], report_[1]})
      if (fd >= 0) close(fd);
  }
  bool ready() const { return ready_; }
  // {connections, bytes} seen.
  std::pair<int64_t, int64_t> Stop() {
    stopped_ = true;
    int64_t counts[2] = {-1, -1};
    if (pid_ <= 0) return {counts[0], counts[1]};
    (void)!write(stop_[1], "s", 1);
    if (read(report_[0], counts, sizeof counts) != static_cast<ssize_t>(sizeof counts)) counts[0] = counts[1] = -1;
    int status = 0;
    waitpid(pid_, &status, 0);
    return {counts[0], counts[1]};
  }

 private:
  std::string socket_path_;
  pid_t pid_ = -1;
  int stop_[2] = {-1, -1}, report_[2] = {-1, -1};
  bool ready_ = false, stopped_ = false;
};

class SocketTrustE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    if (getuid() != 0) GTEST_SKIP() << "needs root to create users";
    mallory_ = EnsureTestUser("gpumanmal");
    victim_ = EnsureTestUser("gpumanvic");
    if (!mallory_ || !victim_) GTEST_SKIP() << "useradd is not available";
    chmod(home_.path().c_str(), 0777);
    auto probe = RunAsUser(*victim_, {kGpuman, "--version"}, Env());
    if (probe.exit_code != 0) GTEST_SKIP() << "the test users cannot run " << kGpuman << ": " << probe.err;
    planted_dir_ = "/tmp/gpuman-" + std::to_string(victim_->pw_uid);
    std::error_code ec;
    std::filesystem::remove_all(planted_dir_, ec);  // a leftover of an earlier run
  }
  void TearDown() override {
    std::error_code ec;
    if (!planted_dir_.empty()) std::filesystem::remove_all(planted_dir_, ec);
  }
  // The victim's environment: no XDG_RUNTIME_DIR, no GPUMAN_SOCKET.
  std::map<std::string, std::string> Env() { return UserEnv(*victim_, home_.path(), home_.Join("state")); }

  std::optional<passwd> mallory_, victim_;
  TempDir home_;
  std::string planted_dir_;
};

// Issue 23: a socket planted at the victim's default path is skipped with one warning, and
// the machine's authority is used (the machine lease table here, no daemon runs): the plant
// gets nothing and blocks nothing. Named explicitly (GPUMAN_SOCKET), it is refused hard.
TEST_F(SocketTrustE2E, APlantedUserSocketIsSkippedAndGetsNothing) {
  PlantedListener planted(*mallory_, planted_dir_);
  ASSERT_TRUE(planted.ready());
  const std::string why = " the daemon socket " + planted_dir_ + "/gpuman.sock: its directory belongs to gpumanmal (uid " +
                          std::to_string(mallory_->pw_uid) + "), not to you or root";
  const std::string warning =
      "gpuman: warning: skipping" + why + "; using the machine's daemon or lease table instead\n";
  // Queue commands need a daemon: the machine's is not running, and they say whom to ask.
  auto queue = RunAsUser(*victim_, {kGpuman, "queue"}, Env());
  EXPECT_EQ(queue.exit_code, 3) << queue.err;
  EXPECT_EQ(queue.err.rfind(warning, 0), 0u) << queue.err;
  EXPECT_NE(queue.err.find("no gpuman daemon at /run/gpuman/gpuman.sock"), std::string::npos) << queue.err;
  EXPECT_NE(queue.err.find("ask your admin"), std::string::npos) << queue.err;
  auto submit = RunAsUser(*victim_, {kGpuman, "submit", "--", "true"}, Env());
  EXPECT_EQ(submit.exit_code, 3) << submit.err;
  EXPECT_EQ(submit.out, "") << "no job id: nothing was submitted";
  // Named explicitly, the same socket is refused hard.
  auto env = Env();
  env["GPUMAN_SOCKET"] = planted_dir_ + "/gpuman.sock";
  auto named = RunAsUser(*victim_, {kGpuman, "submit", "--", "true"}, env);
  EXPECT_EQ(named.exit_code, 5) << named.err;
  EXPECT_EQ(named.err, "gpuman: error: refusing" + why + "\n");
  // Lease commands go on through the machine lease table, with the warning.
  auto run = RunAsUser(*victim_, {kGpuman, "--simulate", "a100-4", "run", "--", "true"}, Env());
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.err.rfind(warning, 0), 0u) << run.err;
  auto explain = RunAsUser(*victim_, {kGpuman, "--simulate", "a100-4", "explain", "--json"}, Env());
  EXPECT_EQ(explain.exit_code, 0) << explain.err;
  EXPECT_FALSE(nlohmann::json::parse(explain.out, nullptr, false).is_discarded()) << explain.out;
  EXPECT_EQ(explain.err, warning);
  auto [connections, bytes] = planted.Stop();
  EXPECT_EQ(connections, 0) << "the victim's client never connected to mallory's socket";
  EXPECT_EQ(bytes, 0);
}

TEST_F(SocketTrustE2E, AnotherUsersSocketInARootDirectoryIsRefused) {
  // Root's 0755 directory (like /run/gpuman), but the socket and its listener are mallory's.
  TempDir root_dir;
  chmod(root_dir.path().c_str(), 0755);
  const std::string dir = root_dir.Join("run");
  mkdir(dir.c_str(), 0777);
  chown(dir.c_str(), mallory_->pw_uid, mallory_->pw_gid);  // mallory may create in it...
  PlantedListener planted(*mallory_, dir);
  ASSERT_TRUE(planted.ready());
  chown(dir.c_str(), 0, 0);  // ...then it is root's again, and not writable by others
  chmod(dir.c_str(), 0755);
  auto env = Env();
  env["GPUMAN_SOCKET"] = dir + "/gpuman.sock";
  auto r = RunAsUser(*victim_, {kGpuman, "queue"}, env);
  EXPECT_EQ(r.exit_code, 5) << r.err;
  EXPECT_EQ(r.err, "gpuman: error: refusing the daemon socket " + dir + "/gpuman.sock: it belongs to gpumanmal (uid " +
                       std::to_string(mallory_->pw_uid) + "), not to you or root\n");
  EXPECT_EQ(planted.Stop(), std::make_pair(int64_t{0}, int64_t{0}));
}

// The legitimate case the rule must keep working: the victim's own user daemon at the
// default path, found with XDG_RUNTIME_DIR unset.
TEST_F(SocketTrustE2E, TheUsersOwnDaemonAtTheDefaultPathIsUsed) {
  TempDir scenario_dir;
  chmod(scenario_dir.path().c_str(), 0755);
  const std::string scenario = IdleScenario(scenario_dir, "a100-4");
  chmod(scenario.c_str(), 0644);
  const std::string socket = planted_dir_ + "/gpuman.sock";
  // The victim's own 0700 directory, made as root: CI's /tmp is 0755, where the victim's
  // daemon could not make it (it then exits 1 saying so).
  ASSERT_EQ(mkdir(planted_dir_.c_str(), 0700), 0) << planted_dir_;
  ASSERT_EQ(chown(planted_dir_.c_str(), victim_->pw_uid, victim_->pw_gid), 0);
  PrivateDaemon daemon;
  ASSERT_TRUE(daemon.Start({.scenario = scenario,
                            .socket = socket,
                            .default_socket = true,
                            .env = Env(),
                            .exact_env = true,
                            .stdout_path = "/dev/null",
                            .stderr_path = "/dev/null",
                            .user = &*victim_}))
      << "the user daemon";
  auto r = RunAsUser(*victim_, {kGpuman, "queue", "--json"}, Env());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"jobs\""), std::string::npos) << r.out;
  // Root does not talk to a user's daemon: its socket is not root's.
  auto as_root = RunGpuman(home_.Join("root-state"), {"queue"}, {{"GPUMAN_SOCKET", socket}});
  EXPECT_EQ(as_root.exit_code, 5) << as_root.err;
  EXPECT_NE(as_root.err.find("its directory belongs to gpumanvic"), std::string::npos) << as_root.err;
  daemon.Stop();
}

}  // namespace
}  // namespace gpuman::e2e
