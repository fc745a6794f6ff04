// End-to-end: a GPU drained through the daemon shows wherever users look (`status`,
// `status --json`, `health`, `select`, the queue's reason). Real binaries, the stand-in
// NVML (h100-8, idle), a private socket and state directory.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>

#include "e2e/e2e_util.h"

namespace gpuman::e2e {
namespace {

using nlohmann::json;
using testing::TempDir;

bool Eventually(const std::function<bool()>& done, int ms = 30000) {
  for (int waited = 0; waited < ms; waited += 100) {
    if (done()) return true;
    usleep(100000);
  }
  return done();
}

class DrainsE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "draining needs root (the daemon's admin)";
    socket_ = dir_.Join("gpuman.sock");
    scenario_ = IdleScenario(dir_, "h100-8");
    kernel_log_ = dir_.Write("kmsg.txt", "");  // no Xids from the host's own kernel log
    auto env = CleanEnv(dir_.Join("leases"));
    env["GPUMAN_KERNEL_LOG"] = kernel_log_;
    ASSERT_TRUE(daemon_.Start({.scenario = scenario_, .socket = socket_, .state_dir = dir_.Join("state"), .env = env}));
    std::ifstream in(scenario_);
    uuid2_ = json::parse(in)["gpus"][2]["uuid"];
  }
  void TearDown() override { daemon_.Stop(); }
  // The CLI sees the same simulated machine as the daemon.
  testing::RunResult Gpuman(std::vector<std::string> args) {
    args.insert(args.begin(), {"--simulate", scenario_});
    return RunGpuman(dir_.Join("leases"), std::move(args), {{"GPUMAN_SOCKET", socket_}, {"COLUMNS", "140"}, {"GPUMAN_KERNEL_LOG", kernel_log_}});
  }

  TempDir dir_;
  std::string socket_, scenario_, kernel_log_, uuid2_;
  PrivateDaemon daemon_;
};

TEST_F(DrainsE2E, ADrainedGpuShowsInStatusHealthSelectAndQueue) {
  // Nothing drained: the GPU is ok and its JSON drain is null.
  auto before = Gpuman({"status", "--json", "--no-processes"});
  ASSERT_EQ(before.exit_code, 0) << before.err;
  EXPECT_TRUE(json::parse(before.out)["gpus"][2]["drain"].is_null()) << before.out;

  auto drain = Gpuman({"drain", "2", "--reason", "fan noise"});
  ASSERT_EQ(drain.exit_code, 0) << drain.err;

  // status: the HEALTH cell says DRAINED and "drained: <reason> (by ... since ...)" follows beneath.
  auto text = Gpuman({"status", "--no-processes"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("drained: fan noise (by root since "), std::string::npos) << text.out;
  const size_t row = text.out.find("\n  2 ");
  ASSERT_NE(row, std::string::npos) << text.out;
  const std::string row_line = text.out.substr(row + 1, text.out.find('\n', row + 1) - row - 1);
  EXPECT_TRUE(row_line.ends_with("DRAINED")) << row_line;
  EXPECT_EQ(text.err, "");

  // status --json: the drain object on GPU 2 only.
  auto j = json::parse(Gpuman({"status", "--json", "--no-processes"}).out);
  ASSERT_EQ(j["gpus"].size(), 8u);
  const json& d = j["gpus"][2]["drain"];
  ASSERT_TRUE(d.is_object()) << j["gpus"][2].dump(2);
  EXPECT_EQ(d["reason"], "fan noise");
  EXPECT_EQ(d["by"], "root");
  EXPECT_EQ(d["by_uid"], 0);
  EXPECT_GT(d["since_unix_ms"].get<int64_t>(), 1700000000000);
  EXPECT_TRUE(j["gpus"][1]["drain"].is_null());

  // health: a note, not a finding: still healthy, exit 0.
  auto health = Gpuman({"health"});
  EXPECT_EQ(health.exit_code, 0) << health.out << health.err;
  EXPECT_NE(health.out.find("note: GPU 2 is drained: fan noise (by root since "), std::string::npos) << health.out;
  auto health_json = Gpuman({"health", "--json"});
  EXPECT_EQ(health_json.exit_code, 0);
  json h = json::parse(health_json.out);
  ASSERT_EQ(h["drains"].size(), 1u) << h.dump(2);
  EXPECT_EQ(h["drains"][0]["uuid"], uuid2_);
  EXPECT_EQ(h["drains"][0]["index"], 2);
  EXPECT_EQ(h["findings"].size(), 0u);

  // select (no lease): all 8 cannot be had, and the error says GPU 2 is drained and why.
  auto all = Gpuman({"select", "-n", "8"});
  EXPECT_EQ(all.exit_code, 4) << all.err;  // not enough GPUs
  EXPECT_NE(all.err.find("gpuman: error: need 8 GPUs, 7 eligible: GPU 2 drained (fan noise)"), std::string::npos)
      << all.err;
  EXPECT_EQ(all.out, "");
  // 7 can, and GPU 2 is not among them.
  auto seven = Gpuman({"select", "-n", "7", "--format", "index"});
  ASSERT_EQ(seven.exit_code, 0) << seven.err;
  EXPECT_EQ(seven.out, "0,1,3,4,5,6,7\n");

  // queue: an 8-GPU job waits, and its reason names the drain.
  auto submit = Gpuman({"submit", "-n", "8", "--output", dir_.Join("job.log"), "--", "true"});
  ASSERT_EQ(submit.exit_code, 0) << submit.err;
  std::string reason;
  ASSERT_TRUE(Eventually([&] {
    auto q = Gpuman({"queue", "--json"});
    if (q.exit_code != 0) return false;
    json jobs = json::parse(q.out)["jobs"];
    reason = jobs.empty() ? "" : jobs[0].value("reason", "");
    return !reason.empty();
  })) << "no reason";
  EXPECT_EQ(reason, "needs 8 GPUs; 1 of 8 is drained (GPU 2)") << "named by index, as users name GPUs";
  auto queue = Gpuman({"queue"});
  EXPECT_NE(queue.out.find("1 of 8 is drained"), std::string::npos) << queue.out;

  // Undrained, it is ok again everywhere.
  ASSERT_EQ(Gpuman({"undrain", "2"}).exit_code, 0);
  auto after = Gpuman({"status", "--no-processes"});
  EXPECT_EQ(after.out.find("DRAINED"), std::string::npos) << after.out;
  EXPECT_EQ(Gpuman({"health"}).out.find("drained"), std::string::npos);
}

}  // namespace
}  // namespace gpuman::e2e
