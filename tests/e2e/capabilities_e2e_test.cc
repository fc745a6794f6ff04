// GPU capabilities (issue 24): status --json and explain --json show them, and --require
// chooses by them on a mixed machine (RTX 3090s at 8.6, an RTX 4090 at 8.9).
#include <sys/stat.h>

#include <fstream>

#include "e2e/e2e_util.h"

namespace gpuman::e2e {
namespace {

using nlohmann::json;
using testing::TempDir;

class CapabilitiesE2E : public ::testing::Test {
 protected:
  void SetUp() override { scenario_ = IdleScenario(dir_, "workstation-mixed"); }
  testing::RunResult Gpuman(std::vector<std::string> args) {
    args.insert(args.begin(), {"--simulate", scenario_});
    return RunGpuman(dir_.Join("state"), std::move(args), {{"GPUMAN_LEASE_DIR", dir_.Join("leases")}});
  }
  TempDir dir_;
  std::string scenario_;
};

TEST_F(CapabilitiesE2E, StatusAndExplainShowThemAndRequireChoosesByThem) {
  auto status = Gpuman({"status", "--json"});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  const json status_doc = json::parse(status.out);
  for (const auto& g : status_doc["gpus"]) {
    const bool ada = g["compute_capability"] == "8.9";
    EXPECT_EQ(g["capabilities"], (json{{"tf32", true}, {"bf16", true}, {"fp8", ada}, {"fp4", false}})) << g["name"];
  }
  auto explain = Gpuman({"explain", "--json"});
  ASSERT_EQ(explain.exit_code, 0) << explain.err;
  const json explain_doc = json::parse(explain.out);
  for (const auto& v : explain_doc["visible"]) {
    EXPECT_EQ(v["capabilities"]["bf16"], true) << v;
  }
  auto text = Gpuman({"explain"});
  EXPECT_NE(text.out.find("compute 8.9: tf32, bf16, fp8"), std::string::npos) << text.out;

  // Only the RTX 4090 (GPU 1) computes in fp8.
  auto fp8 = Gpuman({"select", "-n", "1", "--require", "fp8", "--format", "index"});
  EXPECT_EQ(fp8.exit_code, 0) << fp8.err;
  EXPECT_EQ(fp8.out, "1\n");
  auto two = Gpuman({"select", "-n", "2", "--require", "fp8"});
  EXPECT_EQ(two.exit_code, 4) << two.out;
  auto bf16 = Gpuman({"select", "-n", "3", "--require", "tf32,bf16", "--format", "index"});
  EXPECT_EQ(bf16.exit_code, 0) << bf16.err;
  auto fp4 = Gpuman({"run", "-n", "1", "--require", "fp4", "--", "true"});
  EXPECT_EQ(fp4.exit_code, 125) << fp4.err;
  EXPECT_NE(fp4.err.find("compute capability below 10.0"), std::string::npos) << fp4.err;
  auto unknown = Gpuman({"select", "--require", "fp16"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_EQ(unknown.err, "gpuman: error: --require: unknown capability 'fp16' (known: tf32, bf16, fp8, fp4)\n");
}

}  // namespace
}  // namespace gpuman::e2e
