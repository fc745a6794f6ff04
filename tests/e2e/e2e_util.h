// Shared helpers for end-to-end tests: run the real gpuman with a clean GPU-related
// environment (no config file, no simulate, a private state dir) and small file helpers.
#pragma once

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace gpuman::e2e {

inline const std::string kGpuman = GPUMAN_TEST_BINARY;
inline const std::string kScenarios = GPUMAN_TEST_SCENARIO_DIR;

/// The sanitizers' settings of this test process (scripts/test.sh --sanitize sets them:
/// where reports go, leak checking), for every gpuman it starts, even those started with an
/// exact environment (users.h): without them a report of a child could go unseen.
inline void AddSanitizerOptions(std::map<std::string, std::string>& env) {
  for (const char* name : {"ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS", "TSAN_OPTIONS"}) {
    if (const char* value = std::getenv(name)) env[name] = value;
  }
}

/// The environment every test starts from: nothing GPU-related inherited.
inline std::map<std::string, std::string> CleanEnv(const std::string& state_dir) {
  static testing::TempDir empty_config_home;
  std::map<std::string, std::string> env{
      {"GPUMAN_SIMULATE", ""},        {"GPUMAN_NVML_LIBRARY", ""},   {"GPUMAN_CONFIG", ""},
      {"GPUMAN_FAKE_NVML_SCENARIO", ""}, {"XDG_CONFIG_HOME", empty_config_home.path()},
      {"NO_COLOR", ""},               {"COLUMNS", ""},               {"GPUMAN_STATE_DIR", state_dir},
      {"CUDA_VISIBLE_DEVICES", ""},   {"CUDA_DEVICE_ORDER", ""},     {"NVIDIA_VISIBLE_DEVICES", ""},
      {"SLURM_JOB_GPUS", ""},         {"SLURM_STEP_GPUS", ""},       {"GPUMAN_LEASE_ID", ""},
  };
  AddSanitizerOptions(env);
  return env;
}

inline testing::RunResult RunGpuman(const std::string& state_dir, std::vector<std::string> args,
                                    const std::map<std::string, std::string>& env = {}) {
  auto base = CleanEnv(state_dir);
  for (const auto& [k, v] : env) base[k] = v;
  args.insert(args.begin(), kGpuman);
  return testing::Run(args, base);
}

/// True when something accepts connections on the Unix socket (a daemon that was killed
/// leaves its socket file behind, so the file existing is not enough).
inline bool DaemonAnswers(const std::string& socket_path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, socket_path.c_str(), sizeof addr.sun_path - 1);
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  close(fd);
  return ok;
}

inline std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// A copy of a shipped scenario with every process removed (all GPUs idle).
inline std::string IdleScenario(const testing::TempDir& dir, const std::string& name) {
  std::ifstream in(kScenarios + "/" + name + ".json");
  nlohmann::json s = nlohmann::json::parse(in);
  for (auto& g : s["gpus"]) g["processes"] = nlohmann::json::array();
  return dir.Write(name + "-idle.json", s.dump(2));
}

}  // namespace gpuman::e2e
