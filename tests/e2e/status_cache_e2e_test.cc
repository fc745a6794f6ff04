// End-to-end: the daemon as a cache for `status` and `top`. A private daemon on the
// stand-in NVML (8 H100s, its processes, and one real process of root's) serves its sample
// over the snapshot op; `status` through it and `status` reading NVML itself must print
// the same GPUs and values, for root and for a second user (who sees through the daemon
// no more than their own /proc shows them); `top` says where its data came from.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "e2e/e2e_util.h"
#include "e2e/users.h"

namespace gpuman::e2e {
namespace {

using nlohmann::json;
using testing::TempDir;

// What may differ between two looks a moment apart: when, and from where.
json Normalized(json j) {
  for (const char* k : {"timestamp", "timestamp_unix_ms", "source", "sampled_at_unix_ms", "source_note"}) j.erase(k);
  return j;
}

// The text view without its first line (the sample's time) and its last (the source).
std::string Body(const std::string& text) {
  size_t first = text.find('\n');
  size_t last = text.rfind("source: ");
  if (first == std::string::npos || last == std::string::npos || last < first) return "<" + text + ">";
  return text.substr(first + 1, last - first - 1);
}

std::string LastLine(const std::string& text) {
  std::string t = text;
  while (!t.empty() && t.back() == '\n') t.pop_back();
  size_t nl = t.rfind('\n');
  return nl == std::string::npos ? t : t.substr(nl + 1);
}

class StatusCacheE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    chmod(dir_.path().c_str(), 0755);  // a second user reaches the socket and the scenario
    socket_ = dir_.Join("gpuman.sock");
    // A real process of root's on GPU 4: /proc decides who sees its command line.
    sleeper_ = fork();
    if (sleeper_ == 0) {
      execl("/bin/sleep", "sleep", "300", static_cast<char*>(nullptr));
      _exit(127);
    }
    std::ifstream in(kScenarios + "/h100-8.json");
    json s = json::parse(in);
    s["gpus"][4]["processes"] = json::array({{{"pid", sleeper_}, {"used_memory", int64_t{1} << 30}, {"type", "compute"}}});
    scenario_ = dir_.Write("h100-8-real.json", s.dump(2));
    chmod(scenario_.c_str(), 0644);
    ASSERT_TRUE(daemon_.Start(
        {.scenario = scenario_, .socket = socket_, .state_dir = dir_.Join("state"), .env = CleanEnv(dir_.Join("leases"))}));
  }
  void TearDown() override {
    daemon_.Stop();
    if (sleeper_ > 0) {
      kill(sleeper_, SIGTERM);
      waitpid(sleeper_, nullptr, 0);
      sleeper_ = -1;
    }
  }

  // Through the daemon: no --simulate, the daemon's socket.
  testing::RunResult ViaDaemon(std::vector<std::string> args) {
    return RunGpuman(dir_.Join("leases"), std::move(args), {{"GPUMAN_SOCKET", socket_}});
  }
  // Without it: the client reads the same stand-in itself, and no daemon is expected.
  testing::RunResult ViaNvml(std::vector<std::string> args) {
    args.insert(args.begin(), {"--simulate", scenario_});
    return RunGpuman(dir_.Join("leases"), std::move(args), {{"GPUMAN_SOCKET", ""}});
  }

  TempDir dir_;
  std::string socket_, scenario_;
  PrivateDaemon daemon_;
  pid_t sleeper_ = -1;
};

TEST_F(StatusCacheE2E, StatusThroughTheDaemonPrintsWhatNvmlSays) {
  auto daemon = ViaDaemon({"status", "--json"});
  ASSERT_EQ(daemon.exit_code, 0) << daemon.err;
  auto direct = ViaNvml({"status", "--json"});
  ASSERT_EQ(direct.exit_code, 0) << direct.err;
  const json d = json::parse(daemon.out), n = json::parse(direct.out);
  EXPECT_EQ(d["source"], "daemon");
  EXPECT_EQ(n["source"], "nvml");
  EXPECT_TRUE(d["source_note"].is_null()) << d["source_note"];
  EXPECT_EQ(d["sampled_at_unix_ms"], d["timestamp_unix_ms"]);
  EXPECT_EQ(d["simulated"], true) << "the daemon's stand-in: still a simulated machine";
  ASSERT_EQ(d["gpus"].size(), 8u);
  EXPECT_EQ(Normalized(d), Normalized(n));
  // The real process: visible to root either way, with its command line.
  EXPECT_EQ(d["gpus"][4]["processes"][0]["command"], "sleep 300");

  auto daemon_text = ViaDaemon({"status"});
  auto direct_text = ViaNvml({"status"});
  ASSERT_EQ(daemon_text.exit_code, 0) << daemon_text.err;
  ASSERT_EQ(direct_text.exit_code, 0) << direct_text.err;
  EXPECT_EQ(Body(daemon_text.out), Body(direct_text.out));
  EXPECT_EQ(LastLine(daemon_text.out).rfind("source: daemon (sampled ", 0), 0u) << daemon_text.out;
  EXPECT_EQ(LastLine(direct_text.out), "source: NVML");

  // --gpus and --no-processes apply to the daemon's sample as to NVML's.
  auto some = ViaDaemon({"status", "--json", "--gpus", "4,7", "--no-processes"});
  auto some_direct = ViaNvml({"status", "--json", "--gpus", "4,7", "--no-processes"});
  ASSERT_EQ(some.exit_code, 0) << some.err;
  EXPECT_EQ(Normalized(json::parse(some.out)), Normalized(json::parse(some_direct.out)));
  EXPECT_FALSE(json::parse(some.out)["gpus"][0].contains("processes"));
}

// A daemon that is expected (its socket names it) but silent: the GPUs come from NVML and
// the output says so; the lease holders are unknown rather than taken from another table.
TEST_F(StatusCacheE2E, SilentDaemonIsSaidNotHidden) {
  daemon_.Stop(SIGKILL);
  auto r = RunGpuman(dir_.Join("leases"), {"status", "--json"},
                     {{"GPUMAN_SOCKET", socket_}, {"GPUMAN_NVML_LIBRARY", GPUMAN_TEST_FAKE_NVML},
                      {"GPUMAN_FAKE_NVML_SCENARIO", scenario_}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["source"], "nvml");
  EXPECT_EQ(j["source_note"], "the daemon does not answer");
  EXPECT_NE(r.err.find("lease holders unknown"), std::string::npos) << r.err;
  auto text = RunGpuman(dir_.Join("leases"), {"status"},
                        {{"GPUMAN_SOCKET", socket_}, {"GPUMAN_NVML_LIBRARY", GPUMAN_TEST_FAKE_NVML},
                         {"GPUMAN_FAKE_NVML_SCENARIO", scenario_}});
  EXPECT_EQ(LastLine(text.out), "source: NVML (the daemon does not answer)") << text.out;
}

// A second user sees through the daemon what they would see without it: with the default
// /proc, root's process with its command line (everyone may read /proc/<pid>/cmdline);
// under a /proc mounted hidepid=invisible, neither way shows it.
TEST_F(StatusCacheE2E, SecondUserSeesWhatTheirProcShows) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (useradd, runuser)";
  auto user = EnsureTestUser("gpumancache");
  ASSERT_TRUE(user) << "useradd failed";
  auto env = CleanEnv(dir_.Join("leases-user"));
  env["HOME"] = "/nonexistent";
  auto as_user = [&](std::vector<std::string> args, bool daemon) {
    std::map<std::string, std::string> e = env;
    if (daemon) {
      e["GPUMAN_SOCKET"] = socket_;
    } else {
      args.insert(args.begin(), {"--simulate", scenario_});
    }
    args.insert(args.begin(), kGpuman);
    return RunAsUser(*user, args, e);
  };
  auto daemon = as_user({"status", "--json"}, true);
  auto direct = as_user({"status", "--json"}, false);
  ASSERT_EQ(daemon.exit_code, 0) << daemon.err;
  ASSERT_EQ(direct.exit_code, 0) << direct.err;
  const json d = json::parse(daemon.out), n = json::parse(direct.out);
  EXPECT_EQ(d["source"], "daemon");
  EXPECT_EQ(Normalized(d), Normalized(n));
  EXPECT_EQ(d["gpus"][4]["processes"][0]["command"], "sleep 300") << "hidepid off: cmdline is everyone's";

  // The same user in a mount namespace whose /proc hides other users' processes.
  const std::string hidden_proc = "mount -t proc -o hidepid=invisible proc /proc || exit 77; exec /usr/sbin/runuser -u " +
                                  std::string(user->pw_name) + " -- /usr/bin/env -i";
  auto in_hidepid = [&](bool via_daemon) {
    std::string cmd = hidden_proc + " GPUMAN_STATE_DIR=" + dir_.Join("leases-user") + " XDG_CONFIG_HOME=/nonexistent";
    cmd += via_daemon ? " GPUMAN_SOCKET=" + socket_ + " " + kGpuman + " status --json"
                      : " " + kGpuman + " --simulate " + scenario_ +
                            " status --json";
    return testing::Run({"/usr/bin/unshare", "-m", "--propagation", "private", "--", "/bin/sh", "-c", cmd});
  };
  auto hd = in_hidepid(true);
  if (hd.exit_code == 77 || hd.exit_code == 1) GTEST_SKIP() << "cannot mount a hidepid /proc here: " << hd.err;
  ASSERT_EQ(hd.exit_code, 0) << hd.err;
  auto hn = in_hidepid(false);
  ASSERT_EQ(hn.exit_code, 0) << hn.err;
  const json hdj = json::parse(hd.out), hnj = json::parse(hn.out);
  EXPECT_EQ(hdj["source"], "daemon");
  const json& via = hdj["gpus"][4]["processes"][0];
  const json& own = hnj["gpus"][4]["processes"][0];
  EXPECT_EQ(via, own) << "the daemon showed more than the caller's /proc";
  EXPECT_EQ(via["in_pid_namespace"], false);
  EXPECT_TRUE(via["command"].is_null()) << via;
  EXPECT_TRUE(via["user"].is_null()) << via;
}

TEST_F(StatusCacheE2E, TopSaysItReadsTheDaemon) {
  const char kTmux[] = "/usr/bin/tmux";
  if (access(kTmux, X_OK) != 0) GTEST_SKIP() << "tmux is not installed";
  auto once = RunGpuman(dir_.Join("leases"), {"top", "--once"}, {{"GPUMAN_SOCKET", socket_}, {"COLUMNS", "120"}});
  ASSERT_EQ(once.exit_code, 0) << once.err;
  EXPECT_NE(once.out.find("via daemon"), std::string::npos) << once.out;
  EXPECT_NE(once.out.find("simulated: "), std::string::npos) << once.out;

  TempDir tdir;
  const std::string sock = tdir.Join("tmux.sock");
  auto env = CleanEnv(dir_.Join("leases"));
  env["TERM"] = "xterm-256color";
  env["LC_ALL"] = "C";
  env["TMUX"] = "";
  auto tmux = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {kTmux, "-S", sock});
    return testing::Run(args, env);
  };
  ASSERT_EQ(tmux({"new-session", "-d", "-s", "top", "-x", "100", "-y", "30", "/usr/bin/env", "GPUMAN_SOCKET=" + socket_,
                  kGpuman, "top", "--interval", "0.2"})
                .exit_code,
            0);
  std::string screen;
  for (int i = 0; i < 200; ++i) {
    screen = tmux({"capture-pane", "-p", "-t", "top"}).out;
    // The whole first frame: curses draws it in pieces, and a capture can fall between
    // the header and the process table.
    if (screen.find("via daemon") != std::string::npos && screen.find("sleep 300") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  tmux({"send-keys", "-t", "top", "q"});
  tmux({"kill-server"});
  EXPECT_NE(screen.find("via daemon"), std::string::npos) << screen;
  EXPECT_NE(screen.find("8 GPUs"), std::string::npos) << screen;
  EXPECT_NE(screen.find("sleep 300"), std::string::npos) << screen;
}

}  // namespace
}  // namespace gpuman::e2e
