// `status --compact` (issue 26): gpustat's one line per GPU with the users inline, what
// people paste into chat. The same facts as `status` with and without a daemon: gpuman's
// leases and jobs in brackets, drained and lost GPUs marked, the simulated marker kept;
// with --watch/-l too.
#include <chrono>
#include <thread>

#include "e2e/e2e_util.h"

namespace gpuman::e2e {
namespace {

using testing::TempDir;

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(CompactE2E, WithoutADaemonLeasesAreInBracketsAndLostGpusMarked) {
  TempDir dir;
  const std::string scenario = IdleScenario(dir, "a100-4");
  const std::map<std::string, std::string> env{{"GPUMAN_LEASE_DIR", dir.Join("leases")}};
  // Inside `run -n 2`: its lease holds two GPUs, and status -c says whose.
  auto r = RunGpuman(dir.Join("state"),
                     {"--simulate", scenario, "run", "-n", "2", "--", kGpuman, "--simulate", scenario, "status", "-c"}, env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 5u) << r.out;
  EXPECT_TRUE(lines[0].starts_with("[SIMULATED: a100-4-idle]  driver 550.54.15  CUDA 12.4  ")) << lines[0];
  int leased = 0;
  for (size_t i = 1; i < lines.size(); ++i) {
    EXPECT_TRUE(lines[i].starts_with("[" + std::to_string(i - 1) + "] A100-SXM4-80GB | ")) << lines[i];
    if (lines[i].ends_with(" GiB | [lease 1 root]")) ++leased;
    else EXPECT_TRUE(lines[i].ends_with(" GiB |")) << lines[i];
  }
  EXPECT_EQ(leased, 2) << r.out;

  // gpustat's figures and users: a100-4's GPU 1 runs two processes of alice.
  auto busy = RunGpuman(dir.Join("state"), {"--simulate", "a100-4", "status", "--compact", "-i", "1"}, env);
  ASSERT_EQ(busy.exit_code, 0) << busy.err;
  EXPECT_EQ(Lines(busy.out).at(1), "[1] A100-SXM4-80GB | 67C 97% | 70.5/80.0 GiB | alice(70.5G)") << busy.out;
  auto mib = RunGpuman(dir.Join("state"), {"--simulate", "a100-4", "status", "-c", "-i", "1", "--units", "mib"}, env);
  ASSERT_EQ(mib.exit_code, 0) << mib.err;
  EXPECT_EQ(Lines(mib.out).at(1), "[1] A100-SXM4-80GB | 67C 97% | 72192/81920 MiB | alice(72192M)") << mib.out;

  // A lost GPU is marked, its unknown figures are "-".
  auto lost = RunGpuman(dir.Join("state"), {"--simulate", "lost-gpu", "status", "-c"}, env);
  ASSERT_EQ(lost.exit_code, 0) << lost.err;
  EXPECT_NE(lost.out.find("\n[2] - LOST         |   -   - |             - |\n"), std::string::npos) << lost.out;

  // A text view only.
  for (const std::vector<std::string> args : {std::vector<std::string>{"--json"}, {"--format", "csv"}}) {
    std::vector<std::string> argv = {"--simulate", "a100-4", "status", "-c"};
    argv.insert(argv.end(), args.begin(), args.end());
    auto refused = RunGpuman(dir.Join("state"), argv, env);
    EXPECT_EQ(refused.exit_code, 2) << args[0];
    EXPECT_EQ(refused.err,
              "gpuman: error: --compact is a text view (--json and --format csv have every GPU's users already)\n");
  }
}

TEST(CompactE2E, ThroughTheDaemonJobsAndDrainsAsStatusShowsThem) {
  TempDir dir;
  const std::string socket = dir.Join("gpuman.sock");
  PrivateDaemon daemon;
  ASSERT_TRUE(daemon.Start({.scenario = IdleScenario(dir, "a100-4"),
                            .socket = socket,
                            .state_dir = dir.Join("state"),
                            .env = CleanEnv(dir.Join("leases")),
                            .stderr_path = dir.Join("daemon.log")}));
  auto gpuman = [&](std::vector<std::string> args) {
    return RunGpuman(dir.Join("leases"), std::move(args), {{"GPUMAN_SOCKET", socket}});
  };
  auto job = gpuman({"submit", "-n", "1", "--gpus", "0", "--name", "train", "--", "sleep", "60"});
  ASSERT_EQ(job.exit_code, 0) << job.err;
  const std::string id = job.out.substr(0, job.out.find('\n'));
  auto drain = gpuman({"drain", "3", "--reason", "fan noise"});
  ASSERT_EQ(drain.exit_code, 0) << drain.err;

  // The job's lease appears once it runs.
  std::string compact;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < until) {
    auto r = gpuman({"status", "-c"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    compact = r.out;
    if (compact.find("[job " + id + " root]") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const std::vector<std::string> lines = Lines(compact);
  ASSERT_EQ(lines.size(), 5u) << compact;  // no source line: the daemon answered
  EXPECT_TRUE(lines[0].starts_with("[SIMULATED: a100-4-idle]  ")) << lines[0];
  EXPECT_TRUE(lines[1].starts_with("[0] A100-SXM4-80GB         | ")) << lines[1];
  EXPECT_TRUE(lines[1].ends_with(" GiB | [job " + id + " root]")) << lines[1];
  EXPECT_TRUE(lines[4].starts_with("[3] A100-SXM4-80GB DRAINED | ")) << lines[4];
  EXPECT_TRUE(lines[4].ends_with(" GiB |")) << lines[4];
  // The table says the same.
  auto table = gpuman({"status"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("lease 1 root (job)"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("DRAINED\n    drained: fan noise"), std::string::npos) << table.out;

  // -l/--watch: one block per refresh (not a terminal: no screen clearing, a blank line between).
  auto watched = gpuman({"status", "-c", "-l", "0.2", "--iterations", "2"});
  ASSERT_EQ(watched.exit_code, 0) << watched.err;
  const std::vector<std::string> blocks = Lines(watched.out);
  ASSERT_EQ(blocks.size(), 11u) << watched.out;
  EXPECT_EQ(blocks[5], "");
  EXPECT_TRUE(blocks[6].starts_with("[SIMULATED: a100-4-idle]")) << watched.out;
  EXPECT_EQ(watched.out.find("\x1b["), std::string::npos);

  EXPECT_EQ(gpuman({"cancel", id}).exit_code, 0);
}

}  // namespace
}  // namespace gpuman::e2e
