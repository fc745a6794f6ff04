// `gpuman submit --backend slurm` against a real Slurm 22.05 with accounting
// (tests/slurm/slurm-single-node.sh with SLURM_ACCOUNTING=1: mariadb + slurmdbd), 8 fake
// GPUs, ConstrainDevices=yes, and the stand-in NVML for the job's `gpuman run` (sbatch
// exports GPUMAN_SIMULATE to the job). Root only; skipped otherwise. ctest label `slurm`.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "e2e/e2e_util.h"
#include "e2e/users.h"

namespace gpuman::e2e {
namespace {

using ::testing::HasSubstr;

const std::string kRecipe = std::string(GPUMAN_TEST_SOURCE_DIR) + "/slurm/slurm-single-node.sh";

std::map<std::string, std::string> RecipeEnv() {
  return {{"SLURM_FAKE_GPUS", "8"}, {"SLURM_NODE_CPUS", "8"}, {"SLURM_CONSTRAIN_DEVICES", "1"},
          {"SLURM_ACCOUNTING", "1"}, {"SLURM_CONF", "/etc/slurm/slurm.conf"}};
}

testing::RunResult Sh(const std::string& script) {
  std::map<std::string, std::string> env = RecipeEnv();
  return testing::Run({"/bin/bash", "-c", script}, env);
}

class SlurmSubmitE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root: the Slurm recipe runs slurmd, slurmdbd and munged";
    const auto started = Sh("'" + kRecipe + "' start");
    ASSERT_EQ(started.exit_code, 0) << "slurm recipe failed:\n" << started.out << started.err;
    ASSERT_THAT(started.out, HasSubstr("accounting=1"));
    is_started_ = true;
    chmod(work_.path().c_str(), 0755);
    // h100-8 without processes: the job's `gpuman run` finds its GPUs free.
    std::ifstream in(kScenarios + "/h100-8.json");
    nlohmann::json s = nlohmann::json::parse(in);
    for (auto& gpu : s["gpus"]) {
      gpu["processes"] = nlohmann::json::array();
      uuids_.push_back(gpu["uuid"]);
    }
    scenario_ = work_.Write("h100-8-idle.json", s.dump(2));
  }
  void TearDown() override {
    if (is_started_) Sh("'" + kRecipe + "' stop");
  }

  std::map<std::string, std::string> Env() {
    auto env = CleanEnv(state_.path());
    env["GPUMAN_SIMULATE"] = scenario_;
    env["SLURM_JOB_ID"] = "";
    for (const auto& [k, v] : RecipeEnv()) env[k] = v;
    return env;
  }
  // gpuman ARGS in the work directory (the jobs' directory and logs).
  testing::RunResult Gpuman(std::vector<std::string> args) {
    std::vector<std::string> argv = {"/bin/sh", "-c", "cd \"$0\" && exec \"$@\"", work_.path(), kGpuman};
    argv.insert(argv.end(), args.begin(), args.end());
    return testing::Run(argv, Env());
  }
  std::string Submit(std::vector<std::string> args) {
    args.insert(args.begin(), {"submit", "--backend", "slurm"});
    const auto r = Gpuman(args);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    std::string id = r.out;
    while (!id.empty() && id.back() == '\n') id.pop_back();
    EXPECT_EQ(id.rfind("slurm:", 0), 0u) << id;
    return id;
  }
  nlohmann::json Show(const std::string& id) {
    const auto r = Gpuman({"show", id, "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out, nullptr, false);
  }

  testing::TempDir state_, work_;
  std::string scenario_;
  std::vector<std::string> uuids_;
  bool is_started_ = false;
};

TEST_F(SlurmSubmitE2E, AfterRunsInOrderAndAccountingShowsTheGpus) {
  // A: two GPUs, hostile arguments that must reach the job exactly (sbatch's script is a
  // shell script, and #SBATCH lines in it are directives).
  const std::vector<std::string> hostile = {"it's", "$(touch pwned)", "`touch pwned`", "a  b", "*",
                                            "x\n#SBATCH --gres=gpu:8", "\\"};
  std::vector<std::string> a_args = {"-n", "2", "--name", "alpha", "--time-limit", "2m", "--",
                                     "/bin/sh", "-c", "sleep 2; printf '[%s]\\n' \"$@\"; printenv CUDA_VISIBLE_DEVICES", "sh"};
  a_args.insert(a_args.end(), hostile.begin(), hostile.end());
  const std::string a = Submit(a_args);
  // B: only after A succeeded; exits 3 by itself.
  const std::string b = Submit({"-n", "1", "--after", a, "--name", "beta", "--output", "beta.log", "--",
                                "/bin/sh", "-c", "echo beta ran; exit 3"});

  const auto queued = Gpuman({"queue", "--backend", "slurm", "--json"});
  ASSERT_EQ(queued.exit_code, 0) << queued.err;
  const nlohmann::json q = nlohmann::json::parse(queued.out);
  std::map<std::string, nlohmann::json> listed;
  for (const auto& j : q["jobs"]) listed[j["id"]] = j;
  ASSERT_TRUE(listed.count(a) && listed.count(b)) << queued.out;
  EXPECT_EQ(listed[b]["state"], "queued");
  EXPECT_EQ(listed[a]["gpus"], 2);
  const auto text = Gpuman({"queue", "--backend", "slurm"});
  EXPECT_THAT(text.out, HasSubstr(b)) << text.out;

  const auto wait_a = Gpuman({"wait", a});
  EXPECT_EQ(wait_a.exit_code, 0) << wait_a.out << wait_a.err;
  const auto wait_b = Gpuman({"wait", b});
  EXPECT_EQ(wait_b.exit_code, 3) << wait_b.err;
  EXPECT_THAT(wait_b.err, HasSubstr("gpuman: job " + b + " failed"));

  // A's output: every argument exactly, and the two GPUs of `gpuman run` as UUIDs.
  const auto logs = Gpuman({"logs", a});
  ASSERT_EQ(logs.exit_code, 0) << logs.err;
  std::string expected;
  for (const auto& h : hostile) expected += "[" + h + "]\n";
  EXPECT_THAT(logs.out, HasSubstr(expected));
  EXPECT_THAT(logs.out, ::testing::ContainsRegex("GPU-[0-9a-f-]+,GPU-[0-9a-f-]+\n"));
  EXPECT_FALSE(std::filesystem::exists(work_.Join("pwned")));
  EXPECT_EQ(Gpuman({"logs", b}).out, "beta ran\n");

  // In order: B started no earlier than A ended.
  const nlohmann::json sa = Show(a), sb = Show(b);
  EXPECT_EQ(sa["state"], "succeeded") << sa.dump();
  EXPECT_EQ(sb["state"], "failed") << sb.dump();
  EXPECT_EQ(sb["exit_code"], 3);
  ASSERT_TRUE(sa["ended"].is_string() && sb["started"].is_string()) << sa.dump() << sb.dump();
  EXPECT_LE(sa["ended"].get<std::string>(), sb["started"].get<std::string>());
  const auto shown = Gpuman({"show", a});
  EXPECT_THAT(shown.out, HasSubstr("job " + a + " (alpha)"));
  EXPECT_THAT(shown.out, HasSubstr("gpus:       2 on"));

  // Accounting has both jobs with their GPUs (slurmdbd may take a moment).
  const std::string ids = a.substr(6) + "," + b.substr(6);
  testing::RunResult acct;
  for (int i = 0; i < 50; ++i) {
    acct = Sh("sacct -n -P -X -j " + ids + " -o JobID,State,AllocTRES");
    if (acct.out.find("gres/gpu=1") != std::string::npos && acct.out.find("gres/gpu=2") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_THAT(acct.out, ::testing::ContainsRegex(a.substr(6) + "\\|COMPLETED\\|[^\n]*gres/gpu=2"));
  EXPECT_THAT(acct.out, ::testing::ContainsRegex(b.substr(6) + "\\|FAILED\\|[^\n]*gres/gpu=1"));
}

TEST_F(SlurmSubmitE2E, RefusedOptionAndCancel) {
  const auto refused = Gpuman({"submit", "--backend", "slurm", "--min-free-memory", "20GiB", "--", "true"});
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_EQ(refused.err,
            "gpuman: error: --min-free-memory: not with --backend slurm: Slurm hands out whole GPUs and does not look at their free memory\n");

  const std::string c = Submit({"-n", "1", "--name", "long", "--", "sleep", "100"});
  // Another user may not cancel it: Slurm says so, gpuman runs scancel as that user.
  const auto other = EnsureTestUser("gpuman-slurm-other");
  ASSERT_TRUE(other) << "could not create a second user";
  {
    std::map<std::string, std::string> env = {{"PATH", "/usr/bin:/bin"}, {"GPUMAN_CONFIG", "/dev/null"},
                                              {"SLURM_CONF", "/etc/slurm/slurm.conf"}};
    const auto denied = RunAsUser(*other, {kGpuman, "cancel", c}, env, "/tmp");
    EXPECT_EQ(denied.exit_code, 5) << denied.out << denied.err;
    EXPECT_THAT(denied.err, HasSubstr("Access/permission denied"));
  }
  const auto cancelled = Gpuman({"cancel", c});
  EXPECT_EQ(cancelled.exit_code, 0) << cancelled.err;
  const auto waited = Gpuman({"wait", c, "--json"});
  EXPECT_EQ(waited.exit_code, 193) << waited.out << waited.err;
  const nlohmann::json w = nlohmann::json::parse(waited.out, nullptr, false);
  EXPECT_EQ(w["state"], "cancelled") << waited.out;
  EXPECT_EQ(w["wait_exit_code"], 193);
  // Cancelling it again says it is over.
  EXPECT_EQ(Gpuman({"cancel", c}).exit_code, 1);
}

}  // namespace
}  // namespace gpuman::e2e
