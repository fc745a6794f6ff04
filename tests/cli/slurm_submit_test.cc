// The Slurm paths of the queue commands (cli/slurm_submit.h) against a fake SlurmTools:
// which options are refused and why, how ids are written, wait's exit codes, logs.
#include "cli/slurm_submit.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <sstream>

#include "cli/cli_options.h"
#include "cli/exit_codes.h"
#include "cli/queue_commands.h"
#include "support/fake_slurm_tools.h"
#include "support/temp_dir.h"

namespace gpuman::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class SlurmSubmitTest : public ::testing::Test {
 protected:
  // Parses `gpuman <words>` into args_ the way main does; returns the command's name.
  std::string Parse(std::vector<std::string> words) {
    CLI::App app;
    app.require_subcommand(1);
    auto cmds = AddQueueCommands(app, args_);
    std::vector<std::string> reversed(words.rbegin(), words.rend());
    app.parse(reversed);
    for (CLI::App* c : cmds) {
      if (*c) return c->get_name();
    }
    return "";
  }

  int RunCommand(const std::vector<std::string>& words, Config config = {}) {
    const std::string name = Parse(words);
    Context ctx(Environment{}, std::move(config), std::nullopt, out_, err_);
    SlurmCliDeps deps;
    deps.tools = &tools_;
    deps.cwd = "/home/alice/exp";
    deps.gpuman_exe = "/usr/bin/gpuman";
    deps.sleep_ms = [this](int64_t ms) { slept_.push_back(ms); };
    return RunSlurmQueueCommand(name, args_, ctx, deps);
  }

  QueueArgs args_;
  testing::FakeSlurmTools tools_;
  std::ostringstream out_, err_;
  std::vector<int64_t> slept_;
};

TEST_F(SlurmSubmitTest, SubmitPrintsASlurmId) {
  tools_.Answer({"sbatch"}, 0, "812\n");
  EXPECT_EQ(RunCommand({"submit", "--backend", "slurm", "-n", "2", "--name", "t", "--", "python", "x.py"}), 0) << err_.str();
  EXPECT_EQ(out_.str(), "slurm:812\n");
  const auto sb = tools_.CallsOf("sbatch");
  ASSERT_EQ(sb.size(), 1u);
  EXPECT_THAT(sb[0].argv, ::testing::Contains("--gpus=2"));
  EXPECT_THAT(sb[0].argv, ::testing::Contains("--chdir=/home/alice/exp"));
  EXPECT_THAT(sb[0].input, HasSubstr("exec '/usr/bin/gpuman' 'run' '-q' '-n' '2' '--' 'python' 'x.py'"));
}

TEST_F(SlurmSubmitTest, SubmitJsonAndAfter) {
  tools_.Answer({"sbatch"}, 0, "813\n");
  EXPECT_EQ(RunCommand({"submit", "--json", "--after", "slurm:811,slurm:812", "--", "true"}), 0) << err_.str();
  EXPECT_EQ(out_.str(), "{\"backend\":\"slurm\",\"id\":\"slurm:813\",\"slurm_job_id\":\"813\"}\n");
  EXPECT_THAT(tools_.CallsOf("sbatch")[0].argv, ::testing::Contains("--dependency=afterok:811:812"));
}

TEST_F(SlurmSubmitTest, ModelBecomesTheGresType) {
  tools_.Answer({"sinfo"}, 0, "gpu:a100-sxm4-80gb:4(S:0-1)\n");
  tools_.Answer({"sbatch"}, 0, "9\n");
  EXPECT_EQ(RunCommand({"submit", "--backend", "slurm", "-n", "3", "--model", "A100", "--", "true"}), 0) << err_.str();
  EXPECT_THAT(tools_.CallsOf("sbatch")[0].argv, ::testing::Contains("--gres=gpu:a100-sxm4-80gb:3"));
}

// --mig PROFILE: the Slurm type that holds the profile (AutoDetect=nvml names MIG devices
// by it), and the node's run leases MIG devices of it inside the allocation.
TEST_F(SlurmSubmitTest, MigBecomesTheGresTypeOfItsProfile) {
  tools_.Answer({"sinfo"}, 0, "gpu:a100_1g.10gb:7(S:0),gpu:a100_2g.20gb:3(S:0)\n");
  tools_.Answer({"sbatch"}, 0, "10\n");
  EXPECT_EQ(RunCommand({"submit", "--backend", "slurm", "-n", "2", "--mig", "1g.10gb", "--", "true"}), 0) << err_.str();
  const auto sb = tools_.CallsOf("sbatch");
  ASSERT_EQ(sb.size(), 1u);
  EXPECT_THAT(sb[0].argv, ::testing::Contains("--gres=gpu:a100_1g.10gb:2"));
  EXPECT_THAT(sb[0].input, HasSubstr("'run' '-q' '-n' '2' '--mig' '1g.10gb' '--' 'true'"));

  args_ = QueueArgs{};
  err_.str("");
  EXPECT_EQ(RunCommand({"submit", "--backend", "slurm", "--mig", "3g.40gb", "--", "true"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("gpuman: error: --mig 3g.40gb: no Slurm GPU type contains '3g.40gb'")) << err_.str();
  args_ = QueueArgs{};
  err_.str("");
  EXPECT_EQ(RunCommand({"submit", "--backend", "slurm", "--mig", "1g.10gb", "--model", "A100", "--", "true"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("gpuman: error: --mig: not with --model and --backend slurm")) << err_.str();
  EXPECT_EQ(tools_.CallsOf("sbatch").size(), 1u);
}

TEST_F(SlurmSubmitTest, OptionsSlurmCannotHonourAreRefused) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--gpus", "0,1"}, "--gpus: not with --backend slurm: Slurm chooses the node and its GPUs"},
      {{"--exclude", "3"}, "--exclude: not with --backend slurm"},
      {{"--min-free-memory", "20GiB"}, "--min-free-memory: not with --backend slurm: Slurm hands out whole GPUs"},
      {{"--max-utilization", "10"}, "--max-utilization: not with --backend slurm"},
      {{"--min-compute-capability", "8.0"}, "--min-compute-capability: not with --backend slurm"},
      {{"--priority", "-5"}, "--priority: not with --backend slurm"},
  };
  for (const auto& [option, message] : cases) {
    args_ = QueueArgs{};
    out_.str("");
    err_.str("");
    std::vector<std::string> words = {"submit", "--backend", "slurm"};
    words.insert(words.end(), option.begin(), option.end());
    words.insert(words.end(), {"--", "true"});
    EXPECT_EQ(RunCommand(words), kExitUsage) << option[0];
    EXPECT_THAT(err_.str(), HasSubstr("gpuman: error: " + message)) << err_.str();
    const std::string err = err_.str();
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  }
  EXPECT_TRUE(tools_.CallsOf("sbatch").empty());
}

TEST_F(SlurmSubmitTest, AllowSharedGoesToTheNodesRun) {
  tools_.Answer({"sbatch"}, 0, "1\n");
  EXPECT_EQ(RunCommand({"submit", "--backend", "slurm", "--allow-shared", "--", "true"}), 0) << err_.str();
  EXPECT_THAT(tools_.CallsOf("sbatch")[0].input, HasSubstr("'--allow-shared' '--' 'true'"));
}

TEST_F(SlurmSubmitTest, WhichBackend) {
  Config slurm_default;
  slurm_default.submit.backend = "slurm";
  EXPECT_FALSE(*UsesSlurm(Parse({"queue"}), args_, Config{}));
  args_ = QueueArgs{};
  EXPECT_TRUE(*UsesSlurm(Parse({"queue"}), args_, slurm_default));
  args_ = QueueArgs{};
  EXPECT_FALSE(*UsesSlurm(Parse({"queue", "--backend", "gpuman"}), args_, slurm_default));
  args_ = QueueArgs{};
  EXPECT_EQ(Parse({"wait", "slurm:12"}), "wait");
  EXPECT_THAT(args_.ids, ElementsAre("12"));
  EXPECT_TRUE(*UsesSlurm("wait", args_, Config{}));
  args_ = QueueArgs{};
  EXPECT_FALSE(UsesSlurm(Parse({"cancel", "slurm:12", "13"}), args_, Config{}));  // mixed
  args_ = QueueArgs{};
  auto clash = UsesSlurm(Parse({"show", "--backend", "gpuman", "slurm:3"}), args_, Config{});
  ASSERT_FALSE(clash);
  EXPECT_THAT(clash.error().message, HasSubstr("names a Slurm job"));
  args_ = QueueArgs{};
  EXPECT_FALSE(*UsesSlurm(Parse({"drain", "0"}), args_, slurm_default));  // the machine's, always
}

TEST(SlurmSubmitConfigTest, SubmitBackendKey) {
  EXPECT_EQ(ParseConfig("", "t")->submit.backend, "gpuman");
  EXPECT_EQ(ParseConfig("[submit]\nbackend = \"slurm\"\n", "t")->submit.backend, "slurm");
  auto bad = ParseConfig("[submit]\nbackend = \"pbs\"\n", "t");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message, "config t: submit.backend must be \"gpuman\" or \"slurm\"");
  auto unknown = ParseConfig("[submit]\npartition = \"gpu\"\n", "t");
  ASSERT_FALSE(unknown);
  EXPECT_THAT(unknown.error().message, HasSubstr("submit: unknown key 'partition'"));
}

TEST_F(SlurmSubmitTest, WaitExitCodes) {
  EXPECT_EQ(SlurmWaitExitCode("COMPLETED", 0, std::nullopt), 0);
  EXPECT_EQ(SlurmWaitExitCode("FAILED", 3, std::nullopt), 3);
  EXPECT_EQ(SlurmWaitExitCode("FAILED", 0, 9), kJobSignalBase + 9);
  EXPECT_EQ(SlurmWaitExitCode("FAILED", 127, std::nullopt), kJobNotFound);  // gpuman run: command not found
  EXPECT_EQ(SlurmWaitExitCode("TIMEOUT", 0, 15), kJobTimedOut);
  EXPECT_EQ(SlurmWaitExitCode("CANCELLED", 0, 15), kJobCancelled);
  EXPECT_EQ(SlurmWaitExitCode("NODE_FAIL", 0, std::nullopt), kJobGpumanFailed);
  EXPECT_EQ(SlurmWaitExitCode("OUT_OF_MEMORY", 0, std::nullopt), kJobSignalBase + 9);
}

TEST_F(SlurmSubmitTest, WaitPollsUntilSlurmIsDone) {
  tools_.Answer({"squeue"}, 0, "PENDING\n");
  tools_.Answer({"squeue"}, 0, "RUNNING\n");
  tools_.Answer({"squeue"}, 0, "FAILED\n");
  tools_.Answer({"scontrol"}, 0, "JobId=5 JobName=x UserId=root(0) JobState=FAILED Reason=NonZeroExitCode ExitCode=3:0\n");
  EXPECT_EQ(RunCommand({"wait", "slurm:5"}), 3);
  EXPECT_EQ(slept_.size(), 2u);
  EXPECT_EQ(err_.str(), "gpuman: job slurm:5 failed: NonZeroExitCode (Slurm FAILED, exit 3)\n");
}

TEST_F(SlurmSubmitTest, WaitOnAnUnknownJobIs125) {
  tools_.Answer({"squeue"}, 1, "", "slurm_load_jobs error: Invalid job id specified\n");
  tools_.Answer({"scontrol"}, 1, "", "slurm_load_jobs error: Invalid job id specified\n");
  tools_.Answer({"sacct"}, 0, "");
  EXPECT_EQ(RunCommand({"wait", "slurm:404"}), kJobGpumanFailed);
  EXPECT_THAT(err_.str(), HasSubstr("no Slurm job 404"));
}

TEST_F(SlurmSubmitTest, LogsReadTheOutputFile) {
  testing::TempDir dir;
  const std::string log = dir.Write("out.log", "hello\n");
  tools_.Answer({"scontrol"}, 0, "JobId=5 JobName=x UserId=root(0) JobState=COMPLETED StdOut=" + log + "\n");
  EXPECT_EQ(RunCommand({"logs", "slurm:5"}), 0) << err_.str();
  EXPECT_EQ(out_.str(), "hello\n");
}

TEST_F(SlurmSubmitTest, CancelAsTheCallerOnly) {
  tools_.Answer({"scontrol"}, 0, "JobId=5 JobName=x UserId=bob(2) JobState=RUNNING\n");
  tools_.Answer({"scancel"}, 210, "", "scancel: error: Kill job error on job id 5: Access/permission denied\n");
  EXPECT_EQ(RunCommand({"cancel", "slurm:5"}), kExitPermission);
  EXPECT_EQ(err_.str(), "gpuman: error: job slurm:5: scancel 5: scancel: error: Kill job error on job id 5: Access/permission denied\n");
}

TEST_F(SlurmSubmitTest, HoldAndResumeAreScontrols) {
  tools_.Answer({"scontrol", "hold"}, 0, "");
  tools_.Answer({"scontrol", "release"}, 1, "", "Job is no longer pending execution for job 6\n");
  EXPECT_EQ(RunCommand({"hold", "slurm:5"}), 0) << err_.str();
  args_ = QueueArgs{};
  EXPECT_EQ(RunCommand({"resume", "slurm:6"}), kExitUsage);
  EXPECT_EQ(err_.str(), "gpuman: error: job slurm:6: scontrol release 6: Job is no longer pending execution for job 6\n");
  const auto calls = tools_.CallsOf("scontrol");
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_THAT(calls[0].argv, ElementsAre("scontrol", "hold", "5"));
  EXPECT_THAT(calls[1].argv, ElementsAre("scontrol", "release", "6"));
}

TEST_F(SlurmSubmitTest, SbatchEnvironmentDropsTheSubmittingMachinesGpus) {
  auto env = SbatchEnvironment({{"PATH", "/bin"}, {"CUDA_VISIBLE_DEVICES", "GPU-1"}, {"GPUMAN_LEASE_ID", "4"},
                                {"NVIDIA_VISIBLE_DEVICES", "GPU-1"}, {"GPUMAN_JOB_ID", "2"}, {"HOME", "/h"},
                                {"CUDA_DEVICE_ORDER", "PCI_BUS_ID"}});
  // CUDA_DEVICE_ORDER names no GPU: a setting that holds on any machine, kept.
  EXPECT_EQ(env, (std::map<std::string, std::string>{
                     {"CUDA_DEVICE_ORDER", "PCI_BUS_ID"}, {"HOME", "/h"}, {"PATH", "/bin"}}));
}

}  // namespace
}  // namespace gpuman::cli
