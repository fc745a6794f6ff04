// `gpuman doctor` (issue 24; docs/doctor.md): verdicts with fixes, exit 6 on a failure.
// The frameworks: a stand-in `torch` (tests/e2e/fake_torch, $FAKE_TORCH) for the verdicts
// that need a CUDA build, and Debian's real python3-torch (a CPU-only build) where it is
// installed.
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "e2e/e2e_util.h"

namespace gpuman::e2e {
namespace {

using nlohmann::json;
using testing::TempDir;

const std::string kPython = "/usr/bin/python3";

class DoctorE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    if (access(kPython.c_str(), X_OK) != 0) GTEST_SKIP() << "no " << kPython;
  }
  // h100-8 without processes; GPU 7 made an RTX 5090 (12.0); the driver's CUDA as given.
  std::string Scenario(int cuda_driver_version) {
    json s = json::parse(std::ifstream(kScenarios + "/h100-8.json"));
    for (auto& g : s["gpus"]) g["processes"] = json::array();
    s["gpus"][7]["name"] = "NVIDIA GeForce RTX 5090";
    s["gpus"][7]["compute_capability"] = json::array({12, 0});
    s["driver"]["cuda_driver_version"] = cuda_driver_version;
    return dir_.Write("scenario-" + std::to_string(cuda_driver_version) + ".json", s.dump());
  }
  testing::RunResult Doctor(const std::string& scenario, std::vector<std::string> extra,
                            std::map<std::string, std::string> env = {}) {
    std::vector<std::string> args = {"--simulate", scenario, "doctor", "--json", "--python", kPython};
    args.insert(args.end(), extra.begin(), extra.end());
    env.emplace("GPUMAN_LEASE_DIR", dir_.Join("leases"));
    return RunGpuman(dir_.Join("state"), args, env);
  }
  static std::map<std::string, json> ByName(const std::string& out) {
    std::map<std::string, json> checks;
    const json doc = json::parse(out);
    for (const auto& c : doc["checks"]) {
      const std::string key = c["name"].get<std::string>() + (checks.count(c["name"]) ? "#" + std::to_string(checks.size()) : "");
      checks[key] = c;
    }
    return checks;
  }
  TempDir dir_;
};

TEST_F(DoctorE2E, AWheelWithoutTheGpusArchitectureIsAFailureBeforeAnythingRuns) {
  const std::string fake = kScenarios + "/../tests/e2e/fake_torch";
  auto r = Doctor(Scenario(12080), {},
                  {{"PYTHONPATH", fake},
                   {"FAKE_TORCH", R"({"version": "2.5.1+cu124", "cuda": "12.4", "available": true, "device_count": 8,
                                      "arch_list": ["sm_80", "sm_86", "sm_90"]})"}});
  EXPECT_EQ(r.exit_code, 6) << r.out << r.err;
  json doc = json::parse(r.out);
  int arch_ok = 0, arch_fail = 0;
  std::string failure;
  for (const auto& c : doc["checks"]) {
    EXPECT_TRUE(c.contains("name") && c.contains("status") && c.contains("message") && c.contains("fix")) << c;
    if (c["name"] == "driver") EXPECT_EQ(c["status"], "ok") << c;
    if (c["name"] == "torch_cuda") EXPECT_EQ(c["status"], "ok") << "a 12.4 build on a 12.8 driver: " << c;
    if (c["name"] != "torch_arch") continue;
    if (c["status"] == "ok") ++arch_ok;
    if (c["status"] == "fail") {
      ++arch_fail;
      failure = c["message"].get<std::string>() + " / " + c["fix"].get<std::string>();
    }
  }
  EXPECT_EQ(arch_ok, 7) << r.out;
  EXPECT_EQ(arch_fail, 1) << r.out;
  EXPECT_NE(failure.find("GPU 7 (NVIDIA GeForce RTX 5090, compute 12.0)"), std::string::npos) << failure;
  EXPECT_NE(failure.find("no kernel image"), std::string::npos) << failure;
  EXPECT_NE(failure.find("sm_120"), std::string::npos) << failure;

  // The same wheel on an 11.8 driver: the build's CUDA is the failure.
  auto old = Doctor(Scenario(11080), {},
                    {{"PYTHONPATH", fake}, {"FAKE_TORCH", R"({"cuda": "12.4", "arch_list": ["sm_90"]})"}});
  EXPECT_EQ(old.exit_code, 6);
  bool cuda_failed = false;
  const json old_doc = json::parse(old.out);
  for (const auto& c : old_doc["checks"]) {
    if (c["name"] == "torch_cuda" && c["status"] == "fail") {
      cuda_failed = true;
      EXPECT_NE(c["message"].get<std::string>().find("supports CUDA 11.8 only"), std::string::npos) << c;
    }
  }
  EXPECT_TRUE(cuda_failed) << old.out;

  // A probe that hangs is bounded by --timeout.
  const std::string slow = dir_.Write("slow/torch/__init__.py", "import time\ntime.sleep(60)\n");
  auto hung = Doctor(Scenario(12080), {"--timeout", "1"}, {{"PYTHONPATH", dir_.Join("slow")}});
  bool timed_out = false;
  const json hung_doc = json::parse(hung.out);
  for (const auto& c : hung_doc["checks"]) {
    if (c["name"] == "torch") timed_out = c["message"].get<std::string>().find("within 1 s") != std::string::npos;
  }
  EXPECT_TRUE(timed_out) << hung.out;
}

// TensorFlow and JAX, probed beside torch (stand-ins driven by $FAKE_TF and $FAKE_JAX):
// a TF wheel without the RTX 5090's architecture, a TF CPU-only build, a jaxlib without
// its CUDA plugin, and a healthy JAX.
TEST_F(DoctorE2E, TensorflowAndJaxGetVerdictsToo) {
  const std::string fake = kScenarios + "/../tests/e2e/fake_torch";
  auto r = Doctor(Scenario(12080), {},
                  {{"PYTHONPATH", fake},
                   {"FAKE_TORCH", R"({"cuda": "12.4", "arch_list": ["sm_80", "sm_90", "sm_120"], "device_count": 8})"},
                   {"FAKE_TF", R"({"version": "2.16.1", "cuda_version": "12.3", "gpus": 8,
                                   "cuda_compute_capabilities": ["sm_60", "sm_70", "sm_80", "compute_90"]})"},
                   {"FAKE_JAX", R"({"version": "0.4.30", "platform": "cpu", "count": 1})"}});
  EXPECT_EQ(r.exit_code, 6) << r.out << r.err;
  std::map<std::string, int> ok, failed;
  std::string jax_message;
  const json doc = json::parse(r.out);
  for (const auto& c : doc["checks"]) {
    (c["status"] == "fail" ? failed : ok)[c["name"]]++;
    if (c["name"] == "jax") jax_message = c["message"].get<std::string>() + " / " + c["fix"].get<std::string>();
  }
  EXPECT_EQ(failed.count("torch_arch"), 0u) << r.out;
  EXPECT_EQ(ok["tf_cuda"], 1) << r.out;
  EXPECT_EQ(ok["tf_arch"], 8) << "compute_90 is PTX the driver compiles for 12.0: " << r.out;
  EXPECT_EQ(failed["jax"], 1) << r.out;
  EXPECT_NE(jax_message.find("jax 0.4.30 will not use the 8 visible GPUs"), std::string::npos) << jax_message;
  EXPECT_NE(jax_message.find("jax[cuda12]"), std::string::npos) << jax_message;

  // TF without PTX misses the 5090; a CPU-only TF misses every GPU; JAX on its GPUs is fine.
  auto r2 = Doctor(Scenario(12080), {},
                   {{"PYTHONPATH", fake},
                    {"FAKE_TORCH", R"({"cuda": "12.4", "arch_list": ["sm_90", "sm_120"], "device_count": 8})"},
                    {"FAKE_TF", R"({"cuda_compute_capabilities": ["sm_80", "sm_90"], "gpus": 8})"},
                    {"FAKE_JAX", R"({"platform": "gpu", "count": 8})"}});
  EXPECT_EQ(r2.exit_code, 6);
  std::string tf_arch;
  bool jax_ok = false;
  const json doc2 = json::parse(r2.out);
  for (const auto& c : doc2["checks"]) {
    if (c["name"] == "tf_arch" && c["status"] == "fail") tf_arch = c["message"].get<std::string>() + " / " + c["fix"].get<std::string>();
    if (c["name"] == "jax") jax_ok = c["status"] == "ok";
  }
  EXPECT_NE(tf_arch.find("GPU 7 (NVIDIA GeForce RTX 5090, compute 12.0): tensorflow 2.16.1 has no kernel"), std::string::npos)
      << r2.out;
  EXPECT_NE(tf_arch.find("install a TensorFlow built with sm_120"), std::string::npos) << tf_arch;
  EXPECT_TRUE(jax_ok) << r2.out;
  auto cpu_tf = Doctor(Scenario(12080), {}, {{"PYTHONPATH", fake}, {"FAKE_TF", R"({"is_cuda_build": false})"}});
  bool tf_cpu = false;
  const json doc3 = json::parse(cpu_tf.out);
  for (const auto& c : doc3["checks"]) {
    if (c["name"] == "tf" && c["status"] == "fail") {
      tf_cpu = c["message"].get<std::string>().find("tensorflow 2.16.1 is a CPU-only build") != std::string::npos;
    }
  }
  EXPECT_TRUE(tf_cpu) << cpu_tf.out;
}

// NVSwitch machines: a GPU whose fabric Fabric Manager has not set up is a failure with
// the fix; all completed is one ok line.
TEST_F(DoctorE2E, FabricManagerNotRunningIsAFailure) {
  json s = json::parse(std::ifstream(Scenario(12040)));
  for (auto& g : s["gpus"]) g["fabric"] = {{"state", 3}, {"status", 0}};
  const std::string ready = dir_.Write("fabric-ready.json", s.dump());
  auto fine = Doctor(ready, {"--no-frameworks"});
  auto checks = ByName(fine.out);
  EXPECT_EQ(checks["fabric"]["status"], "ok") << fine.out;
  EXPECT_EQ(checks["fabric"]["message"], "the NVSwitch fabric is ready on 8 GPU(s)");
  s["gpus"][2]["fabric"] = {{"state", 1}};
  const std::string down = dir_.Write("fabric-down.json", s.dump());
  auto r = Doctor(down, {"--no-frameworks"});
  EXPECT_EQ(r.exit_code, 6) << r.out;
  bool failed = false;
  const json doc = json::parse(r.out);
  for (const auto& c : doc["checks"]) {
    if (c["name"] == "fabric" && c["status"] == "fail") {
      failed = c["message"].get<std::string>().rfind("GPU 2: its NVSwitch fabric is not set up", 0) == 0 &&
               c["fix"].get<std::string>().find("nvidia-fabricmanager") != std::string::npos;
    }
  }
  EXPECT_TRUE(failed) << r.out;
}

TEST_F(DoctorE2E, WithoutFrameworksAndWithoutADriver) {
  auto fine = Doctor(Scenario(12040), {"--no-frameworks"});
  EXPECT_EQ(fine.exit_code, 0) << "warnings only (no daemon): " << fine.out;
  auto checks = ByName(fine.out);
  EXPECT_EQ(checks["driver"]["status"], "ok");
  EXPECT_EQ(checks["daemon"]["status"], "warn");
  EXPECT_FALSE(checks["daemon"]["fix"].get<std::string>().empty());
  EXPECT_EQ(checks.count("torch"), 0u);

  auto none = RunGpuman(dir_.Join("state"), {"doctor", "--no-frameworks"},
                        {{"GPUMAN_NVML_LIBRARY", dir_.Join("no-libnvidia-ml.so.1")}, {"GPUMAN_LEASE_DIR", dir_.Join("leases")}});
  EXPECT_EQ(none.exit_code, 6);
  EXPECT_EQ(none.out.rfind("fail  driver: ", 0), 0u) << none.out;
  EXPECT_NE(none.out.find("      fix: install the NVIDIA driver"), std::string::npos) << none.out;
}

// gpuman's own setup: the file the machine's rules come from must be root's and writable by
// root only; a lease table not set up yet is said, with the fix.
TEST_F(DoctorE2E, WhoMayWriteTheMachinesRulesAndTheLeaseTable) {
  if (getuid() != 0) GTEST_SKIP() << "as root: the named config is then the machine's";
  const std::string config = dir_.Write("config.toml", "[daemon]\nmax_gpus_per_user = 2\n");
  chmod(config.c_str(), 0666);
  auto open = Doctor(Scenario(12040), {"--no-frameworks"}, {{"GPUMAN_CONFIG", config}});
  EXPECT_EQ(open.exit_code, 6) << open.out;
  auto checks = ByName(open.out);
  EXPECT_EQ(checks["machine_config"]["status"], "fail") << open.out;
  EXPECT_NE(checks["machine_config"]["message"].get<std::string>().find("mode 0666: every user may rewrite"),
            std::string::npos)
      << open.out;
  EXPECT_EQ(checks["machine_config"]["fix"], "sudo chmod 644 " + config);
  EXPECT_EQ(checks["lease_table"]["status"], "warn") << "not set up yet: " << open.out;
  chmod(config.c_str(), 0644);
  auto fine = Doctor(Scenario(12040), {"--no-frameworks"}, {{"GPUMAN_CONFIG", config}});
  EXPECT_EQ(fine.exit_code, 0) << fine.out;
  checks = ByName(fine.out);
  EXPECT_EQ(checks["machine_config"]["status"], "ok");
  EXPECT_EQ(checks["machine_config"]["message"], "the machine's rules come from " + config + " (root's, 0644)");
  // The table once root has set it up (any root command creates it).
  ASSERT_EQ(RunGpuman(dir_.Join("state"), {"--simulate", Scenario(12040), "leases"},
                      {{"GPUMAN_LEASE_DIR", dir_.Join("leases")}})
                .exit_code,
            0);
  checks = ByName(Doctor(Scenario(12040), {"--no-frameworks"}, {{"GPUMAN_CONFIG", config}}).out);
  EXPECT_EQ(checks["lease_table"]["status"], "ok") << checks["lease_table"];
  chmod(dir_.Join("leases/leases.db").c_str(), 0600);
  checks = ByName(Doctor(Scenario(12040), {"--no-frameworks"}, {{"GPUMAN_CONFIG", config}}).out);
  EXPECT_EQ(checks["lease_table"]["status"], "fail") << checks["lease_table"];
  EXPECT_NE(checks["lease_table"]["message"].get<std::string>().find("leases.db is mode 0600"), std::string::npos);
}

// Through a daemon on a simulated machine: the client is told so by the daemon's sample,
// and the daemon is the authority.
TEST_F(DoctorE2E, ThroughADaemonOfASimulatedMachine) {
  chmod(dir_.path().c_str(), 0755);
  const std::string socket = dir_.Join("gpuman.sock");
  PrivateDaemon daemon;
  ASSERT_TRUE(daemon.Start({.scenario = Scenario(12040), .socket = socket, .state_dir = dir_.Join("daemon-state"),
                            .env = CleanEnv(dir_.Join("state"))}));
  auto r = RunGpuman(dir_.Join("state"), {"doctor", "--json", "--no-frameworks"}, {{"GPUMAN_SOCKET", socket}});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  auto checks = ByName(r.out);
  EXPECT_EQ(json::parse(r.out)["simulated"], true);
  EXPECT_EQ(checks["daemon"]["status"], "ok") << r.out;
  EXPECT_EQ(checks["device_nodes"]["status"], "ok") << r.out;
  EXPECT_EQ(checks.count("confinement"), 1u) << "the daemon says whether it confines: " << r.out;
  EXPECT_EQ(checks.count("lease_table"), 0u) << "the daemon's table is the authority: " << r.out;
}

// Debian's python3-torch is a CPU-only build: on a machine with GPUs that is the verdict.
TEST_F(DoctorE2E, DebiansCpuOnlyTorchIsCalledOut) {
  auto probe = testing::Run({kPython, "-c", "import torch, sys; sys.exit(0 if torch.version.cuda is None else 1)"}, {});
  if (probe.exit_code != 0) GTEST_SKIP() << "no CPU-only torch for " << kPython << " (apt install python3-torch)";
  auto r = Doctor(Scenario(12040), {});
  EXPECT_EQ(r.exit_code, 6) << r.out;
  bool called_out = false;
  const json doc = json::parse(r.out);
  for (const auto& c : doc["checks"]) {
    if (c["name"] == "torch" && c["status"] == "fail") {
      called_out = c["message"].get<std::string>().find("CPU-only build") != std::string::npos;
    }
  }
  EXPECT_TRUE(called_out) << r.out;
}

}  // namespace
}  // namespace gpuman::e2e
