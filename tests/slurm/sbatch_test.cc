// The translation of a gpuman job into sbatch, and the parsing of Slurm's answers
// (slurm/sbatch.h), without Slurm: pure functions, and the calls through a fake SlurmTools.
#include "slurm/sbatch.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <fstream>
#include <sstream>

#include "support/fake_slurm_tools.h"
#include "support/temp_dir.h"

namespace gpuman::slurm {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

SbatchSpec Spec() {
  SbatchSpec s;
  s.gpus = 2;
  s.cwd = "/home/alice/exp";
  s.gpuman_exe = "/usr/bin/gpuman";
  s.argv = {"python", "train.py"};
  return s;
}

// Runs `script` with /bin/sh (the shell of its #! line) and returns the words the
// program it execs received, NUL-separated by a stand-in for gpuman.
std::vector<std::string> WordsTheShellPasses(const std::vector<std::string>& argv) {
  testing::TempDir dir;
  const std::string catcher = dir.Write("catch.sh", "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\0' \"$a\"; done > \"$OUT\"\n");
  std::filesystem::permissions(catcher, std::filesystem::perms::owner_all);
  SbatchSpec s = Spec();
  s.gpuman_exe = catcher;
  s.argv = argv;
  const std::string script = dir.Write("job.sh", BatchScript(s));
  const std::string out = dir.Join("words");
  const std::string cmd = "cd '" + dir.path() + "' && OUT='" + out + "' /bin/sh '" + script + "'";
  const int rc = std::system(cmd.c_str());
  EXPECT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 0) << script;
  std::ifstream in(out, std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> words;
  std::string cur;
  for (char c : all) {
    if (c == '\0') {
      words.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  return words;
}

TEST(SbatchTest, TranslatesEveryOption) {
  SbatchSpec s = Spec();
  s.name = "train";
  s.output = "logs/run-%j.txt";
  s.time_limit_ms = 90 * 60 * 1000 + 1;  // rounded up to the second
  s.after = {"12", "13"};
  s.requeue = true;
  s.mail_user = "alice";  // --notify mail
  EXPECT_THAT(SbatchArgv(s), ElementsAre("sbatch", "--parsable", "--nodes=1", "--job-name=train", "--chdir=/home/alice/exp",
                                         "--output=logs/run-%j.txt", "--gpus=2", "--time=0-01:30:01",
                                         "--dependency=afterok:12:13", "--kill-on-invalid-dep=yes", "--requeue",
                                         "--mail-type=END,FAIL", "--mail-user=alice"));
}

TEST(SbatchTest, DefaultsAndGresType) {
  SbatchSpec s = Spec();
  s.argv = {"/opt/bin/train.sh"};
  s.gres_type = "a100-sxm4-80gb";
  EXPECT_THAT(SbatchArgv(s), ElementsAre("sbatch", "--parsable", "--nodes=1", "--job-name=train.sh", "--chdir=/home/alice/exp",
                                         "--output=gpuman-%j.log", "--gres=gpu:a100-sxm4-80gb:2", "--no-requeue"));
  s.gpus = 0;  // no GPU request at all
  for (const auto& a : SbatchArgv(s)) {
    EXPECT_THAT(a, ::testing::Not(::testing::AnyOf(HasSubstr("--gpus"), HasSubstr("--gres")))) << a;
  }
}

TEST(SbatchTest, AnArrayIsSlurmsOwnWithATaskLogEach) {
  SbatchSpec s = Spec();
  s.argv = {"train.sh"};
  s.array = "0-99%8";
  EXPECT_THAT(SbatchArgv(s), ElementsAre("sbatch", "--parsable", "--nodes=1", "--job-name=train.sh", "--chdir=/home/alice/exp",
                                         "--output=gpuman-%A_%a.log", "--array=0-99%8", "--gpus=2", "--no-requeue"));
}

TEST(SbatchTest, TimeLimits) {
  EXPECT_EQ(SlurmTimeLimit(1), "0-00:00:01");
  EXPECT_EQ(SlurmTimeLimit(60000), "0-00:01:00");
  EXPECT_EQ(SlurmTimeLimit(int64_t{3} * 86400000 + 3600000 * 5 + 7000), "3-05:00:07");
}

TEST(SbatchTest, ScriptRunsTheJobUnderGpumanRun) {
  SbatchSpec s = Spec();
  s.allow_shared = true;
  EXPECT_EQ(BatchScript(s),
            "#!/bin/sh\nexec '/usr/bin/gpuman' 'run' '-q' '-n' '2' '--allow-shared' '--' 'python' 'train.py'\n");
}

// --mig: Slurm gives the job MIG devices of the profile's type (gres_type), and the node's
// run leases MIG devices of that profile inside the allocation.
TEST(SbatchTest, MigIsTheGresTypeAndTheNodesRunAsksForTheProfile) {
  SbatchSpec s = Spec();
  s.gres_type = "a100_1g.10gb";
  s.mig_profile = "1g.10gb";
  EXPECT_EQ(BatchScript(s),
            "#!/bin/sh\nexec '/usr/bin/gpuman' 'run' '-q' '-n' '2' '--mig' '1g.10gb' '--' 'python' 'train.py'\n");
  EXPECT_THAT(SbatchArgv(s), ::testing::Contains("--gres=gpu:a100_1g.10gb:2"));
}

TEST(SbatchTest, HostileArgumentsReachTheJobExactly) {
  const std::vector<std::string> hostile = {
      "it's", "$(touch pwned)", "`touch pwned`", "a b\tc", "*", "\\", "\"", "'", "''", "-", "--", "",
      "line1\n#SBATCH --gres=gpu:8\nline3", "${HOME}", "; rm -rf ~ ;", "\x1b[2J", "é"};
  const auto words = WordsTheShellPasses(hostile);
  std::vector<std::string> expected = {"run", "-q", "-n", "2", "--"};
  expected.insert(expected.end(), hostile.begin(), hostile.end());
  EXPECT_EQ(words, expected);
}

TEST(SbatchTest, NoArgumentCanBecomeAnSbatchDirective) {
  SbatchSpec s = Spec();
  s.argv = {"x\n#SBATCH --gres=gpu:8", "\n#SBATCH -t 99"};
  const std::string script = BatchScript(s);
  std::istringstream lines(script);
  std::string first, second;
  std::getline(lines, first);
  std::getline(lines, second);
  EXPECT_EQ(first, "#!/bin/sh");
  // sbatch reads #SBATCH lines only before the first command: the second line is one.
  EXPECT_EQ(second.rfind("exec ", 0), 0u) << second;
}

TEST(SbatchTest, ShellQuote) {
  EXPECT_EQ(ShellQuote("a"), "'a'");
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
  EXPECT_EQ(ShellQuote(""), "''");
}

TEST(SbatchTest, ParsesSbatchOutput) {
  EXPECT_EQ(*ParseSbatchJobId("123\n"), "123");
  EXPECT_EQ(*ParseSbatchJobId("77;cluster2\n"), "77");
  EXPECT_FALSE(ParseSbatchJobId("Submitted batch job 5\n"));
  EXPECT_FALSE(ParseSbatchJobId(""));
}

TEST(SbatchTest, GresTypeForModel) {
  const std::vector<std::string> types = ParseSinfoGpuTypes("gpu:a100-sxm4-80gb:4(S:0-1),gpu:h100_80gb_hbm3:8\ngpu:8\ngpu:rtx_4090:2\n");
  EXPECT_THAT(types, ElementsAre("a100-sxm4-80gb", "h100_80gb_hbm3", "rtx_4090"));
  EXPECT_EQ(*ResolveGresType("A100", types), "a100-sxm4-80gb");
  EXPECT_EQ(*ResolveGresType("4090", types), "rtx_4090");
  EXPECT_EQ(*ResolveGresType("NVIDIA H100 80GB HBM3", types), "h100_80gb_hbm3");  // spelled as gres-conf spells it
  const auto none = ResolveGresType("V100", types);
  ASSERT_FALSE(none);
  EXPECT_THAT(none.error().message, HasSubstr("no Slurm GPU type contains 'v100'"));
  const auto several = ResolveGresType("0", types);
  ASSERT_FALSE(several);
  EXPECT_THAT(several.error().message, HasSubstr("matches several"));
  EXPECT_EQ(*ResolveGresType("A100", {}), "a100");  // sinfo could not say: as spelled
}

const char* kScontrolRunning =
    "JobId=56 JobName=my job UserId=alice(1001) GroupId=alice(1001) MCS_label=N/A Priority=1 Nice=0 Account=a QOS=normal "
    "JobState=RUNNING Reason=None Dependency=(null) Requeue=0 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0 "
    "RunTime=00:00:02 TimeLimit=00:01:00 TimeMin=N/A SubmitTime=2026-12-01T15:24:49 StartTime=2026-12-01T15:24:51 "
    "EndTime=2026-12-01T15:25:51 AllocNode:Sid=localhost:23475 NodeList=vm NumNodes=1 "
    "TRES=cpu=1,mem=24105M,node=1,billing=1,gres/gpu=2 Socks/Node=* Command=(null) WorkDir=/tmp/my dir "
    "StdErr=/tmp/my dir/a-56.log StdIn=/dev/null StdOut=/tmp/my dir/a-56.log Power= TresPerJob=gres:gpu:2 \n";

TEST(SbatchTest, ParsesScontrol) {
  auto job = JobFromScontrol(kScontrolRunning);
  ASSERT_TRUE(job) << job.error().message;
  EXPECT_EQ(job->id, "56");
  EXPECT_EQ(job->name, "my job");
  EXPECT_EQ(job->user, "alice");
  EXPECT_EQ(job->state, "RUNNING");
  EXPECT_EQ(job->reason, "");
  EXPECT_EQ(job->gpus, 2);
  EXPECT_EQ(job->nodes, "vm");
  EXPECT_EQ(job->cwd, "/tmp/my dir");
  EXPECT_EQ(job->output_path, "/tmp/my dir/a-56.log");
  EXPECT_EQ(job->started, "2026-12-01T15:24:51");
  EXPECT_EQ(GpumanState(*job), model::JobState::kRunning);

  auto failed = JobFromScontrol("JobId=7 JobName=x UserId=bob(2) JobState=FAILED Reason=NonZeroExitCode ExitCode=3:0 "
                                "TresPerNode=gres:gpu:1");
  ASSERT_TRUE(failed);
  EXPECT_EQ(failed->exit_code, 3);
  EXPECT_FALSE(failed->signal);
  EXPECT_EQ(failed->gpus, 1);
  auto killed = JobFromScontrol("JobId=8 JobName=x UserId=bob(2) JobState=FAILED ExitCode=0:9");
  ASSERT_TRUE(killed);
  EXPECT_EQ(killed->signal, 9);
  EXPECT_FALSE(JobFromScontrol(""));
}

TEST(SbatchTest, ParsesSqueueJson) {
  const std::string v38 = R"J({"meta":{},"errors":[],"jobs":[
    {"job_id":57,"name":"beta","user_name":"root","job_state":"PENDING","state_reason":"Dependency",
     "tres_req_str":"cpu=1,node=1,gres/gpu=1","tres_alloc_str":"","tres_per_node":"gres:gpu:1","nodes":"",
     "submit_time":1796138689,"start_time":0,"end_time":0,"time_limit":1,"dependency":"afterok:56(unfulfilled)",
     "current_working_directory":"/tmp/ss"},
    {"job_id":58,"name":"g","user_name":"bob","job_state":"COMPLETED","tres_alloc_str":"cpu=1,gres/gpu=4"}]})J";
  auto jobs = JobsFromSqueueJson(v38);
  ASSERT_TRUE(jobs) << jobs.error().message;
  ASSERT_EQ(jobs->size(), 2u);
  EXPECT_EQ((*jobs)[0].id, "57");
  EXPECT_EQ((*jobs)[0].reason, "Dependency");
  EXPECT_EQ((*jobs)[0].gpus, 1);
  EXPECT_EQ((*jobs)[0].time_limit, "0-00:01:00");
  EXPECT_EQ((*jobs)[0].started, "");
  EXPECT_EQ((*jobs)[0].dependency, "afterok:56(unfulfilled)");
  EXPECT_EQ((*jobs)[1].gpus, 4);
  EXPECT_EQ(GpumanState((*jobs)[1]), model::JobState::kSucceeded);
  // Slurm 23.x: states as lists, numbers as objects.
  auto v40 = JobsFromSqueueJson(R"({"jobs":[{"job_id":{"set":true,"number":9},"job_state":["RUNNING"],
     "time_limit":{"set":true,"infinite":false,"number":120}}]})");
  ASSERT_TRUE(v40);
  ASSERT_EQ(v40->size(), 1u);
  EXPECT_EQ((*v40)[0].id, "9");
  EXPECT_EQ((*v40)[0].state, "RUNNING");
  EXPECT_EQ((*v40)[0].time_limit, "0-02:00:00");
  EXPECT_FALSE(JobsFromSqueueJson("squeue: error: x"));
}

TEST(SbatchTest, ParsesSacct) {
  const std::string us(1, '\x1f');
  const std::string line = "56" + us + "CANCELLED by 0" + us + "0:0" + us + "root" + us + "vm" + us +
                           "billing=1,cpu=1,gres/gpu=2,node=1" + us + "00:01:00" + us + "2026-12-01T15:24:49" + us +
                           "2026-12-01T15:24:51" + us + "2026-12-01T15:24:54" + us + "/tmp/ss" + us + "a" + us + "b\n";
  auto job = JobFromSacct(line, "56");
  ASSERT_TRUE(job) << job.error().message;
  EXPECT_EQ(job->state, "CANCELLED");
  EXPECT_EQ(job->gpus, 2);
  EXPECT_EQ(job->cwd, "/tmp/ss");
  EXPECT_EQ(job->name, "a" + us + "b");  // the name is last and may hold the delimiter
  EXPECT_EQ(GpumanState(*job), model::JobState::kCancelled);
  EXPECT_FALSE(JobFromSacct(line, "57"));
}

TEST(SbatchTest, States) {
  auto state = [](std::string s, std::string reason = "") {
    SlurmJob j;
    j.state = std::move(s);
    j.reason = std::move(reason);
    return GpumanState(j);
  };
  EXPECT_EQ(state("PENDING", "Resources"), model::JobState::kQueued);
  EXPECT_EQ(state("PENDING", "JobHeldUser"), model::JobState::kHeld);
  EXPECT_EQ(state("COMPLETING"), model::JobState::kRunning);
  EXPECT_EQ(state("TIMEOUT"), model::JobState::kTimedOut);
  EXPECT_EQ(state("NODE_FAIL"), model::JobState::kFailed);
  EXPECT_TRUE(IsFinalSlurmState("OUT_OF_MEMORY"));
  EXPECT_FALSE(IsFinalSlurmState("COMPLETING"));  // its output may still be written
}

TEST(SbatchTest, SubmitSendsTheScriptOnStdin) {
  testing::FakeSlurmTools tools;
  tools.Answer({"sbatch"}, 0, "4242\n");
  auto id = Submit(tools, Spec());
  ASSERT_TRUE(id) << id.error().message;
  EXPECT_EQ(*id, "4242");
  ASSERT_EQ(tools.calls.size(), 1u);
  EXPECT_EQ(tools.calls[0].argv, SbatchArgv(Spec()));
  EXPECT_EQ(tools.calls[0].input, BatchScript(Spec()));

  testing::FakeSlurmTools refusing;
  refusing.Answer({"sbatch"}, 1, "", "sbatch: error: Batch job submission failed: Requested node configuration is not available\n");
  auto refused = Submit(refusing, Spec());
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kInvalidArgument);
  EXPECT_THAT(refused.error().message, HasSubstr("Requested node configuration is not available"));
}

TEST(SbatchTest, FindJobFallsBackToAccounting) {
  testing::FakeSlurmTools tools;
  tools.Answer({"scontrol"}, 1, "", "slurm_load_jobs error: Invalid job id specified\n");
  const std::string us(1, '\x1f');
  tools.Answer({"sacct"}, 0, "9" + us + "COMPLETED" + us + "0:0" + us + "root" + us + "vm" + us + "gres/gpu=1" + us + "1" + us +
                                 "" + us + "" + us + "" + us + "/w" + us + "n\n");
  auto job = FindJob(tools, "9");
  ASSERT_TRUE(job) << job.error().message;
  EXPECT_EQ(job->source, "sacct");
  EXPECT_EQ(job->state, "COMPLETED");

  testing::FakeSlurmTools no_accounting;
  no_accounting.Answer({"scontrol"}, 1, "", "slurm_load_jobs error: Invalid job id specified\n");
  no_accounting.Answer({"sacct"}, 1, "", "sacct: error: Slurm accounting storage is disabled\n");
  auto missing = FindJob(no_accounting, "9");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_THAT(missing.error().message, HasSubstr("accounting storage is disabled"));
}

TEST(SbatchTest, CancelReportsSlurmsRefusal) {
  testing::FakeSlurmTools tools;
  tools.Answer({"scontrol"}, 0, "JobId=5 JobName=x UserId=root(0) JobState=RUNNING\n");
  tools.Answer({"scancel"}, 210, "", "scancel: error: Kill job error on job id 5: Access/permission denied\n");
  const Status st = Cancel(tools, "5");
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().code, ErrorCode::kPermissionDenied);
  EXPECT_THAT(tools.CallsOf("scancel")[0].argv, ElementsAre("scancel", "5"));  // as the caller, nothing else

  testing::FakeSlurmTools ended;
  ended.Answer({"scontrol"}, 0, "JobId=5 JobName=x UserId=root(0) JobState=COMPLETED\n");
  const Status late = Cancel(ended, "5");
  ASSERT_FALSE(late);
  EXPECT_EQ(late.error().code, ErrorCode::kConflict);
  EXPECT_TRUE(ended.CallsOf("scancel").empty());
}

}  // namespace
}  // namespace gpuman::slurm
