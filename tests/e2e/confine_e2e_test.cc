// Device confinement end to end (issue 23, docs/enforce.md): a root daemon puts each queue
// job and each `run` it grants into a cgroup of its own that may open only its GPUs' device
// nodes. Fake nodes made with mknod (major 195, the stand-in's minor numbers 0..7) answer
// ENXIO when a process may open them (no driver behind them) and EPERM when the cgroup
// refuses. Under cgroup v2 (device programs) and v1 (device lists); root only.
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "base/strings.h"
#include "e2e/e2e_util.h"
#include "e2e/users.h"

namespace gpuman::e2e {
namespace {

using nlohmann::json;
using testing::TempDir;

class ConfineE2E : public ::testing::Test {
 protected:
  void Prepare(const std::string& devices, const std::string& more_config = "") {
    if (getuid() != 0) GTEST_SKIP() << "needs root: cgroups, device nodes, a system daemon";
    chmod(dir_.path().c_str(), 0755);
    scenario_ = IdleScenario(dir_, "h100-8");
    chmod(scenario_.c_str(), 0644);
    dev_ = dir_.Join("dev");
    ASSERT_EQ(mkdir(dev_.c_str(), 0755), 0);
    for (int i = 0; i < 8; ++i) {
      const std::string node = dev_ + "/nvidia" + std::to_string(i);
      ASSERT_EQ(mknod(node.c_str(), S_IFCHR | 0666, makedev(195, static_cast<unsigned>(i))), 0) << node;
    }
    config_ = dir_.Write("config.toml", "[enforce]\ndevices = \"" + devices + "\"\n" + more_config);
    chmod(config_.c_str(), 0644);
    socket_ = dir_.Join("gpuman.sock");
    auto env = CleanEnv(dir_.Join("leases"));
    env["GPUMAN_CONFIG"] = config_;
    env["PATH"] = "/usr/bin:/bin";
    const std::string err = daemon_err_ = dir_.Join("daemon.err");
    ASSERT_TRUE(daemon_.Start({.scenario = scenario_, .socket = socket_, .state_dir = dir_.Join("state"), .env = env,
                               .stderr_path = err}));
    std::string said = Slurp(err);  // the line follows the socket's first answer
    for (int i = 0; i < 100 && said.find("gpuman: device confinement ") == std::string::npos; ++i) {
      usleep(50 * 1000);
      said = Slurp(err);
    }
    ASSERT_NE(said.find("gpuman: device confinement "), std::string::npos) << said;
    if (said.find("device confinement off:") != std::string::npos) GTEST_SKIP() << "this host cannot: " << said;
  }

  std::map<std::string, std::string> Env() {
    auto env = CleanEnv(dir_.Join("leases"));
    env["GPUMAN_SOCKET"] = socket_;
    env["GPUMAN_CONFIG"] = config_;
    env["PATH"] = "/usr/bin:/bin";
    env["HOME"] = "/nonexistent";
    env["GPUMAN_SIMULATE"] = scenario_;  // `run` reads the devices too (issue 27)
    return env;
  }
  testing::RunResult Gpuman(std::vector<std::string> args) {
    args.insert(args.begin(), kGpuman);
    return testing::Run(args, Env());
  }
  json Show(int64_t id) {
    auto r = Gpuman({"show", std::to_string(id), "--json"});
    return r.exit_code == 0 ? json::parse(r.out) : json();
  }
  bool WaitForState(int64_t id, const std::string& state, int ms = 30000) {
    for (int waited = 0; waited < ms; waited += 50) {
      if (Show(id)["state"] == state) return true;
      usleep(50000);
    }
    return false;
  }
  size_t LeaseCount() { return json::parse(Gpuman({"leases", "--json"}).out)["leases"].size(); }

  // A shell command that tries to open every node and prints cat's verdict on each.
  std::string Probe() const { return "for i in 0 1 2 3 4 5 6 7; do cat " + dev_ + "/nvidia$i 2>&1; done; true"; }
  // Which nodes the probe's output says were allowed (ENXIO: opened as far as the driver)
  // and which refused (EPERM); a node named with neither fails the test.
  std::string Verdicts(const std::string& out) {
    std::string v;
    for (int i = 0; i < 8; ++i) {
      const std::string node = dev_ + "/nvidia" + std::to_string(i) + ": ";
      const auto at = out.find(node);
      if (at == std::string::npos) return "no line for nvidia" + std::to_string(i) + " in: " + out;
      const std::string rest = out.substr(at + node.size(), out.find('\n', at) - at - node.size());
      if (rest == "No such device or address") v += "+";
      else if (rest == "Operation not permitted") v += "-";
      else return "nvidia" + std::to_string(i) + ": " + rest;
    }
    return v;
  }

  TempDir dir_;
  std::string scenario_, dev_, config_, socket_, daemon_err_;
  PrivateDaemon daemon_;
};

class ConfineVersionsE2E : public ConfineE2E, public ::testing::WithParamInterface<std::string> {};

// A queue job given GPUs 1 and 5 may open those two nodes and none of the six others.
TEST_P(ConfineVersionsE2E, AQueueJobOpensOnlyItsOwnGpus) {
  Prepare(GetParam());
  const std::string log = dir_.Join("job.log");
  auto sub = Gpuman({"submit", "-n", "2", "--gpus", "1,5", "--output", log, "--", "/bin/sh", "-c", Probe()});
  ASSERT_EQ(sub.exit_code, 0) << sub.err;
  const int64_t job = std::stoll(std::string(Trim(sub.out)));
  ASSERT_TRUE(WaitForState(job, "succeeded")) << Slurp(log);
  EXPECT_EQ(Verdicts(Slurp(log)), "-+---+--");
  // Outside gpuman nothing is refused: what confinement cannot stop (docs/enforce.md).
  auto outside = testing::Run({"/bin/sh", "-c", Probe()}, Env());
  EXPECT_EQ(Verdicts(outside.out), "++++++++");
}

// A `run` the daemon grants to an ordinary user: the same, for its command and what that
// starts.
TEST_P(ConfineVersionsE2E, ARunThroughTheDaemonOpensOnlyItsOwnGpus) {
  Prepare(GetParam());
  auto alice = EnsureTestUser("gpumanta");
  if (!alice) GTEST_SKIP() << "useradd is not available";
  auto r = RunAsUser(*alice, {kGpuman, "run", "-q", "-n", "2", "--gpus", "2,3", "--", "/bin/sh", "-c",
                              "/bin/sh -c '" + Probe() + "'"},
                     Env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Verdicts(r.out), "--++----");
  EXPECT_EQ(LeaseCount(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Cgroups, ConfineVersionsE2E, ::testing::Values("cgroup-v2", "cgroup-v1"),
                         [](const auto& param_info) { return param_info.param == "cgroup-v2" ? "V2" : "V1"; });

bool Alive(pid_t pid) {
  if (kill(pid, 0) != 0) return false;
  // A zombie no longer runs.
  const std::string stat = Slurp("/proc/" + std::to_string(pid) + "/stat");
  const auto paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] != 'Z';
}

pid_t ReadPid(const std::string& file, int ms = 10000) {
  for (int waited = 0; waited < ms; waited += 50) {
    const std::string text(Trim(Slurp(file)));
    if (!text.empty()) return static_cast<pid_t>(std::stol(text));
    usleep(50000);
  }
  return -1;
}

// Cancel ends the whole job: a setsid'ed, double-forked child too, and only then do its
// GPUs go back.
TEST_F(ConfineE2E, ACancelledJobIsEndedWithWhatItDaemonized) {
  Prepare("cgroup");
  const std::string pidfile = dir_.Join("daemonized.pid");
  auto sub = Gpuman({"submit", "-n", "1", "--output", dir_.Join("job.log"), "--", "/bin/sh", "-c",
                     "setsid /bin/sh -c 'echo $$ > " + pidfile + "; exec sleep 300' & sleep 300"});
  ASSERT_EQ(sub.exit_code, 0) << sub.err;
  const int64_t job = std::stoll(std::string(Trim(sub.out)));
  ASSERT_TRUE(WaitForState(job, "running"));
  const pid_t daemonized = ReadPid(pidfile);
  ASSERT_GT(daemonized, 0);
  EXPECT_TRUE(Alive(daemonized));
  ASSERT_EQ(Gpuman({"cancel", std::to_string(job)}).exit_code, 0);
  ASSERT_TRUE(WaitForState(job, "cancelled"));
  for (int i = 0; i < 100 && Alive(daemonized); ++i) usleep(50000);
  EXPECT_FALSE(Alive(daemonized)) << "the daemonized child outlived its job";
  for (int i = 0; i < 100 && LeaseCount() != 0; ++i) usleep(50000);
  EXPECT_EQ(LeaseCount(), 0u);
}

// A `run` whose command exits while a child that ignores SIGTERM lives on: the lease stays
// while the child lives (the cgroup is not empty), the child is killed after the grace
// period, and then the lease ends.
TEST_F(ConfineE2E, ARunsLeaseLastsUntilItsCgroupIsEmpty) {
  Prepare("cgroup");
  const std::string pidfile = dir_.Join("stubborn.pid");
  chmod(dir_.path().c_str(), 0755);
  testing::RunResult run;
  std::thread runner([&] {
    run = Gpuman({"run", "-q", "-n", "1", "--", "/bin/sh", "-c",
                  "setsid /bin/sh -c 'trap \"\" TERM; echo $$ > " + pidfile + "; exec sleep 300' & sleep 0.3"});
  });
  const pid_t stubborn = ReadPid(pidfile);
  EXPECT_GT(stubborn, 0);
  usleep(1000 * 1000);  // the command has exited; the run waits out the grace period
  EXPECT_EQ(LeaseCount(), 1u) << "the lease ended while a process of the run lived";
  if (stubborn > 0) EXPECT_TRUE(Alive(stubborn));
  runner.join();
  EXPECT_EQ(run.exit_code, 0) << run.err;
  if (stubborn > 0) EXPECT_FALSE(Alive(stubborn)) << "the run's leftover child outlived it";
  EXPECT_EQ(LeaseCount(), 0u);
}

// Issue 23: with `foreign_processes = "kill"`, another user's process on a GPU leased to
// someone is told to go (SIGTERM) and, still there after the grace period, killed; root's
// is reported and left alone. Both are in the daemon's log.
TEST_F(ConfineE2E, IntrudersAreEndedUnderTheKillPolicyAndRootsAreSpared) {
  Prepare("cgroup", "foreign_processes = \"kill\"\ngrace = \"1s\"\n");
  auto alice = EnsureTestUser("gpumanta");
  auto bob = EnsureTestUser("gpumantb");
  if (!alice || !bob) GTEST_SKIP() << "useradd is not available";
  const std::string go = dir_.Join("go");
  testing::RunResult run;
  std::thread runner([&] {
    run = RunAsUser(*alice, {kGpuman, "run", "-q", "--gpus", "2", "--", "/bin/sh", "-c",
                             "while [ ! -e \"$0\" ]; do sleep 0.05; done", go},
                    Env());
  });
  for (int i = 0; i < 600 && LeaseCount() != 1; ++i) usleep(50 * 1000);
  // Bob's process ignores SIGTERM, so only the SIGKILL after the grace period ends it.
  const pid_t bobs = SleepAs(&*bob, /*ignore_term=*/true);
  const pid_t roots = SleepAs(nullptr);
  json scenario = json::parse(Slurp(scenario_));
  scenario["gpus"][2]["processes"] = json::array({{{"pid", bobs}, {"used_memory", 1 << 30}, {"type", "compute"}},
                                                  {{"pid", roots}, {"used_memory", 1 << 30}, {"type", "compute"}}});
  dir_.Write("h100-8-idle.json", scenario.dump(2));
  chmod(scenario_.c_str(), 0644);
  const auto start = std::chrono::steady_clock::now();
  int status = 0;
  bool ended = false;
  for (int i = 0; i < 300 && !ended; ++i) {
    ended = waitpid(bobs, &status, WNOHANG) == bobs;
    if (!ended) usleep(50 * 1000);
  }
  const auto took = std::chrono::steady_clock::now() - start;
  const bool root_alive = waitpid(roots, nullptr, WNOHANG) == 0;
  std::ofstream(go) << "go";
  runner.join();
  kill(roots, SIGKILL);
  waitpid(roots, nullptr, 0);
  if (!ended) {
    kill(bobs, SIGKILL);
    waitpid(bobs, nullptr, 0);
  }
  ASSERT_TRUE(ended) << "the intruder was not ended; the daemon said:\n" << Slurp(daemon_err_);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  EXPECT_GE(took, std::chrono::milliseconds(900)) << "killed before the grace period";
  EXPECT_TRUE(root_alive) << "root's process was ended";
  const std::string log = Slurp(daemon_err_);
  EXPECT_NE(log.find("intruder: process " + std::to_string(bobs) + " of gpumantb (sleep 60) on GPU 2, leased to gpumanta"),
            std::string::npos) << log;
  EXPECT_NE(log.find("sent SIGTERM to intruder process " + std::to_string(bobs)), std::string::npos) << log;
  EXPECT_NE(log.find("sent SIGKILL to intruder process " + std::to_string(bobs)), std::string::npos) << log;
  EXPECT_NE(log.find("intruder: process " + std::to_string(roots) + " of root (sleep 60) on GPU 2, leased to gpumanta"),
            std::string::npos) << log;
  EXPECT_NE(log.find("not ended: it is root's"), std::string::npos) << log;
  EXPECT_EQ(run.exit_code, 0) << run.err;
  // The history keeps it: seen, TERM and KILL for bob's; seen, never signalled, for root's.
  auto history = testing::Run({kGpuman, "history", "--intruders", "--json", "--db", dir_.Join("state/history.db")}, Env());
  ASSERT_EQ(history.exit_code, 0) << history.err;
  std::vector<std::string> bobs_events, roots_events;
  const json recorded = json::parse(history.out);
  for (const auto& e : recorded["intruders"]) {
    EXPECT_EQ(e["gpu_index"], 2);
    EXPECT_EQ(e["lease_user"], "gpumanta");
    if (e["pid"] == bobs) bobs_events.push_back(e["event"]);
    if (e["pid"] == roots) roots_events.push_back(e["event"]);
  }
  EXPECT_GE(bobs_events.size(), 3u) << history.out;
  if (bobs_events.size() >= 3) {
    EXPECT_EQ(std::vector<std::string>(bobs_events.begin(), bobs_events.begin() + 3),
              (std::vector<std::string>{"seen", "term", "kill"}));
  }
  ASSERT_FALSE(roots_events.empty()) << history.out;
  EXPECT_EQ(roots_events.front(), "seen");
  EXPECT_EQ(std::count(roots_events.begin(), roots_events.end(), "term"), 0);
}

}  // namespace
}  // namespace gpuman::e2e
