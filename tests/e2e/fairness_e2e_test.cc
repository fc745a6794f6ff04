// End-to-end tests of the daemon's fairness (docs/protocol.md, "Limits"): one user's idle
// connections do not lock others out, a flooding client does not stop a normal one from
// being answered, a client that half-closes gets its reply, and `queue --all` pages
// through more jobs than one frame holds. Correctness only; the latencies are measured by
// bench/flood_bench.cc.
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <optional>
#include <thread>

#include "e2e/e2e_util.h"
#include "e2e/users.h"

namespace gpuman::e2e {
namespace {

using nlohmann::json;
using testing::TempDir;

// A raw protocol client: frames by hand (4-byte big-endian length, then JSON).
std::string Frame(const json& message) {
  const std::string payload = message.dump();
  const uint32_t n = static_cast<uint32_t>(payload.size());
  std::string out = {static_cast<char>(n >> 24), static_cast<char>(n >> 16), static_cast<char>(n >> 8),
                     static_cast<char>(n)};
  return out + payload;
}
json Request(int64_t id, const std::string& op, json args = json::object()) {
  return json{{"v", 1}, {"id", id}, {"op", op}, {"args", std::move(args)}};
}
int ConnectTo(const std::string& path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}
bool WriteAll(int fd, const std::string& bytes) {
  for (size_t sent = 0; sent < bytes.size();) {
    ssize_t w = send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (w <= 0) return false;
    sent += static_cast<size_t>(w);
  }
  return true;
}
bool ReadExactly(int fd, char* out, size_t n) {
  for (size_t got = 0; got < n;) {
    ssize_t r = read(fd, out + got, n - got);
    if (r <= 0) return false;
    got += static_cast<size_t>(r);
  }
  return true;
}
// The next reply on `fd`; nullopt at end of stream.
std::optional<json> ReadReply(int fd) {
  unsigned char header[4];
  if (!ReadExactly(fd, reinterpret_cast<char*>(header), 4)) return std::nullopt;
  const size_t n = (size_t{header[0]} << 24) | (size_t{header[1]} << 16) | (size_t{header[2]} << 8) | header[3];
  std::string payload(n, '\0');
  if (!ReadExactly(fd, payload.data(), n)) return std::nullopt;
  return json::parse(payload);
}

class FairnessE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    chmod(dir_.path().c_str(), 0755);  // test users reach the socket through it
    socket_ = dir_.Join("gpuman.sock");
    scenario_ = IdleScenario(dir_, "h100-8");
    ASSERT_TRUE(daemon_.Start(
        {.scenario = scenario_, .socket = socket_, .state_dir = dir_.Join("state"), .env = CleanEnv(dir_.Join("leases"))}));
  }
  void TearDown() override { daemon_.Stop(); }
  testing::RunResult Gpuman(std::vector<std::string> args) {
    return RunGpuman(dir_.Join("leases"), std::move(args), {{"GPUMAN_SOCKET", socket_}});
  }
  std::map<std::string, std::string> UserEnv() {
    auto env = CleanEnv("");
    env["GPUMAN_SOCKET"] = socket_;
    env["PATH"] = "/usr/bin:/bin";
    return env;
  }
  // A connection that said hello.
  int Hello() {
    int fd = ConnectTo(socket_);
    EXPECT_GE(fd, 0);
    EXPECT_TRUE(WriteAll(fd, Frame(Request(1, "hello", {{"client", "test"}, {"protocol", 1}}))));
    auto reply = ReadReply(fd);
    EXPECT_TRUE(reply && (*reply)["ok"] == true);
    return fd;
  }

  TempDir dir_;
  std::string socket_, scenario_;
  PrivateDaemon daemon_;
};

TEST_F(FairnessE2E, OneUsersIdleConnectionsDoNotLockAnotherUserOut) {
  if (getuid() != 0) GTEST_SKIP() << "needs root to create users";
  auto hog = EnsureTestUser("gpuman-fair-hog");
  auto other = EnsureTestUser("gpuman-fair-other");
  ASSERT_TRUE(hog && other);
  if (RunAsUser(*other, {kGpuman, "--version"}, UserEnv()).exit_code != 0) GTEST_SKIP() << "test users cannot run gpuman";
  // The hog: 300 connections that never say anything, held until it is killed.
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t holder = fork();
  if (holder == 0) {
    close(ready[0]);
    if (setgid(hog->pw_gid) != 0 || setuid(hog->pw_uid) != 0) _exit(1);
    std::vector<int> fds;
    for (int i = 0; i < 300; ++i) fds.push_back(ConnectTo(socket_));
    int connected = 0;
    for (int fd : fds) connected += fd >= 0;
    (void)!write(ready[1], &connected, sizeof connected);
    pause();
    _exit(0);
  }
  close(ready[1]);
  int connected = 0;
  ASSERT_EQ(read(ready[0], &connected, sizeof connected), static_cast<ssize_t>(sizeof connected));
  close(ready[0]);
  EXPECT_EQ(connected, 300);
  usleep(300000);  // the daemon accepts (and refuses) them

  auto theirs = RunAsUser(*other, {kGpuman, "queue"}, UserEnv());
  EXPECT_EQ(theirs.exit_code, 0) << theirs.err;
  EXPECT_EQ(theirs.out, "no jobs\n");
  auto roots = Gpuman({"queue"});
  EXPECT_EQ(roots.exit_code, 0) << roots.err;
  // The hog itself is over its cap: one line, saying so.
  auto hogs = RunAsUser(*hog, {kGpuman, "queue"}, UserEnv());
  EXPECT_EQ(hogs.exit_code, 3);
  EXPECT_EQ(hogs.err, "gpuman: error: too many connections from user gpuman-fair-hog (limit 64)\n");
  EXPECT_EQ(hogs.out, "");

  kill(holder, SIGKILL);
  int status = 0;
  waitpid(holder, &status, 0);
  // Its slots come back once its connections are gone.
  bool back = false;
  for (int i = 0; i < 100 && !back; ++i) {
    back = RunAsUser(*hog, {kGpuman, "queue"}, UserEnv()).exit_code == 0;
    if (!back) usleep(100000);
  }
  EXPECT_TRUE(back);
}

TEST_F(FairnessE2E, AFloodingClientBesideANormalOne) {
  constexpr int kFlood = 20000;
  int flood = Hello();
  ASSERT_GE(flood, 0);
  // The flood: pipelined requests, written without reading a reply (the writes block once
  // the daemon stops reading from it), some of them status, most queue.
  std::string requests;
  for (int i = 0; i < kFlood; ++i) {
    requests += Frame(i % 20 == 0 ? Request(100 + i, "status") : Request(100 + i, "queue", {{"all", true}}));
  }
  std::thread writer([&] { EXPECT_TRUE(WriteAll(flood, requests)); });
  usleep(200000);

  // Meanwhile the normal client is answered, correctly.
  auto queue = Gpuman({"queue"});
  EXPECT_EQ(queue.exit_code, 0) << queue.err;
  EXPECT_EQ(queue.out, "no jobs\n");
  auto submitted = Gpuman({"submit", "--output", dir_.Join("job.log"), "--", "sh", "-c", "echo ran"});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.err;
  const std::string id = submitted.out.substr(0, submitted.out.find('\n'));
  auto waited = Gpuman({"wait", id});
  EXPECT_EQ(waited.exit_code, 0) << waited.err;
  EXPECT_EQ(Slurp(dir_.Join("job.log")), "ran\n");

  // The flood gets every reply, in order, once it reads.
  int answered = 0;
  bool in_order = true;
  while (answered < kFlood) {
    auto reply = ReadReply(flood);
    if (!reply) break;
    in_order = in_order && (*reply)["id"] == 100 + answered && (*reply)["ok"] == true;
    ++answered;
  }
  writer.join();
  EXPECT_EQ(answered, kFlood);
  EXPECT_TRUE(in_order);
  close(flood);
}

TEST_F(FairnessE2E, AClientThatHalfClosesAfterItsRequestGetsItsReply) {
  int fd = ConnectTo(socket_);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(WriteAll(fd, Frame(Request(1, "hello", {{"client", "test"}, {"protocol", 1}})) +
                               Frame(Request(2, "queue", {{"all", true}}))));
  ASSERT_EQ(shutdown(fd, SHUT_WR), 0);
  auto hello = ReadReply(fd);
  ASSERT_TRUE(hello);
  EXPECT_EQ((*hello)["ok"], true);
  auto queue = ReadReply(fd);
  ASSERT_TRUE(queue) << "the reply came before the close";
  EXPECT_EQ((*queue)["id"], 2);
  EXPECT_EQ((*queue)["ok"], true);
  EXPECT_TRUE((*queue)["result"]["jobs"].is_array());
  EXPECT_FALSE(ReadReply(fd)) << "then the daemon closes";
  close(fd);
}

TEST_F(FairnessE2E, QueueAllPrintsEveryJobOfMoreThanOneFrame) {
  // 2,000 jobs with names of the most submit takes (256 bytes): about 1.6 MB of
  // summaries, more than the frame limit. (Names of 1 kB are refused at submit now; the
  // unit test queue_paging_test has such rows.) They stay queued: each waits for a first
  // job that sleeps (an impossible request is refused at submit now, issue 23).
  // Submitted over one connection, in batches of pipelined requests.
  constexpr int kJobs = 2000;
  const std::string pad(240, 'n');
  int fd = Hello();
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(WriteAll(fd, Frame(Request(9, "submit", {{"name", "blocker"}, {"argv", {"sleep", "600"}},
                                                        {"cwd", dir_.path()}, {"output", dir_.Join("blocker.log")}}))));
  auto blocker = ReadReply(fd);
  ASSERT_TRUE(blocker);
  ASSERT_EQ((*blocker)["ok"], true) << blocker->dump();
  const int64_t blocker_id = (*blocker)["result"]["id"].get<int64_t>();
  for (int start = 0; start < kJobs; start += 25) {
    std::string batch;
    for (int i = start; i < start + 25; ++i) {
      json args = {{"name", "job" + std::to_string(i) + "-" + pad}, {"argv", {"true"}}, {"cwd", dir_.path()},
                   {"output", dir_.Join("never.log")}, {"after", {blocker_id}}};
      batch += Frame(Request(10 + i, "submit", args));
    }
    ASSERT_TRUE(WriteAll(fd, batch));
    for (int i = start; i < start + 25; ++i) {
      auto reply = ReadReply(fd);
      ASSERT_TRUE(reply);
      ASSERT_EQ((*reply)["ok"], true) << reply->dump();
    }
  }
  // One page is bounded and says where the next starts.
  ASSERT_TRUE(WriteAll(fd, Frame(Request(2, "queue", {{"all", true}}))));
  auto page = ReadReply(fd);
  ASSERT_TRUE(page);
  ASSERT_EQ((*page)["ok"], true);
  const size_t first_page = (*page)["result"]["jobs"].size();
  EXPECT_GE(first_page, 1u);
  EXPECT_LT(first_page, static_cast<size_t>(kJobs));
  EXPECT_EQ((*page)["result"]["next"], (*page)["result"]["jobs"].back()["id"]);
  close(fd);

  auto listed = Gpuman({"queue", "--all", "--json"});
  ASSERT_EQ(listed.exit_code, 0) << listed.err.substr(0, 500);
  json jobs = json::parse(listed.out)["jobs"];
  ASSERT_EQ(jobs.size(), static_cast<size_t>(kJobs) + 1) << "the blocker and every job";
  EXPECT_EQ(jobs[0]["name"], "blocker");
  for (int i = 0; i < kJobs; ++i) {
    ASSERT_EQ(jobs[static_cast<size_t>(i) + 1]["name"], "job" + std::to_string(i) + "-" + pad) << i;
  }
  auto table = Gpuman({"queue", "--all"});
  ASSERT_EQ(table.exit_code, 0) << table.err.substr(0, 500);
  EXPECT_EQ(std::count(table.out.begin(), table.out.end(), '\n'), kJobs + 2) << "a header and one line per job";
  EXPECT_NE(table.out.find("job1999-"), std::string::npos);
}

}  // namespace
}  // namespace gpuman::e2e
