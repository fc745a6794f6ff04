// End-to-end: the real gpuman binary, the real loader, the stand-in NVML. Each test runs
// `gpuman` as a user would and checks exit code, stdout and stderr.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <algorithm>
#include <fstream>

#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace gpuman {
namespace {

using nlohmann::json;
using testing::Run;
using testing::RunResult;
using testing::TempDir;

const std::string kGpuman = GPUMAN_TEST_BINARY;
const std::string kScenarios = GPUMAN_TEST_SCENARIO_DIR;

// Runs gpuman with a clean GPU-related environment (no config file, no simulate).
RunResult Gpuman(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
  static TempDir empty_config_home;
  std::map<std::string, std::string> base = {
      {"GPUMAN_SIMULATE", ""}, {"GPUMAN_NVML_LIBRARY", ""}, {"GPUMAN_CONFIG", ""},
      {"GPUMAN_FAKE_NVML_SCENARIO", ""}, {"XDG_CONFIG_HOME", empty_config_home.path()},
      {"NO_COLOR", ""}, {"COLUMNS", ""}, {"GPUMAN_STATE_DIR", empty_config_home.path() + "/state"},
  };
  for (auto& [k, v] : env) base[k] = v;
  args.insert(args.begin(), kGpuman);
  return Run(args, base);
}

// Display columns of UTF-8 text (we only print ASCII and one-column code points).
size_t Columns(const std::string& line) {
  size_t n = 0;
  for (unsigned char c : line) n += (c & 0xC0) != 0x80;
  return n;
}

int CountLines(const std::string& text) {
  return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

TEST(StatusE2E, NoDriverIsOneLineAndExitCode3) {
  auto r = Gpuman({"status"}, {{"GPUMAN_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1"}});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(CountLines(r.err), 1) << r.err;
  EXPECT_EQ(r.err.rfind("gpuman: error: cannot load NVML library /nonexistent/libnvidia-ml.so.1", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("--simulate"), std::string::npos) << r.err;
}

TEST(StatusE2E, DriverNotLoadedThroughTheStandIn) {
  // The stand-in with no scenario behaves like a machine whose kernel module is missing.
  auto r = Gpuman({"status", "--json"}, {{"GPUMAN_NVML_LIBRARY", GPUMAN_TEST_FAKE_NVML}});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(CountLines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("driver not loaded"), std::string::npos) << r.err;
  auto sim = Gpuman({"--simulate", "no-driver", "status"});
  EXPECT_EQ(sim.exit_code, 3);
  EXPECT_EQ(CountLines(sim.err), 1) << sim.err;
}

TEST(StatusE2E, SimulatedA100JsonFollowsTheContract) {
  auto r = Gpuman({"--simulate", "a100-4", "status", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json doc = json::parse(r.out);
  EXPECT_EQ(doc["schema_version"], 1);
  EXPECT_EQ(doc["simulated"], true);
  EXPECT_EQ(doc["scenario"], "a100-4");
  EXPECT_EQ(doc["driver_version"], "550.54.15");
  EXPECT_EQ(doc["cuda_driver_version"], "12.4");
  ASSERT_EQ(doc["gpus"].size(), 4u);
  for (const auto& g : doc["gpus"]) {
    for (const char* key : {"index", "uuid", "name", "pci_bus_id", "memory", "utilization", "temperature_c",
                            "power_usage_w", "power_limit_w", "compute_capability", "healthy",
                            "health_problems", "processes"}) {
      EXPECT_TRUE(g.contains(key)) << key;
    }
    EXPECT_EQ(g["uuid"].get<std::string>().rfind("GPU-", 0), 0u);
    EXPECT_EQ(g["healthy"], true);
    EXPECT_TRUE(g["memory"]["reserved_bytes"].is_number());  // _v2 memory
    EXPECT_TRUE(g["fan_percent"].is_null());                 // SXM: not supported, not 0
    EXPECT_EQ(g["compute_capability"], "8.0");
  }
  const auto& busy = doc["gpus"][1];
  EXPECT_GE(busy["utilization"]["gpu_percent"].get<int>(), 90);
  ASSERT_EQ(busy["processes"].size(), 2u);
  EXPECT_EQ(busy["processes"][0]["user"], "alice");
  EXPECT_EQ(busy["processes"][0]["type"], "compute");
  EXPECT_GT(busy["processes"][0]["used_memory_bytes"].get<int64_t>(), 0);
  EXPECT_NE(busy["processes"][0]["command"].get<std::string>().find("python"), std::string::npos);
  EXPECT_EQ(doc["gpus"][0]["numa_node"], 0);
  EXPECT_EQ(doc["gpus"][3]["numa_node"], 1);
}

TEST(StatusE2E, SimulateFromEnvironmentAndMarkerInText) {
  auto r = Gpuman({"status"}, {{"GPUMAN_SIMULATE", "h100-8"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("SIMULATED"), std::string::npos);
  EXPECT_NE(r.out.find("h100-8"), std::string::npos);
  EXPECT_EQ(r.out.find("\x1b["), std::string::npos);  // not a tty: no colour
  // Not a terminal: the table is laid out for 80 columns, and nothing is cut (the long
  // command lines are whole).
  int gpu_lines = 0;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("H100") == std::string::npos) continue;
    EXPECT_LE(Columns(line), 80u) << line;
    ++gpu_lines;
  }
  EXPECT_EQ(gpu_lines, 8);
  EXPECT_NE(r.out.find("-m ipykernel_launcher -f /home/dave/.local/share/jupyter/runtime/kernel-3.json\n"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("\xE2\x80\xA6"), std::string::npos) << r.out;
}

TEST(StatusE2E, WideTerminalUsesTheWidth) {
  auto narrow = Gpuman({"--simulate", "a100-4", "status"}, {{"COLUMNS", "80"}});
  auto wide = Gpuman({"--simulate", "a100-4", "status"}, {{"COLUMNS", "160"}});
  ASSERT_EQ(wide.exit_code, 0);
  size_t narrow_max = 0, wide_max = 0;
  std::istringstream a(narrow.out), b(wide.out);
  for (std::string l; std::getline(a, l);) narrow_max = std::max(narrow_max, Columns(l));
  for (std::string l; std::getline(b, l);) wide_max = std::max(wide_max, Columns(l));
  EXPECT_LE(narrow_max, 80u);
  EXPECT_GT(wide_max, 80u);
  EXPECT_LE(wide_max, 160u);
}

TEST(StatusE2E, LostGpuStaysListedAndUnhealthy) {
  auto r = Gpuman({"--simulate", "lost-gpu", "status", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json doc = json::parse(r.out);
  ASSERT_EQ(doc["gpus"].size(), 4u);
  EXPECT_EQ(doc["gpus"][2]["healthy"], false);
  ASSERT_FALSE(doc["gpus"][2]["health_problems"].empty());
  EXPECT_NE(doc["gpus"][2]["health_problems"][0].get<std::string>().find("GPU is lost"), std::string::npos);
  EXPECT_EQ(doc["gpus"][1]["healthy"], true);
  auto text = Gpuman({"--simulate", "lost-gpu", "status"});
  EXPECT_NE(text.out.find("LOST"), std::string::npos) << text.out;
}

TEST(StatusE2E, ForeignPidsAreShownNotDropped) {
  auto r = Gpuman({"--simulate", "workstation-mixed", "status", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json doc = json::parse(r.out);
  int foreign = 0, graphics = 0;
  for (const auto& g : doc["gpus"]) {
    for (const auto& p : g["processes"]) {
      if (!p["in_pid_namespace"].get<bool>()) {
        ++foreign;
        EXPECT_TRUE(p["user"].is_null());
        EXPECT_TRUE(p["command"].is_null());
      }
      if (p["type"] == "graphics") ++graphics;
    }
  }
  EXPECT_GT(foreign, 0);
  EXPECT_GT(graphics, 0);
  auto text = Gpuman({"--simulate", "workstation-mixed", "status"});
  EXPECT_NE(text.out.find("not in this PID namespace"), std::string::npos) << text.out;
}

TEST(StatusE2E, GpuFilterAndNoProcesses) {
  auto r = Gpuman({"--simulate", "a100-4", "status", "--json", "--gpus", "3,GPU-3f2a9c1e", "--no-processes"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json doc = json::parse(r.out);
  ASSERT_EQ(doc["gpus"].size(), 2u);
  EXPECT_EQ(doc["gpus"][0]["index"], 3);
  EXPECT_EQ(doc["gpus"][1]["index"], 0);
  EXPECT_FALSE(doc["gpus"][0].contains("processes"));
}

TEST(StatusE2E, BadArgumentsExit2WithOneLine) {
  struct Case {
    std::vector<std::string> args;
    const char* message_part;
  } cases[] = {
      {{"--simulate", "a100-4", "status", "--gpus", "9"}, "unknown GPU index 9"},
      {{"--simulate", "a100-4", "status", "--gpus", "GPU-ffffffff"}, "unknown GPU UUID"},
      {{"--simulate", "a100-4", "status", "--gpus", "../../etc"}, "neither an index nor a UUID"},
      {{"--simulate", "a100-4", "status", "--gpus", ""}, "empty GPU list"},
      {{"--simulate", "nope", "status"}, "unknown scenario 'nope' (known: a100-4"},
      {{"status", "--watch", "-1"}, "--watch"},
      {{"status", "--watch", "abc"}, "--watch"},
      {{"status", "--bogus"}, "bogus"},
      {{"frobnicate"}, "unknown command 'frobnicate' (commands: status"},
      {{"--simulate", "a100-4", "frobnicate"}, "unknown command 'frobnicate'"},
      {{}, "subcommand"},
  };
  for (const auto& c : cases) {
    auto r = Gpuman(c.args);
    std::string joined;
    for (const auto& a : c.args) joined += a + " ";
    EXPECT_EQ(r.exit_code, 2) << joined << "\n" << r.err;
    EXPECT_EQ(r.err.rfind("gpuman: error: ", 0), 0u) << joined << "\n" << r.err;
    EXPECT_NE(r.err.find(c.message_part), std::string::npos) << joined << "\n" << r.err;
    EXPECT_EQ(r.out, "") << joined;
  }
}

// The stand-in checks the scenario when a command first reads devices, and gpuman says
// what it found, once: one line, exit 2 (run: 125, its own errors), for a file that is not
// JSON and for a wrong field alike; the daemon refuses to start rather than serve no GPUs.
TEST(StatusE2E, AMalformedScenarioIsOneLineAndExit2) {
  TempDir dir;
  const std::string not_json = dir.Write("not-json.json", "{\"gpus\": [");
  const std::string bad_field = dir.Write("bad-field.json", R"({"gpus": [{"name": "no uuid"}]})");
  const std::pair<std::string, std::string> files[] = {{not_json, "parse error"}, {bad_field, "gpus[0]: uuid: required"}};
  for (const auto& [path, reason] : files) {
    const std::vector<std::vector<std::string>> commands = {
        {"status"}, {"status", "--json"}, {"select", "-n", "1"}, {"health"}, {"run", "-n", "1", "--", "true"},
        {"daemon", "--socket", dir.Join("d.sock"), "--state-dir", dir.Join("d-state")}};
    for (std::vector<std::string> args : commands) {
      const bool run = args[0] == "run";
      args.insert(args.begin(), {"--simulate", path});
      SCOPED_TRACE(path + " " + args[2]);
      auto r = Gpuman(args, {{"GPUMAN_LEASE_DIR", dir.Join("leases")}});
      EXPECT_EQ(r.exit_code, run ? 125 : 2) << r.err;
      EXPECT_EQ(r.err.rfind("gpuman: error: scenario " + path + ": ", 0), 0u) << r.err;
      EXPECT_NE(r.err.find(reason), std::string::npos) << r.err;
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line, the stand-in's own not beside it: " << r.err;
      EXPECT_EQ(r.out, "");
    }
  }
}

TEST(StatusE2E, ConfigFileChoosesTheLibraryAndBrokenConfigIsAnError) {
  TempDir dir;
  std::string good = dir.Write("good.toml", std::string("nvml_library = \"") + GPUMAN_TEST_FAKE_NVML_LEGACY + "\"\n");
  auto r = Gpuman({"--config", good, "status", "--json"},
                  {{"GPUMAN_FAKE_NVML_SCENARIO", kScenarios + "/a100-4.json"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json doc = json::parse(r.out);
  EXPECT_EQ(doc["simulated"], false);  // gpuman cannot tell; it loaded what it was told to
  EXPECT_TRUE(doc["gpus"][0]["memory"]["reserved_bytes"].is_null());  // legacy: v1 memory only
  EXPECT_EQ(doc["gpus"][1]["processes"].size(), 2u);                  // 16-byte entries

  // The environment variable beats the file.
  auto env_wins = Gpuman({"--config", good, "status"}, {{"GPUMAN_NVML_LIBRARY", "/nonexistent/nvml.so"}});
  EXPECT_EQ(env_wins.exit_code, 3);
  EXPECT_NE(env_wins.err.find("/nonexistent/nvml.so"), std::string::npos);

  std::string broken = dir.Write("broken.toml", "nvml_library = \n");
  auto b = Gpuman({"status"}, {{"GPUMAN_CONFIG", broken}});
  EXPECT_EQ(b.exit_code, 2);
  EXPECT_NE(b.err.find(broken + ":1:"), std::string::npos) << b.err;
  EXPECT_EQ(CountLines(b.err), 1) << b.err;

  std::string unknown = dir.Write("unknown.toml", "nvml_libary = \"x\"\n");
  auto u = Gpuman({"--config", unknown, "status"});
  EXPECT_EQ(u.exit_code, 2);
  EXPECT_NE(u.err.find("unknown key 'nvml_libary'"), std::string::npos) << u.err;

  auto missing = Gpuman({"--config", dir.Join("absent.toml"), "status"});
  EXPECT_EQ(missing.exit_code, 2);
}

TEST(StatusE2E, WatchJsonStreamsOneObjectPerLine) {
  auto r = Gpuman({"--simulate", "a100-4", "status", "--json", "--watch", "0.1", "--iterations", "3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream lines(r.out);
  int n = 0;
  for (std::string line; std::getline(lines, line); ++n) {
    json doc = json::parse(line);
    EXPECT_EQ(doc["gpus"].size(), 4u);
  }
  EXPECT_EQ(n, 3);
}

// A process appears on a GPU while `status --watch` runs: the stand-in re-reads its
// scenario, and gpuman attributes the (real) pid to us through /proc.
TEST(StatusE2E, WatchSeesAProcessAppear) {
  TempDir dir;
  std::ifstream in(kScenarios + "/a100-4.json");
  json scenario = json::parse(in);
  std::string path = dir.Write("live.json", scenario.dump());

  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t child = fork();
  if (child == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    setenv("GPUMAN_FAKE_NVML_SCENARIO", "", 1);
    unsetenv("GPUMAN_SIMULATE");
    execl(kGpuman.c_str(), kGpuman.c_str(), "--simulate", path.c_str(), "status", "--json", "--watch", "0.1",
          "--iterations", "100", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  FILE* out = fdopen(fds[0], "r");
  char* line = nullptr;
  size_t cap = 0;
  ASSERT_GT(getline(&line, &cap, out), 0);
  EXPECT_TRUE(json::parse(line)["gpus"][0]["processes"].empty());

  scenario["gpus"][0]["processes"] = {{{"pid", getpid()}, {"used_memory", 1 << 30}, {"type", "compute"}}};
  dir.Write("live.json", scenario.dump(2));  // different size, new inode
  bool seen = false;
  for (int i = 0; i < 50 && !seen; ++i) {
    if (getline(&line, &cap, out) <= 0) break;
    json doc = json::parse(line);
    if (!doc["gpus"][0]["processes"].empty()) {
      seen = true;
      const auto& p = doc["gpus"][0]["processes"][0];
      EXPECT_EQ(p["pid"], getpid());
      EXPECT_EQ(p["in_pid_namespace"], true);
      EXPECT_EQ(p["uid"], getuid());
      EXPECT_NE(p["command"].get<std::string>().find("e2e_test"), std::string::npos);
      EXPECT_TRUE(p["start_time"].is_string());
    }
  }
  EXPECT_TRUE(seen);
  free(line);
  kill(child, SIGTERM);
  int status = 0;
  waitpid(child, &status, 0);
  fclose(out);
  EXPECT_TRUE(WIFEXITED(status)) << "gpuman should exit cleanly on SIGTERM";
}

TEST(StatusE2E, ListsScenarios) {
  auto r = Gpuman({"scenarios"});
  ASSERT_EQ(r.exit_code, 0);
  for (const char* name : {"a100-4", "h100-8", "workstation-mixed", "lost-gpu", "no-driver"}) {
    EXPECT_NE(r.out.find(name), std::string::npos) << name;
  }
}

}  // namespace
}  // namespace gpuman
