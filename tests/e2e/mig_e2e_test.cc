// End-to-end tests of MIG devices as lease units (docs/share.md, "MIG", issue 25): on the
// h100-mig stand-in (GPU 0 split 3g.40gb + 2x 2g.20gb, GPUs 1-3 whole) two users lease the
// two 2g.20gb MIG devices of GPU 0, a third request for one waits, a whole-GPU request
// never gets GPU 0, the child gets CUDA_VISIBLE_DEVICES=MIG-<uuid>, and an unknown profile
// is refused with the list. Through the machine lease table and through a daemon. Real binaries, the stand-in NVML; the two-user test runs as root only.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <thread>

#include <gmock/gmock.h>

#include "e2e/e2e_util.h"
#include "e2e/users.h"

namespace gpuman::e2e {
namespace {

using nlohmann::json;
using testing::TempDir;

class MigE2E : public ::testing::TestWithParam<bool> {  // true: through a daemon
 protected:
  void SetUp() override {
    chmod(dir_.path().c_str(), 0755);
    lease_dir_ = dir_.Join("leases");
    scenario_ = IdleScenario(dir_, "h100-mig");
    chmod(scenario_.c_str(), 0644);
    gate_ = dir_.Join("gate");
    if (GetParam()) {
      socket_ = dir_.Join("gpuman.sock");
      auto env = Env();
      env["GPUMAN_SIMULATE"] = "";
      ASSERT_TRUE(daemon_.Start({.scenario = scenario_, .socket = socket_, .state_dir = dir_.Join("state"), .env = env}));
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
  // opens; the child writes its CUDA_VISIBLE_DEVICES to `out`.
  void Hold(const passwd& who, std::vector<std::string> args, const std::string& out) {
    std::vector<std::string> argv = {kGpuman, "run"};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.insert(argv.end(), {"--", "/bin/sh", "-c",
                             "env | grep -E '^CUDA_VISIBLE_DEVICES=' > \"$1\"; "
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

TEST_P(MigE2E, TwoUsersLeaseTwoMigDevicesOfOneGpuAndAWholeRequestNeverGetsIt) {
  if (getuid() != 0) GTEST_SKIP() << "needs root to create users";
  auto alice = EnsureTestUser("gpumanta");
  auto bob = EnsureTestUser("gpumantb");
  if (!alice || !bob) GTEST_SKIP() << "useradd is not available";
  if (!GetParam()) ASSERT_EQ(Gpuman({"leases"}).exit_code, 0);  // root sets the machine table up
  const std::string a_env = dir_.Write("a.env", ""), b_env = dir_.Write("b.env", "");
  chmod(a_env.c_str(), 0666);
  chmod(b_env.c_str(), 0666);

  Hold(*alice, {"--mig", "2g.20gb"}, a_env);
  ASSERT_EQ(WaitForLeases(1).size(), 1u);
  Hold(*bob, {"--mig", "2g.20gb"}, b_env);
  json leases = WaitForLeases(2);
  ASSERT_EQ(leases.size(), 2u) << leases.dump();
  std::set<std::string> units;
  for (const auto& l : leases) {
    EXPECT_EQ(l["gpus"][0]["index"], 0) << l.dump();  // the parent GPU's index
    units.insert(l["gpus"][0]["uuid"].get<std::string>());
  }
  EXPECT_EQ(units, (std::set<std::string>{"MIG-7a3e5c2b-14d6-5f80-b9c2-1d3e4f5a6b72",
                                          "MIG-c84f6d3a-25e7-5a91-8ad3-2e4f5a6b7c83"}));

  // A third 2g.20gb: both are leased (busy, exit 4 for select).
  auto third = Gpuman({"select", "--mig", "2g.20gb"});
  EXPECT_EQ(third.exit_code, 4) << third.err;
  // A whole GPU never is GPU 0: -n 4 can never be had, -n 3 gets 1-3.
  auto four = Gpuman({"select", "-n", "4"});
  EXPECT_NE(four.exit_code, 0);
  EXPECT_THAT(four.err, ::testing::HasSubstr("GPU 0 in MIG mode"));
  auto three = Gpuman({"select", "-n", "3", "--format", "index"});
  EXPECT_EQ(three.exit_code, 0) << three.err;
  EXPECT_THAT(three.out, ::testing::Not(::testing::HasSubstr("0")));
  // The 3g.40gb is still free, by profile and by UUID.
  auto by_uuid = Gpuman({"run", "--gpus", "MIG-2f6d1b0a-93c4-5e7f-a8b1-0c2d3e4f5a61", "--", "/bin/sh", "-c",
                         "echo $CUDA_VISIBLE_DEVICES"});
  EXPECT_EQ(by_uuid.exit_code, 0) << by_uuid.err;
  EXPECT_EQ(by_uuid.out, "MIG-2f6d1b0a-93c4-5e7f-a8b1-0c2d3e4f5a61\n");
  // An unknown profile: one line listing the profiles there are.
  auto unknown = Gpuman({"run", "--mig", "1g.10gb", "--", "/bin/true"});
  EXPECT_NE(unknown.exit_code, 0);
  EXPECT_THAT(unknown.err, ::testing::HasSubstr("--mig: no MIG device of profile 1g.10gb here; the profiles here: 2g.20gb, 3g.40gb"));

  // Each child was given its MIG device.
  std::string a, b;
  for (int i = 0; i < 200 && (a.empty() || b.empty()); ++i) {
    a = Slurp(a_env);
    b = Slurp(b_env);
    usleep(20000);
  }
  EXPECT_THAT(a, ::testing::StartsWith("CUDA_VISIBLE_DEVICES=MIG-"));
  EXPECT_THAT(b, ::testing::StartsWith("CUDA_VISIBLE_DEVICES=MIG-"));
  EXPECT_NE(a, b);

  // Status shows the two MIG leases.
  json status = json::parse(Gpuman({"status", "--json"}).out);
  int leased = 0;
  for (const auto& m : status["gpus"][0]["mig_devices"]) leased += m["lease"].is_null() ? 0 : 1;
  EXPECT_EQ(leased, 2) << status["gpus"][0].dump();
  // top shows which MIG devices are taken and by whom (the 3g.40gb run above has ended), and
  // the two leases' GPUs by parent index and profile; topo marks GPU 0's MIG devices.
  auto top = Gpuman({"top", "--once"});
  EXPECT_EQ(top.exit_code, 0) << top.err;
  EXPECT_THAT(top.out, ::testing::HasSubstr("MIG 2/3 leased: 2g.20gb gpumant")) << top.out;
  EXPECT_THAT(top.out, ::testing::HasSubstr("0:2g.20gb")) << top.out;
  auto topo = Gpuman({"topo"});
  EXPECT_EQ(topo.exit_code, 0) << topo.err;
  EXPECT_THAT(topo.out, ::testing::HasSubstr("3g.40gb, 2g.20gb x2\n")) << topo.out;
}

// Queued MIG jobs (submit --mig, schema 11): a root daemon runs gpumanta's jobs on the two
// 2g.20gb MIG devices of h100-mig's GPU 0 with CUDA_VISIBLE_DEVICES=MIG-<uuid>; a third
// waits with why and starts when one ends; an absent profile is refused at submit with
// run's line; show/queue --json carry request.mig_profile.
TEST(MigQueueE2E, QueuedMigJobsRunOnMigDevicesAsTheirOwnerAndATheThirdWaitsWithWhy) {
  if (getuid() != 0) GTEST_SKIP() << "needs root: a system daemon running jobs as their owners";
  auto alice = EnsureTestUser("gpumanta");
  if (!alice) GTEST_SKIP() << "useradd is not available";
  TempDir dir;
  chmod(dir.path().c_str(), 0755);
  const std::string scenario = IdleScenario(dir, "h100-mig");
  chmod(scenario.c_str(), 0644);
  const std::string socket = dir.Join("gpuman.sock"), err = dir.Join("daemon.err");
  auto env = CleanEnv(dir.Join("leases"));
  env["PATH"] = "/usr/bin:/bin";
  PrivateDaemon daemon;
  ASSERT_TRUE(daemon.Start({.scenario = scenario, .socket = socket, .state_dir = dir.Join("state"), .env = env,
                            .stderr_path = err}));
  env["GPUMAN_SOCKET"] = socket;
  env["HOME"] = "/nonexistent";
  const std::string shared = dir.Join("shared");
  ASSERT_EQ(mkdir(shared.c_str(), 0777), 0);
  chmod(shared.c_str(), 0777);
  const std::string gate = shared + "/gate";
  auto submit = [&](const std::string& profile) {
    return RunAsUser(*alice,
                     {kGpuman, "submit", "--mig", profile, "--output", shared + "/job-%j.log", "--", "/bin/sh", "-c",
                      "env | grep -E '^CUDA_VISIBLE_DEVICES=' > \"$1\"; id -un >> \"$1\"; "
                      "while [ ! -e \"$0\" ]; do sleep 0.05; done",
                      gate, shared + "/env-" + profile + "-" + std::to_string(rand())},
                     env, shared);
  };
  for (int i = 0; i < 3; ++i) {
    auto r = submit("2g.20gb");
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  // Refused at once: a profile no MIG device has, in run's words (exit 2).
  auto absent = submit("1g.10gb");
  EXPECT_EQ(absent.exit_code, 2) << absent.err;
  EXPECT_THAT(absent.err, ::testing::HasSubstr("--mig: no MIG device of profile 1g.10gb here; the profiles here: "
                                               "2g.20gb, 3g.40gb"));
  EXPECT_EQ(std::count(absent.err.begin(), absent.err.end(), '\n'), 1) << absent.err;

  std::string reason;
  for (int i = 0; i < 600; ++i) {
    json q = json::parse(testing::Run({kGpuman, "queue", "--json"}, env).out);
    int running = 0;
    for (const auto& j : q["jobs"]) {
      if (j["state"] == "running") ++running;
      if (j["id"] == 3 && j["state"] == "queued" && j["reason"].is_string()) reason = j["reason"];
    }
    if (running == 2 && !reason.empty()) break;
    usleep(50 * 1000);
  }
  EXPECT_EQ(reason, "needs 1 MIG device of profile 2g.20gb; all 2 are leased") << Slurp(err);
  auto shown = testing::Run({kGpuman, "show", "3", "--json"}, env);
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_EQ(json::parse(shown.out)["request"]["mig_profile"], "2g.20gb") << shown.out;
  auto shown_text = testing::Run({kGpuman, "show", "3"}, env);
  EXPECT_THAT(shown_text.out, ::testing::HasSubstr("-n 1 --mig 2g.20gb")) << shown_text.out;
  EXPECT_THAT(testing::Run({kGpuman, "queue"}, env).out, ::testing::HasSubstr("all 2 are leased"));

  // The two running jobs each got one 2g.20gb MIG device, by UUID, and ran as gpumanta.
  const std::set<std::string> two_g = {"MIG-7a3e5c2b-14d6-5f80-b9c2-1d3e4f5a6b72",
                                       "MIG-c84f6d3a-25e7-5a91-8ad3-2e4f5a6b7c83"};
  std::set<std::string> seen;
  for (int i = 0; i < 600 && seen.size() < 2; ++i) {
    seen.clear();
    for (const auto& entry : std::filesystem::directory_iterator(shared)) {
      const std::string name = entry.path().filename().string();
      if (!name.starts_with("env-")) continue;
      const std::string text = Slurp(entry.path().string());
      if (text.find("gpumanta\n") == std::string::npos) continue;
      EXPECT_THAT(text, ::testing::StartsWith("CUDA_VISIBLE_DEVICES=MIG-")) << text;
      seen.insert(text.substr(21, text.find('\n') - 21));
    }
    usleep(50 * 1000);
  }
  EXPECT_EQ(seen, two_g) << Slurp(err);
  json leases = json::parse(testing::Run({kGpuman, "leases", "--json"}, env).out)["leases"];
  ASSERT_EQ(leases.size(), 2u) << leases.dump();
  for (const auto& l : leases) {
    EXPECT_EQ(l["kind"], "job");
    EXPECT_EQ(l["gpus"][0]["index"], 0) << l.dump();  // the parent GPU's index
  }

  // When they end, the third runs.
  dir.Write("shared/gate", "");
  std::string state;
  for (int i = 0; i < 600 && state != "succeeded"; ++i) {
    auto r = testing::Run({kGpuman, "show", "3", "--json"}, env);
    if (r.exit_code == 0) state = json::parse(r.out).value("state", "");
    usleep(50 * 1000);
  }
  EXPECT_EQ(state, "succeeded") << Slurp(err);
}

// Without a daemon (false), and through one (true), whose confinement holds a MIG lease to
// its parent GPU's device node.
INSTANTIATE_TEST_SUITE_P(Paths, MigE2E, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Daemon" : "MachineTable"; });

}  // namespace
}  // namespace gpuman::e2e
