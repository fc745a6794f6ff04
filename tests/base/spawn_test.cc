// Spawn and FindProgram against the real OS: real children, real files (ninja
// subprocess_test). The uid/gid test needs root and is skipped otherwise.
#include "base/spawn.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "support/temp_dir.h"

namespace gpuman {
namespace {

using gpuman::testing::TempDir;

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int WaitExit(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

SpawnSpec Shell(const std::string& script) {
  SpawnSpec spec;
  spec.argv = {"sh", "-c", script};
  spec.env = std::vector<std::string>{"PATH=/usr/bin:/bin"};
  return spec;
}

// ResolveCommand: execvp's search, against a given PATH, without the shell fallback.
class FindProgramTest : public ::testing::Test {
 protected:
  std::string Make(const std::string& rel, mode_t mode, const std::string& body = "#!/bin/sh\n") {
    std::string path = dir_.Join(rel);
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    std::ofstream(path) << body;
    chmod(path.c_str(), mode);
    return path;
  }
  TempDir dir_;
};

TEST_F(FindProgramTest, FirstExecutableMatchOnPathWins) {
  Make("a/tool", 0755);
  Make("b/tool", 0755);
  auto found = FindProgram("tool", dir_.Join("missing") + ":" + dir_.Join("a") + ":" + dir_.Join("b"));
  ASSERT_TRUE(found.has_value()) << found.error().message;
  EXPECT_EQ(*found, dir_.Join("a/tool"));
}

TEST_F(FindProgramTest, SkipsDirectoriesAndFilesWeMayNotRun) {
  std::filesystem::create_directories(dir_.Join("a/tool"));
  Make("b/tool", 0644);
  Make("c/tool", 0755);
  auto found = FindProgram("tool", dir_.Join("a") + ":" + dir_.Join("b") + ":" + dir_.Join("c"));
  ASSERT_TRUE(found.has_value()) << found.error().message;
  EXPECT_EQ(*found, dir_.Join("c/tool"));
}

TEST_F(FindProgramTest, FoundButNotExecutableIsPermissionDeniedNotNotFound) {
  Make("b/tool", 0644);
  auto found = FindProgram("tool", dir_.Join("a") + ":" + dir_.Join("b"));
  ASSERT_FALSE(found.has_value());
  EXPECT_EQ(found.error().code, ErrorCode::kPermissionDenied);
  EXPECT_EQ(found.error().message, "could not execute " + dir_.Join("b/tool") + ": permission denied");
}

TEST_F(FindProgramTest, NowhereOnPathIsNotFoundNamingThePath) {
  auto found = FindProgram("gpuman-nothing-by-this-name", std::string("/nonexistent:/also-not"));
  ASSERT_FALSE(found.has_value());
  EXPECT_EQ(found.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(found.error().message, "command not found: gpuman-nothing-by-this-name (not in PATH /nonexistent:/also-not)");
}

TEST_F(FindProgramTest, UnsetPathIsBinAndUsrBin) {
  auto found = FindProgram("sh", std::nullopt);
  ASSERT_TRUE(found.has_value()) << found.error().message;
  EXPECT_TRUE(*found == "/bin/sh" || *found == "/usr/bin/sh") << *found;
  auto missing = FindProgram("gpuman-nothing-by-this-name", std::nullopt);
  ASSERT_FALSE(missing.has_value());
  EXPECT_NE(missing.error().message.find("(not in PATH /bin:/usr/bin)"), std::string::npos);
}

TEST_F(FindProgramTest, EmptyPathEntryIsTheCurrentDirectory) {
  Make("here/tool", 0755);
  std::string old = std::filesystem::current_path().string();
  ASSERT_EQ(chdir(dir_.Join("here").c_str()), 0);
  auto found = FindProgram("tool", std::string("/nonexistent::/also-not"));
  auto trailing = FindProgram("tool", std::string("/nonexistent:"));
  ASSERT_EQ(chdir(old.c_str()), 0);
  ASSERT_TRUE(found.has_value()) << found.error().message;
  EXPECT_EQ(*found, "./tool");
  ASSERT_TRUE(trailing.has_value()) << trailing.error().message;
  EXPECT_EQ(*trailing, "./tool");
}

TEST_F(FindProgramTest, NameWithASlashIsNotSearched) {
  Make("a/tool", 0755);
  EXPECT_EQ(*FindProgram(dir_.Join("a/tool"), std::string("/nonexistent")), dir_.Join("a/tool"));
  auto missing = FindProgram(dir_.Join("a/other"), dir_.Join("a"));
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(missing.error().message, "command not found: " + dir_.Join("a/other") + ": no such file");
  auto dir = FindProgram(dir_.Join("a"), std::nullopt);
  ASSERT_FALSE(dir.has_value());
  EXPECT_EQ(dir.error().code, ErrorCode::kPermissionDenied);
  EXPECT_EQ(FindProgram("", std::nullopt).error().code, ErrorCode::kNotFound);
}

TEST(ExecErrorTextTest, NotAnExecutableFormatSaysWhy) {
  EXPECT_EQ(ExecErrorText(ENOEXEC), "not an executable format (a script needs a #! line)");
  EXPECT_EQ(ExecErrorText(EACCES), "permission denied");
}


TEST(EnvValueTest, LastOneWins) {
  EXPECT_EQ(EnvValue({"PATH=/a", "X=1", "PATH=/b"}, "PATH"), "/b");
  EXPECT_FALSE(EnvValue({"PATHX=/a"}, "PATH").has_value());
}

// Exec failures come back through the exec-error pipe, naming the step and the errno.
TEST(SpawnTest, ExecFailureIsReportedWithStepAndErrno) {
  SpawnSpec spec;
  spec.argv = {"x"};
  spec.program = "/nonexistent/definitely-not-here";
  auto child = Spawn(spec);
  ASSERT_TRUE(child.has_value()) << child.error().message;
  SpawnFailure failure;
  Status outcome = child->ExecOutcome(&failure);
  ASSERT_FALSE(outcome);
  EXPECT_EQ(failure.step, SpawnStep::kExec);
  EXPECT_EQ(failure.err, ENOENT);
  EXPECT_EQ(outcome.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(outcome.error().message, "command not found: /nonexistent/definitely-not-here: no such file or directory");
  EXPECT_EQ(WaitExit(child->pid()), 127);
}

TEST(SpawnTest, ScriptWithoutInterpreterLineIsNotGivenToAShell) {
  TempDir dir;
  const std::string tool = dir.Join("tool");
  std::ofstream(tool) << "touch " << dir.Join("ran") << "\n";
  chmod(tool.c_str(), 0755);
  SpawnSpec spec;
  spec.argv = {tool};
  auto child = Spawn(spec);
  ASSERT_TRUE(child.has_value());
  SpawnFailure failure;
  Status outcome = child->ExecOutcome(&failure);
  ASSERT_FALSE(outcome);
  EXPECT_EQ(failure.step, SpawnStep::kExec);
  EXPECT_EQ(failure.err, ENOEXEC);
  EXPECT_EQ(outcome.error().code, ErrorCode::kPermissionDenied);
  EXPECT_EQ(outcome.error().message,
            "could not execute " + tool + ": not an executable format (a script needs a #! line)");
  EXPECT_EQ(WaitExit(child->pid()), 126);
  EXPECT_FALSE(std::filesystem::exists(dir.Join("ran")));
}

TEST(SpawnTest, ProgramIsLookedUpOnTheChildsPath) {
  SpawnSpec spec = Shell("exit 0");
  spec.argv[0] = "gpuman-no-such-program";
  auto child = Spawn(spec);
  ASSERT_TRUE(child.has_value());
  SpawnFailure failure;
  Status outcome = child->ExecOutcome(&failure);
  ASSERT_FALSE(outcome);
  EXPECT_EQ(failure.step, SpawnStep::kFindProgram);
  EXPECT_EQ(outcome.error().message, "command not found: gpuman-no-such-program (not in PATH /usr/bin:/bin)");
  WaitExit(child->pid());

  SpawnSpec found = Shell("exit 7");  // "sh" from PATH=/usr/bin:/bin
  auto ok = Spawn(found);
  ASSERT_TRUE(ok.has_value());
  EXPECT_TRUE(ok->ExecOutcome());
  EXPECT_EQ(WaitExit(ok->pid()), 7);
}

TEST(SpawnTest, FailureIsNotedOnStderrWhenAsked) {
  TempDir dir;
  SpawnSpec spec;
  spec.argv = {"/nonexistent/cmd"};
  spec.stdout_fd = SpawnFd::File(dir.Join("log"), O_WRONLY | O_CREAT | O_APPEND);
  spec.stderr_fd = SpawnFd::SameAsStdout();
  spec.note_failure_on_stderr = true;
  auto child = Spawn(spec);
  ASSERT_TRUE(child.has_value());
  EXPECT_FALSE(child->ExecOutcome());
  WaitExit(child->pid());
  EXPECT_EQ(Slurp(dir.Join("log")), "gpuman: command not found: /nonexistent/cmd: no such file\n");
}

TEST(SpawnTest, EnvironmentDirectoryAndRedirectionsReachTheChild) {
  TempDir dir;
  std::filesystem::create_directories(dir.Join("work"));
  SpawnSpec spec = Shell("echo \"$GREETING\" \"$(pwd)\"; echo to-stderr >&2; cat");
  spec.env->push_back("GREETING=hello there");
  spec.cwd = dir.Join("work");
  std::ofstream(dir.Join("in")) << "from stdin\n";
  spec.stdin_fd = SpawnFd::File(dir.Join("in"), O_RDONLY);
  spec.stdout_fd = SpawnFd::File("out.log", O_WRONLY | O_CREAT | O_TRUNC);  // relative to cwd
  spec.stderr_fd = SpawnFd::SameAsStdout();
  auto child = Spawn(spec);
  ASSERT_TRUE(child.has_value());
  EXPECT_TRUE(child->ExecOutcome());
  EXPECT_EQ(WaitExit(child->pid()), 0);
  EXPECT_EQ(Slurp(dir.Join("work/out.log")), "hello there " + dir.Join("work") + "\nto-stderr\nfrom stdin\n");
}

TEST(SpawnTest, AFileOrNullThatCannotBeOpenedIsDevNullNotAFailure) {
  TempDir dir;
  std::ofstream(dir.Join("log")) << "before\n";
  for (const std::string& path : {dir.Join("log"), dir.Join("missing/log")}) {
    SpawnSpec spec = Shell("echo appended");
    spec.stdout_fd = SpawnFd::FileOrNull(path, O_WRONLY | O_APPEND);
    auto child = Spawn(spec);
    ASSERT_TRUE(child.has_value());
    EXPECT_TRUE(child->ExecOutcome()) << path;
    EXPECT_EQ(WaitExit(child->pid()), 0) << path;
  }
  EXPECT_EQ(Slurp(dir.Join("log")), "before\nappended\n");
  EXPECT_FALSE(std::filesystem::exists(dir.Join("missing/log")));
}

TEST(SpawnTest, ChdirFailureNamesTheStep) {
  SpawnSpec spec = Shell("exit 0");
  spec.cwd = "/nonexistent/dir";
  auto child = Spawn(spec);
  ASSERT_TRUE(child.has_value());
  SpawnFailure failure;
  Status outcome = child->ExecOutcome(&failure);
  ASSERT_FALSE(outcome);
  EXPECT_EQ(failure.step, SpawnStep::kChdir);
  EXPECT_EQ(outcome.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(outcome.error().message, "chdir /nonexistent/dir: no such file or directory");
  EXPECT_EQ(WaitExit(child->pid()), 125);
}

TEST(SpawnTest, GivenDescriptorsAndKeptOnesReachTheChildOthersDoNot) {
  auto out = MakePipe();
  auto extra = MakePipe();
  ASSERT_TRUE(out && extra);
  int leaked = fcntl(STDERR_FILENO, F_DUPFD, 57);  // not CLOEXEC, yet must not reach the child
  ASSERT_GE(leaked, 57);
  SpawnSpec spec = Shell("echo one; echo two >&5; if [ -e /proc/self/fd/" + std::to_string(leaked) +
                         " ]; then echo leaked; else echo closed; fi");
  spec.stdout_fd = SpawnFd::Fd(out->write.get());
  spec.keep_fds = {{5, extra->write.get()}};
  spec.close_other_fds = true;
  auto child = Spawn(spec);
  UniqueFd(leaked).reset();
  ASSERT_TRUE(child.has_value());
  out->write.reset();
  extra->write.reset();
  EXPECT_TRUE(child->ExecOutcome());
  EXPECT_EQ(WaitExit(child->pid()), 0);
  auto drain = [](int fd) {
    std::string text;
    char buf[256];
    for (ssize_t r; (r = read(fd, buf, sizeof buf)) > 0;) text.append(buf, static_cast<size_t>(r));
    return text;
  };
  EXPECT_EQ(drain(out->read.get()), "one\nclosed\n");
  EXPECT_EQ(drain(extra->read.get()), "two\n");
}

TEST(SpawnTest, NewSessionAndProcessGroup) {
  SpawnSpec spec = Shell("exit 0");
  spec.group = SpawnSpec::Group::kNewSession;
  spec.start_barrier = true;
  auto child = Spawn(spec);
  ASSERT_TRUE(child.has_value());
  ASSERT_TRUE(child->WaitReady());  // set-up done: its session is its own now
  EXPECT_EQ(getsid(child->pid()), child->pid());
  EXPECT_NE(getsid(child->pid()), getsid(0));
  child->Abandon();
  EXPECT_EQ(WaitExit(child->pid()), 125);

  SpawnSpec grouped = Shell("exit 0");
  grouped.group = SpawnSpec::Group::kNewProcessGroup;
  grouped.start_barrier = true;
  auto leader = Spawn(grouped);
  ASSERT_TRUE(leader.has_value());
  ASSERT_TRUE(leader->WaitReady());
  EXPECT_EQ(getpgid(leader->pid()), leader->pid());
  EXPECT_EQ(getsid(leader->pid()), getsid(0));

  // A second child joins the leader's group (the ranks of `run --per-gpu`).
  SpawnSpec member = Shell("exit 0");
  member.group = SpawnSpec::Group::kJoinProcessGroup;
  member.process_group = leader->pid();
  member.start_barrier = true;
  auto joined = Spawn(member);
  ASSERT_TRUE(joined.has_value());
  ASSERT_TRUE(joined->WaitReady());
  EXPECT_EQ(getpgid(joined->pid()), leader->pid());
  // The leader goes first, while the second still holds the leader's barrier open
  // (inherited until its exec): the go must not need EOF.
  EXPECT_TRUE(leader->Release());
  EXPECT_EQ(WaitExit(leader->pid()), 0);
  EXPECT_TRUE(joined->Release());
  EXPECT_EQ(WaitExit(joined->pid()), 0);

  member.process_group = 0;
  EXPECT_EQ(Spawn(member).error().code, ErrorCode::kInvalidArgument) << "no group to join";
}

TEST(SpawnTest, StartBarrierHoldsTheChildUntilReleased) {
  TempDir dir;
  const std::string marker = dir.Join("ran");
  SpawnSpec spec = Shell("echo \"$WHO\" > " + marker);
  spec.env->push_back("WHO=early");
  spec.start_barrier = true;
  auto child = Spawn(spec);
  ASSERT_TRUE(child.has_value());
  ASSERT_TRUE(child->WaitReady());
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  EXPECT_FALSE(std::filesystem::exists(marker)) << "ran before the go";
  int status = 0;
  EXPECT_EQ(waitpid(child->pid(), &status, WNOHANG), 0) << "still waiting";
  LateStart late;
  late.env = {"WHO=late"};  // replaces the spec's WHO
  EXPECT_TRUE(child->Release(late));
  EXPECT_EQ(WaitExit(child->pid()), 0);
  EXPECT_EQ(Slurp(marker), "late\n");
}

TEST(SpawnTest, AbandonedChildNeverRuns) {
  TempDir dir;
  const std::string marker = dir.Join("ran");
  {
    SpawnSpec spec = Shell("touch " + marker);
    spec.start_barrier = true;
    auto child = Spawn(spec);
    ASSERT_TRUE(child.has_value());
    const pid_t pid = child->pid();
    child = MakeError(ErrorCode::kInternal, "dropped");  // the parent lets go of it unreleased
    EXPECT_EQ(WaitExit(pid), 125);
  }
  EXPECT_FALSE(std::filesystem::exists(marker));
}

TEST(SpawnTest, SetUpFailureBeforeTheBarrierWaitsThere) {
  SpawnSpec spec = Shell("exit 0");
  spec.cwd = "/nonexistent/dir";
  spec.start_barrier = true;
  auto child = Spawn(spec);
  ASSERT_TRUE(child.has_value());
  SpawnFailure failure;
  ASSERT_FALSE(child->WaitReady(&failure));
  EXPECT_EQ(failure.step, SpawnStep::kChdir);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  int status = 0;
  EXPECT_EQ(waitpid(child->pid(), &status, WNOHANG), 0) << "the pid stays valid until the parent lets go";
  child->Abandon();
  EXPECT_EQ(WaitExit(child->pid()), 125);
}

TEST(SpawnTest, ReleaseReportsAFailureBeforeTheBarrier) {
  SpawnSpec spec = Shell("exit 0");
  spec.argv[0] = "gpuman-no-such-program";
  spec.start_barrier = true;
  auto child = Spawn(spec);
  ASSERT_TRUE(child.has_value());
  SpawnFailure failure;
  Status released = child->Release({}, &failure);
  ASSERT_FALSE(released);
  EXPECT_EQ(failure.step, SpawnStep::kFindProgram);
  EXPECT_EQ(failure.err, ENOENT);
  EXPECT_EQ(WaitExit(child->pid()), 127);
}

TEST(SpawnTest, DetachedChildIsNotOurs) {
  TempDir dir;
  const std::string out = dir.Join("pid");
  SpawnSpec spec = Shell("echo $$ > " + out + ".tmp; mv " + out + ".tmp " + out + "; sleep 30");
  spec.detached = true;
  auto child = Spawn(spec);
  ASSERT_TRUE(child.has_value()) << child.error().message;
  EXPECT_TRUE(child->ExecOutcome());
  for (int i = 0; i < 200 && !std::filesystem::exists(out); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(Slurp(out), std::to_string(child->pid()) + "\n");
  EXPECT_NE(getsid(child->pid()), getsid(0)) << "a session of its own";
  int status = 0;
  EXPECT_EQ(waitpid(child->pid(), &status, WNOHANG), -1) << "re-parented, not our child";
  kill(child->pid(), SIGKILL);
}

TEST(SpawnTest, DropsToTheGivenUserAndGroups) {
  if (geteuid() != 0) GTEST_SKIP() << "changing uid and gid needs root";
  TempDir dir;
  chmod(dir.path().c_str(), 0777);
  SpawnSpec spec = Shell("id -u; id -g; id -G");
  spec.uid = 65534;
  spec.gid = 65534;
  spec.groups = std::vector<gid_t>{65534, 4242};
  spec.stdout_fd = SpawnFd::File(dir.Join("ids"), O_WRONLY | O_CREAT | O_TRUNC);
  auto child = Spawn(spec);
  ASSERT_TRUE(child.has_value());
  EXPECT_TRUE(child->ExecOutcome());
  EXPECT_EQ(WaitExit(child->pid()), 0);
  EXPECT_EQ(Slurp(dir.Join("ids")), "65534\n65534\n65534 4242\n");
  struct stat st{};
  ASSERT_EQ(stat(dir.Join("ids").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 65534u) << "the file is opened as the new user";
}

}  // namespace
}  // namespace gpuman
