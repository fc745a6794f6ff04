// `gpuman run --per-gpu` (issue 24; docs/cli.md, "One process per GPU"): one process per
// leased GPU, each with its rank and every GPU of the lease, one rendezvous port; a failing
// rank stops the others and gives its code; SIGTERM and Ctrl-C reach every rank; one lease
// for all of them, through the daemon and through the machine lease table.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <sstream>

#include "base/strings.h"
#include "e2e/e2e_util.h"
#include "e2e/tmux.h"

namespace gpuman::e2e {
namespace {

using nlohmann::json;
using testing::TempDir;

class PerGpuE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    chmod(dir_.path().c_str(), 0755);
    scenario_ = IdleScenario(dir_, "h100-8");
    socket_ = dir_.Join("gpuman.sock");
    env_["GPUMAN_LEASE_DIR"] = dir_.Join("leases");
  }

  void StartDaemon() {
    ASSERT_TRUE(daemon_.Start({.scenario = scenario_, .socket = socket_, .state_dir = dir_.Join("daemon-state"),
                               .env = CleanEnv(dir_.Join("state"))}));
    env_["GPUMAN_SOCKET"] = socket_;
  }

  std::vector<std::string> Args(std::vector<std::string> args) {
    args.insert(args.begin(), {"--simulate", scenario_});
    return args;
  }

  testing::RunResult Gpuman(std::vector<std::string> args) {
    return RunGpuman(dir_.Join("state"), Args(std::move(args)), env_);
  }

  json Leases() {
    auto r = Gpuman({"leases", "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return json::parse(r.out)["leases"];
  }

  // gpuman in the background (to signal it); its pid.
  pid_t Background(std::vector<std::string> args) {
    return StartGpuman(dir_.Join("state"), Args(std::move(args)), env_);
  }

  static bool WaitFor(const std::function<bool()>& cond, int ms = 30000) {
    for (int waited = 0; waited < ms; waited += 20) {
      if (cond()) return true;
      usleep(20 * 1000);
    }
    return cond();
  }
  static bool Exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

  TempDir dir_;
  std::string scenario_, socket_;
  std::map<std::string, std::string> env_;
  PrivateDaemon daemon_;
};

// Each rank writes "RANK LOCAL_RANK WORLD_SIZE LOCAL_WORLD_SIZE GROUP_RANK MASTER_ADDR
// MASTER_PORT GPUMAN_LEASE_ID CUDA_VISIBLE_DEVICES" to its own file.
const char kReport[] =
    "echo \"$RANK $LOCAL_RANK $WORLD_SIZE $LOCAL_WORLD_SIZE $GROUP_RANK $MASTER_ADDR $MASTER_PORT $GPUMAN_LEASE_ID "
    "$CUDA_VISIBLE_DEVICES $JAX_PROCESS_ID $JAX_COORDINATOR_ADDRESS\" > \"$0.$RANK\"; echo \"out of $RANK\"";

TEST_F(PerGpuE2E, EveryRankGetsItsRankTheLeasesGpusAndOnePort) {
  for (bool through_daemon : {false, true}) {
    SCOPED_TRACE(through_daemon ? "through the daemon" : "machine lease table");
    if (through_daemon) StartDaemon();
    for (int n : {4, 1}) {
      const std::string base = dir_.Join(std::string(through_daemon ? "d" : "t") + std::to_string(n));
      auto r = Gpuman({"run", "-q", "-n", std::to_string(n), "--per-gpu", "--", "sh", "-c", kReport, base});
      ASSERT_EQ(r.exit_code, 0) << r.err;
      // Not a terminal: the ranks wrote to gpuman's stdout themselves, without prefixes.
      for (int rank = 0; rank < n; ++rank) {
        EXPECT_NE(r.out.find("out of " + std::to_string(rank) + "\n"), std::string::npos) << r.out;
      }
      EXPECT_EQ(r.out.find('['), std::string::npos) << r.out;
      std::string port, lease, gpus;
      for (int rank = 0; rank < n; ++rank) {
        std::istringstream words(Slurp(base + "." + std::to_string(rank)));
        std::vector<std::string> w;
        for (std::string word; words >> word;) w.push_back(word);
        ASSERT_EQ(w.size(), 11u) << "rank " << rank;
        const std::string r_text = std::to_string(rank), n_text = std::to_string(n);
        EXPECT_EQ(w[0], r_text) << "RANK";
        EXPECT_EQ(w[1], r_text) << "LOCAL_RANK";
        EXPECT_EQ(w[2], n_text) << "WORLD_SIZE";
        EXPECT_EQ(w[3], n_text) << "LOCAL_WORLD_SIZE";
        EXPECT_EQ(w[4], "0") << "GROUP_RANK";
        EXPECT_EQ(w[5], "127.0.0.1");
        EXPECT_EQ(w[9], r_text) << "JAX_PROCESS_ID";
        EXPECT_EQ(w[10], "127.0.0.1:" + w[6]) << "JAX_COORDINATOR_ADDRESS";
        EXPECT_EQ(std::count(w[8].begin(), w[8].end(), ',') + 1, n) << "every rank sees every GPU: " << w[8];
        if (rank == 0) {
          port = w[6];
          lease = w[7];
          gpus = w[8];
          EXPECT_TRUE(ParseInt(port)) << port;
        } else {
          EXPECT_EQ(w[6], port) << "one MASTER_PORT for all ranks";
          EXPECT_EQ(w[7], lease) << "one lease for all ranks";
          EXPECT_EQ(w[8], gpus);
        }
      }
      EXPECT_TRUE(Leases().empty()) << "released when the last rank ended";
    }
    if (through_daemon) daemon_.Stop();
  }
}

TEST_F(PerGpuE2E, AFailingRankStopsTheOthersAndRunExitsWithItsCode) {
  for (bool through_daemon : {false, true}) {
    SCOPED_TRACE(through_daemon ? "through the daemon" : "machine lease table");
    if (through_daemon) StartDaemon();
    const std::string m = dir_.Join(through_daemon ? "d" : "t");
    // Rank 2 fails once the others are up with their trap; they would run forever.
    auto r = Gpuman({"run", "-q", "-n", "4", "--per-gpu", "--", "sh", "-c",
                     "if [ $RANK = 2 ]; then for r in 0 1 3; do while [ ! -e \"$0.up$r\" ]; do sleep 0.01; done; done; "
                     "exit 3; fi; trap 'echo term > \"$0.term$RANK\"; exit 9' TERM; touch \"$0.up$RANK\"; "
                     "while :; do sleep 0.05; done",
                     m});
    EXPECT_EQ(r.exit_code, 3) << "the failing rank's code\n" << r.err;
    EXPECT_NE(r.err.find("gpuman: rank 2 exited with 3; stopped the other ranks\n"), std::string::npos) << r.err;
    for (int rank : {0, 1, 3}) EXPECT_EQ(Slurp(m + ".term" + std::to_string(rank)), "term\n") << rank;
    EXPECT_TRUE(Leases().empty());

    // A rank killed by a signal: 128 + N, said so.
    auto killed = Gpuman({"run", "-q", "-n", "2", "--per-gpu", "--", "sh", "-c",
                          "if [ $RANK = 1 ]; then kill -SEGV $$; fi; exec sleep 60"});
    EXPECT_EQ(killed.exit_code, 128 + SIGSEGV) << killed.err;
    EXPECT_NE(killed.err.find("gpuman: rank 1 was killed by SIGSEGV (139); stopped the other ranks"), std::string::npos)
        << killed.err;

    // Every rank succeeds: 0, and nothing said.
    auto fine = Gpuman({"run", "-q", "-n", "3", "--per-gpu", "--", "sh", "-c", "exit 0"});
    EXPECT_EQ(fine.exit_code, 0) << fine.err;
    EXPECT_EQ(fine.err, "");
    if (through_daemon) daemon_.Stop();
  }
}

TEST_F(PerGpuE2E, SigtermToRunReachesEveryRank) {
  for (bool through_daemon : {false, true}) {
    SCOPED_TRACE(through_daemon ? "through the daemon" : "machine lease table");
    if (through_daemon) StartDaemon();
    const std::string m = dir_.Join(through_daemon ? "d" : "t");
    pid_t run = Background({"run", "-q", "-n", "3", "--per-gpu", "--", "sh", "-c",
                            "trap 'echo term > \"$0.term$RANK\"; exit 143' TERM; touch \"$0.up$RANK\"; "
                            "while :; do sleep 0.05; done",
                            m});
    ASSERT_TRUE(WaitFor([&] { return Exists(m + ".up0") && Exists(m + ".up1") && Exists(m + ".up2"); }));
    ASSERT_EQ(Leases().size(), 1u) << "one lease for the three ranks";
    kill(run, SIGTERM);
    int status = 0;
    ASSERT_EQ(waitpid(run, &status, 0), run);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 143);
    for (int rank = 0; rank < 3; ++rank) EXPECT_EQ(Slurp(m + ".term" + std::to_string(rank)), "term\n") << rank;
    EXPECT_TRUE(Leases().empty());
    if (through_daemon) daemon_.Stop();
  }
}

// kill -9 of run: the ranks go on and keep the lease, as a plain run's job does; once the
// last rank ends the lease is reclaimed.
TEST_F(PerGpuE2E, KillNineOfRunLeavesTheRanksTheirLease) {
  const std::string m = dir_.Join("k");
  pid_t run = Background({"run", "-q", "-n", "2", "--per-gpu", "--", "sh", "-c",
                          "echo $$ > \"$0.pid$RANK\"; exec sleep 60", m});
  ASSERT_TRUE(WaitFor([&] { return !Slurp(m + ".pid0").empty() && !Slurp(m + ".pid1").empty(); }));
  kill(run, SIGKILL);
  waitpid(run, nullptr, 0);
  ASSERT_EQ(Leases().size(), 1u) << "the ranks still hold it";
  const pid_t rank0 = std::stoi(Slurp(m + ".pid0")), rank1 = std::stoi(Slurp(m + ".pid1"));
  kill(rank0, SIGKILL);
  EXPECT_EQ(Leases().size(), 1u) << "rank 1 still holds it";
  kill(rank1, SIGKILL);
  EXPECT_TRUE(WaitFor([&] { return Leases().empty(); }, 15000)) << "a lease without processes is reclaimed";
}

TEST_F(PerGpuE2E, BindNumaBindsEachRankToItsOwnGpu) {
  // h100-8: GPU 0 is local to CPUs 0-55,112-167 (node 0), GPU 4 to 56-111,168-223 (node 1).
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  if (cpus < 1 || cpus > 56) GTEST_SKIP() << "needs a machine with at most 56 CPUs";
  const std::string m = dir_.Join("cpus");
  auto r = Gpuman({"run", "-q", "-n", "2", "--gpus", "0,4", "--per-gpu", "--bind-numa", "--", "sh", "-c",
                   "grep Cpus_allowed_list /proc/self/status > \"$0.$RANK\"", m});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string all = cpus == 1 ? "0" : "0-" + std::to_string(cpus - 1);
  EXPECT_NE(Slurp(m + ".0").find("\t" + all + "\n"), std::string::npos) << "rank 0, GPU 0: " << Slurp(m + ".0");
  // Rank 1's GPU is on node 1, whose CPUs this machine does not have: rank 1 alone is told.
  EXPECT_NE(r.err.find("--bind-numa: rank 1: none of the GPUs' CPUs (56-111,168-223)"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("rank 0:"), std::string::npos) << r.err;
}

TEST_F(PerGpuE2E, OptionsThatMakeNoSenseAreRefusedInOneLine) {
  auto shared = Gpuman({"run", "-n", "2", "--per-gpu", "--allow-shared", "--", "true"});
  EXPECT_EQ(shared.exit_code, 125);
  EXPECT_EQ(shared.err, "gpuman: error: --per-gpu does not go with --allow-shared: each rank needs a GPU of its own\n");
  auto submit = Gpuman({"submit", "-n", "2", "--per-gpu", "--", "true"});
  EXPECT_EQ(submit.exit_code, 2);
  EXPECT_EQ(std::count(submit.err.begin(), submit.err.end(), '\n'), 1) << submit.err;
  EXPECT_NE(submit.err.find("--per-gpu is for run only (for now)"), std::string::npos) << submit.err;
  auto missing = Gpuman({"run", "-n", "2", "--per-gpu", "--", "gpuman-no-such-command"});
  EXPECT_EQ(missing.exit_code, 127) << missing.err;
  EXPECT_TRUE(Leases().empty());
}

// What docs/cli.md offers instead of `submit --per-gpu`: the job starts its ranks itself,
// inside its own lease (a nested run takes no lease of its own).
TEST_F(PerGpuE2E, AQueuedJobStartsItsRanksInsideItsLease) {
  StartDaemon();
  const std::string log = dir_.Join("job.log");
  auto sub = Gpuman({"submit", "-n", "2", "--output", log, "--", kGpuman, "--simulate", scenario_, "run", "-q", "-n", "2",
                     "--per-gpu", "--", "sh", "-c", "echo \"rank $RANK of $WORLD_SIZE in lease $GPUMAN_LEASE_ID\""});
  ASSERT_EQ(sub.exit_code, 0) << sub.err;
  auto waited = Gpuman({"wait", std::string(Trim(sub.out))});
  EXPECT_EQ(waited.exit_code, 0) << waited.err << Slurp(log);
  const std::string out = Slurp(log);
  const auto lease_of = [&](const std::string& line) {
    const auto at = out.find(line);
    return at == std::string::npos ? std::string() : out.substr(at + line.size(), out.find('\n', at) - at - line.size());
  };
  const std::string lease0 = lease_of("rank 0 of 2 in lease "), lease1 = lease_of("rank 1 of 2 in lease ");
  EXPECT_FALSE(lease0.empty()) << out;
  EXPECT_EQ(lease0, lease1) << out;
  daemon_.Stop();
}

// On a terminal: each rank's lines behind its rank, never mixed; Ctrl-C reaches every rank
// (they share the foreground process group) and run ends with 130.
TEST_F(PerGpuE2E, OnATerminalLinesArePrefixedAndCtrlCReachesEveryRank) {
  if (access(kTmux, X_OK) != 0) GTEST_SKIP() << "needs tmux";
  Tmux tmux(dir_.Join("state"));
  const std::string m = dir_.Join("tty");
  const std::string rank_script =
      "trap 'echo int > \"$0.int$RANK\"; exit 130' INT; [ -t 1 ] && echo \"tty $RANK\"; printf \"part $RANK\"; "
      "touch \"$0.up$RANK\"; while :; do sleep 0.05; done";
  tmux.Start({"/bin/sh", "-c",
              "trap : INT; /usr/bin/env GPUMAN_LEASE_DIR=\"$2\" \"$0\" --simulate \"$1\" run -q -n 2 --per-gpu -- "
              "sh -c \"$4\" \"$3\"; echo \"exit=$?\"",
              kGpuman, scenario_, dir_.Join("leases"), m, rank_script},
             100, 20);
  ASSERT_TRUE(WaitFor([&] { return Exists(m + ".up0") && Exists(m + ".up1"); })) << tmux.Screen();
  const std::string up = tmux.WaitFor([](const std::string& s) {
    return s.find("[0] tty 0") != std::string::npos && s.find("[1] tty 1") != std::string::npos;
  });
  EXPECT_NE(up.find("[0] tty 0"), std::string::npos) << up;
  EXPECT_NE(up.find("[1] tty 1"), std::string::npos) << "a rank's stdout is a terminal, its lines prefixed\n" << up;
  tmux.Keys({"C-c"});
  const std::string after = tmux.WaitForText("exit=");
  EXPECT_NE(after.find("exit=130"), std::string::npos) << after;
  EXPECT_NE(after.find("[0] part 0"), std::string::npos) << "a partial last line is still shown\n" << after;
  EXPECT_NE(after.find("[1] part 1"), std::string::npos) << after;
  EXPECT_EQ(after.find("stopped the other ranks"), std::string::npos) << "Ctrl-C stopped them all\n" << after;
  EXPECT_EQ(Slurp(m + ".int0"), "int\n");
  EXPECT_EQ(Slurp(m + ".int1"), "int\n");
  EXPECT_TRUE(Leases().empty());
}

}  // namespace
}  // namespace gpuman::e2e
