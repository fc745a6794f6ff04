// End-to-end tests of health, the daemon's health watch, idle leases and alert hooks:
// the real binaries, the stand-in NVML (Xid events appended to the scenario file), a
// kernel log file, a private socket, state directory and config file per test.
#include <signal.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <functional>

#include "e2e/e2e_util.h"

namespace gpuman::e2e {
namespace {

using nlohmann::json;
using testing::TempDir;

json ReadJson(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}

// Replaces the scenario atomically (the stand-in reloads it on the next call).
void WriteScenario(const TempDir& dir, const std::string& path, const json& s) {
  std::string staged = dir.Join("staged.json");
  std::ofstream(staged) << s.dump(2);
  ASSERT_EQ(std::rename(staged.c_str(), path.c_str()), 0);
}

bool Eventually(const std::function<bool()>& done, int ms = 30000) {
  for (int waited = 0; waited < ms; waited += 100) {
    if (done()) return true;
    usleep(100000);
  }
  return done();
}

std::string KernelBusId(const json& gpu) {
  char bus[32];
  std::snprintf(bus, sizeof bus, "%04x:%02x:%02x", gpu["pci"].value("domain", 0), gpu["pci"]["bus"].get<int>(),
                gpu["pci"].value("device", 0));
  return bus;
}

class HealthLocalE2E : public ::testing::Test {
 protected:
  testing::RunResult Health(const std::string& scenario, const std::string& kernel_log, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--simulate", scenario, "health", "--local"};
    args.insert(args.end(), extra.begin(), extra.end());
    return RunGpuman(dir_.Join("state"), args, {{"GPUMAN_KERNEL_LOG", kernel_log}, {"GPUMAN_SOCKET", dir_.Join("none.sock")}});
  }
  TempDir dir_;
};

TEST_F(HealthLocalE2E, HealthyNodeExitsZero) {
  std::string scenario = IdleScenario(dir_, "a100-4");
  std::string log = dir_.Write("kmsg.txt", "[    1.000000] NVRM: loading NVIDIA UNIX x86_64 Kernel Module\n");
  auto r = Health(scenario, log);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("healthy"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("all 4 GPUs"), std::string::npos) << r.out;
}

TEST_F(HealthLocalE2E, LostGpuIsFatal) {
  std::string log = dir_.Write("kmsg.txt", "");
  auto r = Health("lost-gpu", log, {"--json"});
  EXPECT_EQ(r.exit_code, 6) << r.out << r.err;
  json j = json::parse(r.out);
  EXPECT_EQ(j["healthy"], false);
  bool lost = false;
  for (const auto& f : j["findings"]) lost = lost || (f["code"] == "gpu_lost" && f["severity"] == "fatal");
  EXPECT_TRUE(lost) << j.dump(2);
  EXPECT_EQ(j["from_daemon"], false);
}

TEST_F(HealthLocalE2E, KernelLogXidIsMatchedToItsGpu) {
  std::string scenario = IdleScenario(dir_, "a100-4");
  json s = ReadJson(scenario);
  std::string log = dir_.Write("kmsg.txt", "[   12.5] NVRM: Xid (PCI:" + KernelBusId(s["gpus"][2]) +
                                               "): 79, pid=1234, GPU has fallen off the bus.\n");
  auto r = Health(scenario, log, {"--json"});
  EXPECT_EQ(r.exit_code, 6) << r.out << r.err;
  json j = json::parse(r.out);
  ASSERT_FALSE(j["findings"].empty()) << j.dump(2);
  const json& f = j["findings"][0];
  EXPECT_EQ(f["code"], "xid");
  EXPECT_EQ(f["xid"], 79);
  EXPECT_EQ(f["gpu_index"], 2);
  EXPECT_EQ(f["gpu_uuid"], s["gpus"][2]["uuid"]);
  EXPECT_EQ(f["source"], "kernel_log");
  EXPECT_EQ(f["severity"], "fatal");

  auto text = Health(scenario, log);
  EXPECT_EQ(text.exit_code, 6);
  EXPECT_NE(text.out.find("xid 79"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("fallen off the bus"), std::string::npos) << text.out;
}

TEST_F(HealthLocalE2E, ApplicationXidIsOnlyAWarning) {
  std::string scenario = IdleScenario(dir_, "a100-4");
  json s = ReadJson(scenario);
  std::string log = dir_.Write("kmsg.txt", "NVRM: Xid (PCI:" + KernelBusId(s["gpus"][0]) + "): 13, Graphics Exception\n");
  auto r = Health(scenario, log, {"--json"});
  EXPECT_EQ(r.exit_code, 7) << r.out << r.err;
  EXPECT_EQ(json::parse(r.out)["warnings"], 1);
}

TEST_F(HealthLocalE2E, UnreadableKernelLogIsSaidNotHidden) {
  std::string scenario = IdleScenario(dir_, "a100-4");
  auto r = Health(scenario, dir_.Join("missing-kmsg"), {"--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  json j = json::parse(r.out);
  bool said = false;
  for (const auto& n : j["notes"]) said = said || n.get<std::string>().find("missing-kmsg") != std::string::npos;
  EXPECT_TRUE(said) << j.dump(2);
}

TEST_F(HealthLocalE2E, NoDriverIsOneClearLine) {
  auto r = RunGpuman(dir_.Join("state"), {"health", "--local"},
                     {{"GPUMAN_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1"}, {"GPUMAN_SOCKET", dir_.Join("none.sock")}});
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

// A daemon started before the driver (issue 23): `health` says the driver is missing
// (fatal, exit 6) instead of "all 0 GPUs passed", `status` says why it shows no GPUs, and
// the GPUs appear once the library loads, without a restart.
TEST_F(HealthLocalE2E, ADaemonWithoutADriverSaysSoAndPicksItUpLater) {
  const std::string lib_dir = dir_.Join("driver");
  ASSERT_EQ(mkdir(lib_dir.c_str(), 0755), 0);
  const std::string lib = lib_dir + "/libnvidia-ml.so.1";
  const std::string socket = dir_.Join("gpuman.sock");
  auto env = CleanEnv(dir_.Join("leases"));
  env["GPUMAN_NVML_LIBRARY"] = lib;  // not there yet
  env["GPUMAN_FAKE_NVML_SCENARIO"] = kScenarios + "/a100-4.json";
  env["GPUMAN_SOCKET"] = socket;
  PrivateDaemon daemon;
  ASSERT_TRUE(daemon.Start({.socket = socket, .state_dir = dir_.Join("daemon"), .env = env, .stderr_path = dir_.Join("log")}));

  auto health = RunGpuman(dir_.Join("state"), {"health"}, env);
  EXPECT_EQ(health.exit_code, 6) << health.out << health.err;
  EXPECT_EQ(health.out.find("healthy: all 0"), std::string::npos) << health.out;
  EXPECT_NE(health.out.find("driver"), std::string::npos) << health.out;
  auto health_json = RunGpuman(dir_.Join("state"), {"health", "--json"}, env);
  EXPECT_EQ(health_json.exit_code, 6);
  EXPECT_NE(health_json.out.find(lib), std::string::npos) << "the finding names the library: " << health_json.out;
  auto status = RunGpuman(dir_.Join("state"), {"status"}, env);
  EXPECT_NE((status.out + status.err).find(lib), std::string::npos)
      << "status says why there are no GPUs: " << status.out << status.err;

  ASSERT_EQ(symlink(GPUMAN_TEST_FAKE_NVML, lib.c_str()), 0);  // the driver comes
  bool seen = false;
  for (int i = 0; i < 200 && !seen; ++i) {  // retried at 1, 2, 4, 8 s: within 20 s
    auto j = RunGpuman(dir_.Join("state"), {"status", "--json"}, env);
    seen = j.exit_code == 0 && j.out.find("\"index\": 3") != std::string::npos;
    if (!seen) usleep(100 * 1000);
  }
  EXPECT_TRUE(seen) << "the daemon never loaded NVML: " << Slurp(dir_.Join("log"));
  // The watch judges the next sample (within a second): the driver finding goes.
  testing::RunResult healthy;
  for (int i = 0; i < 50; ++i) {
    healthy = RunGpuman(dir_.Join("state"), {"health"}, env);
    if (healthy.exit_code != 6) break;
    usleep(100 * 1000);
  }
  EXPECT_NE(healthy.exit_code, 6) << healthy.out;
}

// The daemon side: Xid events, drains and lifts, idle leases, alert hooks.
class MonitorE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    socket_ = dir_.Join("gpuman.sock");
    scenario_ = IdleScenario(dir_, "h100-8");
    json s = ReadJson(scenario_);
    for (auto& g : s["gpus"]) g["utilization"] = {{"gpu", 0}, {"memory", 0}};
    WriteScenario(dir_, scenario_, s);
    kernel_log_ = dir_.Write("kmsg.txt", "");
  }
  void TearDown() override { daemon_.Stop(); }
  void StartDaemon(const std::string& config) {
    config_ = dir_.Write("config.toml", config);
    ASSERT_TRUE(daemon_.Start({.scenario = scenario_,
                               .socket = socket_,
                               .state_dir = dir_.Join("state"),
                               .env = Env(),
                               .stdout_path = "/dev/null"}));
  }
  std::map<std::string, std::string> Env() {
    auto env = CleanEnv(dir_.Join("leases"));
    env["GPUMAN_SOCKET"] = socket_;
    env["GPUMAN_CONFIG"] = config_;
    env["GPUMAN_KERNEL_LOG"] = kernel_log_;
    return env;
  }
  testing::RunResult Gpuman(std::vector<std::string> args) {
    args.insert(args.begin(), {"--simulate", scenario_});
    return RunGpuman(dir_.Join("leases"), std::move(args), Env());
  }
  json HealthJson(int* exit_code = nullptr) {
    auto r = Gpuman({"health", "--json"});
    if (exit_code) *exit_code = r.exit_code;
    return r.out.empty() ? json() : json::parse(r.out, nullptr, false);
  }
  void AppendXid(int gpu, int xid) {
    json s = ReadJson(scenario_);
    s["gpus"][gpu]["xid_events"].push_back(xid);
    WriteScenario(dir_, scenario_, s);
  }

  TempDir dir_;
  std::string socket_, scenario_, kernel_log_, config_;
  PrivateDaemon daemon_;
};

TEST_F(MonitorE2E, FatalXidEventDrainsTheGpuAndAQuietRecheckLiftsIt) {
  StartDaemon("[health]\nrecheck_after = \"4s\"\n");
  std::string uuid = ReadJson(scenario_)["gpus"][3]["uuid"];
  int code = -1;
  json before = HealthJson(&code);
  EXPECT_EQ(code, 0) << before.dump(2);
  EXPECT_EQ(before["from_daemon"], true);
  EXPECT_EQ(before["gpu_count"], 8);

  AppendXid(3, 79);
  json drained;
  ASSERT_TRUE(Eventually([&] {
    drained = HealthJson(&code);
    return drained.is_object() && !drained["quarantined"].empty();
  })) << drained.dump(2);
  EXPECT_EQ(code, 6);
  EXPECT_EQ(drained["quarantined"][0], uuid);
  const json& f = drained["findings"][0];
  EXPECT_EQ(f["xid"], 79);
  EXPECT_EQ(f["gpu_index"], 3);
  EXPECT_EQ(f["source"], "nvml_event");

  // A job that needs all 8 GPUs waits while one is drained, and runs once the drain lifts.
  auto submit = Gpuman({"submit", "-n", "8", "--output", dir_.Join("job.log"), "--", "true"});
  ASSERT_EQ(submit.exit_code, 0) << submit.err;
  std::string id = submit.out.substr(0, submit.out.find('\n'));
  auto show = [&] { return json::parse(Gpuman({"show", id, "--json"}).out); };
  usleep(1500 * 1000);
  EXPECT_EQ(show()["state"], "queued") << show().dump(2);

  json lifted;
  ASSERT_TRUE(Eventually([&] {
    lifted = HealthJson(&code);
    return lifted.is_object() && lifted["quarantined"].empty();
  }, 60000)) << lifted.dump(2);
  EXPECT_EQ(code, 7) << lifted.dump(2);  // the Xid stays in the report as a cleared warning
  EXPECT_EQ(lifted["findings"][0]["severity"], "warning");
  EXPECT_TRUE(Eventually([&] { return show()["state"] == "succeeded"; }, 60000)) << show().dump(2);
}

TEST_F(MonitorE2E, LostGpuIsDrainedByUuidAndLiftedWhenItIsBack) {
  StartDaemon("[health]\nrecheck_after = \"2s\"\n");
  json s = ReadJson(scenario_);
  std::string uuid = s["gpus"][2]["uuid"];
  ASSERT_TRUE(Eventually([&] { return HealthJson()["gpu_count"] == 8; }));  // the daemon saw it healthy first
  s["gpus"][2]["lost"] = true;
  WriteScenario(dir_, scenario_, s);
  json h;
  ASSERT_TRUE(Eventually([&] {
    h = HealthJson();
    return h.is_object() && !h["quarantined"].empty();
  })) << h.dump(2);
  EXPECT_EQ(h["quarantined"][0], uuid);
  EXPECT_EQ(h["findings"][0]["code"], "gpu_lost");
  s["gpus"][2]["lost"] = false;
  WriteScenario(dir_, scenario_, s);
  ASSERT_TRUE(Eventually([&] {
    h = HealthJson();
    return h.is_object() && h["quarantined"].empty();
  })) << h.dump(2);
  int code = -1;
  HealthJson(&code);
  EXPECT_EQ(code, 0);
}

TEST_F(MonitorE2E, KernelLogXidSeenByTheDaemon) {
  StartDaemon("");
  json s = ReadJson(scenario_);
  {
    std::ofstream out(kernel_log_, std::ios::app);
    out << "NVRM: Xid (PCI:" << KernelBusId(s["gpus"][5]) << "): 119, GSP RPC timeout\n";
  }
  json h;
  ASSERT_TRUE(Eventually([&] {
    h = HealthJson();
    return h.is_object() && !h["quarantined"].empty();
  })) << h.dump(2);
  EXPECT_EQ(h["quarantined"][0], s["gpus"][5]["uuid"]);
  EXPECT_EQ(h["findings"][0]["source"], "kernel_log");
}

TEST_F(MonitorE2E, IdleLeaseIsFlaggedOwnerToldThenReleased) {
  std::string notify = dir_.Join("notify.jsonl");
  StartDaemon("[idle]\nthreshold_percent = 5\nafter = \"2s\"\nrelease_after = \"5s\"\n"
              "notify_command = [\"/bin/sh\", \"-c\", \"cat >> " + notify + "\"]\n");
  auto sel = Gpuman({"select", "-n", "1", "--lease", "--format", "json"});
  ASSERT_EQ(sel.exit_code, 0) << sel.out << sel.err;
  json leases;
  ASSERT_TRUE(Eventually([&] {
    leases = json::parse(Gpuman({"leases", "--json"}).out, nullptr, false)["leases"];
    return leases.is_array() && !leases.empty() && !leases[0]["idle_since_unix_ms"].is_null();
  })) << leases.dump(2);
  ASSERT_TRUE(Eventually([&] { return Slurp(notify).find("\"lease\"") != std::string::npos; })) << Slurp(notify);
  // Flagged where people look: status (text and JSON).
  auto status = Gpuman({"status", "--no-color"});
  EXPECT_NE(status.out.find("IDLE for"), std::string::npos) << status.out;
  json sj = json::parse(Gpuman({"status", "--json"}).out);
  int idle_gpus = 0;
  for (const auto& g : sj["gpus"]) idle_gpus += g["lease"].is_object() && !g["lease"]["idle_since_unix_ms"].is_null();
  EXPECT_EQ(idle_gpus, 1) << sj.dump(2);
  ASSERT_TRUE(Eventually([&] {
    leases = json::parse(Gpuman({"leases", "--json"}).out, nullptr, false)["leases"];
    return leases.is_array() && leases.empty();
  })) << leases.dump(2);
}

TEST_F(MonitorE2E, IdleRunningJobIsFlaggedInQueueButNeverReleased) {
  StartDaemon("[idle]\nafter = \"1s\"\nrelease_after = \"2s\"\n");
  auto submit = Gpuman({"submit", "-n", "1", "--output", dir_.Join("job.log"), "--", "sleep", "30"});
  ASSERT_EQ(submit.exit_code, 0) << submit.err;
  std::string id = submit.out.substr(0, submit.out.find('\n'));
  std::string queue;
  ASSERT_TRUE(Eventually([&] {
    queue = Gpuman({"queue"}).out;
    return queue.find("IDLE") != std::string::npos;
  })) << queue;
  json job = json::parse(Gpuman({"show", id, "--json"}).out);
  EXPECT_FALSE(job["idle_since_unix_ms"].is_null()) << job.dump(2);
  usleep(3000 * 1000);  // past release_after: a queue job's lease is never released
  job = json::parse(Gpuman({"show", id, "--json"}).out);
  EXPECT_EQ(job["state"], "running") << job.dump(2);
  json leases = json::parse(Gpuman({"leases", "--json"}).out)["leases"];
  EXPECT_EQ(leases.size(), 1u) << leases.dump(2);
  EXPECT_EQ(Gpuman({"cancel", id}).exit_code, 0);
}

TEST_F(MonitorE2E, AlertHookRunsWithAJsonPayload) {
  std::string hook = dir_.Join("alert.jsonl");
  json s = ReadJson(scenario_);
  s["gpus"][6]["temperature"] = 91;
  WriteScenario(dir_, scenario_, s);
  StartDaemon("[[alert]]\nname = \"hot\"\nmetric = \"temperature_c\"\nabove = 85\nfor = \"1s\"\n"
              "command = [\"/bin/sh\", \"-c\", \"cat >> " + hook + "\"]\n");
  std::string text;
  ASSERT_TRUE(Eventually([&] {
    text = Slurp(hook);
    return text.find('\n') != std::string::npos;
  })) << text;
  json payload = json::parse(text.substr(0, text.find('\n')));
  EXPECT_EQ(payload["rule"], "hot");
  EXPECT_EQ(payload["state"], "firing");
  EXPECT_NE(payload.dump().find(s["gpus"][6]["uuid"].get<std::string>()), std::string::npos) << payload.dump(2);
}

// The daemon's history names who used each GPU: a lease's owner, and the Unix users of
// processes that run on a GPU outside gpuman (split between them), not "(free)".
TEST_F(MonitorE2E, HistoryCountsProcessesOutsideGpumanToTheirUsers) {
  json s = ReadJson(scenario_);
  auto process = [](int pid) {
    return json{{"pid", pid}, {"sm_util", 50}, {"used_memory", 1LL << 30}, {"type", "compute"},
                {"gpu_instance_id", nullptr}, {"compute_instance_id", nullptr}};
  };
  s["gpus"][2]["processes"] = json::array({process(62011)});                  // carol
  s["gpus"][3]["processes"] = json::array({process(62011), process(73377)});  // carol, dave
  WriteScenario(dir_, scenario_, s);
  StartDaemon("");
  auto sel = Gpuman({"select", "-n", "1", "--lease", "--format", "json"});
  ASSERT_EQ(sel.exit_code, 0) << sel.out << sel.err;
  json leases = json::parse(Gpuman({"leases", "--json"}).out, nullptr, false)["leases"];
  ASSERT_TRUE(leases.is_array() && leases.size() == 1u) << leases.dump(2);
  const std::string leased = leases[0]["gpus"][0]["uuid"];
  const std::string db = dir_.Join("state/history.db");

  // The newest sample of each GPU, once one is recorded after the lease was taken.
  std::map<std::string, json> last;
  ASSERT_TRUE(Eventually([&] {
    auto r = Gpuman({"history", "--db", db, "--json", "--since", "1m"});
    if (r.exit_code != 0) return false;
    json doc = json::parse(r.out, nullptr, false);
    if (!doc.is_object()) return false;
    for (const auto& sample : doc["samples"]) last[sample["gpu_uuid"]] = sample;
    return last.count(leased) && last[leased]["holder_kind"] == "lease";
  })) << "no sample shows the lease";
  EXPECT_EQ(last[leased]["user"], leases[0]["user"]);
  const json& alone = last[s["gpus"][2]["uuid"]];
  EXPECT_EQ(alone["holder_kind"], "outside") << alone.dump(2);
  EXPECT_EQ(alone["user"], "carol");
  const json& shared = last[s["gpus"][3]["uuid"]];
  EXPECT_EQ(shared["holder_kind"], "outside") << shared.dump(2);
  EXPECT_EQ(shared["holders"], json::parse(R"([{"user": "carol", "kind": "outside", "share": 0.5},
                                              {"user": "dave", "kind": "outside", "share": 0.5}])"));
  EXPECT_EQ(last[s["gpus"][5]["uuid"]]["holder_kind"], "free");

  auto report = Gpuman({"report", "--html", "-", "--db", db, "--since", "1h"});
  ASSERT_EQ(report.exit_code, 0) << report.err;
  EXPECT_NE(report.out.find(">carol (outside gpuman)</text>"), std::string::npos);
  EXPECT_NE(report.out.find(">dave (outside gpuman)</text>"), std::string::npos);
}

}  // namespace
}  // namespace gpuman::e2e
