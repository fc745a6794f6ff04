// End-to-end tests of MPS leases (docs/share.md, "MPS"; issue 25): a slice with --mps
// makes the daemon start the stand-in nvidia-cuda-mps-control (tests/e2e/fake_mps) for the
// GPU, as the lease's user, with the GPU's environment; the client gets the MPS variables;
// a second user's MPS slice goes to another GPU (or waits, with MPS's reason); the control
// gets "quit" when the lease ends, also across a daemon killed with SIGKILL. Real
// binaries, the stand-in NVML, a private daemon; root only (two users).
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>
#include <thread>

#include <gmock/gmock.h>

#include "e2e/e2e_util.h"
#include "e2e/users.h"

namespace gpuman::e2e {
namespace {

using nlohmann::json;
using testing::TempDir;
using ::testing::HasSubstr;

int Count(const std::string& text, const std::string& line) {
  int n = 0;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) n += l == line;
  return n;
}

class MpsE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    if (getuid() != 0) GTEST_SKIP() << "needs root to create users and run MPS as them";
    alice_ = EnsureTestUser("gpumanta");
    bob_ = EnsureTestUser("gpumantb");
    if (!alice_ || !bob_) GTEST_SKIP() << "useradd is not available";
    chmod(dir_.path().c_str(), 0755);
    scenario_ = IdleScenario(dir_, "h100-8");
    chmod(scenario_.c_str(), 0644);
    gate_ = dir_.Join("gate");
    socket_ = dir_.Join("gpuman.sock");
    mps_dir_ = dir_.Join("mps");
    // The stand-in where the lease's user may run it.
    std::filesystem::create_directories(dir_.Join("bin"));
    control_ = dir_.Join("bin/nvidia-cuda-mps-control");
    std::filesystem::copy_file(kScenarios + "/../tests/e2e/fake_mps/nvidia-cuda-mps-control", control_);
    chmod(dir_.Join("bin").c_str(), 0755);
    chmod(control_.c_str(), 0755);
    config_ = dir_.Write("config.toml", "[share]\nmps_control = \"" + control_ + "\"\nmps_dir = \"" + mps_dir_ + "\"\n");
    chmod(config_.c_str(), 0644);
    ASSERT_TRUE(StartDaemon());
  }
  void TearDown() override {
    dir_.Write("gate", "");
    for (auto& t : holders_) t.join();
    daemon_.Stop();
  }
  ::testing::AssertionResult StartDaemon() {
    auto env = Env();
    env["GPUMAN_SIMULATE"] = "";
    return daemon_.Start({.scenario = scenario_, .socket = socket_, .state_dir = dir_.Join("state"), .env = env,
                          .stderr_path = dir_.Join("daemon.err")});
  }
  std::map<std::string, std::string> Env() {
    auto env = CleanEnv(dir_.Join("leases"));
    env["GPUMAN_LEASE_DIR"] = dir_.Join("leases");
    env["GPUMAN_SIMULATE"] = scenario_;
    if (!socket_.empty()) env["GPUMAN_SOCKET"] = socket_;
    env["GPUMAN_CONFIG"] = config_;
    env["PATH"] = "/usr/bin:/bin";
    env["HOME"] = "/nonexistent";
    return env;
  }
  testing::RunResult As(const passwd& who, std::vector<std::string> args) {
    args.insert(args.begin(), kGpuman);
    return RunAsUser(who, args, Env());
  }
  // `gpuman run ARGS -- sh` as `who` in the background until the gate opens; the child
  // writes its GPU and MPS variables to `out`.
  void Hold(const passwd& who, std::vector<std::string> args, const std::string& out) {
    std::vector<std::string> argv = {kGpuman, "run"};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.insert(argv.end(), {"--", "/bin/sh", "-c",
                             "env | grep -E '^(CUDA_VISIBLE_DEVICES|CUDA_MPS_[A-Z_]*)=' | sort > \"$1\"; "
                             "while [ ! -e \"$0\" ]; do sleep 0.05; done",
                             gate_, out});
    const auto env = Env();
    holders_.emplace_back([who, argv, env] { (void)RunAsUser(who, argv, env); });
  }
  json Leases() {
    std::vector<std::string> argv = {kGpuman, "leases", "--json"};
    return json::parse(testing::Run(argv, Env()).out)["leases"];
  }
  json WaitForLeases(size_t n) {
    json leases;
    for (int i = 0; i < 600; ++i) {
      leases = Leases();
      if (leases.size() == n) break;
      usleep(50 * 1000);
    }
    return leases;
  }
  std::string Uuid(int index) {
    json status = json::parse(testing::Run({kGpuman, "status", "--json"}, Env()).out);
    for (const auto& g : status["gpus"]) {
      if (g["index"] == index) return g["uuid"];
    }
    return "";
  }
  std::string ControlLog(const std::string& uuid) { return Slurp(mps_dir_ + "/" + uuid + "/log/stand-in.log"); }
  // Waits until the control log of `uuid` has `line` `n` times.
  std::string WaitForLine(const std::string& uuid, const std::string& line, int n = 1) {
    std::string log;
    for (int i = 0; i < 300; ++i) {
      log = ControlLog(uuid);
      if (Count(log, line) >= n) break;
      usleep(50 * 1000);
    }
    return log;
  }
  std::string WaitForFile(const std::string& path, const std::string& needle) {
    std::string got;
    for (int i = 0; i < 300 && got.find(needle) == std::string::npos; ++i) {
      got = Slurp(path);
      usleep(20000);
    }
    return got;
  }

  TempDir dir_;
  std::optional<passwd> alice_, bob_;
  std::string scenario_, gate_, socket_, mps_dir_, control_, config_;
  PrivateDaemon daemon_;
  std::vector<std::thread> holders_;
};

TEST_F(MpsE2E, AnMpsSliceStartsItsGpusControlAsItsUserAndASecondUserGoesElsewhere) {
  const std::string a_env = dir_.Write("a.env", ""), b_env = dir_.Write("b.env", "");
  chmod(a_env.c_str(), 0666);
  chmod(b_env.c_str(), 0666);
  const std::string gpu3 = Uuid(3);
  ASSERT_FALSE(gpu3.empty());

  Hold(*alice_, {"--mps", "--gpu-memory", "20GiB", "--gpu-share", "30", "-i", "3"}, a_env);
  json leases = WaitForLeases(1);
  ASSERT_EQ(leases.size(), 1u);
  EXPECT_EQ(leases[0]["mps"], true) << leases.dump();
  EXPECT_EQ(leases[0]["gpu_share_percent"], 30);
  // Marked where users look: status (the daemon's reply carries the flag and the share),
  // status --json on the slice, and leases.
  const std::string status = testing::Run({kGpuman, "status"}, Env()).out;
  EXPECT_NE(status.find("20 GiB slice, MPS 30%) since "), std::string::npos) << status;
  const json doc = json::parse(testing::Run({kGpuman, "status", "--json"}, Env()).out);
  for (const auto& g : doc["gpus"]) {
    if (g["index"] != 3) continue;
    ASSERT_EQ(g["slices"].size(), 1u) << g.dump();
    EXPECT_EQ(g["slices"][0]["mps"], true);
    EXPECT_EQ(g["slices"][0]["gpu_share_percent"], 30);
  }
  const std::string listed = testing::Run({kGpuman, "leases"}, Env()).out;
  EXPECT_NE(listed.find("3 (20 GiB, MPS 30%)"), std::string::npos) << listed;

  // The control: started once, with -d, as alice, for GPU 3 alone, in its directories.
  const std::string pipe = mps_dir_ + "/" + gpu3 + "/pipe", log = mps_dir_ + "/" + gpu3 + "/log";
  std::string control = WaitForLine(gpu3, "run -d");
  EXPECT_EQ(Count(control, "run -d"), 1) << control;
  EXPECT_EQ(Count(control, "uid " + std::to_string(alice_->pw_uid)), 1) << control;
  EXPECT_EQ(Count(control, "env CUDA_VISIBLE_DEVICES=" + gpu3), 1) << control;
  EXPECT_EQ(Count(control, "env CUDA_MPS_PIPE_DIRECTORY=" + pipe), 1) << control;
  EXPECT_EQ(Count(control, "env CUDA_MPS_LOG_DIRECTORY=" + log), 1) << control;
  struct stat st {};
  ASSERT_EQ(stat(pipe.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, alice_->pw_uid);
  EXPECT_EQ(st.st_mode & 0777, 0700u);

  // The client: the GPU, the control's directories, its pinned memory and its share.
  std::string got = WaitForFile(a_env, "CUDA_MPS_PIPE_DIRECTORY");
  EXPECT_THAT(got, HasSubstr("CUDA_VISIBLE_DEVICES=" + gpu3 + "\n"));
  EXPECT_THAT(got, HasSubstr("CUDA_MPS_PIPE_DIRECTORY=" + pipe + "\n"));
  EXPECT_THAT(got, HasSubstr("CUDA_MPS_LOG_DIRECTORY=" + log + "\n"));
  EXPECT_THAT(got, HasSubstr("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=20480M\n"));
  EXPECT_THAT(got, HasSubstr("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=30\n"));

  // Bob's MPS slice cannot have GPU 3 (MPS serves one user at a time), nor can a plain slice.
  auto there = As(*bob_, {"run", "--mps", "--gpu-memory", "20GiB", "-i", "3", "--", "/bin/true"});
  EXPECT_NE(there.exit_code, 0);
  EXPECT_THAT(there.err, HasSubstr("GPU 3 runs MPS for gpumanta; MPS serves one user at a time"));
  auto plain = As(*bob_, {"run", "--gpu-memory", "20GiB", "-i", "3", "--", "/bin/true"});
  EXPECT_NE(plain.exit_code, 0);
  EXPECT_THAT(plain.err, HasSubstr("GPU 3 runs MPS for gpumanta"));
  // Anywhere, it goes to another GPU, whose control runs as bob and quits with his command.
  Hold(*bob_, {"--mps", "--gpu-memory", "20GiB"}, b_env);
  got = WaitForFile(b_env, "CUDA_MPS_PIPE_DIRECTORY");
  ASSERT_THAT(got, HasSubstr("CUDA_VISIBLE_DEVICES=GPU-"));
  EXPECT_THAT(got, ::testing::Not(HasSubstr(gpu3)));
  const size_t at = got.find("CUDA_VISIBLE_DEVICES=") + std::strlen("CUDA_VISIBLE_DEVICES=");
  const std::string bobs_gpu = got.substr(at, got.find('\n', at) - at);
  EXPECT_EQ(Count(ControlLog(bobs_gpu), "uid " + std::to_string(bob_->pw_uid)), 1);
  // Alice's second MPS slice joins her GPU's control (started once only).
  EXPECT_EQ(As(*alice_, {"run", "--mps", "--gpu-memory", "10GiB", "-i", "3", "--", "/bin/true"}).exit_code, 0);
  EXPECT_EQ(Count(ControlLog(gpu3), "run -d"), 1);
  EXPECT_EQ(Count(ControlLog(gpu3), "stdin quit"), 0) << "alice's first lease still lives";

  // Their leases end: each control is told "quit" on its stdin, as its user.
  dir_.Write("gate", "");
  for (auto& t : holders_) t.join();
  holders_.clear();
  control = WaitForLine(gpu3, "stdin quit");
  EXPECT_EQ(Count(control, "stdin quit"), 1) << control;
  EXPECT_EQ(Count(control, "uid " + std::to_string(alice_->pw_uid)), 2) << control;  // -d, then quit
  EXPECT_EQ(Count(WaitForLine(bobs_gpu, "stdin quit"), "stdin quit"), 1);
}

TEST_F(MpsE2E, ADaemonKilledAndRestartedFindsTheLiveControlAndStopsAnOrphan) {
  const std::string a_env = dir_.Write("a.env", "");
  chmod(a_env.c_str(), 0666);
  const std::string gpu3 = Uuid(3);
  Hold(*alice_, {"--mps", "--gpu-memory", "20GiB", "-i", "3"}, a_env);
  ASSERT_EQ(WaitForLeases(1).size(), 1u);
  ASSERT_EQ(Count(WaitForLine(gpu3, "run -d"), "run -d"), 1);

  // kill -9, restart: the control of the live lease is found, not started again.
  ASSERT_EQ(daemon_.Stop(SIGKILL), 128 + SIGKILL);
  ASSERT_TRUE(StartDaemon());
  ASSERT_EQ(Leases().size(), 1u);  // answered: the restart's reconciliation is done
  EXPECT_EQ(Count(ControlLog(gpu3), "run -d"), 1) << ControlLog(gpu3);
  EXPECT_EQ(Count(ControlLog(gpu3), "stdin quit"), 0);

  // kill -9 again; the lease ends while no daemon runs (its processes killed too, so
  // that no `run` waits to give it back): the next daemon stops the orphan.
  json leases = Leases();
  ASSERT_EQ(leases.size(), 1u);
  ASSERT_EQ(daemon_.Stop(SIGKILL), 128 + SIGKILL);
  for (const auto& p : leases[0]["processes"]) kill(p["pid"].get<pid_t>(), SIGKILL);
  dir_.Write("gate", "");
  for (auto& t : holders_) t.join();
  holders_.clear();
  EXPECT_EQ(Count(ControlLog(gpu3), "stdin quit"), 0);
  ASSERT_TRUE(StartDaemon());
  // Gone at once, or within a tick: the holder's `sleep 0.05` child, orphaned by the kill,
  // may still be in the lease's cgroup (a live process of the lease) for a moment.
  ASSERT_EQ(WaitForLeases(0).size(), 0u);
  const std::string control = WaitForLine(gpu3, "stdin quit");
  EXPECT_EQ(Count(control, "stdin quit"), 1) << control << Slurp(dir_.Join("daemon.err"));
}

TEST_F(MpsE2E, LimitsAreOneLineEach) {
  // --gpu-share without --mps, a bad percent: argument errors (run: 125).
  auto r = As(*alice_, {"run", "--gpu-share", "50", "--gpu-memory", "10GiB", "--", "/bin/true"});
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_EQ(r.err, "gpuman: error: --gpu-share needs --mps\n");
  r = As(*alice_, {"select", "--mps", "--gpu-share", "0", "--gpu-memory", "10GiB"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "gpuman: error: --gpu-share must be a percent from 1 to 100, got 0\n");
  // Without the daemon's control program: refused before anything is leased.
  dir_.Write("config.toml", "[share]\nmps_control = \"" + dir_.Join("nowhere/nvidia-cuda-mps-control") + "\"\n");
  daemon_.Stop();
  ASSERT_TRUE(StartDaemon());
  r = As(*alice_, {"run", "--mps", "--gpu-memory", "10GiB", "--", "/bin/true"});
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_THAT(r.err, HasSubstr("gpuman: error: --mps: MPS is not available here: "));
  EXPECT_THAT(r.err, HasSubstr("nowhere/nvidia-cuda-mps-control"));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  r = As(*alice_, {"submit", "--mps", "--gpu-memory", "10GiB", "--output", "/dev/null", "--", "/bin/true"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--mps: MPS is not available here"));
  EXPECT_EQ(Leases().size(), 0u);
  // Without a daemon: the machine lease table cannot run MPS.
  daemon_.Stop();
  socket_.clear();
  ASSERT_EQ(testing::Run({kGpuman, "leases"}, Env()).exit_code, 0);  // root sets the machine table up
  r = As(*alice_, {"run", "--mps", "--gpu-memory", "10GiB", "--", "/bin/true"});
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_THAT(r.err, HasSubstr("--mps needs the gpuman daemon"));
}

}  // namespace
}  // namespace gpuman::e2e
