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

}  // namespace
}  // namespace gpuman::sched
