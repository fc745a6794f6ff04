// ChildProcess against the real OS: real children, real signals (ninja subprocess_test).
#include "sched/child_process.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "support/temp_dir.h"

extern char** environ;

namespace gpuman::sched {
namespace {

using gpuman::testing::TempDir;

JobSpec Spec(std::vector<std::string> argv, std::vector<std::string> extra_env = {}) {
  JobSpec spec;
  spec.argv = std::move(argv);
  for (char** e = environ; *e; ++e) spec.env.emplace_back(*e);
  for (auto& e : extra_env) spec.env.push_back(std::move(e));
  return spec;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int RunToEnd(const JobSpec& spec, const StartInfo& info = {}) {
  auto child = ChildProcess::Fork(spec);
  EXPECT_TRUE(child.has_value());
  if (!child) return -1;
  auto started = (*child)->Start(info);
  EXPECT_TRUE(started.has_value()) << started.error().message;
  return (*child)->WaitForwardingSignals(1000);
}

TEST(ChildProcessTest, ExitCodesAndSignals) {
  EXPECT_EQ(RunToEnd(Spec({"true"})), 0);
  EXPECT_EQ(RunToEnd(Spec({"sh", "-c", "exit 3"})), 3);
  EXPECT_EQ(RunToEnd(Spec({"sh", "-c", "kill -9 $$"})), 128 + 9);
}

TEST(ChildProcessTest, ArgvIsNotReinterpretedByAShell) {
  TempDir dir;
  std::string out = dir.Join("out");
  // An argument with shell metacharacters arrives verbatim.
  EXPECT_EQ(RunToEnd(Spec({"sh", "-c", "printf '%s' \"$1\" > \"$2\"", "sh", "a b; $(rm -rf /) `x`", out})), 0);
  EXPECT_EQ(Slurp(out), "a b; $(rm -rf /) `x`");
}

TEST(ChildProcessTest, GetsTheGivenEnvironment) {
  TempDir dir;
  std::string out = dir.Join("env");
  EXPECT_EQ(RunToEnd(Spec({"sh", "-c", "echo \"$CUDA_VISIBLE_DEVICES\" > " + out},
                          {"CUDA_VISIBLE_DEVICES=GPU-abc,GPU-def"})),
            0);
  EXPECT_EQ(Slurp(out), "GPU-abc,GPU-def\n");
}

TEST(ChildProcessTest, StartInfoEnvironmentOverridesTheSpec) {
  TempDir dir;
  std::string out = dir.Join("env");
  StartInfo info;
  info.env = {"CUDA_VISIBLE_DEVICES=GPU-chosen", "GPUMAN_LEASE_ID=7"};
  EXPECT_EQ(RunToEnd(Spec({"sh", "-c", "echo \"$CUDA_VISIBLE_DEVICES $GPUMAN_LEASE_ID\" > " + out},
                          {"CUDA_VISIBLE_DEVICES=0,1"}),
                     info),
            0);
  EXPECT_EQ(Slurp(out), "GPU-chosen 7\n");
}

TEST(ChildProcessTest, MissingCommandIsAClearError) {
  auto child = ChildProcess::Fork(Spec({"/nonexistent/definitely-not-here"}));
  ASSERT_TRUE(child.has_value());
  auto started = (*child)->Start();
  ASSERT_FALSE(started.has_value());
  EXPECT_EQ(started.error().code, ErrorCode::kNotFound);
  EXPECT_NE(started.error().message.find("no such file or directory"), std::string::npos) << started.error().message;
}

TEST(ChildProcessTest, CommandIsFoundOnTheJobsPathNotOurs) {
  TempDir dir;
  std::filesystem::create_directories(dir.Join("bin"));
  const std::string out = dir.Join("out");
  std::ofstream(dir.Join("bin/gpuman-only-here")) << "#!/bin/sh\necho found > " << out << "\n";
  chmod(dir.Join("bin/gpuman-only-here").c_str(), 0755);
  JobSpec spec = Spec({"gpuman-only-here"});
  std::erase_if(spec.env, [](const std::string& e) { return e.rfind("PATH=", 0) == 0; });
  spec.env.push_back("PATH=/usr/bin:" + dir.Join("bin"));
  EXPECT_EQ(RunToEnd(spec), 0);
  EXPECT_EQ(Slurp(out), "found\n");
}

TEST(ChildProcessTest, NeverRunsWithoutStart) {
  TempDir dir;
  std::string marker = dir.Join("ran");
  {
    auto child = ChildProcess::Fork(Spec({"sh", "-c", "touch " + marker}));
    ASSERT_TRUE(child.has_value());
    // Destroyed without Start(): as if the runner died before recording the lease.
  }
  usleep(100 * 1000);
  EXPECT_FALSE(std::filesystem::exists(marker));
}

TEST(ChildProcessTest, ForwardsTerminationToTheJob) {
  auto child = ChildProcess::Fork(Spec({"sleep", "30"}));
  ASSERT_TRUE(child.has_value());
  ASSERT_TRUE((*child)->Start().has_value());
  kill(getpid(), SIGTERM);  // blocked in the runner, so it is forwarded, not fatal
  EXPECT_EQ((*child)->WaitForwardingSignals(1000), 128 + SIGTERM);
}

TEST(ChildProcessTest, LeftoversOfTheProcessGroupAreEnded) {
  TempDir dir;
  std::string pidfile = dir.Join("pid");
  EXPECT_EQ(RunToEnd(Spec({"sh", "-c", "sleep 60 & echo $! > " + pidfile + "; exit 0"})), 0);
  pid_t leftover = std::stoi(Slurp(pidfile));
  usleep(50 * 1000);
  EXPECT_NE(kill(leftover, 0), 0) << "background process of the job still alive";
}

TEST(ChildProcessTest, AppliesCpuAffinity) {
  TempDir dir;
  std::string out = dir.Join("cpus");
  JobSpec spec = Spec({"sh", "-c", "grep Cpus_allowed_list /proc/self/status > " + out});
  StartInfo info;
  info.cpu_affinity = {0};
  EXPECT_EQ(RunToEnd(spec, info), 0);
  EXPECT_NE(Slurp(out).find("\t0\n"), std::string::npos) << Slurp(out);
}

// `run --per-gpu`: one process per rank, one process group, each with its own StartInfo.
std::vector<StartInfo> RankInfos(int ranks) {
  std::vector<StartInfo> infos(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r) infos[static_cast<size_t>(r)].env = {"RANK=" + std::to_string(r)};
  return infos;
}

TEST(ChildProcessTest, RanksShareOneProcessGroupAndGetTheirOwnStart) {
  TempDir dir;
  JobSpec spec = Spec({"sh", "-c", "echo \"$RANK $(cut -d' ' -f5 /proc/$$/stat)\" > \"$0.$RANK\"", dir.Join("out")});
  spec.processes = 3;
  auto child = ChildProcess::Fork(spec);
  ASSERT_TRUE(child.has_value()) << child.error().message;
  const auto pids = (*child)->pids();
  ASSERT_EQ(pids.size(), 3u);
  EXPECT_EQ(pids.front(), (*child)->pid());
  ASSERT_TRUE((*child)->Start(RankInfos(3)).has_value());
  const JobEnd end = (*child)->Wait();
  EXPECT_EQ(end.exit_code, 0);
  EXPECT_FALSE(end.failed);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(Slurp(dir.Join("out." + std::to_string(r))), std::to_string(r) + " " + std::to_string(pids.front()) + "\n")
        << "rank " << r << ": its RANK, and the first rank's process group";
  }
}

TEST(ChildProcessTest, AFailingRankStopsTheOthersAndGivesItsCode) {
  TempDir dir;
  // Rank 1 fails once the others have set their trap; they wait until they are stopped.
  JobSpec spec = Spec({"sh", "-c",
                       "if [ $RANK = 1 ]; then while [ ! -e \"$0.ready0\" ] || [ ! -e \"$0.ready2\" ]; do sleep 0.01; done; "
                       "exit 3; fi; trap 'echo term > \"$0.term$RANK\"; exit 9' TERM; touch \"$0.ready$RANK\"; "
                       "while :; do sleep 0.05; done",
                       dir.Join("m")});
  spec.processes = 3;
  auto child = ChildProcess::Fork(spec);
  ASSERT_TRUE(child.has_value());
  ASSERT_TRUE((*child)->Start(RankInfos(3)).has_value());
  WaitOptions options;
  options.stop_grace_ms = 30000;
  const JobEnd end = (*child)->Wait(options);
  EXPECT_EQ(end.exit_code, 3) << "the failing rank's code, not the stopped ones' 9";
  ASSERT_TRUE(end.failed);
  EXPECT_EQ(*end.failed, 1);
  EXPECT_TRUE(end.stopped_others);
  EXPECT_EQ(end.forwarded_signal, 0);
  EXPECT_EQ(Slurp(dir.Join("m.term0")), "term\n");
  EXPECT_EQ(Slurp(dir.Join("m.term2")), "term\n");
}

TEST(ChildProcessTest, ARankThatIgnoresTermIsKilledAfterTheGrace) {
  TempDir dir;
  JobSpec spec = Spec({"sh", "-c",
                       "if [ $RANK = 0 ]; then while [ ! -e \"$0\" ]; do sleep 0.01; done; exit 4; fi; "
                       "trap '' TERM; touch \"$0\"; exec sleep 60",
                       dir.Join("ignoring")});
  spec.processes = 2;
  auto child = ChildProcess::Fork(spec);
  ASSERT_TRUE(child.has_value());
  ASSERT_TRUE((*child)->Start(RankInfos(2)).has_value());
  WaitOptions options;
  options.stop_grace_ms = 0;
  const JobEnd end = (*child)->Wait(options);
  EXPECT_EQ(end.exit_code, 4);
  EXPECT_TRUE(end.stopped_others) << "sleep ignores TERM: only the KILL ends it, or Wait would not return";
}

TEST(ChildProcessTest, ASignalToTheRunnerReachesEveryRank) {
  TempDir dir;
  JobSpec spec = Spec({"sh", "-c", "trap 'echo term > \"$0.$RANK\"; exit 7' TERM; touch \"$0.up$RANK\"; while :; do sleep 0.05; done",
                       dir.Join("t")});
  spec.processes = 2;
  auto child = ChildProcess::Fork(spec);
  ASSERT_TRUE(child.has_value());
  ASSERT_TRUE((*child)->Start(RankInfos(2)).has_value());
  for (int i = 0; i < 600 && (access(dir.Join("t.up0").c_str(), F_OK) != 0 || access(dir.Join("t.up1").c_str(), F_OK) != 0); ++i) {
    usleep(50 * 1000);
  }
  kill(getpid(), SIGTERM);  // blocked in the runner, so it is forwarded, not fatal
  const JobEnd end = (*child)->Wait();
  EXPECT_EQ(end.exit_code, 7);
  EXPECT_EQ(end.forwarded_signal, SIGTERM);
  EXPECT_FALSE(end.stopped_others) << "the forwarded signal was ending them already";
  EXPECT_EQ(Slurp(dir.Join("t.0")), "term\n");
  EXPECT_EQ(Slurp(dir.Join("t.1")), "term\n");
}

TEST(ChildProcessTest, ARankEndedBySigintDoesNotStopTheOthers) {
  // Ctrl-C reaches every rank itself; a TERM on top would cut short their own handling.
  TempDir dir;
  JobSpec spec = Spec({"sh", "-c",
                       "if [ $RANK = 0 ]; then echo $$ > \"$0.pid\"; kill -INT $$; fi; "
                       "trap 'echo term > \"$0.term\"; exit 9' TERM; "
                       "while [ ! -s \"$0.pid\" ] || kill -0 $(cat \"$0.pid\") 2>/dev/null; do sleep 0.01; done; "
                       "sleep 0.3; exit 0",
                       dir.Join("i")});
  spec.processes = 2;
  auto child = ChildProcess::Fork(spec);
  ASSERT_TRUE(child.has_value());
  ASSERT_TRUE((*child)->Start(RankInfos(2)).has_value());
  const JobEnd end = (*child)->Wait();
  EXPECT_EQ(end.exit_code, 128 + SIGINT);
  EXPECT_FALSE(end.stopped_others);
  EXPECT_EQ(Slurp(dir.Join("i.term")), "") << "rank 1 was sent TERM";
}

TEST(ChildProcessTest, AMissingCommandStartsNoRank) {
  JobSpec spec = Spec({"gpuman-no-such-command"});
  spec.processes = 3;
  auto child = ChildProcess::Fork(spec);
  ASSERT_TRUE(child.has_value());
  const auto pids = (*child)->pids();
  auto started = (*child)->Start(RankInfos(3));
  ASSERT_FALSE(started.has_value());
  EXPECT_EQ(started.error().code, ErrorCode::kNotFound);
  for (pid_t pid : pids) EXPECT_NE(kill(pid, 0), 0) << pid << " was reaped";
}

}  // namespace
}  // namespace gpuman::sched
