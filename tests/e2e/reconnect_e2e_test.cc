// End-to-end: clients that ride out a daemon restart (`wait`, `logs -f`, `top` across a
// kill -9 and a restart of the daemon; giving up after the reconnect time), and the exit
// codes of `wait`, one meaning each (docs/cli.md, "Exit codes of wait").
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "e2e/e2e_util.h"
#include "e2e/tmux.h"

namespace gpuman::e2e {
namespace {

using nlohmann::json;
using testing::TempDir;

size_t Count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// A gpuman started in the background; Finish() waits for it.
class Background {
 public:
  Background(const std::vector<std::string>& args, const std::map<std::string, std::string>& env) {
    out_ = dir_.Join("out");
    err_ = dir_.Join("err");
    std::vector<std::string> argv = args;
    argv.insert(argv.begin(), kGpuman);
    pid_ = fork();
    if (pid_ == 0) {
      for (const auto& [k, v] : env) {
        if (v.empty()) unsetenv(k.c_str());
        else setenv(k.c_str(), v.c_str(), 1);
      }
      int out = open(out_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      int err = open(err_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      dup2(out, 1);
      dup2(err, 2);
      std::vector<char*> a;
      for (auto& s : argv) a.push_back(s.data());
      a.push_back(nullptr);
      execv(a[0], a.data());
      _exit(127);
    }
  }
  ~Background() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  /// Waits at most `ms`; the exit code, or -1 when it is still running (then killed).
  testing::RunResult Finish(int ms = 60000) {
    testing::RunResult r;
    int status = 0;
    for (int waited = 0; waited < ms; waited += 20) {
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        break;
      }
      usleep(20000);
    }
    r.out = Slurp(out_);
    r.err = Slurp(err_);
    return r;
  }
  std::string Out() const { return Slurp(out_); }
  std::string Err() const { return Slurp(err_); }
  void Signal(int sig) const {
    if (pid_ > 0) kill(pid_, sig);
  }

 private:
  TempDir dir_;
  std::string out_, err_;
  pid_t pid_ = -1;
};

class ReconnectE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    socket_ = dir_.Join("gpuman.sock");
    scenario_ = IdleScenario(dir_, "h100-8");
    StartDaemon();
  }
  void TearDown() override {
    if (daemon_.running()) {
      // Leave nothing running: cancel what is left, then stop.
      auto q = Gpuman({"queue", "--json"});
      if (q.exit_code == 0) {
        // Parsed into a variable: a range-for over parse(...)["jobs"] reads a destroyed temporary.
        const json queue = json::parse(q.out);
        for (const auto& j : queue.at("jobs")) Gpuman({"cancel", std::to_string(j.at("id").get<int64_t>())});
      }
    }
    StopDaemon(SIGTERM);
  }

  void StartDaemon() {
    ASSERT_TRUE(daemon_.Start({.scenario = scenario_,
                               .socket = socket_,
                               .state_dir = dir_.Join("state"),
                               .env = CleanEnv(dir_.Join("leases")),
                               .stderr_path = "/dev/null"}));
  }
  void StopDaemon(int sig) { daemon_.Stop(sig); }

  std::map<std::string, std::string> Env(std::map<std::string, std::string> extra = {}) {
    auto env = CleanEnv(dir_.Join("leases"));
    env["GPUMAN_SOCKET"] = socket_;
    for (const auto& [k, v] : extra) env[k] = v;
    return env;
  }
  testing::RunResult Gpuman(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
    env["GPUMAN_SOCKET"] = socket_;
    return RunGpuman(dir_.Join("leases"), std::move(args), env);
  }
  int64_t Submit(std::vector<std::string> args) {
    args.insert(args.begin(), {"submit", "--output", dir_.Join("job-" + std::to_string(++submitted_) + ".log")});
    auto r = Gpuman(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? std::stoll(r.out) : -1;
  }
  std::string Log(int n) { return dir_.Join("job-" + std::to_string(n) + ".log"); }
  json Show(int64_t id) {
    auto r = Gpuman({"show", std::to_string(id), "--json"});
    return r.exit_code == 0 ? json::parse(r.out) : json();
  }
  bool WaitForState(int64_t id, const std::string& state, int ms = 60000) {
    for (int waited = 0; waited < ms; waited += 50) {
      if (Show(id)["state"] == state) return true;
      usleep(50000);
    }
    return false;
  }
  bool WaitForFile(const std::string& path, const std::string& needle, int ms = 60000) {
    for (int waited = 0; waited < ms; waited += 20) {
      if (Slurp(path).find(needle) != std::string::npos) return true;
      usleep(20000);
    }
    return false;
  }

  void RideOut(int sig);

  TempDir dir_;
  std::string socket_, scenario_;
  PrivateDaemon daemon_;
  int submitted_ = 0;
};

const char kLost[] = "gpuman: lost the daemon; reconnecting for up to 60s...\n";
const char kBack[] = "gpuman: reconnected\n";

// The job prints five lines, waits for the test's go (after the daemon was stopped with
// `sig` and started again), prints five more and exits 7. SIGKILL leaves the socket file
// behind (connections are refused); SIGTERM removes it (the socket is briefly gone).
TEST_F(ReconnectE2E, WaitAndLogsFollowRideOutAKill9AndARestart) { RideOut(SIGKILL); }
TEST_F(ReconnectE2E, WaitAndLogsFollowRideOutAStopAndARestart) { RideOut(SIGTERM); }

void ReconnectE2E::RideOut(int sig) {
  const std::string go = dir_.Join("go");
  int64_t id = Submit({"--", "sh", "-c",
                       "for i in 1 2 3 4 5; do echo line $i; done; while [ ! -e \"$1\" ]; do sleep 0.05; done; "
                       "for i in 6 7 8 9 10; do echo line $i; done; exit 7",
                       "sh", go});
  ASSERT_TRUE(WaitForFile(Log(1), "line 5\n"));
  Background waiter({"wait", std::to_string(id)}, Env());
  Background follower({"logs", "-f", std::to_string(id)}, Env());
  for (int i = 0; i < 3000 && follower.Out().find("line 5\n") == std::string::npos; ++i) usleep(20000);
  ASSERT_NE(follower.Out().find("line 5\n"), std::string::npos) << "logs -f printed the first lines";

  StopDaemon(sig);
  usleep(300000);  // both clients notice (wait polls every 100 ms, logs -f every 200 ms)
  StartDaemon();
  ASSERT_EQ(close(open(go.c_str(), O_WRONLY | O_CREAT, 0600)), 0);

  auto waited = waiter.Finish();
  EXPECT_EQ(waited.exit_code, 7) << "the job's real outcome, from the restarted daemon: " << waited.err;
  auto followed = follower.Finish();
  EXPECT_EQ(followed.exit_code, 0) << followed.err;
  std::string expected;
  for (int i = 1; i <= 10; ++i) expected += "line " + std::to_string(i) + "\n";
  EXPECT_EQ(followed.out, expected) << "every line exactly once";
  for (const auto* r : {&waited, &followed}) {
    EXPECT_EQ(Count(r->err, kLost), 1u) << r->err;
    EXPECT_EQ(Count(r->err, kBack), 1u) << r->err;
  }
  EXPECT_EQ(followed.err, std::string(kLost) + kBack) << "nothing else on stderr";
}

// A `wait` typed while the daemon is down (its socket still there: it is restarting) waits
// for it as after a loss, and returns the job's own outcome.
TEST_F(ReconnectE2E, WaitStartedWhileTheDaemonIsDownWaitsForItToComeBack) {
  const std::string go = dir_.Join("go");
  int64_t id = Submit({"--", "sh", "-c", "while [ ! -e \"$1\" ]; do sleep 0.05; done; exit 7", "sh", go});
  ASSERT_TRUE(WaitForState(id, "running"));
  StopDaemon(SIGKILL);
  Background waiter({"wait", std::to_string(id)}, Env());
  usleep(500000);  // it found the socket and nobody answering
  StartDaemon();
  ASSERT_EQ(close(open(go.c_str(), O_WRONLY | O_CREAT, 0600)), 0);
  auto waited = waiter.Finish();
  EXPECT_EQ(waited.exit_code, 7) << waited.err;
  EXPECT_EQ(waited.err, std::string(kLost) + kBack + "gpuman: job " + std::to_string(id) + " failed: exit code 7 (exit 7)\n")
      << "one line when it found no daemon, one when back, then the outcome";
}

// A daemon that is stopping may still accept a connection and then close it before the
// hello's reply, and a stopped daemon removes its socket. A `wait` that met that (the ASan
// run's RideOut flake: it exited 125 with "closed the connection") rides it out as well.
// Stand-in for the stopping daemon: a listener that accepts one connection, closes it,
// and removes the socket.
TEST_F(ReconnectE2E, WaitThatMetAStoppingDaemonWaitsForTheNextOne) {
  const std::string go = dir_.Join("go");
  int64_t id = Submit({"--", "sh", "-c", "while [ ! -e \"$1\" ]; do sleep 0.05; done; exit 7", "sh", go});
  ASSERT_TRUE(WaitForState(id, "running"));
  StopDaemon(SIGKILL);
  unlink(socket_.c_str());
  const int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, socket_.c_str(), sizeof addr.sun_path - 1);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0) << std::strerror(errno);
  ASSERT_EQ(listen(listener, 4), 0);
  Background waiter({"wait", std::to_string(id)}, Env());
  const int accepted = accept(listener, nullptr, nullptr);
  ASSERT_GE(accepted, 0) << std::strerror(errno);
  close(accepted);  // before any reply: the hello is lost
  close(listener);
  unlink(socket_.c_str());
  usleep(300000);  // it is reconnecting, and no socket is there
  StartDaemon();
  ASSERT_EQ(close(open(go.c_str(), O_WRONLY | O_CREAT, 0600)), 0);
  auto waited = waiter.Finish();
  EXPECT_EQ(waited.exit_code, 7) << waited.err;
  EXPECT_EQ(waited.err, std::string(kLost) + kBack + "gpuman: job " + std::to_string(id) + " failed: exit code 7 (exit 7)\n");
}

// With a short reconnect time and no daemon coming back: wait exits 125 (never a code the
// job could have returned), logs -f exits 3 (its daemon-unavailable code), after ~2 s.
TEST_F(ReconnectE2E, GivesUpAfterTheReconnectTimeWithTheDocumentedCode) {
  int64_t id = Submit({"--", "sleep", "60"});
  ASSERT_TRUE(WaitForState(id, "running"));
  const std::string config = dir_.Write("config.toml", "[client]\nreconnect_timeout = \"2s\"\n");
  Background waiter({"wait", std::to_string(id)}, Env({{"GPUMAN_CONFIG", config}}));
  Background follower({"logs", "-f", std::to_string(id)}, Env({{"GPUMAN_RECONNECT_TIMEOUT", "2s"}}));
  Background watcher({"queue", "--watch", "0.2"}, Env({{"GPUMAN_RECONNECT_TIMEOUT", "2s"}}));
  usleep(500000);  // all three are following
  const auto killed = std::chrono::steady_clock::now();
  StopDaemon(SIGKILL);
  auto waited = waiter.Finish();
  auto followed = follower.Finish();
  auto watched = watcher.Finish();
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  EXPECT_EQ(waited.exit_code, 125) << waited.err;
  EXPECT_EQ(followed.exit_code, 3) << followed.err;
  EXPECT_EQ(watched.exit_code, 3) << watched.err;
  EXPECT_NE(watched.out.find("running"), std::string::npos) << "it drew the queue before: " << watched.out;
  for (const auto* r : {&waited, &followed, &watched}) {
    EXPECT_EQ(Count(r->err, "gpuman: lost the daemon; reconnecting for up to 2s...\n"), 1u) << r->err;
    EXPECT_EQ(Count(r->err, "gpuman: error: lost the daemon and it did not come back within 2s"), 1u) << r->err;
    EXPECT_EQ(Count(r->err, "\n"), 2u) << "two lines, no more: " << r->err;
  }
  EXPECT_GE(took, 1.9) << "not before the reconnect time";
  StartDaemon();  // for TearDown's cancel
}

// `queue --watch` redraws the queue across a kill -9 and a restart of the daemon: one line
// when lost, one when back, and the restarted daemon's queue (a job submitted to it shows).
TEST_F(ReconnectE2E, QueueWatchRidesOutAKill9AndARestart) {
  int64_t before = Submit({"--name", "before-restart", "--", "sleep", "60"});
  ASSERT_TRUE(WaitForState(before, "running"));
  Background watcher({"queue", "--watch=0.2", "--json"}, Env());
  for (int i = 0; i < 3000 && watcher.Out().find("before-restart") == std::string::npos; ++i) usleep(20000);
  ASSERT_NE(watcher.Out().find("before-restart"), std::string::npos) << watcher.Err();
  StopDaemon(SIGKILL);
  usleep(500000);  // it notices (it asks every 0.2 s)
  StartDaemon();
  int64_t after = Submit({"--name", "after-restart", "--", "sleep", "60"});
  ASSERT_GT(after, before);
  for (int i = 0; i < 3000 && watcher.Out().find("after-restart") == std::string::npos; ++i) usleep(20000);
  watcher.Signal(SIGTERM);
  auto watched = watcher.Finish();
  EXPECT_EQ(watched.exit_code, 0) << "SIGTERM ends a watch: " << watched.err;
  EXPECT_NE(watched.out.find("after-restart"), std::string::npos) << "the restarted daemon's queue is drawn";
  EXPECT_EQ(watched.err, std::string(kLost) + kBack) << "one line when lost, one when back, nothing else";
  // Every refresh is one whole JSON document on its own line, the last one too.
  std::istringstream lines(watched.out);
  int n = 0;
  for (std::string line; std::getline(lines, line); ++n) {
    EXPECT_NO_THROW((void)json::parse(line)) << line;
  }
  EXPECT_GE(n, 2);
}

// `run --wait` waiting for GPUs through the daemon: it reconnects, goes on waiting, and
// runs once the GPUs are free, on a lease of the restarted daemon.
TEST_F(ReconnectE2E, RunWaitRidesOutARestart) {
  const std::string go = dir_.Join("go-blocker");
  int64_t blocker = Submit({"-n", "8", "--", "sh", "-c", "while [ ! -e \"$1\" ]; do sleep 0.05; done", "sh", go});
  ASSERT_TRUE(WaitForState(blocker, "running"));
  Background runner({"--simulate", scenario_, "run", "--wait", "-n", "1", "--", "sh", "-c", "echo ran on $GPUMAN_LEASE_ID"},
                    Env());
  for (int i = 0; i < 3000 && runner.Err().find("waiting for") == std::string::npos; ++i) usleep(20000);
  ASSERT_NE(runner.Err().find("waiting for"), std::string::npos) << "it waits: " << runner.Err();
  StopDaemon(SIGKILL);
  usleep(300000);
  StartDaemon();
  ASSERT_EQ(close(open(go.c_str(), O_WRONLY | O_CREAT, 0600)), 0);
  auto ran = runner.Finish();
  EXPECT_EQ(ran.exit_code, 0) << ran.err;
  EXPECT_EQ(ran.out.rfind("ran on ", 0), 0u) << ran.out;
  EXPECT_EQ(Count(ran.err, kLost), 1u) << ran.err;
  EXPECT_EQ(Count(ran.err, kBack), 1u) << ran.err;
  auto leases = Gpuman({"leases", "--json"});
  ASSERT_EQ(leases.exit_code, 0) << leases.err;
  EXPECT_EQ(json::parse(leases.out)["leases"].size(), 0u) << "its lease was given back: " << leases.out;
}

// `run --wait` through the daemon has run's codes (docs/cli.md, the `run` section): a wait
// that runs out is 124; a daemon that does not come back within the reconnect time is
// gpuman's own failure, 125, never a code the job could return.
TEST_F(ReconnectE2E, RunWaitThroughTheDaemonExits124Or125) {
  const std::string go = dir_.Join("go-blocker");
  int64_t blocker = Submit({"-n", "8", "--", "sh", "-c", "while [ ! -e \"$1\" ]; do sleep 0.05; done", "sh", go});
  ASSERT_TRUE(WaitForState(blocker, "running"));
  auto ran_out = Gpuman({"--simulate", scenario_, "run", "--wait", "1s", "-n", "1", "--", "true"});
  EXPECT_EQ(ran_out.exit_code, 124) << ran_out.err;
  EXPECT_NE(ran_out.err.find("gpuman: error: gave up after 1s"), std::string::npos) << ran_out.err;
  Background runner({"--simulate", scenario_, "run", "--wait", "-n", "1", "--", "true"},
                    Env({{"GPUMAN_RECONNECT_TIMEOUT", "2s"}}));
  for (int i = 0; i < 3000 && runner.Err().find("waiting for") == std::string::npos; ++i) usleep(20000);
  ASSERT_NE(runner.Err().find("waiting for"), std::string::npos) << "it waits: " << runner.Err();
  StopDaemon(SIGKILL);
  auto gave_up = runner.Finish();
  EXPECT_EQ(gave_up.exit_code, 125) << gave_up.err;
  EXPECT_EQ(Count(gave_up.err, "gpuman: lost the daemon; reconnecting for up to 2s...\n"), 1u) << gave_up.err;
  EXPECT_EQ(Count(gave_up.err, "gpuman: error: lost the daemon and it did not come back within 2s"), 1u) << gave_up.err;
  StartDaemon();  // for TearDown's cancel
  ASSERT_EQ(close(open(go.c_str(), O_WRONLY | O_CREAT, 0600)), 0);
}

// `top` keeps its last view, says the daemon is reconnecting, and shows the daemon's jobs
// again once it is back.
TEST_F(ReconnectE2E, TopAcrossADaemonRestart) {
  if (access(kTmux, X_OK) != 0) GTEST_SKIP() << "tmux is not installed";
  int64_t id = Submit({"--name", "survivor", "--", "sleep", "60"});
  ASSERT_TRUE(WaitForState(id, "running"));
  Tmux tmux(dir_.Join("leases"));
  tmux.Start({"/usr/bin/env", "GPUMAN_SOCKET=" + socket_, kGpuman, "--simulate", scenario_, "top", "--interval", "0.2"},
             120, 40);
  auto has = [](const std::string& s, const std::string& n) { return s.find(n) != std::string::npos; };
  std::string screen = tmux.WaitForText("survivor");
  ASSERT_TRUE(has(screen, "survivor")) << screen;
  StopDaemon(SIGKILL);
  screen = tmux.WaitForText("daemon reconnecting");
  EXPECT_TRUE(has(screen, "daemon reconnecting")) << screen;
  EXPECT_TRUE(has(screen, "survivor")) << "the last answer stays on screen: " << screen;
  StartDaemon();
  screen = tmux.WaitFor([&](const std::string& s) { return !has(s, "reconnecting") && has(s, "survivor"); });
  EXPECT_FALSE(has(screen, "reconnecting")) << screen;
  EXPECT_TRUE(has(screen, "survivor")) << screen;
  tmux.Keys({"q"});
  EXPECT_EQ(tmux.WaitForExit().rfind("1 ", 0), 0u);
}

// After the reconnect time top says the daemon is gone, and keeps looking: it is a view.
TEST_F(ReconnectE2E, TopSaysTheDaemonIsGoneAfterTheReconnectTimeAndStillRecovers) {
  if (access(kTmux, X_OK) != 0) GTEST_SKIP() << "tmux is not installed";
  int64_t id = Submit({"--name", "survivor", "--", "sleep", "60"});
  ASSERT_TRUE(WaitForState(id, "running"));
  Tmux tmux(dir_.Join("leases"));
  tmux.Start({"/usr/bin/env", "GPUMAN_SOCKET=" + socket_, "GPUMAN_RECONNECT_TIMEOUT=1s", kGpuman, "--simulate",
              scenario_, "top", "--interval", "0.2"},
             160, 40);
  auto has = [](const std::string& s, const std::string& n) { return s.find(n) != std::string::npos; };
  ASSERT_TRUE(has(tmux.WaitForText("survivor"), "survivor"));
  StopDaemon(SIGTERM);  // the socket is gone, not just refusing
  std::string screen = tmux.WaitForText("daemon gone for over 1s");
  EXPECT_TRUE(has(screen, "daemon gone for over 1s")) << screen;
  EXPECT_TRUE(has(screen, "still trying")) << screen;
  EXPECT_TRUE(has(screen, "GPU")) << "the GPUs are still shown: " << screen;
  EXPECT_NE(tmux.PaneDead().rfind("0", 0), std::string::npos) << "top did not exit";
  StartDaemon();
  screen = tmux.WaitFor([&](const std::string& s) { return !has(s, "daemon gone") && has(s, "survivor"); });
  EXPECT_FALSE(has(screen, "daemon gone")) << screen;
  tmux.Keys({"q"});
  EXPECT_EQ(tmux.WaitForExit().rfind("1 ", 0), 0u);
}

// Each row of the table in docs/cli.md, "Exit codes of wait".
TEST_F(ReconnectE2E, EachExitCodeOfWait) {
  struct Row {
    std::string what;
    std::vector<std::string> submit;
    int code;
    std::string state;
  };
  const std::vector<Row> rows = {
      {"own exit code 0", {"--", "true"}, 0, "succeeded"},
      {"own exit code 3 (was also gpuman's 'lost the daemon' code)", {"--", "sh", "-c", "exit 3"}, 3, "failed"},
      {"own exit code 125 is the job's, said so by state", {"--", "sh", "-c", "exit 125"}, 125, "failed"},
      {"killed by signal 9: 128+9", {"--", "sh", "-c", "kill -9 $$"}, 137, "failed"},
      {"time limit, exited 0 after SIGTERM: 124",
       {"--time-limit", "1s", "--", "sh", "-c", "trap 'exit 0' TERM; while :; do sleep 0.1; done"}, 124, "timed_out"},
  };
  for (const auto& row : rows) {
    int64_t id = Submit(row.submit);
    auto r = Gpuman({"wait", std::to_string(id)});
    EXPECT_EQ(r.exit_code, row.code) << row.what << ": " << r.err << Show(id).dump();
    EXPECT_EQ(Show(id)["state"], row.state) << row.what;
    if (row.code == 137) {
      EXPECT_EQ(Show(id)["reason"], "killed by signal 9 (KILL)") << "said as a signal, not as 'exit code 137'";
      EXPECT_EQ(r.err, "gpuman: job " + std::to_string(id) + " failed: killed by signal 9 (KILL) (exit 137)\n");
    }
  }

  // Could not execute (126) and not found (127): the command was fine at submit (which
  // checks it up front) and broke before the job started, while GPUs were busy.
  {
    const std::string gone = dir_.Write("gone.sh", "#!/bin/sh\necho hi\n");
    const std::string locked = dir_.Write("locked.sh", "#!/bin/sh\necho hi\n");
    chmod(gone.c_str(), 0755);
    chmod(locked.c_str(), 0755);
    int64_t blocker = Submit({"-n", "8", "--", "sleep", "60"});
    ASSERT_TRUE(WaitForState(blocker, "running"));
    int64_t not_found = Submit({"--", gone});
    int64_t not_executable = Submit({"--", locked});
    ASSERT_EQ(unlink(gone.c_str()), 0);
    ASSERT_EQ(chmod(locked.c_str(), 0644), 0);
    EXPECT_EQ(Gpuman({"cancel", std::to_string(blocker)}).exit_code, 0);
    auto r = Gpuman({"wait", std::to_string(not_found)});
    EXPECT_EQ(r.exit_code, 127) << r.err << Show(not_found).dump();
    r = Gpuman({"wait", std::to_string(not_executable)});
    EXPECT_EQ(r.exit_code, 126) << r.err << Show(not_executable).dump();
    EXPECT_EQ(Show(not_executable)["state"], "failed");
  }

  // Cancelled, while running and while queued: 193.
  int64_t running = Submit({"--", "sleep", "60"});
  ASSERT_TRUE(WaitForState(running, "running"));
  Background waiter({"wait", std::to_string(running)}, Env());
  usleep(300000);
  EXPECT_EQ(Gpuman({"cancel", std::to_string(running)}).exit_code, 0);
  auto cancelled = waiter.Finish();
  EXPECT_EQ(cancelled.exit_code, 193) << cancelled.err;
  EXPECT_NE(cancelled.err.find("cancelled"), std::string::npos) << "one line says why: " << cancelled.err;
  int64_t blocker = Submit({"-n", "8", "--", "sleep", "60"});
  ASSERT_TRUE(WaitForState(blocker, "running"));
  int64_t queued = Submit({"--", "true"});
  EXPECT_EQ(Gpuman({"cancel", std::to_string(queued)}).exit_code, 0);
  EXPECT_EQ(Gpuman({"wait", std::to_string(queued)}).exit_code, 193);
  EXPECT_EQ(Gpuman({"cancel", std::to_string(blocker)}).exit_code, 0);

  // gpuman's own failure: an unknown job, no daemon at all.
  auto unknown = Gpuman({"wait", "999"});
  EXPECT_EQ(unknown.exit_code, 125) << unknown.err;
  EXPECT_EQ(Count(unknown.err, "\n"), 1u) << unknown.err;
  auto nodaemon = RunGpuman(dir_.Join("leases"), {"wait", "1"}, {{"GPUMAN_SOCKET", dir_.Join("nothing.sock")}});
  EXPECT_EQ(nodaemon.exit_code, 125) << nodaemon.err;
}

TEST_F(ReconnectE2E, WaitJsonPrintsTheWholeOutcome) {
  int64_t id = Submit({"--time-limit", "1s", "--", "sh", "-c", "trap 'exit 0' TERM; while :; do sleep 0.1; done"});
  auto r = Gpuman({"wait", "--json", std::to_string(id)});
  EXPECT_EQ(r.exit_code, 124) << r.err;
  EXPECT_EQ(Count(r.out, "\n"), 1u) << "one JSON object on one line: " << r.out;
  json o = json::parse(r.out);
  EXPECT_EQ(o["schema_version"], 1);
  EXPECT_EQ(o["id"], id);
  EXPECT_EQ(o["state"], "timed_out");
  EXPECT_EQ(o["exit_code"], 0) << "what the job itself exited with";
  EXPECT_TRUE(o["signal"].is_null());
  EXPECT_EQ(o["reason"], "ran past its time limit");
  EXPECT_EQ(o["ended_by_itself"], false);
  EXPECT_EQ(o["wait_exit_code"], 124);
  EXPECT_TRUE(o["started_unix_ms"].is_number());
  EXPECT_TRUE(o["ended_unix_ms"].is_number());
  EXPECT_GE(o["ended_unix_ms"].get<int64_t>(), o["started_unix_ms"].get<int64_t>());
  EXPECT_TRUE(o["started"].is_string());
  EXPECT_TRUE(r.err.empty()) << "with --json the outcome is on stdout only: " << r.err;

  int64_t killed = Submit({"--", "sh", "-c", "kill -TERM $$"});
  auto k = Gpuman({"wait", "--json", std::to_string(killed)});
  EXPECT_EQ(k.exit_code, 128 + SIGTERM);
  json ko = json::parse(k.out);
  EXPECT_EQ(ko["signal"], SIGTERM);
  EXPECT_EQ(ko["exit_code"], 128 + SIGTERM);
  EXPECT_EQ(ko["ended_by_itself"], true);
}

}  // namespace
}  // namespace gpuman::e2e
