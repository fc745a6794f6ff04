// Rendezvous ports (issue 24; docs/python.md, "Rendezvous"): every lease gets a MASTER_PORT
// of its own from the machine's range, so that two `torchrun`s never both take 29500; a
// port something listens on is skipped; queue jobs get theirs; `[launch] ports = "off"`
// gives none.
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "base/strings.h"
#include "base/unique_fd.h"
#include "e2e/e2e_util.h"

namespace gpuman::e2e {
namespace {

using testing::TempDir;

// A listening TCP socket on `port` (all IPv4 addresses), or an invalid fd.
UniqueFd Listen(int port) {
  UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  if (bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0 || listen(fd.get(), 1) != 0) {
    return UniqueFd();
  }
  return fd;
}

class LaunchE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    chmod(dir_.path().c_str(), 0755);
    scenario_ = IdleScenario(dir_, "h100-8");
    socket_ = dir_.Join("gpuman.sock");
  }

  testing::RunResult Gpuman(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
    args.insert(args.begin(), {"--simulate", scenario_});
    env.emplace("GPUMAN_LEASE_DIR", dir_.Join("leases"));
    return RunGpuman(dir_.Join("state"), std::move(args), env);
  }

  // MASTER_ADDR MASTER_PORT PET_MASTER_PORT PET_NPROC_PER_NODE of a `run -n N`'s command.
  std::vector<std::string> LaunchVars(int n, const std::map<std::string, std::string>& env = {}) {
    auto r = Gpuman({"run", "-q", "-n", std::to_string(n), "--", "sh", "-c",
                     "echo \"${MASTER_ADDR:--} ${MASTER_PORT:--} ${PET_MASTER_PORT:--} ${PET_NPROC_PER_NODE:--}\""},
                    env);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::istringstream words(r.out);
    std::vector<std::string> out;
    for (std::string w; words >> w;) out.push_back(w);
    return out;
  }

  TempDir dir_;
  std::string scenario_, socket_;
  PrivateDaemon daemon_;
};

TEST_F(LaunchE2E, TwoLiveLeasesNeverShareAPortWithOrWithoutTheDaemon) {
  for (bool through_daemon : {false, true}) {
    SCOPED_TRACE(through_daemon ? "through the daemon" : "machine lease table");
    std::map<std::string, std::string> env;
    if (through_daemon) {
      ASSERT_TRUE(daemon_.Start({.scenario = scenario_, .socket = socket_, .state_dir = dir_.Join("daemon-state"),
                                 .env = CleanEnv(dir_.Join("state"))}));
      env["GPUMAN_SOCKET"] = socket_;
    }
    const std::string port_file = dir_.Join(through_daemon ? "p-daemon" : "p-table");
    const std::string go = port_file + ".go";
    testing::RunResult holder;
    std::thread runner([&] {
      holder = Gpuman({"run", "-q", "-n", "2", "--", "/bin/sh", "-c",
                       "echo $MASTER_PORT > \"$0.tmp\" && mv \"$0.tmp\" \"$0\"; while [ ! -e \"$0.go\" ]; do sleep 0.05; done",
                       port_file},
                      env);
    });
    for (int i = 0; i < 600 && access(port_file.c_str(), F_OK) != 0; ++i) usleep(50000);
    const std::string held(Trim(Slurp(port_file)));
    const auto second = LaunchVars(1, env);
    std::ofstream(go) << "go";
    runner.join();
    EXPECT_EQ(holder.exit_code, 0) << holder.err;
    ASSERT_EQ(second.size(), 4u);
    EXPECT_EQ(second[0], "127.0.0.1");
    EXPECT_NE(second[1], "-");
    EXPECT_TRUE(ParseInt(held)) << held;
    EXPECT_NE(second[1], held) << "two live leases, one port";
    EXPECT_EQ(second[2], second[1]) << "torchrun's PET_MASTER_PORT";
    EXPECT_EQ(second[3], "1") << "PET_NPROC_PER_NODE: the lease's GPUs";
    const auto port = ParseInt(second[1]);
    ASSERT_TRUE(port);
    EXPECT_GE(*port, 29500);
    EXPECT_LE(*port, 29999);
    EXPECT_TRUE(Listen(static_cast<int>(*port))) << "a lease's port is one that can be bound";
    if (through_daemon) daemon_.Stop();
  }
}

TEST_F(LaunchE2E, APortSomethingListensOnIsSkipped) {
  const auto first = LaunchVars(1);
  ASSERT_EQ(first.size(), 4u);
  const auto port = ParseInt(first[1]);
  ASSERT_TRUE(port) << first[1];
  UniqueFd busy = Listen(static_cast<int>(*port));
  ASSERT_TRUE(busy) << "could not listen on " << *port;
  const auto next = LaunchVars(1);
  ASSERT_EQ(next.size(), 4u);
  EXPECT_NE(next[1], first[1]) << "port " << *port << " is listened on";
}

TEST_F(LaunchE2E, AQueueJobGetsItsLeasesPortAndOffGivesNone) {
  ASSERT_TRUE(daemon_.Start({.scenario = scenario_, .socket = socket_, .state_dir = dir_.Join("daemon-state"),
                             .env = CleanEnv(dir_.Join("state"))}));
  const std::map<std::string, std::string> d = {{"GPUMAN_SOCKET", socket_}};
  const std::string log = dir_.Join("job.log");
  auto sub = Gpuman({"submit", "-n", "2", "--output", log, "--", "sh", "-c", "echo $MASTER_ADDR $MASTER_PORT $PET_NPROC_PER_NODE"}, d);
  ASSERT_EQ(sub.exit_code, 0) << sub.err;
  auto waited = Gpuman({"wait", std::string(Trim(sub.out))}, d);
  EXPECT_EQ(waited.exit_code, 0) << waited.err;
  std::istringstream words(Slurp(log));
  std::string addr, port, nproc;
  words >> addr >> port >> nproc;
  EXPECT_EQ(addr, "127.0.0.1");
  EXPECT_TRUE(ParseInt(port)) << Slurp(log);
  EXPECT_EQ(nproc, "2");
  daemon_.Stop();

  // The machine turned them off: nothing is set.
  const std::string config = dir_.Write("config.toml", "[launch]\nports = \"off\"\n");
  const auto none = LaunchVars(1, {{"GPUMAN_CONFIG", config}});
  EXPECT_EQ(none, (std::vector<std::string>{"-", "-", "-", "-"}));
}

}  // namespace
}  // namespace gpuman::e2e
