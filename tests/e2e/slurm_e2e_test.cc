// gpuman inside real Slurm jobs: a single-node Slurm 22.05 from Debian's packages with 8
// fake GPU device nodes (tests/slurm/slurm-single-node.sh, a copy of the shared recipe),
// ConstrainDevices=yes as on production clusters, and the stand-in NVML for the GPUs.
// Each test starts the cluster (idempotent; it installs slurm-wlm with apt the first
// time) and stops it at the end. Root only (slurmd, munge, mknod); skipped otherwise.
// ctest label `slurm` (`ctest -L slurm`); scripts/test.sh runs them by default.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "e2e/e2e_util.h"

namespace gpuman::e2e {
namespace {

using ::testing::HasSubstr;

const std::string kRecipe = std::string(GPUMAN_TEST_SOURCE_DIR) + "/slurm/slurm-single-node.sh";

// The recipe's knobs for every test here: 8 GPUs, device confinement.
std::map<std::string, std::string> RecipeEnv() {
  return {{"SLURM_FAKE_GPUS", "8"}, {"SLURM_NODE_CPUS", "8"}, {"SLURM_CONSTRAIN_DEVICES", "1"},
          {"SLURM_CONF", "/etc/slurm/slurm.conf"}};
}

testing::RunResult Sh(const std::string& script, std::map<std::string, std::string> env = {}) {
  for (const auto& [k, v] : RecipeEnv()) env.emplace(k, v);
  return testing::Run({"/bin/bash", "-c", script}, env);
}

std::string Trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

class SlurmE2E : public ::testing::Test {
 protected:
  void SetUp() override { Start({}); }
  // Starts the recipe's cluster with RecipeEnv() and `knobs` over it.
  void Start(const std::map<std::string, std::string>& knobs) {
    if (geteuid() != 0) GTEST_SKIP() << "needs root: the Slurm recipe runs slurmd and munged";
    const auto started = Sh("'" + kRecipe + "' start", knobs);
    ASSERT_EQ(started.exit_code, 0) << "slurm recipe failed:\n" << started.out << started.err;
    ASSERT_THAT(started.out, HasSubstr("OK slurm"));
    is_started_ = true;
  }
  void TearDown() override {
    if (!holder_.empty()) Sh("scancel " + holder_);
    if (is_started_) Sh("'" + kRecipe + "' stop");
  }

  // A batch job holding `gpus` GPUs (Slurm picks 0..gpus-1 on an idle node), running.
  void HoldGpus(int gpus) {
    const auto r = Sh("sbatch --parsable -t 2 --gres=gpu:" + std::to_string(gpus) + " -o /dev/null --wrap 'sleep 120'");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    holder_ = Trimmed(r.out);
    const auto running = Sh("for i in $(seq 100); do [[ $(squeue -h -j " + holder_ +
                            " -t R) ]] && exit 0; sleep 0.2; done; exit 1");
    ASSERT_EQ(running.exit_code, 0) << "holder job " << holder_ << " did not start";
    const auto shown = Sh("scontrol show job -d " + holder_);
    ASSERT_THAT(shown.out, HasSubstr(gpus == 1 ? "(IDX:0)" : "IDX:0-" + std::to_string(gpus - 1))) << shown.out;
  }

  // `srun --gres=gpu:N gpuman ARGS` with the stand-in NVML on `scenario` (srun passes the
  // environment on: --export=ALL is its default).
  testing::RunResult SrunGpuman(int gpus, const std::string& scenario, std::vector<std::string> args) {
    std::vector<std::string> argv = {"/usr/bin/srun", "-t", "1", "--gres=gpu:" + std::to_string(gpus), kGpuman};
    argv.insert(argv.end(), args.begin(), args.end());
    auto env = CleanEnv(state_.path());
    env["GPUMAN_SIMULATE"] = scenario;
    env["SLURM_JOB_ID"] = "";  // the test may itself run inside a job
    for (const auto& [k, v] : RecipeEnv()) env[k] = v;
    return testing::Run(argv, env);
  }

  // A copy of h100-8 with no processes and the given minor numbers (NVML index i has
  // minor minors[i]); returns its path.
  std::string Scenario(const std::vector<int>& minors) {
    std::ifstream in(kScenarios + "/h100-8.json");
    nlohmann::json s = nlohmann::json::parse(in);
    for (size_t i = 0; i < s["gpus"].size(); ++i) {
      s["gpus"][i]["processes"] = nlohmann::json::array();
      s["gpus"][i]["minor_number"] = minors[i];
      uuids_.push_back(s["gpus"][i]["uuid"]);
    }
    return work_.Write("h100-8-slurm.json", s.dump(2));
  }

  // The UUID of the GPU whose minor number is `minor`.
  std::string UuidOfMinor(const std::vector<int>& minors, int minor) {
    for (size_t i = 0; i < minors.size(); ++i) {
      if (minors[i] == minor) return uuids_[i];
    }
    return "?";
  }

  testing::TempDir state_, work_;
  std::vector<std::string> uuids_;  // by NVML index
  std::string holder_;
  bool is_started_ = false;
};

TEST_F(SlurmE2E, ConstrainedRunGetsTheStepsGpus) {
  // The issue's case: with GPUs 0-2 held, the step gets Slurm GPUs 3,4, sees
  // CUDA_VISIBLE_DEVICES=0,1 (job-local) and SLURM_STEP_GPUS=3,4 (node indices).
  const std::vector<int> minors = {0, 1, 2, 3, 4, 5, 6, 7};
  const std::string scenario = Scenario(minors);
  HoldGpus(3);
  const auto r = SrunGpuman(2, scenario, {"run", "-n", "2", "--", "printenv", "CUDA_VISIBLE_DEVICES"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, uuids_[3] + "," + uuids_[4] + "\n");

  // select sees the same two, and no more.
  const auto one = SrunGpuman(2, scenario, {"select", "-n", "1"});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_THAT(one.out, ::testing::AnyOf(uuids_[3] + "\n", uuids_[4] + "\n"));
  const auto three = SrunGpuman(2, scenario, {"select", "-n", "3"});
  EXPECT_EQ(three.exit_code, 4) << three.out << three.err;
}

TEST_F(SlurmE2E, MinorsPermutedAgainstPciOrder) {
  // gres.conf lists the fake /dev/nvidia0..7 in minor order; NVML (PCI) order has these
  // minors, so Slurm GPUs 3 and 4 (minors 3, 4) are NVML GPUs 4 and 7.
  const std::vector<int> minors = {2, 5, 0, 7, 3, 1, 6, 4};
  const std::string scenario = Scenario(minors);
  HoldGpus(3);
  const auto r = SrunGpuman(2, scenario, {"run", "-n", "2", "--", "printenv", "CUDA_VISIBLE_DEVICES"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, UuidOfMinor(minors, 3) + "," + UuidOfMinor(minors, 4) + "\n");
  EXPECT_EQ(r.out, uuids_[4] + "," + uuids_[7] + "\n");

  // explain shows the chain and warns that gres.conf is not in PCI order.
  const auto explain = SrunGpuman(2, scenario, {"explain", "--json"});
  ASSERT_EQ(explain.exit_code, 0) << explain.err;
  const nlohmann::json j = nlohmann::json::parse(explain.out);
  ASSERT_TRUE(j["slurm"].is_object()) << explain.out;
  EXPECT_TRUE(j["slurm"]["constrained"].get<bool>());
  EXPECT_EQ(j["slurm"]["value"], "3,4");
  ASSERT_EQ(j["slurm"]["mapping"].size(), 2u);
  EXPECT_EQ(j["slurm"]["mapping"][0]["file"], "/run/slurm-fake-gpu/nvidia3");
  EXPECT_EQ(j["slurm"]["mapping"][0]["minor_number"], 3);
  EXPECT_EQ(j["slurm"]["mapping"][0]["index"], 4);
  EXPECT_EQ(j["slurm"]["mapping"][1]["uuid"], uuids_[7]);
  std::vector<std::string> visible, codes;
  for (const auto& v : j["visible"]) visible.push_back(v["uuid"]);
  for (const auto& w : j["warnings"]) codes.push_back(w["code"]);
  EXPECT_EQ(visible, (std::vector<std::string>{uuids_[4], uuids_[7]}));
  EXPECT_EQ(codes, std::vector<std::string>{"gres_order_not_pci"});
}

TEST_F(SlurmE2E, StatusMarksTheJobsGpus) {
  const std::vector<int> minors = {0, 1, 2, 3, 4, 5, 6, 7};
  const std::string scenario = Scenario(minors);
  const auto r = SrunGpuman(2, scenario, {"status", "--json", "--no-processes"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j["allocation"].is_object()) << r.out;
  EXPECT_THAT(j["allocation"]["source"].get<std::string>(), HasSubstr("SLURM_STEP_GPUS=0,1"));
  int marked = 0;
  for (const auto& g : j["gpus"]) marked += g["in_allocation"].get<bool>() ? 1 : 0;
  EXPECT_EQ(marked, 2);
  EXPECT_TRUE(j["gpus"][0]["in_allocation"].get<bool>());
  EXPECT_TRUE(j["gpus"][1]["in_allocation"].get<bool>());

  const auto only = SrunGpuman(2, scenario, {"status", "--allocation", "--no-processes"});
  ASSERT_EQ(only.exit_code, 0) << only.err;
  EXPECT_THAT(only.out, HasSubstr("in this allocation: Slurm job"));
  EXPECT_THAT(only.out, HasSubstr(uuids_[0].substr(0, 12)));
  EXPECT_THAT(only.out, ::testing::Not(HasSubstr(uuids_[2].substr(0, 12))));
}

TEST_F(SlurmE2E, GresConfCheckComparesSlurmdWithNvml) {
  // The recipe declares 8 fake GPUs, /run/slurm-fake-gpu/nvidia0..7 (minors 0..7).
  auto env = CleanEnv(state_.path());
  for (const auto& [k, v] : RecipeEnv()) env[k] = v;
  env["GPUMAN_SIMULATE"] = Scenario({0, 1, 2, 3, 4, 5, 6, 7});
  const auto ok = testing::Run({kGpuman, "slurm", "gres-conf", "--check"}, env);
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  EXPECT_THAT(ok.out, HasSubstr("ok: slurmd's 8 GPU(s) are NVML's"));

  env["GPUMAN_SIMULATE"] = "a100-4";  // NVML shows 4 GPUs; slurmd declares 8
  const auto bad = testing::Run({kGpuman, "slurm", "gres-conf", "--check"}, env);
  EXPECT_EQ(bad.exit_code, 6) << bad.out << bad.err;
  EXPECT_THAT(bad.out, HasSubstr("mismatch: slurmd has 8 GPU(s), NVML 4"));
  EXPECT_THAT(bad.out, HasSubstr("/run/slurm-fake-gpu/nvidia7 (minor 7) is no GPU NVML shows"));
}

TEST_F(SlurmE2E, HistoryOfARealJob) {
  // Accounting (docs/slurm.md): a real job holds Slurm GPUs 0-1; its record (written here
  // by hand, as the prolog would) names their UUIDs; the daemon tags its samples, and
  // history/report --slurm-job show exactly those GPUs.
  const std::vector<int> minors = {0, 1, 2, 3, 4, 5, 6, 7};
  const std::string scenario = Scenario(minors);
  HoldGpus(2);
  const std::string records = work_.Join("slurm"), socket = work_.Join("gpuman.sock");
  auto env = CleanEnv(state_.path());
  env["GPUMAN_SLURM_DIR"] = records;
  env["GPUMAN_SOCKET"] = socket;
  env["GPUMAN_HISTORY_DB"] = work_.Join("daemon/history.db");
  env["GPUMAN_KERNEL_LOG"] = work_.Write("kmsg.txt", "");
  PrivateDaemon daemon;  // stopped when the test ends, however it ends
  ASSERT_TRUE(daemon.Start({.scenario = scenario, .socket = socket, .state_dir = work_.Join("daemon"), .env = env}));
  const std::string gpus = "[\"" + UuidOfMinor(minors, 0) + "\",\"" + UuidOfMinor(minors, 1) + "\"]";
  std::filesystem::create_directories(records);
  std::ofstream(records + "/.tmp") << R"({"schema":1,"job_id":")" << holder_
                                   << R"(","user":"root","uid":0,"host":"localhost","gpus":)" << gpus
                                   << R"(,"started_unix_ms":0,"ended_unix_ms":null})";
  ASSERT_EQ(std::rename((records + "/.tmp").c_str(), (records + "/" + holder_ + ".json").c_str()), 0);

  nlohmann::json doc;
  for (int i = 0; i < 150; ++i) {
    const auto r = testing::Run({kGpuman, "history", "--slurm-job", holder_, "--json"}, env);
    doc = nlohmann::json::parse(r.out, nullptr, false);
    if (r.exit_code == 0 && doc.is_object() && doc["slurm_job"]["source"] == "history" &&
        doc["samples"].size() >= 2) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  ASSERT_TRUE(doc.is_object() && doc["slurm_job"]["source"] == "history") << doc.dump(2);
  EXPECT_EQ(doc["slurm_job"]["gpus"].dump(), gpus);
  for (const auto& sample : doc["samples"]) {
    EXPECT_EQ(sample["slurm_job_id"], holder_);
    EXPECT_TRUE(sample["gpu_uuid"] == uuids_[0] || sample["gpu_uuid"] == uuids_[1]) << sample.dump();
  }
  const auto report = testing::Run({kGpuman, "report", "--html", "-", "--slurm-job", holder_}, env);
  ASSERT_EQ(report.exit_code, 0) << report.err;
  EXPECT_THAT(report.out, HasSubstr("slurm job " + holder_ + " of root"));
  EXPECT_THAT(report.out, ::testing::Not(HasSubstr(uuids_[2])));
}

// `gpuman slurm gres-conf` on a 4-GPU NVLink node (scenarios/a100-4: pairs (0,1) and (2,3),
// two NUMA nodes) as the node's gres.conf: slurmd accepts it, and Slurm places by its
// Links=. The recipe's fake device nodes /run/slurm-fake-gpu/nvidiaN (char 195:N) stand in
// for /dev/nvidiaN, so the generated File= paths are pointed there.
class SlurmGresConfE2E : public SlurmE2E {
 protected:
  void SetUp() override {}  // each test starts the cluster with its own gres.conf

  // The generated gres.conf lines (File= moved to the fake devices), `links` false: with
  // the Links= field cut off. Also checks the slurm.conf Gres= value it suggests.
  std::string GeneratedGresConf(bool links) {
    auto env = CleanEnv(state_.path());
    env["GPUMAN_SIMULATE"] = "a100-4";
    env["SLURMD_NODENAME"] = "";
    const auto r = testing::Run({kGpuman, "slurm", "gres-conf"}, env);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_THAT(r.out, HasSubstr("Gres=gpu:a100-sxm4-80gb:4\n"));
    std::string out;
    std::istringstream in(r.out);
    for (std::string line; std::getline(in, line);) {
      if (line.empty() || line[0] == '#') continue;
      const size_t file = line.find("File=/dev/nvidia");
      EXPECT_NE(file, std::string::npos) << line;
      if (file == std::string::npos) continue;
      line.replace(file, 16, "File=/run/slurm-fake-gpu/nvidia");
      if (!links) line = line.substr(0, line.find(" Links="));
      out += line + "\n";
    }
    return out;
  }
  void StartWith(const std::string& gres_conf) {
    Start({{"SLURM_FAKE_GPUS", "4"}, {"SLURM_NODE_CPUS", "128"}, {"SLURM_GPU_TYPE", "a100-sxm4-80gb"},
           {"SLURM_GRES_CONF", gres_conf}});
  }
  // SLURM_STEP_GPUS of `srun ARGS printenv SLURM_STEP_GPUS`.
  std::string StepGpus(const std::string& srun_args) {
    const auto r = Sh("srun -t 1 " + srun_args + " printenv SLURM_STEP_GPUS");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return Trimmed(r.out);
  }
};

TEST_F(SlurmGresConfE2E, SlurmdAcceptsItAndGpusTwoGetsTheNvlinkedPair) {
  const std::string conf = GeneratedGresConf(/*links=*/true);
  ASSERT_THAT(conf, HasSubstr("File=/run/slurm-fake-gpu/nvidia3 Cores=32-63,96-127 Links=0,0,12,-1\n"));
  StartWith(conf);
  if (HasFatalFailure() || IsSkipped()) return;
  // slurmd read every field, and the node registered idle with the suggested Gres=.
  const auto node = Sh("scontrol show node");
  EXPECT_THAT(node.out, HasSubstr("Gres=gpu:a100-sxm4-80gb:4"));
  EXPECT_THAT(node.out, HasSubstr("State=IDLE"));
  const auto g = Sh("slurmd -G 2>&1");  // it logs to stderr
  EXPECT_THAT(g.out, HasSubstr("File=/run/slurm-fake-gpu/nvidia1 Cores=0-31,64-95 CoreCnt=128 Links=12,-1,0,0"));
  // --check agrees, Cores= and Links= included.
  auto env = CleanEnv(state_.path());
  for (const auto& [k, v] : RecipeEnv()) env[k] = v;
  env["GPUMAN_SIMULATE"] = "a100-4";
  const auto check = testing::Run({kGpuman, "slurm", "gres-conf", "--check"}, env);
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
  EXPECT_EQ(check.out, "ok: slurmd's 4 GPU(s) are NVML's\n");

  // GPU 0 busy: --gpus=2 gets the linked pair 2,3, not the first two free (1,2).
  HoldGpus(1);
  EXPECT_EQ(StepGpus("--gpus=2"), "2,3");
  // Slurm 22.05 applies Links= only to job-level counts (--gpus); a per-node
  // --gres=gpu:2 still takes the first free GPUs, across the pairs (docs/slurm.md).
  EXPECT_EQ(StepGpus("--gres=gpu:2"), "1,2");
}

TEST_F(SlurmGresConfE2E, WithoutLinksGpusTwoTakesTheFirstFree) {
  // The control: the same gres.conf without Links=, and Slurm no longer keeps the pair.
  const std::string conf = GeneratedGresConf(/*links=*/false);
  ASSERT_THAT(conf, ::testing::Not(HasSubstr("Links=")));
  StartWith(conf);
  if (HasFatalFailure() || IsSkipped()) return;
  HoldGpus(1);
  EXPECT_EQ(StepGpus("--gpus=2"), "1,2");
  // And --check says what is missing, without failing.
  auto env = CleanEnv(state_.path());
  for (const auto& [k, v] : RecipeEnv()) env[k] = v;
  env["GPUMAN_SIMULATE"] = "a100-4";
  const auto check = testing::Run({kGpuman, "slurm", "gres-conf", "--check"}, env);
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
  EXPECT_THAT(check.out, HasSubstr("note: slurmd declares no Links= for 4 NVLinked GPU(s)"));
}

}  // namespace
}  // namespace gpuman::e2e
