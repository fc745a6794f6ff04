// End-to-end tests of `gpuman daemon` and the queue commands: the real binaries, the
// stand-in NVML, a private socket and state directory per test.
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "base/strings.h"
#include "e2e/e2e_util.h"
#include "store/proc_liveness.h"

namespace gpuman::e2e {
namespace {

using nlohmann::json;
using testing::TempDir;

class DaemonE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    chmod(dir_.path().c_str(), 0755);  // other test users reach the socket through it
    socket_ = dir_.Join("gpuman.sock");
    scenario_ = IdleScenario(dir_, "h100-8");
    StartDaemon();
  }
  void TearDown() override { StopDaemon(SIGTERM); }

  void StartDaemon() {
    ASSERT_TRUE(daemon_.Start(
        {.scenario = scenario_, .socket = socket_, .state_dir = dir_.Join("state"), .env = CleanEnv(dir_.Join("leases"))}));
  }
  void StopDaemon(int sig) { daemon_.Stop(sig); }

  testing::RunResult Gpuman(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
    env["GPUMAN_SOCKET"] = socket_;
    return RunGpuman(dir_.Join("leases"), std::move(args), env);
  }
  int64_t Submit(std::vector<std::string> args) {
    args.insert(args.begin(), {"submit", "--output", dir_.Join("job-" + std::to_string(++submitted_) + ".log")});
    auto r = Gpuman(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? std::stoll(r.out) : -1;
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

  TempDir dir_;
  std::string socket_, scenario_;
  PrivateDaemon daemon_;
  int submitted_ = 0;
};

TEST_F(DaemonE2E, SubmitWaitLogsShow) {
  auto r = Gpuman({"submit", "--json", "--output", dir_.Join("out.log"), "-n", "2", "--", "sh", "-c", "echo \"on $CUDA_VISIBLE_DEVICES as $(id -u)\"; exit 5"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  int64_t id = json::parse(r.out)["id"];
  auto waited = Gpuman({"wait", std::to_string(id)});
  EXPECT_EQ(waited.exit_code, 5) << "wait exits with the job's exit code";
  json job = Show(id);
  EXPECT_EQ(job["state"], "failed");
  EXPECT_EQ(job["exit_code"], 5);
  EXPECT_EQ(job["gpu_uuids"].size(), 2u);
  auto logs = Gpuman({"logs", std::to_string(id)});
  EXPECT_EQ(logs.out, "on " + job["gpu_uuids"][0].get<std::string>() + "," + job["gpu_uuids"][1].get<std::string>() +
                          " as " + std::to_string(getuid()) + "\n");
  auto queue = Gpuman({"queue", "--all", "--json"});
  EXPECT_EQ(json::parse(queue.out)["jobs"].size(), 1u);
  EXPECT_EQ(Gpuman({"wait", "999"}).exit_code, 125) << "gpuman's own failure in wait: never a job's plausible code";
}

TEST_F(DaemonE2E, CancelHoldResumeAndDependencies) {
  int64_t running = Submit({"-n", "8", "--", "sleep", "30"});
  ASSERT_TRUE(WaitForState(running, "running"));
  int64_t queued = Submit({"--", "true"});
  int64_t after = Submit({"--after", std::to_string(running), "--", "true"});
  EXPECT_EQ(Gpuman({"hold", std::to_string(queued)}).exit_code, 0);
  EXPECT_EQ(Show(queued)["state"], "held");
  EXPECT_EQ(Gpuman({"resume", std::to_string(queued)}).exit_code, 0);
  EXPECT_EQ(Show(queued)["state"], "queued");
  EXPECT_EQ(Gpuman({"cancel", std::to_string(running)}).exit_code, 0);
  ASSERT_TRUE(WaitForState(running, "cancelled"));
  ASSERT_TRUE(WaitForState(queued, "succeeded"));
  ASSERT_TRUE(WaitForState(after, "cancelled")) << "its dependency was cancelled";
  auto again = Gpuman({"cancel", std::to_string(running)});
  EXPECT_NE(again.exit_code, 0);
  EXPECT_NE(again.err.find("already cancelled"), std::string::npos) << again.err;
}

// kill -9 of the daemon with jobs queued and running, then a restart: every job finishes,
// exactly once.
TEST_F(DaemonE2E, KillNineAndRestartRunsEveryJobExactlyOnce) {
  constexpr int kJobs = 24;  // 4 run at once (2 GPUs each of 8), 20 wait
  std::vector<int64_t> ids;
  for (int i = 0; i < kJobs; ++i) {
    std::string counter = dir_.Join("count-" + std::to_string(i));
    ids.push_back(Submit({"-n", "2", "--", "sh", "-c", "echo run >> \"$1\"; sleep 0.4", "sh", counter}));
  }
  // Kill it once jobs have started (the first ones may even have finished under load).
  bool started = false;
  for (int i = 0; i < 400 && !started; ++i) {
    std::string state = Show(ids[0])["state"];
    started = state == "running" || state == "succeeded";
    if (!started) usleep(50000);
  }
  ASSERT_TRUE(started);
  StopDaemon(SIGKILL);
  StartDaemon();
  for (int64_t id : ids) {
    EXPECT_TRUE(WaitForState(id, "succeeded", 60000)) << "job " << id << ": " << Show(id).dump();
  }
  for (int i = 0; i < kJobs; ++i) {
    EXPECT_EQ(Slurp(dir_.Join("count-" + std::to_string(i))), "run\n") << "job " << ids[i] << " ran once";
  }
}

// Raw bytes on the socket: the daemon answers or hangs up, and keeps serving others.
TEST_F(DaemonE2E, GarbageAndOversizedMessages) {
  auto raw = [&](const std::string& bytes, bool expect_reply) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, socket_.c_str(), sizeof addr.sun_path - 1);
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    timeval tv{2, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char buf[4096];
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    close(fd);
    if (expect_reply) {
      EXPECT_GT(n, 4) << "expected an error reply";
      return n > 4 ? std::string(buf + 4, static_cast<size_t>(n - 4)) : std::string();
    }
    return std::string();
  };
  auto frame = [](const std::string& payload) {
    uint32_t n = htonl(static_cast<uint32_t>(payload.size()));
    return std::string(reinterpret_cast<const char*>(&n), 4) + payload;
  };
  EXPECT_NE(raw("GET / HTTP/1.1\r\n\r\n", true).find("too_large"), std::string::npos);
  EXPECT_NE(raw(frame("{not json"), true).find("bad_message"), std::string::npos);
  EXPECT_NE(raw(frame(std::string(100000, '[')), true).find("bad_message"), std::string::npos);
  EXPECT_NE(raw(frame("{\"v\":1,\"id\":1,\"op\":\"queue\",\"args\":{}}"), true).find("hello_required"), std::string::npos);
  EXPECT_NE(raw(frame("{\"v\":9,\"id\":1,\"op\":\"hello\"}"), true).find("unsupported_version"), std::string::npos);
  EXPECT_NE(raw(frame("{\"v\":1,\"id\":1,\"op\":\"selfdestruct\"}"), true).find("unknown_op"), std::string::npos);
  raw(std::string("\x00\x00\x00\x00", 4), false);
  raw(std::string("\x00\x10\x00", 3), false);  // half a header, then gone
  // A client that starts a frame and stalls does not block the others.
  int slow = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, socket_.c_str(), sizeof addr.sun_path - 1);
  ASSERT_EQ(connect(slow, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  send(slow, "\x00\x00\x01\x00{\"v\"", 8, MSG_NOSIGNAL);
  auto ok = Gpuman({"queue"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  close(slow);
  EXPECT_EQ(kill(daemon_.pid(), 0), 0) << "the daemon is still alive";
}

// With a daemon, `run` and `select --lease` take their leases from it: interactive runs
// and queued jobs share one table.
TEST_F(DaemonE2E, RunGoesThroughTheDaemon) {
  std::string gate = dir_.Join("gate");
  // A run holds 6 GPUs until the gate file appears.
  pid_t runner = fork();
  if (runner == 0) {
    for (const auto& [k, v] : CleanEnv(dir_.Join("leases"))) {
      if (v.empty()) unsetenv(k.c_str());
      else setenv(k.c_str(), v.c_str(), 1);
    }
    setenv("GPUMAN_SOCKET", socket_.c_str(), 1);
    execl(kGpuman.c_str(), kGpuman.c_str(), "--simulate", scenario_.c_str(), "run", "-q", "-n", "6", "--", "sh", "-c",
          "while [ ! -e \"$1\" ]; do sleep 0.02; done", "sh", gate.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  json leases;
  for (int i = 0; i < 200; ++i) {
    auto r = Gpuman({"--simulate", scenario_, "leases", "--json"});
    leases = json::parse(r.out)["leases"];
    // The runner joins its child to the lease right after taking it: wait for both.
    if (!leases.empty() && leases[0]["processes"].size() >= 2) break;
    usleep(50000);
  }
  ASSERT_EQ(leases.size(), 1u) << "the run's lease is in the daemon's table";
  EXPECT_EQ(leases[0]["kind"], "run");
  EXPECT_EQ(leases[0]["processes"].size(), 2u) << "runner and job";
  char host[256] = {};
  ASSERT_EQ(gethostname(host, sizeof host - 1), 0);
  EXPECT_EQ(leases[0]["host"], host) << "the daemon's lease objects carry the host";
  // A queued 4-GPU job waits for the run's GPUs; a second run cannot take them either.
  int64_t job = Submit({"-n", "4", "--", "true"});
  usleep(300000);
  EXPECT_EQ(Show(job)["state"], "queued");
  auto busy = Gpuman({"--simulate", scenario_, "run", "-n", "4", "--", "true"});
  EXPECT_EQ(busy.exit_code, 125) << busy.err;
  std::ofstream(gate) << "go";
  int status = 0;
  waitpid(runner, &status, 0);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_TRUE(WaitForState(job, "succeeded")) << "the job starts when the run gives its GPUs back";
  auto after = Gpuman({"--simulate", scenario_, "leases", "--json"});
  EXPECT_TRUE(json::parse(after.out)["leases"].empty());
}

// A GPU is lost while jobs run on it: the plain job fails, the --requeue one runs again on
// healthy GPUs; the lost GPU is never handed out again.
TEST_F(DaemonE2E, GpuLostWhileJobsRun) {
  int64_t plain = Submit({"-n", "4", "--", "sleep", "30"});
  int64_t again = Submit({"-n", "4", "--requeue", "--", "sleep", "30"});
  ASSERT_TRUE(WaitForState(plain, "running"));
  ASSERT_TRUE(WaitForState(again, "running"));
  std::string lost_plain = Show(plain)["gpu_uuids"][0], lost_again = Show(again)["gpu_uuids"][0];
  std::ifstream in(scenario_);
  json s = json::parse(in);
  for (auto& g : s["gpus"]) {
    if (g["uuid"] == lost_plain || g["uuid"] == lost_again) g["lost"] = true;
  }
  std::string staged = dir_.Join("staged.json");
  std::ofstream(staged) << s.dump(2);
  ASSERT_EQ(std::rename(staged.c_str(), scenario_.c_str()), 0);

  ASSERT_TRUE(WaitForState(plain, "failed"));
  EXPECT_NE(Show(plain)["reason"].get<std::string>().find("GPUs failed"), std::string::npos) << Show(plain).dump();
  // Requeued, then started again (6 healthy GPUs left) without the lost one.
  bool restarted = false;
  for (int i = 0; i < 200 && !restarted; ++i) {
    json j = Show(again);
    restarted = j["state"] == "running" && std::find(j["gpu_uuids"].begin(), j["gpu_uuids"].end(), lost_again) == j["gpu_uuids"].end() &&
                std::find(j["gpu_uuids"].begin(), j["gpu_uuids"].end(), lost_plain) == j["gpu_uuids"].end();
    if (!restarted) usleep(50000);
  }
  EXPECT_TRUE(restarted) << Show(again).dump();
  EXPECT_EQ(Gpuman({"cancel", std::to_string(again)}).exit_code, 0);
}

// A job that writes its pid (its process group's id) to `pid_file`, then sleeps.
std::vector<std::string> PidThenSleep(const std::string& pid_file, std::vector<std::string> options) {
  options.insert(options.end(), {"--", "sh", "-c", "echo $$ > \"$1.tmp\"; mv \"$1.tmp\" \"$1\"; sleep 60", "sh", pid_file});
  return options;
}

int ReadPid(const std::string& pid_file) {
  for (int i = 0; i < 1200; ++i) {
    int pid = 0;
    std::ifstream in(pid_file);
    if (in >> pid && pid > 0) return pid;
    usleep(50000);
  }
  return 0;
}

// kill -9 of a running job's supervisor: the daemon adopts the job. Its GPUs stay taken
// while a process of it lives, across a kill -9 and restart of the daemon too; once it is
// gone the job is recorded failed with an unknown exit status, and the next job starts.
TEST_F(DaemonE2E, AJobWhoseSupervisorDiedKeepsItsGpusWhileItLives) {
  const std::string pid_file = dir_.Join("a.pid"), marker = dir_.Join("b.ran");
  int64_t a = Submit(PidThenSleep(pid_file, {"-n", "8"}));
  ASSERT_TRUE(WaitForState(a, "running"));
  int64_t b = Submit({"-n", "8", "--", "touch", marker});
  const int leader = ReadPid(pid_file);
  ASSERT_GT(leader, 0) << "job A did not start";
  json shown = Show(a);
  ASSERT_TRUE(shown["supervisor_pid"].is_number()) << shown.dump();
  const int supervisor = shown["supervisor_pid"];
  ASSERT_EQ(kill(supervisor, SIGKILL), 0);

  auto holds = [&](int ms, const std::string& when) {
    bool adopted = false;
    for (int waited = 0; waited < ms; waited += 100) {
      json ja = Show(a), jb = Show(b);
      EXPECT_EQ(ja["state"], "running") << when << ": " << ja.dump();
      EXPECT_EQ(jb["state"], "queued") << when << ": B must not get A's GPUs while A lives: " << jb.dump();
      adopted = adopted || ja["reason"].get<std::string>().find("its supervisor died") != std::string::npos;
      usleep(100000);
    }
    EXPECT_TRUE(adopted) << when << ": A's state says what happened: " << Show(a).dump();
    EXPECT_TRUE(store::ProcessStartTicks(leader).has_value()) << when << ": A's process still runs";
    EXPECT_FALSE(std::ifstream(marker).good()) << when << ": B never ran";
  };
  holds(3000, "after kill -9 of A's supervisor");
  StopDaemon(SIGKILL);
  StartDaemon();
  holds(2000, "after kill -9 and restart of the daemon");

  ASSERT_EQ(kill(-leader, SIGKILL), 0);  // A's whole process group
  ASSERT_TRUE(WaitForState(b, "succeeded")) << Show(b).dump();
  EXPECT_TRUE(std::ifstream(marker).good());
  json ended = Show(a);
  EXPECT_EQ(ended["state"], "failed");
  EXPECT_TRUE(ended["exit_code"].is_null()) << ended.dump();
  EXPECT_NE(ended["reason"].get<std::string>().find("its supervisor died; the job ran until "), std::string::npos)
      << ended.dump();
  EXPECT_NE(ended["reason"].get<std::string>().find("exit status unknown"), std::string::npos) << ended.dump();
}

// An adopted job still ends at its time limit: the daemon sends SIGTERM to its process
// group and, since this job ignores it, SIGKILL after the grace period (10 s). Until then
// the next job waits: the GPUs are not handed out while a process of the job lives.
TEST_F(DaemonE2E, AnAdoptedJobStillEndsAtItsTimeLimit) {
  const std::string pid_file = dir_.Join("a.pid"), marker = dir_.Join("b.ran");
  int64_t a = Submit({"-n", "8", "--time-limit", "5s", "--", "sh", "-c",
                      "trap '' TERM; echo $$ > \"$1.tmp\"; mv \"$1.tmp\" \"$1\"; sleep 60", "sh", pid_file});
  ASSERT_TRUE(WaitForState(a, "running"));
  const int leader = ReadPid(pid_file);
  ASSERT_GT(leader, 0);
  ASSERT_EQ(kill(Show(a)["supervisor_pid"].get<int>(), SIGKILL), 0);
  int64_t b = Submit({"-n", "8", "--", "touch", marker});
  bool ending = false;
  for (int i = 0; i < 300 && !ending; ++i) {
    ending = Show(a)["reason"].get<std::string>().find("ending the job (ran past its time limit)") != std::string::npos;
    if (!ending) usleep(50000);
  }
  ASSERT_TRUE(ending) << Show(a).dump();
  const auto term_sent = std::chrono::steady_clock::now();
  // 5 s of the 10 s grace period, by the clock: each Show is a gpuman process, which a
  // sanitizer build or a loaded machine makes slow (50 rounds once took past the grace).
  while (std::chrono::steady_clock::now() - term_sent < std::chrono::seconds(5)) {
    EXPECT_EQ(Show(a)["state"], "running");
    EXPECT_EQ(Show(b)["state"], "queued") << "A's process ignores SIGTERM and still lives";
    usleep(100000);
  }
  EXPECT_TRUE(store::ProcessStartTicks(leader).has_value()) << "A ignores SIGTERM";
  ASSERT_TRUE(WaitForState(a, "timed_out", 30000)) << Show(a).dump();
  EXPECT_GE(std::chrono::steady_clock::now() - term_sent, std::chrono::seconds(8)) << "SIGKILL only after the grace";
  EXPECT_NE(Show(a)["reason"].get<std::string>().find("its supervisor had died"), std::string::npos) << Show(a).dump();
  EXPECT_FALSE(store::ProcessStartTicks(leader).has_value()) << "the daemon ended A's process";
  ASSERT_TRUE(WaitForState(b, "succeeded")) << Show(b).dump();
  auto leases = Gpuman({"--simulate", scenario_, "leases", "--json"});
  EXPECT_EQ(leases.exit_code, 0) << leases.err;
  EXPECT_TRUE(json::parse(leases.out)["leases"].empty()) << "every lease is released: " << leases.out;
}

// Cancel of an adopted job (no supervisor to tell): the daemon ends its process group.
// Enabled once the cancel handler calls Daemon::EndOrphanedJob (see daemon.h).
TEST_F(DaemonE2E, CancelOfAnAdoptedJobEndsItsProcesses) {
  const std::string pid_file = dir_.Join("a.pid");
  int64_t a = Submit(PidThenSleep(pid_file, {"-n", "8"}));
  ASSERT_TRUE(WaitForState(a, "running"));
  const int leader = ReadPid(pid_file);
  ASSERT_GT(leader, 0);
  ASSERT_EQ(kill(Show(a)["supervisor_pid"].get<int>(), SIGKILL), 0);
  bool adopted = false;
  for (int i = 0; i < 200 && !adopted; ++i) {
    adopted = Show(a)["reason"].get<std::string>().find("its supervisor died") != std::string::npos;
    if (!adopted) usleep(50000);
  }
  ASSERT_TRUE(adopted) << Show(a).dump();
  auto cancelled = Gpuman({"cancel", std::to_string(a)});
  EXPECT_EQ(cancelled.exit_code, 0) << cancelled.err;
  ASSERT_TRUE(WaitForState(a, "cancelled", 30000)) << Show(a).dump();
  EXPECT_NE(Show(a)["reason"].get<std::string>().find("cancelled by "), std::string::npos) << Show(a).dump();
  EXPECT_FALSE(store::ProcessStartTicks(leader).has_value()) << "the daemon ended A's process";
}

TEST_F(DaemonE2E, SecondDaemonOnTheSameSocketIsRefused) {
  auto r = RunGpuman(dir_.Join("leases"), {"--simulate", scenario_, "daemon", "--socket", socket_, "--state-dir",
                                           dir_.Join("state2")});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("already serving"), std::string::npos) << r.err;
}

// Two real users (created by the test; CI runs as root): the allow/deny matrix.
class TwoUsersE2E : public DaemonE2E {
 protected:
  static std::optional<passwd> EnsureUser(const std::string& name) {
    if (getpwnam(name.c_str()) == nullptr) {
      testing::Run({"/usr/sbin/useradd", "--no-create-home", "--shell", "/bin/sh", name});
    }
    passwd* pw = getpwnam(name.c_str());
    if (!pw) return std::nullopt;
    return *pw;
  }
  // Runs gpuman as `user` (fork, setgid, initgroups, setuid, exec).
  testing::RunResult As(const passwd& user, std::vector<std::string> args) {
    TempDir out;
    chmod(out.path().c_str(), 0777);
    std::string stdout_path = out.Join("out"), stderr_path = out.Join("err");
    pid_t pid = fork();
    if (pid == 0) {
      initgroups(user.pw_name, user.pw_gid);
      if (setgid(user.pw_gid) != 0 || setuid(user.pw_uid) != 0) _exit(126);
      if (chdir(work_.path().c_str()) != 0) _exit(126);
      int o = open(stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0666);
      int e = open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0666);
      dup2(o, 1);
      dup2(e, 2);
      for (const auto& [k, v] : CleanEnv("/nonexistent")) {
        if (v.empty()) unsetenv(k.c_str());
        else setenv(k.c_str(), v.c_str(), 1);
      }
      setenv("GPUMAN_SOCKET", socket_.c_str(), 1);
      setenv("HOME", "/tmp", 1);
      args.insert(args.begin(), kGpuman);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), Slurp(stdout_path), Slurp(stderr_path)};
  }
  TempDir work_;
};

TEST_F(TwoUsersE2E, OwnersRootAndOthers) {
  if (getuid() != 0) GTEST_SKIP() << "needs root to create users and run a system daemon";
  auto alice = EnsureUser("gpumanta");
  auto bob = EnsureUser("gpumantb");
  if (!alice || !bob) GTEST_SKIP() << "useradd is not available";
  chmod(work_.path().c_str(), 0777);
  // The build tree must be reachable by the test users (a clone under /root is not).
  auto probe = As(*alice, {"--version"});
  if (probe.exit_code != 0) GTEST_SKIP() << "the test users cannot run " << kGpuman << ": " << probe.err;

  auto sub = As(*alice, {"submit", "-n", "1", "--", "sh", "-c", "id -u; sleep 30"});
  ASSERT_EQ(sub.exit_code, 0) << sub.err;
  const std::string id(Trim(sub.out));
  ASSERT_TRUE(WaitForState(std::stoll(id), "running"));
  usleep(300000);
  // The job runs as alice, and its log is hers.
  auto logs = As(*alice, {"logs", id});
  EXPECT_EQ(logs.exit_code, 0) << logs.err;
  EXPECT_EQ(logs.out, std::to_string(alice->pw_uid) + "\n");
  struct stat st{};
  ASSERT_EQ(stat((work_.path() + "/gpuman-" + id + ".log").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, alice->pw_uid);

  // Bob may see the queue but not alice's command, log, or lever.
  EXPECT_EQ(As(*bob, {"queue"}).exit_code, 0);
  auto show = As(*bob, {"show", id, "--json"});
  EXPECT_EQ(show.exit_code, 0);
  EXPECT_FALSE(json::parse(show.out).contains("argv")) << show.out;
  for (const std::string cmd : {"logs", "cancel", "hold", "resume"}) {
    auto r = As(*bob, {cmd, id});
    EXPECT_EQ(r.exit_code, 5) << cmd << ": " << r.err;
    EXPECT_NE(r.err.find("another user"), std::string::npos) << cmd << ": " << r.err;
  }
  EXPECT_EQ(As(*bob, {"drain", "0"}).exit_code, 5);
  // Priority is an admin's lever: bob may lower his job's, not raise it.
  auto raise = As(*bob, {"submit", "--priority", "10", "--", "true"});
  EXPECT_EQ(raise.exit_code, 5) << raise.err;
  EXPECT_EQ(raise.err, "gpuman: error: only root or the admin group may raise a job's priority above 0\n");
  auto lower = As(*bob, {"submit", "--priority=-5", "--", "true"});
  EXPECT_EQ(lower.exit_code, 0) << lower.err;
  EXPECT_GT(Submit({"--priority", "10", "--", "true"}), 0) << "root may raise it";
  EXPECT_EQ(Show(std::stoll(id))["state"], "running");
  // Alice can; root can.
  EXPECT_TRUE(json::parse(As(*alice, {"show", id, "--json"}).out).contains("argv"));
  EXPECT_EQ(Gpuman({"drain", "0", "--reason", "test"}).exit_code, 0);
  EXPECT_EQ(Gpuman({"undrain", "0"}).exit_code, 0);
  EXPECT_EQ(Gpuman({"cancel", id}).exit_code, 0) << "root may cancel anyone's job";
  EXPECT_TRUE(WaitForState(std::stoll(id), "cancelled"));
}

}  // namespace
}  // namespace gpuman::e2e
