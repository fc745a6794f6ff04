// One sample of the machine (docs/design.md): while a daemon serves, client commands take
// the daemon's sample and load no NVML of their own; without one, they make only the calls
// their answer needs. The stand-in NVML counts a whole process's calls
// ($GPUMAN_FAKE_NVML_CALL_LOG: one line per process that loaded it, written at unload), so
// a client that loads NVML leaves a line and one that does not leaves none.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "base/strings.h"
#include "e2e/e2e_util.h"

namespace gpuman::e2e {
namespace {

using nlohmann::json;
using testing::TempDir;

// The call-log lines, one per process that loaded the stand-in: "pid=P total=N name=count".
std::vector<std::string> LogLines(const std::string& path) {
  std::vector<std::string> lines;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

// The count of `name` in a call-log line ("total" for all), 0 when absent.
long CountIn(const std::string& line, const std::string& name) {
  std::istringstream words(line);
  for (std::string w; words >> w;) {
    if (w.rfind(name + "=", 0) == 0) return std::stol(w.substr(name.size() + 1));
  }
  return 0;
}

class OneSampleE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    chmod(dir_.path().c_str(), 0755);
    socket_ = dir_.Join("gpuman.sock");
    scenario_ = IdleScenario(dir_, "h100-8");
    log_ = dir_.Join("calls.log");
  }

  // A client command that writes its NVML calls to the log (the daemon does not).
  testing::RunResult Client(std::vector<std::string> args, bool through_daemon = true) {
    std::map<std::string, std::string> env{{"GPUMAN_FAKE_NVML_CALL_LOG", log_}};
    if (through_daemon) env["GPUMAN_SOCKET"] = socket_;
    args.insert(args.begin(), {"--simulate", scenario_});
    return RunGpuman(dir_.Join("leases"), std::move(args), env);
  }

  TempDir dir_;
  std::string socket_, scenario_, log_;
  PrivateDaemon daemon_;
};

TEST_F(OneSampleE2E, NoClientCommandLoadsNvmlWhileADaemonServes) {
  ASSERT_TRUE(daemon_.Start(
      {.scenario = scenario_, .socket = socket_, .state_dir = dir_.Join("state"), .env = CleanEnv(dir_.Join("leases"))}));
  const std::vector<std::vector<std::string>> commands = {
      {"run", "-q", "-n", "1", "--", "true"},
      {"run", "-q", "-n", "2", "--index", "--bind-numa", "--", "true"},
      {"select", "-n", "2"},
      {"select", "-n", "1", "--format", "json"},
      {"select", "-n", "1", "--lease", "--format", "env"},  // held by the test; released below
      {"leases"},
      {"leases", "--json"},
      {"explain"},
      {"explain", "--json"},
      {"topo"},
      {"submit", "--output", dir_.Join("job.log"), "--", "true"},
  };
  for (const auto& args : commands) {
    auto r = Client(args);
    EXPECT_EQ(r.exit_code, 0) << Join(args, " ") << ": " << r.err;
    auto lines = LogLines(log_);
    EXPECT_TRUE(lines.empty()) << "`gpuman " << Join(args, " ") << "` loaded NVML while a daemon serves: "
                               << (lines.empty() ? "" : lines.front());
    unlink(log_.c_str());
  }
  // What the commands showed came from the daemon's sample.
  auto leases = Client({"leases", "--json"});
  ASSERT_EQ(leases.exit_code, 0) << leases.err;
  json list = json::parse(leases.out)["leases"];
  ASSERT_FALSE(list.empty()) << "the select --lease lease";
  EXPECT_TRUE(list[0]["gpus"][0]["index"].is_number_integer()) << leases.out;
  auto explain = Client({"explain"});
  EXPECT_NE(explain.out.find("daemon's sample"), std::string::npos) << explain.out;
  EXPECT_TRUE(LogLines(log_).empty());

  // No driver at all in the client: `run` through the daemon needs none.
  auto no_driver = RunGpuman(dir_.Join("leases"), {"run", "-q", "-n", "1", "--", "sh", "-c", "echo $CUDA_VISIBLE_DEVICES"},
                             {{"GPUMAN_SOCKET", socket_}, {"GPUMAN_NVML_LIBRARY", dir_.Join("no-such-libnvidia-ml.so.1")}});
  EXPECT_EQ(no_driver.exit_code, 0) << no_driver.err;
  EXPECT_EQ(no_driver.out.rfind("GPU-", 0), 0u) << no_driver.out;
}

TEST_F(OneSampleE2E, WithoutADaemonCommandsMakeOnlyTheCallsTheirAnswerNeeds) {
  // The first command reads the topology and records it in the machine table; the next
  // one (measured) does not read it again.
  ASSERT_EQ(Client({"run", "-q", "-n", "1", "--", "true"}, false).exit_code, 0);
  unlink(log_.c_str());
  auto taken = Client({"run", "-q", "-n", "1", "--", "true"}, false);
  ASSERT_EQ(taken.exit_code, 0) << taken.err;
  auto run_lines = LogLines(log_);
  ASSERT_EQ(run_lines.size(), 1u);
  unlink(log_.c_str());
  auto status = Client({"status", "--json"}, false);
  ASSERT_EQ(status.exit_code, 0) << status.err;
  auto status_lines = LogLines(log_);
  ASSERT_EQ(status_lines.size(), 1u);
  unlink(log_.c_str());
  const long run_inits = CountIn(run_lines[0], "nvmlInit_v2") + CountIn(run_lines[0], "nvmlInit") +
                         CountIn(run_lines[0], "nvmlInitWithFlags");
  EXPECT_EQ(run_inits, 1) << run_lines[0];
  EXPECT_LE(CountIn(run_lines[0], "total"), CountIn(status_lines[0], "total"))
      << "run: " << run_lines[0] << "\nstatus --json: " << status_lines[0];
  // Choosing asks for no clocks, power limits, ECC totals or serials.
  for (const char* unneeded : {"nvmlDeviceGetClockInfo", "nvmlDeviceGetEnforcedPowerLimit", "nvmlDeviceGetNvLinkState",
                               "nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetMigMode"}) {
    EXPECT_EQ(CountIn(run_lines[0], unneeded), 0) << unneeded << " in " << run_lines[0];
  }

  // `leases` and `release` ask the driver nothing: a lease carries its GPUs' indices.
  auto held = Client({"select", "-n", "2", "--lease", "--format", "index"}, false);
  ASSERT_EQ(held.exit_code, 0) << held.err;
  unlink(log_.c_str());
  auto leases = Client({"leases", "--json"}, false);
  ASSERT_EQ(leases.exit_code, 0) << leases.err;
  EXPECT_TRUE(LogLines(log_).empty()) << LogLines(log_).front();
  json list = json::parse(leases.out)["leases"];
  ASSERT_EQ(list.size(), 1u) << leases.out;
  EXPECT_EQ(std::to_string(list[0]["gpus"][0]["index"].get<int>()) + "," +
                std::to_string(list[0]["gpus"][1]["index"].get<int>()) + "\n",
            held.out);
  auto released = Client({"release", std::to_string(list[0]["id"].get<int64_t>())}, false);
  EXPECT_EQ(released.exit_code, 0) << released.err;
  EXPECT_TRUE(LogLines(log_).empty());
}

// The daemon chooses on its latest sample (here taken once: the period is an hour), and a
// process the sample lists that has ended since is not in the way, nor is its memory.
TEST_F(OneSampleE2E, TheDaemonChoosesOnItsSampleAndNotOnProcessesThatEnded) {
  // Every GPU nearly full, each used by a live process of this machine.
  std::vector<pid_t> holders;
  for (int i = 0; i < 8; ++i) {
    pid_t pid = fork();
    if (pid == 0) {
      execlp("sleep", "sleep", "600", static_cast<char*>(nullptr));
      _exit(127);
    }
    ASSERT_GT(pid, 0);
    holders.push_back(pid);
  }
  struct Reap {
    std::vector<pid_t>& pids;
    ~Reap() {
      for (pid_t p : pids) {
        if (p > 0 && kill(p, SIGKILL) == 0) waitpid(p, nullptr, 0);
      }
    }
  } reap{holders};
  json s = json::parse(std::ifstream(scenario_));
  for (size_t g = 0; g < s["gpus"].size(); ++g) {
    const int64_t total = s["gpus"][g]["memory"]["total"].get<int64_t>();
    const int64_t used = total - (1LL << 30);  // 1 GiB free
    s["gpus"][g]["memory"]["used"] = used;
    s["gpus"][g]["processes"] = json::array({{{"pid", holders[g]}, {"used_memory", used}, {"type", "compute"}}});
  }
  std::ofstream(scenario_) << s.dump();
  const std::string config = dir_.Write("daemon.toml", "[daemon]\nsample_interval = \"1h\"\n");
  auto env = CleanEnv(dir_.Join("leases"));
  env["GPUMAN_CONFIG"] = config;
  ASSERT_TRUE(daemon_.Start({.scenario = scenario_, .socket = socket_, .state_dir = dir_.Join("state"), .env = env}));

  const std::vector<std::string> pick = {"select", "-n", "1", "--min-free-memory", "10GiB", "--format", "index"};
  auto full = Client(pick);
  EXPECT_NE(full.exit_code, 0) << full.out;
  // GPU 3's process ends; the stand-in still lists it, the daemon's sample too.
  kill(holders[3], SIGKILL);
  waitpid(holders[3], nullptr, 0);
  holders[3] = -1;
  auto freed = Client(pick);
  EXPECT_EQ(freed.exit_code, 0) << freed.err;
  EXPECT_EQ(freed.out, "3\n");
  auto ran = Client({"run", "-q", "-n", "1", "--min-free-memory", "10GiB", "--", "true"});
  EXPECT_EQ(ran.exit_code, 0) << ran.err;
  EXPECT_TRUE(LogLines(log_).empty()) << "the client read no NVML";
}

}  // namespace
}  // namespace gpuman::e2e
