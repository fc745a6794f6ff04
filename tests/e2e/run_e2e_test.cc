// End-to-end tests of select, run, leases, release, topo and explain: the real binary,
// the stand-in NVML, a private state directory per test.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "e2e/e2e_util.h"
#include "e2e/tmux.h"

namespace gpuman::e2e {
namespace {

using nlohmann::json;
using testing::TempDir;

class RunE2E : public ::testing::Test {
 protected:
  testing::RunResult Gpuman(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
    return RunGpuman(state_.path(), std::move(args), env);
  }
  json Leases() {
    auto r = Gpuman({"--simulate", "a100-4", "leases", "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return json::parse(r.out)["leases"];
  }
  // Starts gpuman in the background (for jobs that must overlap); returns its pid.
  pid_t Spawn(std::vector<std::string> args) { return StartGpuman(state_.path(), std::move(args)); }
  bool WaitFor(const std::function<bool()>& cond, int ms = 30000) {
    for (int waited = 0; waited < ms; waited += 50) {
      if (cond()) return true;
      usleep(50 * 1000);
    }
    return cond();
  }
  TempDir state_;
  TempDir work_;
};

TEST_F(RunE2E, RunGivesUuidsAndPropagatesExitCodes) {
  std::string out = work_.Join("env");
  auto r = Gpuman({"--simulate", "a100-4", "run", "-n", "2", "--", "sh", "-c",
                   "echo \"$CUDA_VISIBLE_DEVICES|$CUDA_DEVICE_ORDER|$NVIDIA_VISIBLE_DEVICES|$GPUMAN_LEASE_ID\" > \"$1\"; exit 7",
                   "sh", out});
  EXPECT_EQ(r.exit_code, 7) << r.err;
  std::string env = Slurp(out);
  // a100-4: GPU 1 is busy with foreign processes, so the free NVLink pair is 2,3.
  EXPECT_EQ(env, "GPU-b7e6d5c4-3b2a-4190-8f7e-6d5c4b3a2918,GPU-0a1b2c3d-4e5f-4a6b-9c7d-8e9f0a1b2c3d|PCI_BUS_ID|"
                 "GPU-b7e6d5c4-3b2a-4190-8f7e-6d5c4b3a2918,GPU-0a1b2c3d-4e5f-4a6b-9c7d-8e9f0a1b2c3d|1\n");
  EXPECT_TRUE(Leases().empty()) << "the lease ends with the job";

  auto killed = Gpuman({"--simulate", "a100-4", "run", "--", "sh", "-c", "kill -TERM $$"});
  EXPECT_EQ(killed.exit_code, 128 + SIGTERM);
}

TEST_F(RunE2E, IndexModeGivesPciOrderedIndices) {
  std::string out = work_.Join("env");
  auto r = Gpuman({"--simulate", "a100-4", "run", "-n", "2", "--index", "--", "sh", "-c",
                   "echo \"$CUDA_VISIBLE_DEVICES|$CUDA_DEVICE_ORDER\" > \"$1\"", "sh", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Slurp(out), "2,3|PCI_BUS_ID\n");
}

TEST_F(RunE2E, MissingCommandIs127AndReleases) {
  auto r = Gpuman({"--simulate", "a100-4", "run", "--", "/nonexistent/cmd"});
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_NE(r.err.find("no such file or directory"), std::string::npos) << r.err;
  EXPECT_TRUE(Leases().empty());
  auto none = Gpuman({"--simulate", "a100-4", "run"});
  EXPECT_EQ(none.exit_code, 125) << "run's own failures, argument errors too, are 125";
}

// `run` exits with its job's code, so each of its own outcomes has a code of its own that
// no plausible job returns (docs/cli.md, the `run` section): every row of that table.
TEST_F(RunE2E, ExitCodesHaveOneMeaning) {
  struct Row {
    std::vector<std::string> args;  // after `gpuman --simulate a100-4 run`
    int code;
    const char* err_part;  // in the one line on stderr; "" for the job's own codes
  } rows[] = {
      {{"--", "sh", "-c", "exit 2"}, 2, ""},  // a job's own 2 (argparse, grep) stays the job's
      {{"--", "sh", "-c", "exit 3"}, 3, ""},
      {{"--", "sh", "-c", "exit 125"}, 125, ""},  // as under timeout(1): the job's, and no line of gpuman's
      {{"--", "sh", "-c", "kill -KILL $$"}, 128 + SIGKILL, ""},
      {{"--", "/nonexistent/cmd"}, 127, "gpuman: error: /nonexistent/cmd: "},
      {{"--", "/etc/passwd"}, 126, "gpuman: error: /etc/passwd: "},
      {{"-n", "5", "--", "true"}, 125, "gpuman: error: "},        // never fits on 4 GPUs
      {{"-n", "abc", "--", "true"}, 125, "gpuman: error: --count: 'abc' is not a whole number"},
      {{"--frob", "--", "true"}, 125, "gpuman: error: unknown option --frob"},
      {{"--wait", "soon", "--", "true"}, 125, "gpuman: error: --wait: "},
      {{"--gpus", "9", "--", "true"}, 125, "gpuman: error: "},
  };
  for (const Row& row : rows) {
    std::vector<std::string> args = {"--simulate", "a100-4", "run"};
    args.insert(args.end(), row.args.begin(), row.args.end());
    const auto r = Gpuman(args);
    std::string shown;
    for (const auto& a : row.args) shown += " " + a;
    EXPECT_EQ(r.exit_code, row.code) << shown << ": " << r.err;
    if (*row.err_part) {
      EXPECT_EQ(r.err.rfind(row.err_part, 0), 0u) << shown << ": " << r.err;
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << shown << ": " << r.err;
    } else {
      EXPECT_EQ(r.err, "") << shown;
    }
  }
  // No driver and a broken config: gpuman's own failures, 125 (not 3, not 2).
  const auto no_driver = Gpuman({"--nvml-library", "/nonexistent/libnvidia-ml.so.1", "run", "--", "true"});
  EXPECT_EQ(no_driver.exit_code, 125) << no_driver.err;
  const auto bad_config = Gpuman({"--config", "/", "--simulate", "a100-4", "run", "--", "true"});
  EXPECT_EQ(bad_config.exit_code, 125) << bad_config.err;
  EXPECT_EQ(bad_config.err, "gpuman: error: config /: is a directory, not a file\n");
  EXPECT_TRUE(Leases().empty()) << "nothing is left leased";
}

TEST_F(RunE2E, SelectFormats) {
  struct Case {
    std::vector<std::string> extra;
    std::string want;
  } cases[] = {
      {{"--format", "index"}, "2,3\n"},
      {{}, "GPU-b7e6d5c4-3b2a-4190-8f7e-6d5c4b3a2918,GPU-0a1b2c3d-4e5f-4a6b-9c7d-8e9f0a1b2c3d\n"},
      {{"--format", "docker"}, "--gpus '\"device=GPU-b7e6d5c4-3b2a-4190-8f7e-6d5c4b3a2918,GPU-0a1b2c3d-4e5f-4a6b-9c7d-8e9f0a1b2c3d\"'\n"},
      {{"--format", "env"}, "export CUDA_VISIBLE_DEVICES=GPU-b7e6d5c4-3b2a-4190-8f7e-6d5c4b3a2918,GPU-0a1b2c3d-4e5f-4a6b-9c7d-8e9f0a1b2c3d\nexport CUDA_DEVICE_ORDER=PCI_BUS_ID\n"
                            "export NVIDIA_VISIBLE_DEVICES=GPU-b7e6d5c4-3b2a-4190-8f7e-6d5c4b3a2918,GPU-0a1b2c3d-4e5f-4a6b-9c7d-8e9f0a1b2c3d\n"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args = {"--simulate", "a100-4", "select", "-n", "2"};
    args.insert(args.end(), c.extra.begin(), c.extra.end());
    auto r = Gpuman(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, c.want);
  }
  auto j = Gpuman({"--simulate", "a100-4", "select", "-n", "2", "--format", "json"});
  json doc = json::parse(j.out);
  EXPECT_EQ(doc["gpus"].size(), 2u);
  EXPECT_EQ(doc["gpus"][0]["index"], 2);
  EXPECT_EQ(doc["placement"].get<std::string>().find("NVLink"), 0u) << doc["placement"];
  EXPECT_TRUE(doc["lease_id"].is_null());
  EXPECT_TRUE(Leases().empty()) << "select without --lease leases nothing";

  auto busy = Gpuman({"--simulate", "a100-4", "select", "-n", "4"});
  EXPECT_EQ(busy.exit_code, 4);
  EXPECT_NE(busy.err.find("foreign processes"), std::string::npos) << busy.err;
  auto impossible = Gpuman({"--simulate", "a100-4", "select", "-n", "5"});
  EXPECT_EQ(impossible.exit_code, 4);
  auto shared = Gpuman({"--simulate", "a100-4", "select", "-n", "4", "--allow-shared", "--format", "index"});
  EXPECT_EQ(shared.out, "0,1,2,3\n");
  auto filtered = Gpuman({"--simulate", "workstation-mixed", "select", "--model", "4090", "--format", "index", "--allow-shared"});
  EXPECT_EQ(filtered.exit_code, 0) << filtered.err;
  EXPECT_EQ(filtered.out, "1\n");
  auto bad = Gpuman({"--simulate", "a100-4", "select", "--min-free-memory", "lots"});
  EXPECT_EQ(bad.exit_code, 2);
}

TEST_F(RunE2E, SelectLeaseLivesWithTheCallerAndCanBeReleased) {
  // Our test process is gpuman's parent: the lease lives as long as we do.
  auto r = Gpuman({"--simulate", "a100-4", "select", "--lease", "--format", "env"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("export GPUMAN_LEASE_ID=1"), std::string::npos) << r.out;
  json leases = Leases();
  ASSERT_EQ(leases.size(), 1u);
  EXPECT_EQ(leases[0]["kind"], "select");
  EXPECT_EQ(leases[0]["processes"][0]["pid"], getpid());
  char host[256] = {};
  ASSERT_EQ(gethostname(host, sizeof host - 1), 0);
  EXPECT_EQ(leases[0]["host"], host) << "the lease names the host that judges its holder";
  // The leased GPU is not handed out again.
  auto again = Gpuman({"--simulate", "a100-4", "select", "-n", "3"});
  EXPECT_EQ(again.exit_code, 4) << again.out;
  auto rel = Gpuman({"--simulate", "a100-4", "release", "1"});
  EXPECT_EQ(rel.exit_code, 0) << rel.err;
  EXPECT_TRUE(Leases().empty());
  auto unknown = Gpuman({"--simulate", "a100-4", "release", "99"});
  EXPECT_EQ(unknown.exit_code, 2);
}

TEST_F(RunE2E, LeaseOfAShellThatExitedIsReclaimed) {
  auto r = testing::Run({"/bin/sh", "-c", kGpuman + " --simulate a100-4 select --lease >/dev/null"},
                        CleanEnv(state_.path()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Leases().empty()) << "the shell that held it is gone";
}

TEST_F(RunE2E, SecondRunWaitsForTheFirst) {
  // The first job holds 3 GPUs until we create the release file.
  std::string release = work_.Join("release");
  pid_t first = Spawn({"--simulate", "a100-4", "run", "-n", "3", "--", "sh", "-c",
                       "while [ ! -e \"$1\" ]; do sleep 0.02; done", "sh", release});
  ASSERT_TRUE(WaitFor([&] { return Leases().size() == 1; }));
  auto no_wait = Gpuman({"--simulate", "a100-4", "run", "-n", "2", "--", "true"});
  EXPECT_EQ(no_wait.exit_code, 125);
  EXPECT_NE(no_wait.err.find("leased"), std::string::npos) << no_wait.err;

  testing::RunResult waited;
  std::chrono::steady_clock::time_point done;
  std::thread second([&] {
    waited = Gpuman({"--simulate", "a100-4", "run", "-n", "2", "--wait", "60s", "--", "true"});
    done = std::chrono::steady_clock::now();
  });
  usleep(1500 * 1000);
  auto released_at = std::chrono::steady_clock::now();
  std::ofstream(release) << "go";
  second.join();
  EXPECT_EQ(waited.exit_code, 0) << waited.err;
  EXPECT_NE(waited.err.find("waiting for 2 GPU(s)"), std::string::npos) << waited.err;
  EXPECT_GT(done, released_at) << "it must not have started before the release";
  int status = 0;
  waitpid(first, &status, 0);
  EXPECT_EQ(WEXITSTATUS(status), 0);

  auto gave_up = Gpuman({"--simulate", "a100-4", "run", "-n", "4", "--wait", "1s", "--", "true"});
  EXPECT_EQ(gave_up.exit_code, 124) << "--wait=DURATION ran out, as timeout(1) says it";
  EXPECT_NE(gave_up.err.find("gave up after"), std::string::npos) << gave_up.err;
}

// Issue 23: a wait for GPUs ends at once on SIGTERM (what timeout(1) sends) and on Ctrl-C at
// a terminal (where the waiting job's process group must not own the terminal yet): 143 and
// 130, no lease taken, the command never ran.
TEST_F(RunE2E, SigtermAndCtrlCEndAWaitAndStartNothing) {
  std::string release = work_.Join("release");
  pid_t holder = Spawn({"--simulate", "a100-4", "run", "-n", "3", "--", "sh", "-c",
                        "while [ ! -e \"$1\" ]; do sleep 0.02; done", "sh", release});
  ASSERT_TRUE(WaitFor([&] { return Leases().size() == 1; }));
  const std::string marker = work_.Join("ran");

  pid_t waiter = Spawn({"--simulate", "a100-4", "run", "-n", "1", "--wait", "--", "touch", marker});
  usleep(1200 * 1000);  // well into the wait
  ASSERT_EQ(kill(waiter, SIGTERM), 0);
  const auto sent = std::chrono::steady_clock::now();
  int status = 0;
  ASSERT_TRUE(WaitFor([&] { return waitpid(waiter, &status, WNOHANG) == waiter; }, 5000)) << "SIGTERM was ignored";
  EXPECT_LT(std::chrono::steady_clock::now() - sent, std::chrono::milliseconds(2500));
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM);

  if (access(kTmux, X_OK) == 0) {
    Tmux tmux(state_.path());
    // The exit status through a shell that prints it: tmux 3.3 does not always fill in
    // pane_dead_status (tmux.h). Ctrl-C reaches the whole foreground process group; the
    // shell's trap (a handler, which exec resets: gpuman gets the default) keeps it alive
    // to say how gpuman ended.
    tmux.Start({"/bin/sh", "-c", "trap : INT; \"$0\" --simulate a100-4 run -n 1 --wait -- touch \"$1\"; echo \"exit=$?\"",
                kGpuman, marker},
               100, 10);
    const std::string waiting = tmux.WaitForText("waiting for 1 GPU(s)");
    ASSERT_NE(waiting.find("waiting for 1 GPU(s)"), std::string::npos) << waiting;
    tmux.Keys({"C-c"});
    const std::string after = tmux.WaitForText("exit=");
    EXPECT_NE(after.find("exit=130"), std::string::npos) << after;
    EXPECT_NE(tmux.Screen().find("gpuman: interrupted by SIGINT while waiting for 1 GPU(s)"), std::string::npos)
        << tmux.Screen();
  }

  EXPECT_NE(access(marker.c_str(), F_OK), 0) << "the command ran";
  EXPECT_EQ(Leases().size(), 1u) << "only the holder's lease";
  std::ofstream(release) << "go";
  waitpid(holder, &status, 0);
}

// kill -9 of the runner: the job goes on and keeps its lease; when the job ends the lease
// is reclaimed on the next look. Never a job without a lease, never a lease without a job.
TEST_F(RunE2E, KillNineOfTheRunner) {
  std::string pidfile = work_.Join("job.pid");
  pid_t runner = Spawn({"--simulate", "a100-4", "run", "--gpus", "0", "--", "sh", "-c",
                        "echo $$ > \"$1\"; exec sleep 30", "sh", pidfile});
  ASSERT_TRUE(WaitFor([&] { return !Slurp(pidfile).empty(); }));
  pid_t job = std::stoi(Slurp(pidfile));
  kill(runner, SIGKILL);
  int status = 0;
  waitpid(runner, &status, 0);
  usleep(100 * 1000);
  EXPECT_EQ(kill(job, 0), 0) << "the job survives its runner";
  json leases = Leases();
  ASSERT_EQ(leases.size(), 1u) << "the running job still holds its lease";
  auto taken = Gpuman({"--simulate", "a100-4", "run", "--gpus", "0", "--", "true"});
  EXPECT_EQ(taken.exit_code, 125) << "GPU 0 is still leased";

  kill(job, SIGKILL);
  ASSERT_TRUE(WaitFor([&] { return kill(job, 0) != 0 || Slurp("/proc/" + std::to_string(job) + "/stat").find(") Z") != std::string::npos; }));
  ASSERT_TRUE(WaitFor([&] { return Leases().empty(); }, 15000)) << "a lease without a job is reclaimed";
  auto free_again = Gpuman({"--simulate", "a100-4", "run", "--gpus", "0", "--", "true"});
  EXPECT_EQ(free_again.exit_code, 0) << free_again.err;
}

TEST_F(RunE2E, StaysInsideTheEnclosingAllocation) {
  std::string out = work_.Join("env");
  auto r = Gpuman({"--simulate", "a100-4", "run", "--", "sh", "-c", "echo $CUDA_VISIBLE_DEVICES > \"$1\"", "sh", out},
                  {{"CUDA_VISIBLE_DEVICES", "GPU-0a1b2c3d"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Slurp(out), "GPU-0a1b2c3d-4e5f-4a6b-9c7d-8e9f0a1b2c3d\n");
  auto slurm = Gpuman({"--simulate", "a100-4", "select", "-n", "2", "--format", "index"}, {{"SLURM_JOB_GPUS", "0,2"}});
  EXPECT_EQ(slurm.exit_code, 0) << slurm.err;
  EXPECT_EQ(slurm.out, "0,2\n");
  auto too_many = Gpuman({"--simulate", "a100-4", "select", "-n", "3"}, {{"SLURM_JOB_GPUS", "0,2"}});
  EXPECT_EQ(too_many.exit_code, 4);
}

TEST_F(RunE2E, BindNumaUsesTheGpusCpus) {
  // a100-4: GPU 0 is local to CPUs 0-31,64-95; GPU 3 to 32-63,96-127.
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  if (cpus < 1 || cpus > 32) GTEST_SKIP() << "needs a machine with at most 32 CPUs";
  std::string out = work_.Join("cpus");
  auto r = Gpuman({"--simulate", "a100-4", "run", "--gpus", "0", "--bind-numa", "--", "sh", "-c",
                   "grep Cpus_allowed_list /proc/self/status > \"$1\"", "sh", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string want = cpus == 1 ? "0" : "0-" + std::to_string(cpus - 1);
  EXPECT_NE(Slurp(out).find("\t" + want + "\n"), std::string::npos) << Slurp(out);
  // GPU 3's CPUs do not exist here: say so and do not bind.
  auto far = Gpuman({"--simulate", "a100-4", "run", "--gpus", "3", "--bind-numa", "--", "true"});
  EXPECT_EQ(far.exit_code, 0) << far.err;
  EXPECT_NE(far.err.find("not binding"), std::string::npos) << far.err;
}

TEST_F(RunE2E, TopoMatrix) {
  auto r = Gpuman({"--simulate", "a100-4", "topo", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json doc = json::parse(r.out);
  EXPECT_EQ(doc["matrix"][0][0], "X");
  EXPECT_EQ(doc["matrix"][0][1], "NV12");
  EXPECT_EQ(doc["matrix"][0][2], "SYS");
  EXPECT_EQ(doc["matrix"][2][3], "NV12");
  EXPECT_EQ(doc["gpus"][2]["numa_node"], 1);
  auto ws = Gpuman({"--simulate", "workstation-mixed", "topo", "--json"});
  ASSERT_EQ(ws.exit_code, 0);
  // Held in a variable: a range-for over a member of the temporary json would read freed memory.
  json ws_doc = json::parse(ws.out);
  ASSERT_EQ(ws_doc["pairs"].size(), 3u);  // three GPUs: three pairs
  for (const auto& pair : ws_doc["pairs"]) {
    EXPECT_EQ(pair["nvlinks"], 0) << "no NVLink on the workstation";
  }
  auto text = Gpuman({"--simulate", "a100-4", "topo"});
  EXPECT_NE(text.out.find("GPU0   X     NV12  SYS   SYS"), std::string::npos) << text.out;
}

// HGX H100 (h100-8): every GPU's 18 links go to the NVSwitches. topo shows NV18 for every
// pair as nvidia-smi does, select calls its choice NVLink, and gres-conf writes Links=.
TEST_F(RunE2E, NvSwitchNodeIsNvLinkedEverywhere) {
  auto r = Gpuman({"--simulate", "h100-8", "topo", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json doc = json::parse(r.out);
  ASSERT_EQ(doc["matrix"].size(), 8u);
  for (size_t i = 0; i < 8; ++i) {
    for (size_t j = 0; j < 8; ++j) EXPECT_EQ(doc["matrix"][i][j], i == j ? "X" : "NV18") << i << "," << j;
  }
  auto pick = Gpuman({"--simulate", "h100-8", "select", "-n", "2", "--format", "json"});
  ASSERT_EQ(pick.exit_code, 0) << pick.err;
  EXPECT_EQ(json::parse(pick.out)["placement"], "NVLink (NV18)");
  auto gres = Gpuman({"--simulate", "h100-8", "slurm", "gres-conf"}, {{"SLURMD_NODENAME", "hgx1"}});
  ASSERT_EQ(gres.exit_code, 0) << gres.err;
  EXPECT_NE(gres.out.find(" Links=-1,18,18,18,18,18,18,18\n"), std::string::npos) << gres.out;
  EXPECT_NE(gres.out.find(" Links=18,18,18,18,18,18,18,-1\n"), std::string::npos) << gres.out;
}

// A lost GPU would be missing from gres.conf, moving every later GPU to another Slurm
// index: refused (exit 6, nothing on stdout) unless --allow-missing.
TEST_F(RunE2E, GresConfRefusesToLeaveALostGpuOut) {
  auto refused = Gpuman({"--simulate", "lost-gpu", "slurm", "gres-conf"}, {{"SLURMD_NODENAME", "n1"}});
  EXPECT_EQ(refused.exit_code, 6) << refused.err;
  EXPECT_EQ(refused.out, "");
  EXPECT_NE(refused.err.find("gpuman: error: GPU 2 left out: NVML reports no minor number ("), std::string::npos)
      << refused.err;
  EXPECT_NE(refused.err.find("GPU is lost"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("--allow-missing"), std::string::npos) << refused.err;

  auto allowed = Gpuman({"--simulate", "lost-gpu", "slurm", "gres-conf", "--allow-missing"},
                        {{"SLURMD_NODENAME", "n1"}});
  EXPECT_EQ(allowed.exit_code, 0) << allowed.err;
  EXPECT_EQ(std::count(allowed.out.begin(), allowed.out.end(), '\n'), 5) << allowed.out;  // 2 comments, 3 GPUs
  EXPECT_EQ(allowed.out.find("File=/dev/nvidia2"), std::string::npos) << allowed.out;
  EXPECT_NE(allowed.err.find("gpuman: warning: GPU 2 left out"), std::string::npos) << allowed.err;

  auto whole = Gpuman({"--simulate", "a100-4", "slurm", "gres-conf"}, {{"SLURMD_NODENAME", "n1"}});
  EXPECT_EQ(whole.exit_code, 0) << whole.err;
  EXPECT_EQ(whole.err, "");
}

TEST_F(RunE2E, ExplainTheClassicMixUp) {
  auto r = Gpuman({"--simulate", "workstation-mixed", "explain", "--json", "--env", "CUDA_VISIBLE_DEVICES=0"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json doc = json::parse(r.out);
  EXPECT_EQ(doc["schema_version"], 1);
  ASSERT_EQ(doc["visible"].size(), 1u);
  bool mixup = false;
  for (const auto& w : doc["warnings"]) mixup = mixup || w["code"] == "index_without_pci_bus_order";
  EXPECT_TRUE(mixup) << doc.dump(2);

  auto truncated = Gpuman({"--simulate", "a100-4", "explain", "--json", "--env",
                           "CUDA_VISIBLE_DEVICES=0,2,-1,1 CUDA_DEVICE_ORDER=PCI_BUS_ID"});
  json t = json::parse(truncated.out);
  ASSERT_EQ(t["visible"].size(), 2u);
  EXPECT_EQ(t["visible"][1]["index"], 2);
  EXPECT_EQ(t["visible"][1]["cuda_index"], 1);

  auto no_driver = Gpuman({"explain"}, {{"GPUMAN_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1"}});
  EXPECT_EQ(no_driver.exit_code, 0);
  EXPECT_NE(no_driver.out.find("libnvidia-ml"), std::string::npos) << no_driver.out;
  auto bad = Gpuman({"--simulate", "a100-4", "explain", "--env", "garbage"});
  EXPECT_EQ(bad.exit_code, 2);
}

}  // namespace
}  // namespace gpuman::e2e
