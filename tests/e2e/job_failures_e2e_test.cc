// End-to-end tests of the ways a queued job can fail to start, and of bad submit input:
// nothing a user submitted is reported succeeded without having run, nothing runs
// somewhere else than asked, names are shown escaped, fields are bounded, and a job's
// outcome survives a full state directory. Real binaries, the stand-in NVML, a private
// daemon (socket and state directory) per test; throwaway users where a test needs one.
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>

#include "e2e/e2e_util.h"
#include "e2e/users.h"

namespace gpuman::e2e {
namespace {

using nlohmann::json;
using testing::TempDir;

class JobFailuresE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    chmod(dir_.path().c_str(), 0755);  // test users reach the socket and their files through it
    socket_ = dir_.Join("gpuman.sock");
    state_ = dir_.Join("state");
    scenario_ = IdleScenario(dir_, "h100-8");
  }
  void TearDown() override {
    StopDaemon();
    if (mounted_) umount2(state_.c_str(), MNT_DETACH);
  }

  void StartDaemon() {
    auto env = CleanEnv(dir_.Join("leases"));
    env["PATH"] = "/usr/bin:/bin";  // the daemon's PATH: nothing of the tests' own
    ASSERT_TRUE(daemon_.Start({.scenario = scenario_, .socket = socket_, .state_dir = state_, .env = env}));
  }
  void StopDaemon() { daemon_.Stop(); }

  // Runs gpuman in `cwd` with CleanEnv + `env`, as `user` when given. `enter_first`:
  // change directory before dropping privileges (to stand in a directory the user may not
  // enter, as after a chmod by someone else).
  testing::RunResult Gpuman(std::vector<std::string> args, const std::string& cwd = "/",
                            std::map<std::string, std::string> env = {}, const passwd* user = nullptr,
                            bool enter_first = false) {
    TempDir out;
    chmod(out.path().c_str(), 0777);
    const std::string out_path = out.Join("out"), err_path = out.Join("err");
    auto vars = CleanEnv(dir_.Join("leases"));
    vars["GPUMAN_SOCKET"] = socket_;
    vars["PATH"] = "/usr/bin:/bin";
    vars["HOME"] = "/tmp";
    for (const auto& [k, v] : env) vars[k] = v;
    pid_t pid = fork();
    if (pid == 0) {
      if (enter_first && chdir(cwd.c_str()) != 0) _exit(126);
      if (user) {
        initgroups(user->pw_name, user->pw_gid);
        if (setgid(user->pw_gid) != 0 || setuid(user->pw_uid) != 0) _exit(126);
      }
      if (!enter_first && chdir(cwd.c_str()) != 0) _exit(126);
      int o = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0666);
      int e = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0666);
      dup2(o, 1);
      dup2(e, 2);
      std::vector<std::string> envs;
      for (const auto& [k, v] : vars) {
        if (!v.empty()) envs.push_back(k + "=" + v);
      }
      std::vector<char*> envp;
      for (auto& s : envs) envp.push_back(s.data());
      envp.push_back(nullptr);
      args.insert(args.begin(), kGpuman);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execve(argv[0], argv.data(), envp.data());
      _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), Slurp(out_path), Slurp(err_path)};
  }

  // Asserts one refusal line and exit 2 from `r`, holding `expected`.
  static void ExpectRefused(const testing::RunResult& r, const std::string& expected) {
    EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(r.err.rfind("gpuman: error: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(expected), std::string::npos) << r.err;
  }

  json Show(int64_t id) {
    auto r = Gpuman({"show", std::to_string(id), "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? json::parse(r.out) : json();
  }
  bool WaitForState(int64_t id, const std::string& state, int ms = 60000) {
    for (int waited = 0; waited < ms; waited += 50) {
      if (Show(id)["state"] == state) return true;
      usleep(50000);
    }
    return false;
  }
  bool WaitForFile(const std::string& path, int ms = 60000) {
    for (int waited = 0; waited < ms && !std::filesystem::exists(path); waited += 20) usleep(20000);
    return std::filesystem::exists(path);
  }
  int64_t Submit(std::vector<std::string> args, const std::string& cwd = "/") {
    args.insert(args.begin(), "submit");
    auto r = Gpuman(args, cwd);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? std::stoll(r.out) : -1;
  }
  // Takes every GPU of the machine with a job that runs until `release` exists.
  int64_t OccupyAllGpus(const std::string& release) {
    int64_t id = Submit({"--output", dir_.Join("occupy.log"), "-n", "8", "--", "sh", "-c",
                         "while [ ! -e " + release + " ]; do sleep 0.05; done"});
    EXPECT_TRUE(WaitForState(id, "running"));
    return id;
  }

  TempDir dir_;
  std::string socket_, state_, scenario_;
  PrivateDaemon daemon_;
  bool mounted_ = false;
};

TEST_F(JobFailuresE2E, OutputIntoAMissingDirectoryIsRefusedUpFront) {
  StartDaemon();
  ExpectRefused(Gpuman({"submit", "--output", dir_.Join("missing/job.log"), "--", "true"}),
                "--output: directory " + dir_.Join("missing") + ": no such file or directory");
  auto queue = Gpuman({"queue", "--all", "--json"});
  EXPECT_TRUE(json::parse(queue.out)["jobs"].empty()) << "nothing was queued";
}

TEST_F(JobFailuresE2E, AsAUserUnwritableOutputAndSubmittingFromRootAreRefused) {
  if (getuid() != 0) GTEST_SKIP() << "needs root to create a user";
  auto user = EnsureTestUser("gpumanjf");
  if (!user) GTEST_SKIP() << "useradd is not available";
  StartDaemon();
  const std::string locked = dir_.Join("locked");
  std::filesystem::create_directories(locked);
  chmod(locked.c_str(), 0755);  // root's: the user may enter it, not write in it
  ExpectRefused(Gpuman({"submit", "--output", locked + "/job.log", "--", "true"}, "/tmp", {}, &*user),
                "--output: cannot create a file in " + locked + ": permission denied");
  // From `/` without --output, the default log gpuman-ID.log would land in `/`.
  ExpectRefused(Gpuman({"submit", "--", "true"}, "/", {}, &*user),
                "cannot write the job's log gpuman-ID.log in /: permission denied");
  auto queue = Gpuman({"queue", "--all", "--json"});
  EXPECT_TRUE(json::parse(queue.out)["jobs"].empty()) << "nothing was queued";
}

TEST_F(JobFailuresE2E, AWorkingDirectoryTheUserCannotEnterIsRefusedUpFront) {
  if (getuid() != 0) GTEST_SKIP() << "needs root to create a user";
  auto user = EnsureTestUser("gpumanjf");
  if (!user) GTEST_SKIP() << "useradd is not available";
  StartDaemon();
  const std::string closed = dir_.Join("closed");
  std::filesystem::create_directories(closed);
  chmod(closed.c_str(), 0700);  // root's alone
  ExpectRefused(Gpuman({"submit", "--output", "/tmp/gpuman-jf.log", "--", "true"}, closed, {}, &*user,
                       /*enter_first=*/true),
                "cannot enter the working directory " + closed + ": permission denied");
}

// The race the up-front checks cannot close: the directory goes away between submit and
// start. The job ends failed with the reason, and its command never runs (it would have
// created the marker); its output directory likewise.
TEST_F(JobFailuresE2E, DirectoryRemovedAfterSubmitFailsTheJobBeforeItRuns) {
  StartDaemon();
  const std::string release = dir_.Join("release"), marker = dir_.Join("ran");
  int64_t occupy = OccupyAllGpus(release);
  const std::string work = dir_.Join("work"), logs = dir_.Join("logs");
  std::filesystem::create_directories(work);
  std::filesystem::create_directories(logs);
  int64_t gone_cwd = Submit({"--output", dir_.Join("a.log"), "--", "touch", marker}, work);
  int64_t gone_log = Submit({"--output", logs + "/b.log", "--", "touch", marker}, dir_.path());
  EXPECT_EQ(Show(gone_cwd)["state"], "queued");
  std::filesystem::remove_all(work);
  std::filesystem::remove_all(logs);
  std::ofstream(release) << "";
  ASSERT_TRUE(WaitForState(occupy, "succeeded"));
  ASSERT_TRUE(WaitForState(gone_cwd, "failed"));
  ASSERT_TRUE(WaitForState(gone_log, "failed"));
  json a = Show(gone_cwd), b = Show(gone_log);
  EXPECT_EQ(a["reason"], "cannot enter its working directory " + work + ": no such file or directory");
  EXPECT_EQ(a["failure"], "cannot_start");
  EXPECT_TRUE(a["exit_code"].is_null()) << "it never ran";
  EXPECT_TRUE(a["started_unix_ms"].is_null());
  EXPECT_EQ(b["reason"], "cannot open its output file " + logs + "/b.log: no such file or directory");
  EXPECT_EQ(b["failure"], "cannot_start");
  EXPECT_FALSE(std::filesystem::exists(marker)) << "the command ran somewhere else";
  auto show = Gpuman({"show", std::to_string(gone_cwd)});
  EXPECT_NE(show.out.find("state:     failed — cannot enter its working directory " + work), std::string::npos) << show.out;
  auto queue = Gpuman({"queue", "--all"}, "/", {{"COLUMNS", "300"}});
  EXPECT_NE(queue.out.find("cannot enter its working directory"), std::string::npos) << queue.out;
  EXPECT_NE(Gpuman({"wait", std::to_string(gone_cwd)}).exit_code, 0) << "never reported as succeeded";
}

// The start-time checks are made as the job's owner, not as the root daemon: a directory
// the owner can no longer enter, or a log directory the owner can no longer write, fails
// the job (root could have done both).
TEST_F(JobFailuresE2E, AsAUserTheChecksAtStartAreTheOwnersNotRoots) {
  if (getuid() != 0) GTEST_SKIP() << "needs root to create a user";
  auto user = EnsureTestUser("gpumanjf");
  if (!user) GTEST_SKIP() << "useradd is not available";
  StartDaemon();
  const std::string release = dir_.Join("release"), marker = dir_.Join("markers/ran");
  int64_t occupy = OccupyAllGpus(release);
  const std::string work = dir_.Join("userwork"), logs = dir_.Join("userlogs");
  std::filesystem::create_directories(dir_.Join("markers"));
  chmod(dir_.Join("markers").c_str(), 0777);  // the user could create the marker, if the job ever ran
  for (const auto& d : {work, logs}) {
    std::filesystem::create_directories(d);
    chown(d.c_str(), user->pw_uid, user->pw_gid);
  }
  auto a = Gpuman({"submit", "--output", logs + "/a.log", "--", "touch", marker}, work, {}, &*user);
  auto b = Gpuman({"submit", "--output", logs + "/b.log", "--", "touch", marker}, "/tmp", {}, &*user);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  chown(work.c_str(), 0, 0);  // now root's, 0755 would do; 0700 keeps the user out
  chmod(work.c_str(), 0700);
  chown(logs.c_str(), 0, 0);
  chmod(logs.c_str(), 0755);
  std::ofstream(release) << "";
  ASSERT_TRUE(WaitForState(occupy, "succeeded"));
  const int64_t ida = std::stoll(a.out), idb = std::stoll(b.out);
  ASSERT_TRUE(WaitForState(ida, "failed"));
  ASSERT_TRUE(WaitForState(idb, "failed"));
  EXPECT_EQ(Show(ida)["reason"], "cannot enter its working directory " + work + ": permission denied");
  EXPECT_EQ(Show(idb)["reason"], "cannot open its output file " + logs + "/b.log: permission denied");
  EXPECT_FALSE(std::filesystem::exists(marker)) << "the command ran";
  EXPECT_FALSE(std::filesystem::exists(logs + "/b.log")) << "root created the user's log";
}

TEST_F(JobFailuresE2E, AToolOnlyOnTheSubmittersPathRuns) {
  StartDaemon();
  const std::string bin = dir_.Join("mybin"), out = dir_.Join("tool-ran");
  std::filesystem::create_directories(bin);
  std::ofstream(bin + "/gpuman-e2e-only-here") << "#!/bin/sh\necho \"$0\" > " << out << "\n";
  chmod((bin + "/gpuman-e2e-only-here").c_str(), 0755);
  auto r = Gpuman({"submit", "--output", dir_.Join("tool.log"), "--", "gpuman-e2e-only-here"}, "/",
                  {{"PATH", "/usr/bin:" + bin + ":/bin"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const int64_t id = std::stoll(r.out);
  auto waited = Gpuman({"wait", std::to_string(id)});
  EXPECT_EQ(waited.exit_code, 0) << waited.err << Show(id).dump();
  EXPECT_EQ(Show(id)["state"], "succeeded");
  EXPECT_EQ(Slurp(out), bin + "/gpuman-e2e-only-here\n");
  // And a command on nobody's PATH is refused at once, naming the PATH it was looked up in.
  ExpectRefused(Gpuman({"submit", "--output", dir_.Join("x.log"), "--", "gpuman-e2e-nowhere"}),
                "command not found: gpuman-e2e-nowhere (not in PATH /usr/bin:/bin)");
}

TEST_F(JobFailuresE2E, EscapeSequencesInANameAreShownEscaped) {
  StartDaemon();
  const std::string release = dir_.Join("release");
  const std::string name = "\x1b[2J\x1b]0;owned\x07x\ny";
  int64_t id = Submit({"--name", name, "--output", dir_.Join("n.log"), "--", "sh", "-c",
                       "while [ ! -e " + release + " ]; do sleep 0.05; done", "\x1b[31m"});
  ASSERT_TRUE(WaitForState(id, "running"));
  auto queue = Gpuman({"queue"}, "/", {{"COLUMNS", "300"}});
  auto show = Gpuman({"show", std::to_string(id)});
  auto leases = Gpuman({"leases"}, "/", {{"COLUMNS", "300"}});
  for (const auto* r : {&queue, &show, &leases}) {
    EXPECT_EQ(r->exit_code, 0) << r->err;
    EXPECT_EQ(r->out.find('\x1b'), std::string::npos) << "a raw escape reached the terminal: " << r->out;
    EXPECT_EQ(r->out.find('\x07'), std::string::npos) << r->out;
  }
  EXPECT_NE(queue.out.find("\\x1b[2J\\x1b]0;"), std::string::npos) << queue.out;
  EXPECT_NE(show.out.find("job " + std::to_string(id) + " (\\x1b[2J\\x1b]0;owned\\x07x\\ny)"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("\\x1b[31m\n"), std::string::npos) << show.out;
  EXPECT_NE(leases.out.find("(\\x1b[2J\\x1b]0;owned\\x07x\\ny)"), std::string::npos) << leases.out;
  // JSON stays exact.
  EXPECT_EQ(Show(id)["name"], name);
  std::ofstream(release) << "";
  EXPECT_TRUE(WaitForState(id, "succeeded"));
}

TEST_F(JobFailuresE2E, OversizeFieldsAreRefusedNamingTheFieldAndTheLimit) {
  StartDaemon();
  ExpectRefused(Gpuman({"submit", "--name", std::string(600, 'a'), "--output", dir_.Join("o.log"), "--", "true"}),
                "--name: 600 bytes; the limit is 256 bytes");
  ExpectRefused(Gpuman({"submit", "--output", dir_.Join("o.log"), "--", "true", std::string(70000, 'b')}),
                "command argument 1: 70000 bytes; the limit is 65536 bytes");
  // (One variable may hold at most 128 KiB on Linux: three of 100 kB.)
  ExpectRefused(Gpuman({"submit", "--output", dir_.Join("o.log"), "--", "true"}, "/",
                       {{"BIG1", std::string(100000, 'c')}, {"BIG2", std::string(100000, 'c')}, {"BIG3", std::string(100000, 'c')}}),
                "environment: ");

  auto queue = Gpuman({"queue", "--all", "--json"});
  EXPECT_TRUE(json::parse(queue.out)["jobs"].empty()) << "nothing was queued";
}

// The state directory on a small tmpfs, filled while a job runs: the job ends meanwhile,
// its supervisor cannot record it and keeps the outcome until space is back; then the job
// reads its real outcome (not "its supervisor died") and the job --after it runs.
TEST_F(JobFailuresE2E, AJobsOutcomeSurvivesAFullStateDirectory) {
  if (getuid() != 0) GTEST_SKIP() << "needs root to mount a tmpfs";
  std::filesystem::create_directories(state_);
  if (mount("tmpfs", state_.c_str(), "tmpfs", 0, "size=24m,mode=0755") != 0) {
    GTEST_SKIP() << "cannot mount a tmpfs here: " << std::strerror(errno);
  }
  mounted_ = true;
  StartDaemon();
  const std::string go = dir_.Join("go"), started = dir_.Join("started"), ended = dir_.Join("ended");
  int64_t id = Submit({"--output", dir_.Join("full.log"), "--", "sh", "-c",
                       "touch " + started + "; while [ ! -e " + go + " ]; do sleep 0.05; done; touch " + ended});
  int64_t after = Submit({"--after", std::to_string(id), "--output", dir_.Join("after.log"), "--", "true"});
  ASSERT_TRUE(WaitForFile(started));
  ASSERT_TRUE(WaitForState(id, "running"));
  // Fill the state directory to the last block.
  const std::string filler = state_ + "/filler";
  {
    int fd = open(filler.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ASSERT_GE(fd, 0);
    std::string block(1 << 16, 'z');
    while (write(fd, block.data(), block.size()) > 0) {
    }
    char one = 'z';
    while (write(fd, &one, 1) > 0) {
    }
    close(fd);
  }
  std::ofstream(go) << "";
  ASSERT_TRUE(WaitForFile(ended));
  usleep(1500 * 1000);  // the supervisor tries to record the outcome meanwhile
  json during = Show(id);
  EXPECT_NE(during["state"], "failed") << "the outcome was thrown away: " << during.dump();
  EXPECT_NE(Show(after)["state"], "cancelled");
  std::filesystem::remove(filler);
  ASSERT_TRUE(WaitForState(id, "succeeded", 60000)) << Show(id).dump();
  json job = Show(id);
  EXPECT_EQ(job["exit_code"], 0);
  EXPECT_EQ(job["reason"].get<std::string>().find("supervisor"), std::string::npos) << job.dump();
  EXPECT_TRUE(WaitForState(after, "succeeded", 60000)) << Show(after).dump();
}

}  // namespace
}  // namespace gpuman::e2e
