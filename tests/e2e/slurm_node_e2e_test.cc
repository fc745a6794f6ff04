// The node-side hooks against a real Slurm (tests/slurm/slurm-single-node.sh): slurmd runs
// `gpuman slurm healthcheck` as its HealthCheckProgram (every 2 s), `gpuman slurm prolog`
// and `gpuman slurm epilog` as Prolog/Epilog, through wrapper scripts that point gpuman at
// the stand-in NVML (slurmd gives them a bare environment). The GPUs' state is a scenario
// file the test rewrites. Root only; ctest label `slurm`.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "e2e/e2e_util.h"

namespace gpuman::e2e {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

const std::string kRecipe = std::string(GPUMAN_TEST_SOURCE_DIR) + "/slurm/slurm-single-node.sh";
// Fixed paths, so that every test here starts the cluster with the same slurm.conf (the
// recipe restarts the daemons only when it changes).
const std::string kDir = "/tmp/gpuman-slurm-node-e2e";

std::string Trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

class SlurmNodeE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root: the Slurm recipe runs slurmd and munged";
    ASSERT_EQ(testing::Run({"/bin/mkdir", "-p", kDir + "/records", kDir + "/state"}).exit_code, 0);
    testing::Run({"/bin/bash", "-c", "rm -f " + kDir + "/records/*.json " + kDir + "/*.log; : > " + kDir + "/kmsg"});
    SetGpus(Idle());
    for (const std::string hook : {"healthcheck", "prolog", "epilog"}) {
      const std::string extra = hook == "epilog" ? " --grace 2s" : "";
      std::ofstream(kDir + "/" + hook + ".sh")
          << "#!/bin/sh\n"
          << "export GPUMAN_NVML_LIBRARY=" << GPUMAN_TEST_FAKE_NVML << " GPUMAN_FAKE_NVML_SCENARIO=" << kDir
          << "/scenario.json GPUMAN_SLURM_DIR=" << kDir << "/records GPUMAN_STATE_DIR=" << kDir
          << "/state GPUMAN_KERNEL_LOG=" << kDir << "/kmsg GPUMAN_CONFIG=/dev/null GPUMAN_SIMULATE=\n"
          << "exec " << kGpuman << " slurm " << hook << extra << " >>" << kDir << "/" << hook << ".log 2>&1\n";
      chmod((kDir + "/" + hook + ".sh").c_str(), 0755);
    }
    const auto started = Sh("'" + kRecipe + "' start");
    ASSERT_EQ(started.exit_code, 0) << "slurm recipe failed:\n" << started.out << started.err;
    is_started_ = true;
    node_ = Trimmed(Sh("hostname -s").out);
  }
  void TearDown() override {
    if (sleeper_ > 0) kill(sleeper_, SIGKILL);
    if (is_started_) Sh("'" + kRecipe + "' stop");
  }

  testing::RunResult Sh(const std::string& script) {
    return testing::Run({"/bin/bash", "-c", script},
                        {{"SLURM_FAKE_GPUS", "8"}, {"SLURM_NODE_CPUS", "8"}, {"SLURM_CONSTRAIN_DEVICES", "1"},
                         {"SLURM_CONF", "/etc/slurm/slurm.conf"}, {"SLURM_PROLOG", kDir + "/prolog.sh"},
                         {"SLURM_EPILOG", kDir + "/epilog.sh"},
                         {"SLURM_EXTRA_CONF", "HealthCheckProgram=" + kDir + "/healthcheck.sh\nHealthCheckInterval=2"}});
  }

  // h100-8 with no processes, minors 0..7 (Slurm GPU i = NVML GPU i).
  nlohmann::json Idle() {
    std::ifstream in(kScenarios + "/h100-8.json");
    nlohmann::json s = nlohmann::json::parse(in);
    for (size_t i = 0; i < s["gpus"].size(); ++i) {
      s["gpus"][i]["processes"] = nlohmann::json::array();
      s["gpus"][i]["minor_number"] = static_cast<int>(i);
      s["gpus"][i]["memory"]["used"] = 5 << 20;
    }
    return s;
  }
  void SetGpus(const nlohmann::json& s) {
    std::ofstream(kDir + "/scenario.json.tmp") << s.dump(2);
    ASSERT_EQ(rename((kDir + "/scenario.json.tmp").c_str(), (kDir + "/scenario.json").c_str()), 0);
  }
  // A real process (so that /proc names its user) that the scenario puts on GPU `gpu`.
  nlohmann::json WithProcess(int gpu) {
    if (sleeper_ <= 0) {
      sleeper_ = fork();
      if (sleeper_ == 0) {
        execl("/bin/sleep", "sleep", "300", nullptr);
        _exit(127);
      }
    }
    nlohmann::json s = Idle();
    s["gpus"][gpu]["processes"] = nlohmann::json::array(
        {{{"pid", sleeper_}, {"type", "compute"}, {"used_memory", 1LL << 30}}});
    s["gpus"][gpu]["memory"]["used"] = 1LL << 30;
    return s;
  }

  std::string NodeLine() { return Sh("sinfo -h -N -n " + node_ + " -o '%T|%E'").out; }
  // Waits up to `seconds` for sinfo's "STATE|REASON" to satisfy `pred`; returns the last.
  std::string WaitNode(int seconds, const std::function<bool(const std::string&)>& pred) {
    std::string line;
    for (int i = 0; i < seconds * 5; ++i) {
      line = NodeLine();
      if (pred(line)) return line;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return line;
  }
  std::string Submit(const std::string& args) {
    const auto r = Sh("cd /tmp && sbatch --parsable -t 2 -o /dev/null " + args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return Trimmed(r.out);
  }
  std::string JobState(const std::string& id) { return Trimmed(Sh("squeue -h -j " + id + " -o '%T'").out); }

  std::string node_;
  pid_t sleeper_ = -1;
  bool is_started_ = false;
};

TEST_F(SlurmNodeE2E, HealthcheckDrainsOnALostGpuAndResumesWhenHealthy) {
  nlohmann::json lost = Idle();
  lost["gpus"][2]["lost"] = true;
  SetGpus(lost);
  // slurmd's own HealthCheckProgram run drains the node.
  std::string line = WaitNode(20, [](const std::string& l) { return l.find("gpuman: GPU 2 gpu_lost") != std::string::npos; });
  EXPECT_THAT(line, StartsWith("drain")) << line;
  EXPECT_THAT(line, HasSubstr("|gpuman: GPU 2 gpu_lost"));
  EXPECT_THAT(Slurp(kDir + "/healthcheck.log"), HasSubstr("gpuman: slurm healthcheck: node " + node_ + " drained"));
  // By hand: exit 6 while the GPU stays lost, the drain stays.
  const auto by_hand = Sh(kDir + "/healthcheck.sh; echo rc=$?");
  EXPECT_THAT(by_hand.out, HasSubstr("rc=6"));

  // A job waits while the node is drained...
  const std::string job = Submit("--gres=gpu:1 --wrap 'true'");
  std::this_thread::sleep_for(std::chrono::seconds(2));
  EXPECT_EQ(JobState(job), "PENDING");
  // ...and runs once the GPU is back and the healthcheck resumed the node.
  SetGpus(Idle());
  line = WaitNode(20, [](const std::string& l) { return l.find("drain") == std::string::npos; });
  EXPECT_THAT(line, ::testing::Not(HasSubstr("drain"))) << line;
  EXPECT_THAT(Slurp(kDir + "/healthcheck.log"), HasSubstr("resumed: healthy again"));
  // Slurm starts it on its next scheduling pass: at once when the resume triggers one, else
  // at the latest after sched_interval (60 s), which a loaded machine reached once.
  std::string state;
  for (int i = 0; i < 325 && !(state = JobState(job)).empty(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(state, "") << "job " << job << " did not run after the resume";
}

TEST_F(SlurmNodeE2E, HealthcheckNeverLiftsAnAdminDrain) {
  ASSERT_EQ(Sh("scontrol update nodename=" + node_ + " state=drain reason='disk swap, ticket 42'").exit_code, 0);
  // Healthy GPUs and several healthcheck runs (every 2 s): the admin's drain stays.
  std::this_thread::sleep_for(std::chrono::seconds(6));
  const auto by_hand = Sh(kDir + "/healthcheck.sh; echo rc=$?");
  EXPECT_THAT(by_hand.out, HasSubstr("rc=0"));
  EXPECT_THAT(NodeLine(), HasSubstr("|disk swap, ticket 42"));
  EXPECT_THAT(NodeLine(), StartsWith("drain"));
  EXPECT_THAT(Slurp(kDir + "/healthcheck.log"), HasSubstr("is not the healthcheck's and stays"));
}

TEST_F(SlurmNodeE2E, PrologRefusesABusyGpu) {
  SetGpus(WithProcess(0));  // on an idle node Slurm gives the first job GPU 0
  const std::string job = Submit("--gres=gpu:1 --wrap 'true'");
  const std::string want = "gpuman-prolog: job " + job + " GPU 0 pid " + std::to_string(sleeper_) + " user root";
  const std::string line = WaitNode(20, [&](const std::string& l) { return l.find(want) != std::string::npos; });
  EXPECT_THAT(line, HasSubstr("|" + want)) << line;
  EXPECT_THAT(Sh("squeue -h -j " + job + " -o '%T %r'").out, HasSubstr("held"));
  EXPECT_THAT(Slurp(kDir + "/prolog.log"), HasSubstr("is still there"));
  // No record for a refused job. The healthcheck leaves the prolog's drain alone.
  EXPECT_FALSE(std::ifstream(kDir + "/records/" + job + ".json").good());
  std::this_thread::sleep_for(std::chrono::seconds(4));
  EXPECT_THAT(NodeLine(), HasSubstr("|" + want));
  Sh("scancel " + job);
}

TEST_F(SlurmNodeE2E, EpilogDrainsOnALeftBehindProcessAndCompletesTheRecord) {
  const std::string job = Submit("--gres=gpu:1 --wrap 'sleep 4'");
  std::string state;
  for (int i = 0; i < 100 && (state = JobState(job)) != "RUNNING"; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_EQ(state, "RUNNING");
  // The prolog recorded the job's GPU. squeue says RUNNING once the job is allocated; the
  // prolog runs on the node when the batch step starts, a moment later on a loaded machine,
  // and the process below must not be on the GPU before the prolog has passed it.
  const std::string record = kDir + "/records/" + job + ".json";
  for (int i = 0; i < 100 && !std::filesystem::exists(record); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(std::filesystem::exists(record)) << Slurp(kDir + "/prolog.log");
  const nlohmann::json started = nlohmann::json::parse(Slurp(record));
  ASSERT_EQ(started["gpus"].size(), 1u) << started.dump();
  EXPECT_EQ(started["gpus"][0], Idle()["gpus"][0]["uuid"]);
  EXPECT_TRUE(started["ended_unix_ms"].is_null());
  // Something stays on the job's GPU after it ends.
  SetGpus(WithProcess(0));
  const std::string want = "gpuman-epilog: job " + job + " GPU 0 user root pid " + std::to_string(sleeper_);
  const std::string line = WaitNode(30, [&](const std::string& l) { return l.find(want) != std::string::npos; });
  EXPECT_THAT(line, HasSubstr("|" + want)) << line;
  // The epilog completes the record after draining, then prints the summary.
  nlohmann::json ended;
  for (int i = 0; i < 50; ++i) {
    ended = nlohmann::json::parse(Slurp(kDir + "/records/" + job + ".json"));
    if (!ended["ended_unix_ms"].is_null()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_TRUE(ended["ended_unix_ms"].is_number_integer()) << ended.dump();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const std::string log = Slurp(kDir + "/epilog.log");
  EXPECT_THAT(log, HasSubstr("left behind after 2s"));
  EXPECT_THAT(log, HasSubstr("\"job\":\"" + job + "\""));  // the AdminComment summary line
  // The healthcheck leaves the epilog's drain alone.
  std::this_thread::sleep_for(std::chrono::seconds(4));
  EXPECT_THAT(NodeLine(), HasSubstr("|" + want));
}

}  // namespace
}  // namespace gpuman::e2e
