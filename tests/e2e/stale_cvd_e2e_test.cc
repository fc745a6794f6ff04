// A CUDA_VISIBLE_DEVICES left over in the user's shell (issue 26): `select`, `run` and
// `explain` name the variable, its value and entries, and how to clear it, with and without
// the daemon. The rule is unchanged: gpuman still stays inside it, and a nested run inside
// a real gpuman lease still works (and is not told to unset anything).
#include "e2e/e2e_util.h"

namespace gpuman::e2e {
namespace {

using testing::TempDir;

const std::string kUuid1 = "GPU-8c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f";  // a100-4's GPU 1
const std::string kUuid3 = "GPU-0a1b2c3d-4e5f-4a6b-9c7d-8e9f0a1b2c3d";  // a100-4's GPU 3

const std::string kStaleThree =
    "CUDA_VISIBLE_DEVICES=\"3\" in this shell (not set by a gpuman lease or Slurm) confines gpuman to GPU 3: if it is "
    "left over from an earlier job or shell, clear it with `unset CUDA_VISIBLE_DEVICES`";

TEST(StaleCudaVisibleDevicesE2E, SelectRunAndExplainNameItWithoutADaemon) {
  TempDir dir;
  const std::string scenario = IdleScenario(dir, "a100-4");
  auto gpuman = [&](std::vector<std::string> args, std::map<std::string, std::string> env) {
    env["GPUMAN_LEASE_DIR"] = dir.Join("leases");
    env["GPUMAN_SIMULATE"] = scenario;
    return RunGpuman(dir.Join("state"), std::move(args), env);
  };
  const std::map<std::string, std::string> stale{{"CUDA_VISIBLE_DEVICES", "3"}};
  const std::string why = "need 2 GPUs, only 1 of 4 can ever be eligible: GPU 0-2 outside the enclosing allocation; ";

  auto select = gpuman({"select", "-n", "2"}, stale);
  EXPECT_EQ(select.exit_code, 4);
  EXPECT_EQ(select.err, "gpuman: error: " + why + kStaleThree + "\n");
  auto run = gpuman({"run", "-n", "2", "--", "true"}, stale);
  EXPECT_EQ(run.exit_code, 125);
  EXPECT_EQ(run.err, "gpuman: error: " + why + kStaleThree + "\n");
  // The rule is the same: inside it, one GPU is there to take.
  auto fits = gpuman({"run", "-n", "1", "--", "sh", "-c", "echo $CUDA_VISIBLE_DEVICES"}, stale);
  EXPECT_EQ(fits.exit_code, 0) << fits.err;
  EXPECT_EQ(fits.out, kUuid3 + "\n");

  // explain says it as a note (it is no mistake when set on purpose).
  auto explain = gpuman({"explain", "--json"}, stale);
  ASSERT_EQ(explain.exit_code, 0) << explain.err;
  const nlohmann::json doc = nlohmann::json::parse(explain.out);
  ASSERT_EQ(doc["notes"].size(), 1u) << explain.out;
  EXPECT_EQ(doc["notes"][0], "gpuman run and select from here choose only among the GPUs this environment allows: " +
                                 kStaleThree);
  auto clean = gpuman({"explain", "--json"}, {});
  EXPECT_EQ(nlohmann::json::parse(clean.out)["notes"], nlohmann::json::array()) << clean.out;

  // What `eval $(gpuman select --format env)` leaves behind: both variables, one unset.
  auto env_out = gpuman({"select", "-n", "1", "--gpus", "1", "--format", "env"}, {});
  ASSERT_EQ(env_out.exit_code, 0) << env_out.err;
  EXPECT_NE(env_out.out.find("export NVIDIA_VISIBLE_DEVICES=" + kUuid1 + "\n"), std::string::npos) << env_out.out;
  auto evaled = gpuman({"select", "-n", "2"}, {{"CUDA_VISIBLE_DEVICES", kUuid1}, {"NVIDIA_VISIBLE_DEVICES", kUuid1}});
  EXPECT_EQ(evaled.exit_code, 4);
  EXPECT_EQ(evaled.err,
            "gpuman: error: need 2 GPUs, only 1 of 4 can ever be eligible: GPU 0,2,3 outside the enclosing "
            "allocation; CUDA_VISIBLE_DEVICES and NVIDIA_VISIBLE_DEVICES=\"" +
                kUuid1 +
                "\" in this shell (as `gpuman select --format env` writes them; not set by a gpuman lease or Slurm) "
                "confine gpuman to GPU 1: if they are left over from an earlier job or shell, clear them with "
                "`unset CUDA_VISIBLE_DEVICES NVIDIA_VISIBLE_DEVICES`\n");

  // An entry that names no GPU here: which one, and why.
  auto gone = gpuman({"select", "-n", "1"}, {{"CUDA_VISIBLE_DEVICES", "GPU-deadbeef"}});
  EXPECT_EQ(gone.exit_code, 4);
  EXPECT_NE(gone.err.find("CUDA_VISIBLE_DEVICES=\"GPU-deadbeef\" in this shell (not set by a gpuman lease or Slurm) "
                          "lets no GPU through; its entry 1 \"GPU-deadbeef\": invalid ("),
            std::string::npos)
      << gone.err;
  EXPECT_NE(gone.err.find("clear it with `unset CUDA_VISIBLE_DEVICES`\n"), std::string::npos) << gone.err;
}

TEST(StaleCudaVisibleDevicesE2E, ANestedRunInsideALeaseStillWorksAndIsNotToldToUnset) {
  TempDir dir;
  const std::string scenario = IdleScenario(dir, "a100-4");
  const std::string nested = kGpuman + " run -n 1 -- sh -c 'echo nested $CUDA_VISIBLE_DEVICES'; " + kGpuman +
                             " select -n 3; echo select=$?; " + kGpuman + " explain --json";
  auto r = RunGpuman(dir.Join("state"), {"run", "-n", "2", "--gpus", "1,3", "--", "sh", "-c", nested},
                     {{"GPUMAN_LEASE_DIR", dir.Join("leases")}, {"GPUMAN_SIMULATE", scenario}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.out.starts_with("nested " + kUuid1 + "\n") || r.out.starts_with("nested " + kUuid3 + "\n")) << r.out;
  EXPECT_NE(r.out.find("select=4\n"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("gpuman: error: asked for 3 GPUs inside lease"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("unset"), std::string::npos) << r.err;
  const nlohmann::json doc = nlohmann::json::parse(r.out.substr(r.out.find('{')));
  EXPECT_EQ(doc["notes"], nlohmann::json::array()) << "the lease's own variables are no surprise";
}

TEST(StaleCudaVisibleDevicesE2E, ThroughTheDaemonTheSameWords) {
  TempDir dir;
  const std::string socket = dir.Join("gpuman.sock");
  PrivateDaemon daemon;
  ASSERT_TRUE(daemon.Start({.scenario = IdleScenario(dir, "a100-4"),
                            .socket = socket,
                            .state_dir = dir.Join("daemon"),
                            .env = CleanEnv(dir.Join("leases")),
                            .stderr_path = dir.Join("daemon.log")}));
  const std::map<std::string, std::string> env{{"GPUMAN_SOCKET", socket}, {"CUDA_VISIBLE_DEVICES", "3"}};
  auto select = RunGpuman(dir.Join("state"), {"select", "-n", "2"}, env);
  EXPECT_EQ(select.exit_code, 4);
  EXPECT_TRUE(select.err.starts_with("gpuman: error: need 2 GPUs")) << select.err;
  EXPECT_TRUE(select.err.ends_with("; " + kStaleThree + "\n")) << select.err;
  auto run = RunGpuman(dir.Join("state"), {"run", "-n", "2", "--", "true"}, env);
  EXPECT_EQ(run.exit_code, 125);
  EXPECT_TRUE(run.err.ends_with("; " + kStaleThree + "\n")) << run.err;
  auto fits = RunGpuman(dir.Join("state"), {"run", "-n", "1", "--", "sh", "-c", "echo $CUDA_VISIBLE_DEVICES"}, env);
  EXPECT_EQ(fits.exit_code, 0) << fits.err;
  EXPECT_EQ(fits.out, kUuid3 + "\n");
}

}  // namespace
}  // namespace gpuman::e2e
