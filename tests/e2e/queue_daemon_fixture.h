// A private daemon on an idle a100-4 for end-to-end tests of the queue commands, reachable
// by the test users (its directory is 0755), with `gpuman` run against it and `submit`
// returning the new job's id. Jobs left by a test are cancelled at its end.
#pragma once

#include <sys/stat.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "e2e/e2e_util.h"

namespace gpuman::e2e {

class QueueDaemonE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    chmod(dir_.path().c_str(), 0755);  // a test user reaches the socket through it
    socket_ = dir_.Join("gpuman.sock");
    ASSERT_TRUE(daemon_.Start({.scenario = IdleScenario(dir_, "a100-4"),
                               .socket = socket_,
                               .state_dir = dir_.Join("state"),
                               .env = CleanEnv(dir_.Join("leases")),
                               .stderr_path = dir_.Join("daemon.log")}));
  }
  void TearDown() override {
    Gpuman({"cancel", "--user", "root"});
    daemon_.Stop();
  }
  testing::RunResult Gpuman(std::vector<std::string> args) {
    return RunGpuman(dir_.Join("leases"), std::move(args), {{"GPUMAN_SOCKET", socket_}});
  }
  int64_t Submit(std::vector<std::string> args) {
    args.insert(args.begin(), "submit");
    auto r = Gpuman(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return std::atoll(r.out.c_str());
  }

  testing::TempDir dir_;
  std::string socket_;
  PrivateDaemon daemon_;
};

}  // namespace gpuman::e2e
