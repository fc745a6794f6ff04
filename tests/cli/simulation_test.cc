// --simulate's scenario finding and its process table (cli/simulation.cc): the
// host_processes table from the member's text (as the stand-in hands it over) or from one
// SAX pass over the file; everything else in the file, and checking it, is the stand-in's.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

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
    return ResolveSimulation(path, env_, InstalledLayout{});
  }
  // The table read from the file, checked against the one read from the member's text
  // (what the stand-in hands over: nlohmann's dump of the parsed member).
  std::map<uint32_t, devices::ProcessDetails> Table(const std::string& text) {
    auto sim = Resolve(text);
    EXPECT_TRUE(sim) << sim.error().message;
    auto from_file = ReadHostProcesses(dir_ + "/s.json");
    nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    std::string member = doc.is_object() && doc.contains("host_processes") ? doc["host_processes"].dump() : "{}";
    auto from_member = ParseHostProcesses(member);
    EXPECT_EQ(from_file.size(), from_member.size());
    for (const auto& [pid, d] : from_file) {
      if (!from_member.count(pid)) {
        ADD_FAILURE() << "the member text lacks pid " << pid;
        continue;
      }
      EXPECT_EQ(from_member.at(pid).user, d.user);
      EXPECT_EQ(from_member.at(pid).uid, d.uid);
      EXPECT_EQ(from_member.at(pid).command, d.command);
      EXPECT_EQ(from_member.at(pid).start_time_unix, d.start_time_unix);
    }
    return from_file;
  }

  std::string dir_;
  Environment env_;
};

TEST_F(SimulationTest, HostProcessesAreReadAndTheRestIsSkipped) {
  auto table = Table(R"({
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
  ASSERT_EQ(table.size(), 2u);
  const devices::ProcessDetails& alice = table.at(4242);  // a repeated PID: the last one
  EXPECT_EQ(alice.user, "alice2");
  EXPECT_EQ(alice.uid, 1002u);
  EXPECT_EQ(alice.command, "");
  EXPECT_FALSE(alice.start_time_unix.has_value());
  const devices::ProcessDetails& other = table.at(17);
  EXPECT_EQ(other.user, "?");
  EXPECT_EQ(other.uid, 2u);
  EXPECT_FALSE(other.start_time_unix.has_value());  // not a whole number
  EXPECT_EQ(other.command, "");
}

TEST_F(SimulationTest, TheFirstEntryKeepsItsFields) {
  auto table = Table(R"({"host_processes": {"1": {"user": "bob", "uid": 7, "more": {"user": "x", "uid": 9}, "command": "sh",
                                                  "start_time": 5}}})");
  ASSERT_EQ(table.count(1), 1u);
  const devices::ProcessDetails& bob = table.at(1);
  EXPECT_EQ(bob.user, "bob");
  EXPECT_EQ(bob.uid, 7u);
  EXPECT_EQ(bob.command, "sh");
  EXPECT_EQ(bob.start_time_unix, 5);
}

TEST_F(SimulationTest, NoTableIsNoProcesses) {
  EXPECT_TRUE(Table(R"({"gpus": [], "host_processes": [{"1": {"user": "in an array"}}]})").empty());
}

TEST_F(SimulationTest, TheFileIsTheStandInsToCheck) {
  // Not read when resolved (the stand-in parses and checks it when NVML is loaded:
  // NvmlLibraryTest.StandInScenarioErrorIsTheLoadsErrorNotStderr); a file that is not a
  // JSON object gives no table either way.
  for (const std::string text : {R"({"host_processes": {"1": {}}, "gpus": [{"uuid": tru}]})",
                                 R"({"host_processes": {"1": {}}} trailing)", R"([{"host_processes": {"1": {}}}])", "3", ""}) {
    SCOPED_TRACE(text);
    auto sim = Resolve(text);
    ASSERT_TRUE(sim) << sim.error().message;
    EXPECT_TRUE(ReadHostProcesses(dir_ + "/s.json").empty());
  }
  EXPECT_TRUE(ReadHostProcesses(dir_ + "/missing.json").empty());
  EXPECT_TRUE(ParseHostProcesses("{\"1\": {").empty());
}

TEST_F(SimulationTest, AMissingFileIsRefused) {
  auto sim = ResolveSimulation(dir_ + "/missing.json", env_, InstalledLayout{});
  ASSERT_FALSE(sim);
  EXPECT_EQ(sim.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(sim.error().message.find("does not exist"), std::string::npos) << sim.error().message;
}

}  // namespace
}  // namespace gpuman::cli
