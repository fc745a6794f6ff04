// End-to-end: `gpuman top` in a real terminal (a detached tmux session on a private
// socket) against the stand-in NVML. Keys go in with send-keys; the screen comes back with
// capture-pane, polled against a deadline rather than fixed sleeps.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <thread>

#include "e2e/e2e_util.h"
#include "e2e/tmux.h"

namespace gpuman::e2e {
namespace {

using nlohmann::json;
using testing::TempDir;

bool Has(const std::string& screen, const std::string& needle) { return screen.find(needle) != std::string::npos; }

// a100-4 with extra processes on GPU 0 (pid -> GiB).
std::string Scenario(const TempDir& dir, const std::vector<std::pair<int, int64_t>>& extra, int gpu1_util = 97) {
  std::ifstream in(kScenarios + "/a100-4.json");
  json s = json::parse(in);
  for (const auto& [pid, gib] : extra) {
    s["gpus"][0]["processes"].push_back({{"pid", pid}, {"used_memory", gib << 30}, {"type", "compute"}});
  }
  s["gpus"][1]["utilization"]["gpu"] = gpu1_util;
  return dir.Write("scenario.json", s.dump(2));
}

class TopE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    if (access(kTmux, X_OK) != 0) GTEST_SKIP() << "tmux is not installed";
  }
  TempDir dir_;
  std::string state_ = dir_.Join("state");
};

TEST_F(TopE2E, ShowsGpusAndProcessesAt80x24ThenFollowsResizeSortAndQuits) {
  Tmux tmux(state_);
  const std::string scenario = Scenario(dir_, {});
  tmux.Start({kGpuman, "--simulate", scenario, "top", "--interval", "0.2"}, 80, 24);
  std::string screen = tmux.WaitForText("4243");
  ASSERT_TRUE(Has(screen, "4243")) << screen;
  EXPECT_TRUE(Has(screen, "gpuman top")) << screen;
  EXPECT_TRUE(Has(screen, "4 GPUs")) << screen;
  for (const char* gpu : {" 0 A100-SXM4-80GB", " 1 A100-SXM4-80GB", " 2 A100-SXM4-80GB", " 3 A100-SXM4-80GB"}) {
    EXPECT_TRUE(Has(screen, gpu)) << gpu << "\n" << screen;
  }
  EXPECT_TRUE(Has(screen, "4242")) << screen;
  EXPECT_TRUE(Has(screen, "alice")) << screen;
  EXPECT_TRUE(Has(screen, "python train.py --epochs 90")) << screen;
  EXPECT_TRUE(Has(screen, "97%")) << screen;
  EXPECT_TRUE(Has(screen, "q quit")) << screen;
  EXPECT_EQ(CountLines(screen), 24) << screen;
  EXPECT_FALSE(Has(screen, "TYPE")) << screen;  // the 80-column table

  // Largest memory first: 4242 (52 GiB) above 4243 (18.5 GiB); s switches to pid order.
  EXPECT_LT(screen.find(" 4242 "), screen.find(" 4243 "));
  tmux.Keys({"s"});
  screen = tmux.WaitForText("sort sm");
  ASSERT_TRUE(Has(screen, "sort sm")) << screen;
  tmux.Keys({"s"});
  screen = tmux.WaitForText("sort pid");
  ASSERT_TRUE(Has(screen, "sort pid")) << screen;
  tmux.Keys({"r"});
  screen = tmux.WaitForText("sort pid (rev)");
  ASSERT_TRUE(Has(screen, "(rev)")) << screen;
  EXPECT_LT(screen.find(" 4243 "), screen.find(" 4242 ")) << screen;

  // A wider, taller window gets the wide table.
  tmux.Cmd({"resize-window", "-t", "top", "-x", "130", "-y", "40"});
  screen = tmux.WaitFor([](const std::string& s) { return Has(s, "TYPE") && CountLines(s) == 40 && Has(s, "q quit"); });
  EXPECT_TRUE(Has(screen, "TYPE")) << screen;
  EXPECT_TRUE(Has(screen, " mem ")) << screen;  // second history line
  // And back to 80x24.
  tmux.Cmd({"resize-window", "-t", "top", "-x", "80", "-y", "24"});
  screen = tmux.WaitFor([](const std::string& s) {
    return !Has(s, "TYPE") && CountLines(s) == 24 && Has(s, " 4242 ") && Has(s, "q quit");
  });
  EXPECT_FALSE(Has(screen, "TYPE")) << screen;
  EXPECT_TRUE(Has(screen, "4242")) << screen;

  tmux.Keys({"q"});
  const std::string dead = tmux.WaitForExit();
  EXPECT_EQ(dead.substr(0, 2), "1 ");  // exited
  if (dead != "1 \n") {
    EXPECT_EQ(dead, "1 0\n");
  }
}

TEST_F(TopE2E, ViewFollowsScenarioChanges) {
  Tmux tmux(state_);
  const std::string scenario = Scenario(dir_, {}, 97);
  tmux.Start({kGpuman, "--simulate", scenario, "top", "--interval", "0.2"}, 80, 24);
  std::string screen = tmux.WaitForText("4243");
  ASSERT_TRUE(Has(screen, "97%")) << screen;
  ASSERT_FALSE(Has(screen, "31337"));
  Scenario(dir_, {{31337, 2}}, 42);  // rename over the file: the stand-in reloads it
  screen = tmux.WaitFor([](const std::string& s) { return Has(s, "31337") && Has(s, "42%"); });
  EXPECT_TRUE(Has(screen, "31337")) << screen;
  EXPECT_TRUE(Has(screen, "42%")) << screen;
  tmux.Keys({"h"});
  screen = tmux.WaitForText("gpuman top: keys");
  EXPECT_TRUE(Has(screen, "signal the selected process")) << screen;
  tmux.Keys({"x"});  // closes the help
  screen = tmux.WaitFor([](const std::string& s) { return !Has(s, "gpuman top: keys"); });
  EXPECT_TRUE(Has(screen, "31337")) << screen;
  tmux.Keys({"q"});
  const std::string dead = tmux.WaitForExit();
  EXPECT_EQ(dead.substr(0, 2), "1 ");  // exited
  if (dead != "1 \n") {
    EXPECT_EQ(dead, "1 0\n");
  }
}

TEST_F(TopE2E, KillSendsSigtermToOwnProcess) {
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    execl("/bin/sleep", "sleep", "300", static_cast<char*>(nullptr));
    _exit(127);
  }
  // The child's pid is not in host_processes, so its owner comes from the real /proc: us.
  Tmux tmux(state_);
  const std::string scenario = Scenario(dir_, {{child, 60}});
  tmux.Start({kGpuman, "--simulate", scenario, "top", "--interval", "0.2"}, 80, 24);
  const std::string pid = std::to_string(child);
  std::string screen = tmux.WaitForText("sleep 300");
  ASSERT_TRUE(Has(screen, "sleep 300")) << screen;
  tmux.Keys({"u"});  // only mine: the sleep is the only row, so it is selected
  screen = tmux.WaitFor([](const std::string& s) { return Has(s, "| mine") && !Has(s, " 4242 "); });
  ASSERT_TRUE(Has(screen, "| mine")) << screen;
  tmux.Keys({"K"});
  screen = tmux.WaitForText("Signal pid " + pid);
  ASSERT_TRUE(Has(screen, "Signal pid " + pid)) << screen;
  tmux.Keys({"Enter"});
  int status = 0;
  pid_t reaped = 0;
  const auto until = std::chrono::steady_clock::now() + kDeadline;
  while (std::chrono::steady_clock::now() < until && (reaped = waitpid(child, &status, WNOHANG)) == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (reaped != child) {
    kill(child, SIGKILL);
    waitpid(child, &status, 0);
    FAIL() << "the child was not signalled\n" << tmux.Screen();
  }
  EXPECT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
  screen = tmux.WaitForText("sent SIGTERM to pid " + pid);
  EXPECT_TRUE(Has(screen, "sent SIGTERM to pid " + pid)) << screen;
  tmux.Keys({"q"});
}

TEST_F(TopE2E, SimulatedPidsAreNeverSignalled) {
  // alice's 4242 exists only in the scenario; whatever real process has that pid (if any)
  // must not be signalled, even by root.
  Tmux tmux(state_);
  tmux.Start({kGpuman, "--simulate", Scenario(dir_, {}), "top"}, 80, 24);
  std::string screen = tmux.WaitForText("4242");
  ASSERT_TRUE(Has(screen, "4242")) << screen;
  tmux.Keys({"K"});
  screen = tmux.WaitFor([](const std::string& s) {
    return Has(s, "Signal pid 4242") || Has(s, "only root") || Has(s, "belongs to alice");
  });
  if (Has(screen, "Signal pid 4242")) tmux.Keys({"Enter"});
  if (geteuid() == 0) {
    screen = tmux.WaitForText("belongs to alice");
    tmux.Keys({"y"});
    screen = tmux.WaitFor([](const std::string& s) { return Has(s, "pid 4242: ") || Has(s, "sent SIG"); });
    EXPECT_TRUE(Has(screen, "pid 4242: ")) << screen;
    EXPECT_FALSE(Has(screen, "sent SIG")) << screen;
  } else {
    EXPECT_TRUE(Has(screen, "only root")) << screen;
  }
  tmux.Keys({"q"});
}

// Issue 26: a terminal that cannot move the cursor is refused like no terminal, exit 2,
// with a line that names TERM=dumb; --once still works there.
TEST_F(TopE2E, TermDumbIsRefusedLikeNoTerminal) {
  Tmux tmux(state_);
  const std::string scenario = Scenario(dir_, {});
  // stdin and stdout are the terminal; stderr and the exit code go to files: a pane can
  // lose all the output of a process that exits at once, and tmux does not always report
  // a pane's exit status.
  const std::string err = dir_.Join("err.txt");
  const std::string rc = dir_.Join("rc.txt");
  tmux.Start({"/bin/sh", "-c", "TERM=dumb \"$0\" --simulate \"$1\" top 2>\"$2\"; echo $? >\"$3.new\"; mv \"$3.new\" \"$3\"",
              kGpuman, scenario, err, rc},
             200, 24);
  const auto until = std::chrono::steady_clock::now() + kDeadline;
  while (std::chrono::steady_clock::now() < until && access(rc.c_str(), F_OK) != 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(Slurp(rc), "2\n") << tmux.Screen();
  EXPECT_EQ(Slurp(err),
            "gpuman: error: top needs a terminal that can move the cursor, and TERM=dumb cannot (try 'gpuman top "
            "--once' or 'gpuman status --watch 1')\n");
  auto once = RunGpuman(state_, {"--simulate", scenario, "top", "--once"}, {{"TERM", "dumb"}, {"LC_ALL", "C"}});
  EXPECT_EQ(once.exit_code, 0) << once.err;
  EXPECT_NE(once.out.find("4242"), std::string::npos) << once.out;
}

// Issue 26: with the GPUs from the daemon's snapshot (top itself not simulated), a daemon
// restart said "daemon gone for over 60s" at once and dropped the jobs. Now the last
// answer stays with "daemon reconnecting for Ns", and the jobs come back with the daemon.
TEST_F(TopE2E, DaemonRestartKeepsTheJobsAndSaysReconnecting) {
  const std::string socket = dir_.Join("gpuman.sock");
  const std::string scenario = IdleScenario(dir_, "h100-8");
  PrivateDaemon daemon;
  DaemonSpec spec{.scenario = scenario,
                  .socket = socket,
                  .state_dir = dir_.Join("daemon-state"),
                  .env = CleanEnv(state_),
                  .stderr_path = "/dev/null"};
  ASSERT_TRUE(daemon.Start(spec));
  auto submitted = RunGpuman(state_, {"submit", "--name", "survivor", "--output", dir_.Join("job.log"), "--", "sleep", "60"},
                             {{"GPUMAN_SOCKET", socket}});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.err;
  Tmux tmux(state_);
  tmux.Start({"/usr/bin/env", "GPUMAN_SOCKET=" + socket, kGpuman, "top", "--interval", "0.2"}, 160, 40);
  std::string screen = tmux.WaitForText("survivor");
  ASSERT_TRUE(Has(screen, "survivor")) << screen;
  ASSERT_TRUE(Has(screen, "via daemon")) << "the GPUs come from the daemon's snapshot: " << screen;
  daemon.Stop(SIGKILL);
  screen = tmux.WaitForText("daemon reconnecting for");
  EXPECT_TRUE(Has(screen, "daemon reconnecting for")) << screen;
  EXPECT_TRUE(Has(screen, "up to 60s")) << screen;
  EXPECT_TRUE(Has(screen, "survivor")) << "the last answer stays on screen: " << screen;
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // several samples later
  screen = tmux.Screen();
  EXPECT_FALSE(Has(screen, "daemon gone")) << "60s have not passed: " << screen;
  EXPECT_TRUE(Has(screen, "survivor")) << screen;
  ASSERT_TRUE(daemon.Start(spec));
  screen = tmux.WaitFor([](const std::string& s) { return !Has(s, "reconnecting") && Has(s, "survivor"); });
  EXPECT_FALSE(Has(screen, "reconnecting")) << screen;
  EXPECT_TRUE(Has(screen, "survivor")) << screen;
  tmux.Keys({"q"});
  tmux.WaitForExit();
  const std::string id = submitted.out.substr(0, submitted.out.find_first_of(" \n"));
  RunGpuman(state_, {"cancel", id}, {{"GPUMAN_SOCKET", socket}});
}

TEST(TopE2ENoTerminal, NoDriverIsOneLineAndExitCode3) {
  TempDir dir;
  auto r = RunGpuman(dir.Join("state"), {"top"}, {{"GPUMAN_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1"}});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(CountLines(r.err), 1) << r.err;
  EXPECT_EQ(r.err.rfind("gpuman: error: cannot load NVML library", 0), 0u) << r.err;
  auto sim = RunGpuman(dir.Join("state"), {"--simulate", "no-driver", "top"});
  EXPECT_EQ(sim.exit_code, 3);
  EXPECT_EQ(CountLines(sim.err), 1) << sim.err;
}

TEST(TopE2ENoTerminal, NeedsATerminalUnlessOnce) {
  TempDir dir;
  auto r = RunGpuman(dir.Join("state"), {"--simulate", "a100-4", "top"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("top needs a terminal"), std::string::npos) << r.err;
  auto once = RunGpuman(dir.Join("state"), {"--simulate", "a100-4", "top", "--once"}, {{"LC_ALL", "C"}});
  ASSERT_EQ(once.exit_code, 0) << once.err;
  EXPECT_NE(once.out.find("4 GPUs"), std::string::npos) << once.out;
  EXPECT_NE(once.out.find("4243"), std::string::npos) << once.out;
  EXPECT_NE(once.out.find("[simulated: a100-4]"), std::string::npos) << once.out;
  auto bad = RunGpuman(dir.Join("state"), {"--simulate", "a100-4", "top", "--interval", "0.01"});
  EXPECT_EQ(bad.exit_code, 2);
}

}  // namespace
}  // namespace gpuman::e2e
