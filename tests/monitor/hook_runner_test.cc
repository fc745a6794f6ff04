// HookRunner against real children. The hooks here are exec'd as argv like any other; a
// few use /bin/sh as *their own program* to observe stdin or to hang.
#include "monitor/hook_runner.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <fcntl.h>
#include <sys/stat.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "support/fake_clock.h"
#include "support/temp_dir.h"

namespace gpuman::monitor {
namespace {

using ::gpuman::testing::FakeClock;

// Calls Reap until every hook ended, collecting outcomes; gives up after ~20 s so a broken
// runner fails the test instead of hanging it (not a timing assertion).
std::vector<HookOutcome> ReapAll(HookRunner& runner) {
  std::vector<HookOutcome> all;
  for (int i = 0; i < 2000 && runner.running() > 0; ++i) {
    auto done = runner.Reap();
    all.insert(all.end(), done.begin(), done.end());
    if (runner.running() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return all;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// True once /proc/PID is gone or shows a zombie; waits up to ~20 s for SIGKILL to land.
bool IsGoneOrZombie(const std::string& pid) {
  for (int i = 0; i < 2000; ++i) {
    std::string stat = ReadFile("/proc/" + pid + "/stat");
    size_t paren = stat.rfind(')');
    if (stat.empty() || (paren != std::string::npos && stat.compare(paren + 2, 1, "Z") == 0)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

TEST(HookRunnerTest, HookGetsThePayloadOnStdin) {
  testing::TempDir dir;
  std::string out = dir.Join("payload.json");
  HookRunner runner;
  std::string payload = R"({"rule":"hot","state":"firing"})";
  ASSERT_TRUE(runner.Run({"/bin/sh", "-c", "cat > \"$0\"", out}, payload));
  auto outcomes = ReapAll(runner);
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_TRUE(outcomes[0].ok) << outcomes[0].message;
  EXPECT_EQ(outcomes[0].exit_code, 0);
  EXPECT_EQ(ReadFile(out), payload);
  EXPECT_EQ(runner.stats().started, 1);
  EXPECT_EQ(runner.stats().succeeded, 1);
}

TEST(HookRunnerTest, LargePayloadIsFedAcrossTicks) {
  testing::TempDir dir;
  std::string out = dir.Join("big.json");
  HookRunner runner;
  std::string payload(300 * 1024, 'x');  // more than a pipe holds
  ASSERT_TRUE(runner.Run({"/bin/sh", "-c", "cat > \"$0\"", out}, payload));
  auto outcomes = ReapAll(runner);
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_TRUE(outcomes[0].ok) << outcomes[0].message;
  EXPECT_EQ(ReadFile(out).size(), payload.size());
}

TEST(HookRunnerTest, ProgramIsFoundInTheSearchPathNotThroughAShell) {
  testing::TempDir dir;
  std::string out = dir.Join("args");
  HookRunner runner;
  // Shell metacharacters in an argument stay one literal argument.
  ASSERT_TRUE(runner.Run({"sh", "-c", "printf '%s' \"$1\" > \"$0\"", out, "a b; $(id)"}, "{}"));
  auto outcomes = ReapAll(runner);
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_TRUE(outcomes[0].ok) << outcomes[0].message;
  EXPECT_EQ(ReadFile(out), "a b; $(id)");
}

TEST(HookRunnerTest, HookEnvironmentIsTheConfiguredOne) {
  testing::TempDir dir;
  std::string out = dir.Join("env");
  HookRunnerOptions options;
  options.env = {"PATH=/usr/bin:/bin", "GPUMAN_TEST=1"};
  HookRunner runner(options);
  ASSERT_TRUE(runner.Run({"/bin/sh", "-c", "env > \"$0\"", out}, "{}"));
  ASSERT_EQ(ReapAll(runner).size(), 1u);
  std::string env = ReadFile(out);
  EXPECT_NE(env.find("GPUMAN_TEST=1"), std::string::npos) << env;
  EXPECT_EQ(env.find("HOME="), std::string::npos) << env;
}

TEST(HookRunnerTest, HookThatHangsIsKilledAfterTheTimeout) {
  FakeClock clock{1000};
  HookRunnerOptions options;
  options.timeout_ms = 5000;
  options.clock = &clock;
  HookRunner runner(options);
  testing::TempDir dir;
  std::string pid_file = dir.Join("pid");
  ASSERT_TRUE(runner.Run({"/bin/sh", "-c", "sleep 600 & echo $! > \"$0\"; wait", pid_file}, "{}"));
  EXPECT_TRUE(runner.Reap().empty());  // still within its time
  EXPECT_EQ(runner.running(), 1);
  std::string background;
  for (int i = 0; i < 2000 && background.empty(); ++i) {
    background = ReadFile(pid_file);
    if (background.empty() || background.back() != '\n') {
      background.clear();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  ASSERT_FALSE(background.empty());
  background.pop_back();
  clock.Advance(5000);
  auto outcomes = ReapAll(runner);
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_TRUE(outcomes[0].timed_out);
  EXPECT_FALSE(outcomes[0].ok);
  EXPECT_EQ(outcomes[0].signal, SIGKILL);
  EXPECT_NE(outcomes[0].message.find("timed out"), std::string::npos) << outcomes[0].message;
  // The whole process group went: the background sleep is gone too (or a zombie that
  // init has not reaped yet).
  EXPECT_TRUE(IsGoneOrZombie(background)) << "pid " << background;
  EXPECT_EQ(runner.stats().timed_out, 1);
  EXPECT_EQ(runner.stats().failed, 1);
}

TEST(HookRunnerTest, ACommandRunsAsItsUserInItsDirectoryWithItsEnvironmentAndOutput) {
  if (geteuid() != 0) GTEST_SKIP() << "changing uid and gid needs root";
  testing::TempDir dir;
  chmod(dir.path().c_str(), 0777);
  const std::string work = dir.Join("work"), log = dir.Join("job.log");
  mkdir(work.c_str(), 0777);
  std::ofstream(log) << "job output\n";
  chown(log.c_str(), 65534, 65534);
  HookRunnerOptions options;
  options.label = "notify";
  HookRunner runner(options);
  HookCommand command;
  command.argv = {"/bin/sh", "-c", "echo \"$(id -u) $(id -g) $(id -G) $(pwd) $GREETING [$(cat)]\"; env | sort > \"$0\"",
                  dir.Join("env")};
  command.env = std::vector<std::string>{"PATH=/usr/bin:/bin", "GREETING=hi"};
  command.cwd = work;
  command.uid = 65534;
  command.gid = 65534;
  command.groups = std::vector<gid_t>{65534};
  command.output_file = log;
  command.tag = 42;
  ASSERT_TRUE(runner.Start(command));
  auto outcomes = ReapAll(runner);
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_TRUE(outcomes[0].ok) << outcomes[0].message;
  EXPECT_EQ(outcomes[0].tag, 42);
  EXPECT_EQ(ReadFile(log), "job output\n65534 65534 65534 " + work + " hi []\n") << "appended, stdin empty";
  // A log the user may not write: its output goes nowhere, and it still runs.
  const std::string roots = dir.Join("roots.log");
  std::ofstream(roots) << "root's\n";
  chmod(roots.c_str(), 0644);
  command.output_file = roots;
  command.argv = {"/bin/sh", "-c", "echo leaked; touch \"$0\"", dir.Join("ran")};
  ASSERT_TRUE(runner.Start(command));
  outcomes = ReapAll(runner);
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_TRUE(outcomes[0].ok) << outcomes[0].message;
  EXPECT_EQ(ReadFile(roots), "root's\n");
  EXPECT_TRUE(std::ifstream(dir.Join("ran")).good());
}

TEST(HookRunnerTest, WithAGraceATimedOutHookGetsSigtermThenSigkill) {
  FakeClock clock{1000};
  HookRunnerOptions options;
  options.timeout_ms = 5000;
  options.kill_grace_ms = 3000;
  options.clock = &clock;
  HookRunner runner(options);
  testing::TempDir dir;
  const std::string ready = dir.Join("ready"), termed = dir.Join("termed");
  // Ignores SIGTERM, but says it got it.
  ASSERT_TRUE(runner.Run({"/bin/sh", "-c", "trap 'echo > \"$1\"' TERM; echo > \"$0\"; while :; do sleep 0.05; done", ready, termed}, ""));
  for (int i = 0; i < 2000 && !std::ifstream(ready).good(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(std::ifstream(ready).good());
  clock.Advance(5000);
  EXPECT_TRUE(runner.Reap().empty()) << "SIGTERM does not end it";
  for (int i = 0; i < 2000 && !std::ifstream(termed).good(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(std::ifstream(termed).good()) << "it got SIGTERM at the timeout";
  EXPECT_EQ(runner.running(), 1);
  clock.Advance(3000);
  auto outcomes = ReapAll(runner);
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_EQ(outcomes[0].signal, SIGKILL);
  EXPECT_TRUE(outcomes[0].timed_out);
  EXPECT_NE(outcomes[0].message.find("timed out after 5s, killed"), std::string::npos) << outcomes[0].message;
}

TEST(HookRunnerTest, OverTheLimitIsDroppedAndCounted) {
  FakeClock clock{1000};
  HookRunnerOptions options;
  options.max_concurrent = 2;
  options.clock = &clock;
  options.timeout_ms = 1000;
  HookRunner runner(options);
  ASSERT_TRUE(runner.Run({"/bin/sleep", "600"}, "{}"));
  ASSERT_TRUE(runner.Run({"/bin/sleep", "600"}, "{}"));
  Status third = runner.Run({"/bin/sleep", "600"}, "{}");
  ASSERT_FALSE(third);
  EXPECT_EQ(third.error().code, ErrorCode::kBusy);
  EXPECT_EQ(runner.stats().dropped, 1);
  EXPECT_EQ(runner.stats().started, 2);
  clock.Advance(1000);
  EXPECT_EQ(ReapAll(runner).size(), 2u);
  EXPECT_TRUE(runner.Run({"/bin/true"}, "{}"));  // room again
  ReapAll(runner);
}

TEST(HookRunnerTest, ErrorsAreValues) {
  HookRunner runner;
  Status empty = runner.Run({}, "{}");
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.error().code, ErrorCode::kInvalidArgument);

  Status missing = runner.Run({"/nonexistent/hook"}, "{}");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(missing.error().message, "hook /nonexistent/hook: no such file or directory");

  Status not_in_path = runner.Run({"gpuman-no-such-hook"}, "{}");
  ASSERT_FALSE(not_in_path);
  EXPECT_EQ(not_in_path.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(runner.stats().started, 0);
}

TEST(HookRunnerTest, NonZeroExitIsReportedAndAHookIgnoringStdinIsFine) {
  HookRunner runner;
  ASSERT_TRUE(runner.Run({"/bin/sh", "-c", "exit 3"}, std::string(200 * 1024, 'y')));
  auto outcomes = ReapAll(runner);
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_FALSE(outcomes[0].ok);
  EXPECT_EQ(outcomes[0].exit_code, 3);
  EXPECT_EQ(outcomes[0].message, "hook /bin/sh: exited with status 3");
  EXPECT_EQ(runner.stats().failed, 1);
}

TEST(HookRunnerTest, DescriptorsOfTheDaemonDoNotReachTheHook) {
  testing::TempDir dir;
  std::string out = dir.Join("fds");
  int leaked = fcntl(STDOUT_FILENO, F_DUPFD, 57);  // not CLOEXEC, yet must not reach the hook
  ASSERT_EQ(leaked, 57);
  HookRunner runner;
  ASSERT_TRUE(runner.Run({"/bin/sh", "-c", "ls /proc/self/fd > \"$0\"", out}, "{}"));
  ReapAll(runner);
  close(leaked);
  std::string fds = "\n" + ReadFile(out);
  EXPECT_NE(fds.find("\n0\n1\n2\n"), std::string::npos) << fds;
  EXPECT_EQ(fds.find("\n57\n"), std::string::npos) << fds;
}

TEST(SerializePayloadTest, CompactLineAndInvalidUtf8IsReplaced) {
  nlohmann::json p = {{"rule", "hot"}, {"command", std::string("python \xff\xfe.py")}};
  std::string text = SerializePayload(p);
  EXPECT_EQ(text, "{\"command\":\"python \xEF\xBF\xBD\xEF\xBF\xBD.py\",\"rule\":\"hot\"}\n");
}

}  // namespace
}  // namespace gpuman::monitor
