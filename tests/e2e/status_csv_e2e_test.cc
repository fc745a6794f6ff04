// `gpuman status` with nvidia-smi's scripting interface (issue 26): --format csv with
// --fields/--query-gpu, -i, -l/--loop, --units mib; the real binary on the stand-in NVML.
#include <pwd.h>
#include <unistd.h>

#include <regex>

#include "e2e/e2e_util.h"

namespace gpuman::e2e {
namespace {

using testing::TempDir;

class StatusCsvE2E : public ::testing::Test {
 protected:
  // gpuman on the shipped a100-4 node (GPU 1 busy with alice's processes, no leases).
  testing::RunResult Gpuman(std::vector<std::string> args) {
    args.insert(args.begin(), {"--simulate", "a100-4"});
    return RunGpuman(dir_.Join("state"), std::move(args), {{"GPUMAN_LEASE_DIR", dir_.Join("leases")}});
  }
  TempDir dir_;
};

TEST_F(StatusCsvE2E, DefaultFieldsWithHeaderAndUnits) {
  auto r = Gpuman({"status", "--format", "csv"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.out,
            "index, name, uuid, memory.used [MiB], memory.total [MiB], utilization.gpu [%], gpuman.holder\n"
            "0, NVIDIA A100-SXM4-80GB, GPU-3f2a9c1e-7b4d-4e8a-9c21-5d6e7f8a9b01, 5 MiB, 81920 MiB, 0 %, \n"
            "1, NVIDIA A100-SXM4-80GB, GPU-8c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f, 72192 MiB, 81920 MiB, 97 %, alice\n"
            "2, NVIDIA A100-SXM4-80GB, GPU-b7e6d5c4-3b2a-4190-8f7e-6d5c4b3a2918, 5 MiB, 81920 MiB, 0 %, \n"
            "3, NVIDIA A100-SXM4-80GB, GPU-0a1b2c3d-4e5f-4a6b-9c7d-8e9f0a1b2c3d, 5 MiB, 81920 MiB, 0 %, \n");
}

TEST_F(StatusCsvE2E, TypedAsNvidiaSmiUsersTypeIt) {
  auto r = Gpuman({"status", "--query-gpu=index,memory.used,temperature.gpu", "--format=csv,noheader,nounits"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "0, 5, 31\n1, 72192, 67\n2, 5, 33\n3, 5, 34\n");
  auto one = Gpuman({"status", "-i", "1", "--format", "csv,noheader", "--fields",
                     "index,gpuman.holder,gpuman.processes,gpuman.lease,gpuman.drained,power.draw"});
  EXPECT_EQ(one.exit_code, 0) << one.err;
  EXPECT_EQ(one.out, "1, alice, 2, , no, 362.00 W\n");
  auto range = Gpuman({"status", "--id", "2-3", "--format", "csv,noheader", "--fields", "index"});
  EXPECT_EQ(range.out, "2\n3\n");
}

TEST_F(StatusCsvE2E, LoopPrintsTheHeaderOnceThenRowsPerRefresh) {
  auto r = Gpuman({"status", "-l", "0.1", "--iterations", "3", "-i", "0", "--format", "csv", "--fields", "index"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "index\n0\n0\n0\n");
  auto loop = Gpuman({"status", "--loop", "0.1", "--iterations", "2", "-i", "1", "--format", "csv,noheader"});
  EXPECT_EQ(loop.exit_code, 0) << loop.err;
  EXPECT_EQ(std::count(loop.out.begin(), loop.out.end(), '\n'), 2) << loop.out;
}

TEST_F(StatusCsvE2E, MistakesAreOneLineAndUsageExit) {
  struct Case {
    std::vector<std::string> args;
    std::string err;
  };
  const Case cases[] = {
      {{"status", "--format", "csv", "--fields", "index,memory.usd"},
       "gpuman: error: unknown GPU field 'memory.usd' (did you mean 'memory.used'?)\n"},
      {{"status", "--query-gpu", "holder", "--format", "csv"},
       "gpuman: error: unknown GPU field 'holder' (did you mean 'gpuman.holder'?)\n"},
      {{"status", "--fields", "index"},
       "gpuman: error: --fields (--query-gpu) needs --format csv, e.g. gpuman status --format csv --fields "
       "index,memory.used\n"},
      {{"status", "--format", "xml"},
       "gpuman: error: --format: unknown format 'xml' (text, json, or csv[,noheader][,nounits])\n"},
      {{"status", "--format", "json,noheader"},
       "gpuman: error: --format: noheader and nounits go with csv, e.g. --format csv,noheader,nounits\n"},
      {{"status", "--format", "csv,json"}, "gpuman: error: --format: name one of text, json, csv (got 'csv,json')\n"},
      {{"status", "--json", "--format", "csv"},
       "gpuman: error: --json and --format csv ask for different outputs: give one\n"},
      {{"status", "--units", "mib", "--format", "csv"},
       "gpuman: error: --units is for the text view (CSV gives memory in MiB, JSON in bytes)\n"},
  };
  for (const Case& c : cases) {
    auto r = Gpuman(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args[1] << " " << c.args[2];
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err, c.err);
  }
  auto units = Gpuman({"status", "--units", "gib"});  // CLI11 checks the choices
  EXPECT_EQ(units.exit_code, 2);
  EXPECT_NE(units.err.find("--units"), std::string::npos) << units.err;
}

TEST_F(StatusCsvE2E, FormatJsonIsJsonAndFormatTextIsTheTable) {
  auto j = Gpuman({"status", "--format", "json", "--no-processes"});
  EXPECT_EQ(j.exit_code, 0) << j.err;
  const auto doc = nlohmann::json::parse(j.out);
  EXPECT_EQ(doc["schema_version"], 1);
  EXPECT_EQ(doc["gpus"].size(), 4u);
  auto both = Gpuman({"status", "--format", "json", "--json", "-i", "0"});
  EXPECT_EQ(both.exit_code, 0) << both.err;
  EXPECT_EQ(nlohmann::json::parse(both.out)["gpus"].size(), 1u);
  auto text = Gpuman({"status", "--format", "text"});
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("70.5/80.0 GiB"), std::string::npos) << text.out;
}

TEST_F(StatusCsvE2E, UnitsMibShowsMemoryAsNvidiaSmiDoes) {
  auto r = Gpuman({"status", "--units", "mib", "-i", "1"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("72192/81920 MiB"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("53248 MiB"), std::string::npos) << r.out;  // alice's first process
  EXPECT_EQ(r.out.find("GiB"), std::string::npos) << r.out;
}

TEST_F(StatusCsvE2E, HolderAndLeaseOfARunningLease) {
  const passwd* me = getpwuid(getuid());
  ASSERT_NE(me, nullptr);
  const std::string scenario = kScenarios + "/a100-4.json";
  auto r = Gpuman({"run", "--gpus", "2", "--", kGpuman, "--simulate", scenario, "status", "-i", "2", "--format",
                   "csv,noheader", "--fields", "index,gpuman.holder,gpuman.lease,gpuman.job"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(std::regex_match(r.out, std::regex("2, " + std::string(me->pw_name) + ", [0-9]+, \n"))) << r.out;
  auto after = Gpuman({"status", "-i", "2", "--format", "csv,noheader", "--fields", "gpuman.holder,gpuman.lease"});
  EXPECT_EQ(after.out, ", \n");  // the lease ended with the command
}

TEST_F(StatusCsvE2E, OutputThatCannotBeWrittenFails) {
  auto env = CleanEnv(dir_.Join("state"));
  env["GPUMAN_LEASE_DIR"] = dir_.Join("leases");
  for (const char* format : {"csv", "text", "json"}) {
    auto r = testing::Run(
        {"/bin/sh", "-c", kGpuman + " --simulate a100-4 status --format " + format + " >/dev/full"}, env);
    EXPECT_EQ(r.exit_code, 1) << format;
    EXPECT_EQ(r.err, "gpuman: error: write standard output: no space left on device\n") << format;
  }
}

// Through a daemon: a queue job's lease names its job, a drain says yes.
TEST(StatusCsvDaemonE2E, JobLeaseAndDrainThroughTheDaemon) {
  if (geteuid() != 0) GTEST_SKIP() << "draining needs root (the daemon's admin)";
  TempDir dir;
  const std::string socket = dir.Join("gpuman.sock");
  const std::string scenario = IdleScenario(dir, "a100-4");
  const std::string kernel_log = dir.Write("kmsg.txt", "");  // no Xids from the host's kernel log
  auto env = CleanEnv(dir.Join("leases"));
  env["GPUMAN_KERNEL_LOG"] = kernel_log;
  PrivateDaemon daemon;
  ASSERT_TRUE(daemon.Start({.scenario = scenario, .socket = socket, .state_dir = dir.Join("state"), .env = env}));
  auto gpuman = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"--simulate", scenario});
    return RunGpuman(dir.Join("leases"), std::move(args), {{"GPUMAN_SOCKET", socket}, {"GPUMAN_KERNEL_LOG", kernel_log}});
  };
  auto drain = gpuman({"drain", "3", "--reason", "fan noise"});
  ASSERT_EQ(drain.exit_code, 0) << drain.err;
  auto submit = gpuman({"submit", "--gpus", "1", "--output", dir.Join("job.log"), "--", "sleep", "60"});
  ASSERT_EQ(submit.exit_code, 0) << submit.err;
  auto queue = gpuman({"queue", "--json"});
  ASSERT_EQ(queue.exit_code, 0) << queue.err;
  const std::string job = std::to_string(nlohmann::json::parse(queue.out)["jobs"].at(0)["id"].get<int64_t>());

  const std::regex expected("0, , , , no\n1, root, [0-9]+, " + job + ", no\n2, , , , no\n3, , , , yes\n");
  std::string out;
  for (int waited = 0; waited < 30000 && !std::regex_match(out, expected); waited += 100) {
    out = gpuman({"status", "--format", "csv,noheader", "--fields",
                  "index,gpuman.holder,gpuman.lease,gpuman.job,gpuman.drained"}).out;
    if (!std::regex_match(out, expected)) usleep(100000);
  }
  EXPECT_TRUE(std::regex_match(out, expected)) << out;
  EXPECT_EQ(gpuman({"cancel", job}).exit_code, 0);
}

}  // namespace
}  // namespace gpuman::e2e
