// --simulate's scenario reading (cli/simulation.cc): the host_processes table comes from one
// SAX pass that checks the whole file; everything else in the file is left to the stand-in.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "cli/simulation.h"

namespace gpuman::cli {
namespace {

class SimulationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpuman-simulation-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
    std::ofstream(dir_ + "/libnvidia-ml.so.1") << "";  // only found, never loaded here
    env_.vars["GPUMAN_SIM_LIBRARY"] = dir_ + "/libnvidia-ml.so.1";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  Result<Simulation> Resolve(const std::string& text) {
    const std::string path = dir_ + "/s.json";
    std::ofstream(path) << text;
    return ResolveSimulation(path, env_, "");
  }

  std::string dir_;
  Environment env_;
};

TEST_F(SimulationTest, HostProcessesAreReadAndTheRestIsSkipped) {
  auto sim = Resolve(R"({
    "gpus": [{"uuid": "GPU-1", "processes": [{"pid": 7}], "host_processes": {"99": {"user": "no"}}}],
    "driver": {"host_processes": {"98": {"user": "no"}}},
    "host_processes": {
      "4242": {"user": "alice", "uid": 1001, "command": "python train.py", "start_time": 1764400000,
               "extra": {"user": "nested, ignored"}},
      "17": {"uid": 2.0, "start_time": 1.5, "command": ["not", "a", "string"]},
      "x12": {"user": "not a pid"},
      "5": "not an object",
      "4242": {"user": "alice2", "uid": 1002}
    },
    "errors": {}
  })");
  ASSERT_TRUE(sim) << sim.error().message;
  ASSERT_EQ(sim->host_processes.size(), 2u);
  const devices::ProcessDetails& alice = sim->host_processes.at(4242);  // a repeated PID: the last one
  EXPECT_EQ(alice.user, "alice2");
  EXPECT_EQ(alice.uid, 1002u);
  EXPECT_EQ(alice.command, "");
  EXPECT_FALSE(alice.start_time_unix.has_value());
  const devices::ProcessDetails& other = sim->host_processes.at(17);
  EXPECT_EQ(other.user, "?");
  EXPECT_EQ(other.uid, 2u);
  EXPECT_FALSE(other.start_time_unix.has_value());  // not a whole number
  EXPECT_EQ(other.command, "");
}

TEST_F(SimulationTest, TheFirstEntryKeepsItsFields) {
  auto sim = Resolve(R"({"host_processes": {"1": {"user": "bob", "uid": 7, "more": {"user": "x", "uid": 9}, "command": "sh",
                                                  "start_time": 5}}})");
  ASSERT_TRUE(sim) << sim.error().message;
  const devices::ProcessDetails& bob = sim->host_processes.at(1);
  EXPECT_EQ(bob.user, "bob");
  EXPECT_EQ(bob.uid, 7u);
  EXPECT_EQ(bob.command, "sh");
  EXPECT_EQ(bob.start_time_unix, 5);
}

TEST_F(SimulationTest, NoTableIsNoProcesses) {
  auto sim = Resolve(R"({"gpus": [], "host_processes": [{"1": {"user": "in an array"}}]})");
  ASSERT_TRUE(sim) << sim.error().message;
  EXPECT_TRUE(sim->host_processes.empty());
}

TEST_F(SimulationTest, TheWholeFileIsChecked) {
  // Broken after the table, and in a part only the stand-in reads: still refused here.
  for (const std::string text : {R"({"host_processes": {}, "gpus": [{"uuid": tru}]})",
                                 R"({"host_processes": {}} trailing)", R"([{"host_processes": {}}])", "3", ""}) {
    SCOPED_TRACE(text);
    auto sim = Resolve(text);
    ASSERT_FALSE(sim);
    EXPECT_EQ(sim.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(sim.error().message.find("not a valid JSON object"), std::string::npos) << sim.error().message;
  }
}

}  // namespace
}  // namespace gpuman::cli
