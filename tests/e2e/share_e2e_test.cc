// End-to-end tests of memory slices (docs/share.md, issue 25): two users' 30 GiB slices
// share one 80 GiB stand-in GPU and a third waits; a whole-GPU request waits for the
// slices; the environment a slice's process gets; the queue's reason; through the machine
// lease table without a daemon and through a daemon. Real binaries, the stand-in NVML;
// the two-user tests run as root only.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <sstream>
#include <thread>

#include <gmock/gmock.h>

#include "e2e/e2e_util.h"
#include "e2e/users.h"

namespace gpuman::e2e {
namespace {

using nlohmann::json;
using testing::TempDir;

constexpr int64_t kGiB = int64_t{1} << 30;

class ShareE2E : public ::testing::TestWithParam<bool> {  // true: through a daemon
 protected:
  void SetUp() override {
    chmod(dir_.path().c_str(), 0755);
    lease_dir_ = dir_.Join("leases");
    scenario_ = IdleScenario(dir_, "h100-8");  // eight idle 80 GiB H100s
    chmod(scenario_.c_str(), 0644);
    gate_ = dir_.Join("gate");
    if (GetParam()) {
      socket_ = dir_.Join("gpuman.sock");
      auto env = Env();
      env["GPUMAN_SIMULATE"] = "";
      env["GPUMAN_FAKE_NVML_LIMITS_LOG"] = dir_.Join("limits.log");  // the stand-in's record
      ASSERT_TRUE(daemon_.Start({.scenario = scenario_, .socket = socket_, .state_dir = dir_.Join("state"), .env = env,
                                 .stderr_path = dir_.Join("daemon.err")}));
    }
  }
  void TearDown() override {
    dir_.Write("gate", "");
    for (auto& t : holders_) t.join();
    daemon_.Stop();
  }

  std::map<std::string, std::string> Env() {
    auto env = CleanEnv(lease_dir_);
    env["GPUMAN_LEASE_DIR"] = lease_dir_;
    env["GPUMAN_SIMULATE"] = scenario_;
    env["PATH"] = "/usr/bin:/bin";
    env["HOME"] = "/nonexistent";
    if (!socket_.empty()) env["GPUMAN_SOCKET"] = socket_;
    return env;
  }
  testing::RunResult Gpuman(std::vector<std::string> args) {
    args.insert(args.begin(), kGpuman);
    return testing::Run(args, Env());
  }
  // `gpuman run ARGS -- sh` as `who` in the background, holding its lease until the gate
  // opens; the child writes its slice variables to `out`.
  void Hold(const passwd& who, std::vector<std::string> args, const std::string& out) {
    std::vector<std::string> argv = {kGpuman, "run"};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.insert(argv.end(), {"--", "/bin/sh", "-c",
                             "env | grep -E '^(CUDA_VISIBLE_DEVICES|GPUMAN_GPU_MEMORY|XLA_|TF_FORCE|PYTORCH_CUDA)' | sort > \"$1\"; "
                             "while [ ! -e \"$0\" ]; do sleep 0.05; done",
                             gate_, out});
    const auto env = Env();
    holders_.emplace_back([who, argv, env] { (void)RunAsUser(who, argv, env); });
  }
  json WaitForLeases(size_t n) {
    json leases;
    for (int i = 0; i < 600; ++i) {
      leases = json::parse(Gpuman({"leases", "--json"}).out)["leases"];
      if (leases.size() == n) break;
      usleep(50 * 1000);
    }
    return leases;
  }

  TempDir dir_;
  std::string lease_dir_, scenario_, socket_, gate_;
  PrivateDaemon daemon_;
  std::vector<std::thread> holders_;
};

TEST_P(ShareE2E, TwoUsersSlicesShareOneGpuAndAThirdAndAWholeRequestWait) {
  if (getuid() != 0) GTEST_SKIP() << "needs root to create users";
  auto alice = EnsureTestUser("gpumanta");
  auto bob = EnsureTestUser("gpumantb");
  if (!alice || !bob) GTEST_SKIP() << "useradd is not available";
  if (!GetParam()) ASSERT_EQ(Gpuman({"leases"}).exit_code, 0);  // root sets the machine table up
  const std::string a_env = dir_.Write("a.env", ""), b_env = dir_.Write("b.env", "");
  chmod(a_env.c_str(), 0666);
  chmod(b_env.c_str(), 0666);

  // Two users, 30 GiB each, confined to GPU 3 so that a third user has no other choice.
  Hold(*alice, {"--gpu-memory", "30GiB", "-i", "3"}, a_env);
  ASSERT_EQ(WaitForLeases(1).size(), 1u);
  Hold(*bob, {"--gpu-memory", "30G", "-i", "3"}, b_env);
  json leases = WaitForLeases(2);
  ASSERT_EQ(leases.size(), 2u) << leases.dump();
  for (const auto& l : leases) {
    EXPECT_EQ(l["gpus"][0]["index"], 3) << l.dump();
    EXPECT_EQ(l["gpu_memory_bytes"], 30 * kGiB) << l.dump();
  }
  EXPECT_NE(leases[0]["user"], leases[1]["user"]);

  // A third 30 GiB slice of GPU 3 does not fit (19.6 GiB left); the reason says so.
  auto third = Gpuman({"run", "--gpu-memory", "30GiB", "-i", "3", "--", "/bin/true"});
  EXPECT_NE(third.exit_code, 0);
  EXPECT_THAT(third.err, ::testing::HasSubstr("GPU 3 less than 30 GiB of declared memory free"));
  // A 19 GiB one still does (the stand-in H100 has 79.6 GiB); a whole GPU 3 does not: the
  // slices hold it.
  EXPECT_EQ(Gpuman({"run", "--gpu-memory", "19GiB", "-i", "3", "--", "/bin/true"}).exit_code, 0);
  auto whole = Gpuman({"run", "-i", "3", "--", "/bin/true"});
  EXPECT_NE(whole.exit_code, 0);
  EXPECT_THAT(whole.err, ::testing::HasSubstr("sliced"));
  // Elsewhere a slice goes beside the others (best fit), not onto a fresh GPU.
  auto where = Gpuman({"select", "--gpu-memory", "10GiB", "--format", "index"});
  EXPECT_EQ(where.exit_code, 0) << where.err;
  EXPECT_EQ(where.out, "3\n");
  // A slice bigger than any GPU can never be had: refused at once.
  auto huge = Gpuman({"run", "--gpu-memory", "100GiB", "--wait", "--", "/bin/true"});
  EXPECT_NE(huge.exit_code, 0);
  EXPECT_THAT(huge.err, ::testing::HasSubstr("can ever be eligible"));

  // What the slice's process was given.
  std::string got;
  for (int i = 0; i < 200 && got.find("PYTORCH") == std::string::npos; ++i) {
    got = Slurp(a_env);
    usleep(20000);
  }
  EXPECT_THAT(got, ::testing::HasSubstr("GPUMAN_GPU_MEMORY=" + std::to_string(30 * kGiB)));
  EXPECT_THAT(got, ::testing::HasSubstr("XLA_PYTHON_CLIENT_MEM_FRACTION=0.376"));  // 30 of 79.6 GiB
  EXPECT_THAT(got, ::testing::HasSubstr("XLA_PYTHON_CLIENT_PREALLOCATE=false"));
  EXPECT_THAT(got, ::testing::HasSubstr("TF_FORCE_GPU_ALLOW_GROWTH=true"));
  EXPECT_THAT(got, ::testing::HasSubstr("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"));

  // Status shows both slices of GPU 3.
  json status = json::parse(Gpuman({"status", "--json"}).out);
  for (const auto& g : status["gpus"]) {
    if (g["index"] != 3) continue;
    EXPECT_EQ(g["declared_memory_bytes"], 60 * kGiB) << g.dump();
    EXPECT_EQ(g["slices"].size(), 2u);
    EXPECT_TRUE(g["lease"].is_null());
  }
}

TEST_P(ShareE2E, TheQueuePacksSliceJobsAndSaysWhatMemoryIsMissing) {
  if (!GetParam()) GTEST_SKIP() << "the queue needs the daemon";
  const std::string out = dir_.Join("job-%j.log");
  // Each job waits for the gate, or ends when the test's directory is gone (a job the
  // daemon's stop leaves running must not outlive the test).
  for (int i = 0; i < 3; ++i) {
    auto r = Gpuman({"submit", "--gpu-memory", "30GiB", "-i", "5", "--output", out, "--", "/bin/sh", "-c",
                     "echo $CUDA_VISIBLE_DEVICES $GPUMAN_GPU_MEMORY; while [ ! -e \"$0\" ] && [ -d \"${0%/*}\" ]; do sleep 0.05; done", gate_});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  std::string reason;
  for (int i = 0; i < 600; ++i) {
    json q = json::parse(Gpuman({"queue", "--json"}).out);
    for (const auto& j : q["jobs"]) {
      if (j["id"] == 3 && j["state"] == "queued" && j.contains("reason")) reason = j["reason"];
    }
    if (reason.find("most free") != std::string::npos) break;
    usleep(50000);
  }
  EXPECT_EQ(reason, "needs 30 GiB on one GPU; the most free declared memory is 19.6 GiB on GPU 5");
  json leases = WaitForLeases(2);
  ASSERT_EQ(leases.size(), 2u);
  for (const auto& l : leases) EXPECT_EQ(l["gpu_memory_bytes"], 30 * kGiB);
  // Confined (a root daemon where the kernel allows), each job's cgroup is held to its slice
  // by the driver too: nvmlDeviceSetMemoryLimits_v1 with the cgroup's path, hard = 30 GiB.
  if (Slurp(dir_.Join("daemon.err")).find("device confinement cgroup") != std::string::npos) {
    std::string limits;
    for (int i = 0; i < 200 && std::count(limits.begin(), limits.end(), '\n') < 2; ++i) {
      limits = Slurp(dir_.Join("limits.log"));
      usleep(20000);
    }
    ASSERT_EQ(std::count(limits.begin(), limits.end(), '\n'), 2) << limits;
    std::istringstream lines(limits);
    std::string uuid, cgroup;
    unsigned long long soft = 1, hard = 0;
    while (lines >> uuid >> cgroup >> soft >> hard) {
      EXPECT_EQ(uuid, leases[0]["gpus"][0]["uuid"].get<std::string>()) << limits;
      EXPECT_THAT(cgroup, ::testing::MatchesRegex("/sys/fs/cgroup/.*/lease-[0-9]+")) << limits;
      EXPECT_EQ(soft, 0u);
      EXPECT_EQ(hard, static_cast<unsigned long long>(30 * kGiB));
    }
    EXPECT_THAT(Slurp(dir_.Join("daemon.err")),
                ::testing::HasSubstr("memory slices are held by the driver (nvmlDeviceSetMemoryLimits_v1) as well"));
  }
  // Refused at submit: bigger than any GPU.
  auto huge = Gpuman({"submit", "--gpu-memory", "81GiB", "--", "/bin/true"});
  EXPECT_NE(huge.exit_code, 0);
  EXPECT_THAT(huge.err, ::testing::HasSubstr("total memory below 81 GiB"));
}

// A queue job whose process grows past its slice (the stand-in reports 30 GiB for it on a
// 20 GiB slice) under `[share] over_limit = "kill"`: SIGTERM after the grace period, the
// job failed with the reason in `show`, each step in `history --slices`.
TEST(ShareOverLimitE2E, AJobOverItsSliceIsEndedWithTheReasonInShowAndHistory) {
  if (getuid() != 0) GTEST_SKIP() << "needs root: a system daemon running jobs as their owners";
  auto alice = EnsureTestUser("gpumanta");
  if (!alice) GTEST_SKIP() << "useradd is not available";
  TempDir dir;
  chmod(dir.path().c_str(), 0755);
  const std::string scenario = IdleScenario(dir, "h100-8");
  chmod(scenario.c_str(), 0644);
  const std::string config = dir.Write("config.toml", "[share]\nover_limit = \"kill\"\nover_limit_grace = \"1s\"\n");
  chmod(config.c_str(), 0644);
  const std::string socket = dir.Join("gpuman.sock"), err = dir.Join("daemon.err");
  auto env = CleanEnv(dir.Join("leases"));
  env["GPUMAN_CONFIG"] = config;
  env["PATH"] = "/usr/bin:/bin";
  PrivateDaemon daemon;
  ASSERT_TRUE(daemon.Start({.scenario = scenario, .socket = socket, .state_dir = dir.Join("state"), .env = env,
                            .stderr_path = err}));
  env["GPUMAN_SOCKET"] = socket;
  env["HOME"] = "/nonexistent";
  const std::string shared = dir.Join("shared");
  ASSERT_EQ(mkdir(shared.c_str(), 0777), 0);
  chmod(shared.c_str(), 0777);
  const std::string pid_file = shared + "/pid";
  auto submitted = RunAsUser(*alice,
                             {kGpuman, "submit", "--gpu-memory", "20GiB", "-i", "4", "--output", shared + "/job.log",
                              "--", "/bin/sh", "-c", "echo $$ > \"$0\"; exec sleep 60", pid_file},
                             env, shared);
  ASSERT_EQ(submitted.exit_code, 0) << submitted.err;
  std::string pid_text;
  for (int i = 0; i < 600 && pid_text.find('\n') == std::string::npos; ++i) {
    usleep(50 * 1000);
    pid_text = Slurp(pid_file);
  }
  ASSERT_NE(pid_text.find('\n'), std::string::npos) << "the job did not start: " << Slurp(err);
  const int pid = std::stoi(pid_text);
  json doc = json::parse(Slurp(scenario));
  doc["gpus"][4]["processes"] = json::array({{{"pid", pid}, {"used_memory", 30 * kGiB}, {"type", "compute"}}});
  const std::string rewritten = dir.Write("rewritten.json", doc.dump(2));
  ASSERT_EQ(rename(rewritten.c_str(), scenario.c_str()), 0);
  chmod(scenario.c_str(), 0644);
  json shown;
  for (int i = 0; i < 600; ++i) {
    auto r = testing::Run({kGpuman, "show", "1", "--json"}, env);
    if (r.exit_code == 0) shown = json::parse(r.out);
    if (shown.value("state", "") == "failed") break;
    usleep(50 * 1000);
  }
  ASSERT_EQ(shown.value("state", ""), "failed") << shown.dump() << "\n" << Slurp(err);
  EXPECT_EQ(shown.value("reason", ""),
            "over its GPU memory slice: its processes on GPU 4 used 30 GiB of the 20 GiB declared, and the "
            "machine's [share] over_limit is \"kill\"; killed by signal 15 (TERM)");
  EXPECT_EQ(shown.value("exit_code", 0), 128 + SIGTERM);
  auto text = testing::Run({kGpuman, "show", "1"}, env);
  EXPECT_THAT(text.out, ::testing::HasSubstr("over its GPU memory slice"));
  const std::string log = Slurp(err);
  EXPECT_THAT(log, ::testing::HasSubstr("slice over its memory: gpumanta's processes on GPU 4 use 30720 MiB"));
  EXPECT_THAT(log, ::testing::HasSubstr("sent SIGTERM to process " + std::to_string(pid)));
  auto history = testing::Run({kGpuman, "history", "--slices", "--json", "--db", dir.Join("state/history.db")}, env);
  ASSERT_EQ(history.exit_code, 0) << history.err;
  std::vector<std::string> events;
  const json recorded = json::parse(history.out);
  for (const auto& e : recorded["slices"]) {
    events.push_back(e["event"]);
    EXPECT_EQ(e["user"], "gpumanta");
    EXPECT_EQ(e["gpu_index"], 4);
    EXPECT_EQ(e["job_id"], 1) << e.dump();
    EXPECT_EQ(e["declared_bytes"], 20 * kGiB);
    if (e["event"] == "term") {
      EXPECT_EQ(e["pids"], json::array({pid}));
    }
  }
  ASSERT_GE(events.size(), 2u) << history.out;
  EXPECT_EQ(events[0], "over");
  EXPECT_EQ(events[1], "term");
  auto table = testing::Run({kGpuman, "history", "--slices", "--db", dir.Join("state/history.db")}, env);
  EXPECT_THAT(table.out, ::testing::HasSubstr("gpumanta"));
  EXPECT_THAT(table.out, ::testing::HasSubstr("30 GiB"));
  daemon.Stop();
}

INSTANTIATE_TEST_SUITE_P(Paths, ShareE2E, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Daemon" : "MachineTable"; });

}  // namespace
}  // namespace gpuman::e2e
