// `gpuman bench` (issue 24, item 6) with the stand-in libcuda.so.1 (tests/fake_cuda/): it
// leases the GPUs it measures, prints and stores the figures the stand-in's clock gives,
// and `--prefer fastest` then follows the measured order; without a CUDA library it says
// so in one line. The mixed workstation: RTX 3090 (0, 2) and RTX 4090 (1), the 4090 the
// fastest on paper.
#include <fstream>

#include "e2e/e2e_util.h"

namespace gpuman::e2e {
namespace {

using nlohmann::json;
using testing::TempDir;

const std::string kFakeCuda = GPUMAN_TEST_FAKE_CUDA;

class BenchE2E : public ::testing::Test {
 protected:
  void SetUp() override { scenario_ = IdleScenario(dir_, "workstation-mixed"); }
  testing::RunResult Gpuman(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
    args.insert(args.begin(), {"--simulate", scenario_});
    std::map<std::string, std::string> base{
        {"GPUMAN_LEASE_DIR", dir_.Join("leases")},
        {"GPUMAN_CUDA_LIBRARY", kFakeCuda},
        {"GPUMAN_BENCH_FILE", BenchFile()},
        {"GPUMAN_FAKE_CUDA_TFLOPS", ""},
        {"GPUMAN_FAKE_CUDA_GBPS", ""},
        {"GPUMAN_FAKE_CUDA_PTX_LOG", ""},
        {"GPUMAN_FAKE_CUDA_INIT", ""},
    };
    for (const auto& [k, v] : env) base[k] = v;
    return RunGpuman(dir_.Join("state"), std::move(args), base);
  }
  std::string BenchFile() const { return dir_.Join("bench.json"); }
  size_t LeaseCount() {
    auto leases = Gpuman({"leases", "--json"});
    EXPECT_EQ(leases.exit_code, 0) << leases.err;
    const json doc = json::parse(leases.out, nullptr, false);
    return doc.is_array() ? doc.size() : doc.value("leases", json::array()).size();
  }
  TempDir dir_;
  std::string scenario_;
};

// The stand-in says the 3090s run faster than the 4090: 40 and 30 FP32 TFLOPS against 20.
const std::map<std::string, std::string> kSlowerOnPaperIsFaster{
    {"GPUMAN_FAKE_CUDA_TFLOPS", "40,20,30"}, {"GPUMAN_FAKE_CUDA_GBPS", "900,1000,800"}};

TEST_F(BenchE2E, MeasuresStoresAndPreferFastestFollowsTheMeasuredOrder) {
  auto before = Gpuman({"select", "-n", "1", "--prefer", "fastest", "--format", "index"});
  ASSERT_EQ(before.exit_code, 0) << before.err;
  EXPECT_EQ(before.out, "1\n");  // the 4090 on paper

  auto env = kSlowerOnPaperIsFaster;
  env["GPUMAN_FAKE_CUDA_PTX_LOG"] = dir_.Join("ptx.txt");
  auto bench = Gpuman({"bench", "--json"}, env);
  ASSERT_EQ(bench.exit_code, 0) << bench.err;
  EXPECT_EQ(bench.err, "");
  const json doc = json::parse(bench.out);
  EXPECT_EQ(doc["file"], BenchFile());
  EXPECT_EQ(doc["cuda_version"], "12.4");
  ASSERT_EQ(doc["gpus"].size(), 3u) << doc;
  const double tflops[] = {40, 20, 30}, gbps[] = {900, 1000, 800};
  for (int i = 0; i < 3; ++i) {
    const json& g = doc["gpus"][i];
    EXPECT_EQ(g["index"], i);
    EXPECT_NEAR(g["fp32_tflops"].get<double>(), tflops[i], 0.05) << g;
    EXPECT_NEAR(g["memory_gbps"].get<double>(), gbps[i], 0.05) << g;
    EXPECT_TRUE(g["peak_fp32_tflops"].is_number()) << g;
    EXPECT_TRUE(g["error"].is_null()) << g;
  }
  EXPECT_NEAR(doc["gpus"][1]["peak_fp32_tflops"].get<double>(), 101.7, 0.05);

  // The kernels went to the driver as PTX text.
  std::ifstream ptx_in(dir_.Join("ptx.txt"));
  const std::string ptx((std::istreambuf_iterator<char>(ptx_in)), std::istreambuf_iterator<char>());
  EXPECT_NE(ptx.find(".entry gpuman_fma("), std::string::npos) << ptx;
  EXPECT_NE(ptx.find(".entry gpuman_copy("), std::string::npos);
  EXPECT_NE(ptx.find("fma.rn.f32"), std::string::npos);

  // Stored by UUID, with the time and the driver version.
  std::ifstream file_in(BenchFile());
  const json stored = json::parse(file_in);
  ASSERT_EQ(stored["gpus"].size(), 3u) << stored;
  const std::string uuid0 = doc["gpus"][0]["uuid"];
  EXPECT_NEAR(stored["gpus"][uuid0]["fp32_tflops"].get<double>(), 40, 0.05);
  EXPECT_GT(stored["gpus"][uuid0]["measured_unix_ms"].get<int64_t>(), 0);
  EXPECT_FALSE(stored["gpus"][uuid0]["driver_version"].get<std::string>().empty());

  // The lease bench held is given back.
  EXPECT_EQ(LeaseCount(), 0u);

  // Measured: 3090 #0 first, then 3090 #2, then the 4090.
  auto after = Gpuman({"select", "-n", "1", "--prefer", "fastest", "--format", "index"});
  ASSERT_EQ(after.exit_code, 0) << after.err;
  EXPECT_EQ(after.out, "0\n");
  auto two = Gpuman({"select", "-n", "2", "--prefer", "fastest", "--format", "index"});
  ASSERT_EQ(two.exit_code, 0) << two.err;
  EXPECT_EQ(two.out.find('1'), std::string::npos) << two.out;
  // Without the preference the measurement changes nothing.
  auto plain = Gpuman({"select", "-n", "1", "--format", "index"});
  EXPECT_EQ(plain.exit_code, 0) << plain.err;
}

TEST_F(BenchE2E, TextTableBesideThePeakAndOnlyTheNamedGpus) {
  auto bench = Gpuman({"bench", "--gpus", "2"}, kSlowerOnPaperIsFaster);
  ASSERT_EQ(bench.exit_code, 0) << bench.err;
  EXPECT_NE(bench.out.find("FP32 TFLOPS"), std::string::npos) << bench.out;
  EXPECT_NE(bench.out.find("30.0"), std::string::npos) << bench.out;   // measured
  EXPECT_NE(bench.out.find("44.1"), std::string::npos) << bench.out;   // computed peak
  EXPECT_NE(bench.out.find("800.0"), std::string::npos) << bench.out;
  EXPECT_NE(bench.out.find("stored in " + BenchFile()), std::string::npos) << bench.out;
  EXPECT_EQ(bench.out.find("40.0"), std::string::npos) << bench.out;   // GPU 0 not measured
  std::ifstream file_in(BenchFile());
  EXPECT_EQ(json::parse(file_in)["gpus"].size(), 1u);
}

TEST_F(BenchE2E, WithoutACudaLibraryOneLineAndExit3AndNoLease) {
  auto bench = Gpuman({"bench"}, {{"GPUMAN_CUDA_LIBRARY", dir_.Join("no/libcuda.so.1")}});
  EXPECT_EQ(bench.exit_code, 3);
  EXPECT_EQ(bench.out, "");
  EXPECT_TRUE(bench.err.starts_with("gpuman: error: no CUDA driver library (" + dir_.Join("no/libcuda.so.1") + "): "))
      << bench.err;
  EXPECT_EQ(std::count(bench.err.begin(), bench.err.end(), '\n'), 1) << bench.err;
  EXPECT_EQ(LeaseCount(), 0u);
  EXPECT_FALSE(std::ifstream(BenchFile()).good());
}

TEST_F(BenchE2E, CudaInitFailingIsExit3AndTheLeaseIsGivenBack) {
  auto bench = Gpuman({"bench"}, {{"GPUMAN_FAKE_CUDA_INIT", "100"}});
  EXPECT_EQ(bench.exit_code, 3) << bench.err;
  EXPECT_EQ(bench.err, "gpuman: error: cuInit: no CUDA-capable device is detected (code 100)\n");
  EXPECT_EQ(LeaseCount(), 0u);
}

TEST_F(BenchE2E, NeverOnAGpuSomeoneElseHolds) {
  // A run holds GPU 1 while bench is asked for every GPU: refused, exit 4, nothing measured.
  const pid_t holder = StartGpuman(dir_.Join("state"),
                                   {"--simulate", scenario_, "run", "--gpus", "1", "--", "sleep", "60"},
                                   {{"GPUMAN_LEASE_DIR", dir_.Join("leases")}});
  for (int i = 0; i < 200 && LeaseCount() == 0; ++i) usleep(50 * 1000);
  ASSERT_EQ(LeaseCount(), 1u);
  auto bench = Gpuman({"bench", "--json"}, kSlowerOnPaperIsFaster);
  EXPECT_EQ(bench.exit_code, 4) << bench.err;
  EXPECT_EQ(bench.out, "");
  EXPECT_FALSE(std::ifstream(BenchFile()).good());
  // The free ones can be named.
  auto free_ones = Gpuman({"bench", "--gpus", "0,2", "--json"}, kSlowerOnPaperIsFaster);
  EXPECT_EQ(free_ones.exit_code, 0) << free_ones.err;
  EXPECT_EQ(json::parse(free_ones.out)["gpus"].size(), 2u);
  EXPECT_EQ(LeaseCount(), 1u);  // the run's, still
  kill(holder, SIGTERM);
  int status = 0;
  waitpid(holder, &status, 0);
}

// Through the daemon: bench leases from it, and the measured figures travel with the
// request, so the daemon's choice follows them too.
TEST_F(BenchE2E, ThroughTheDaemonTheLeaseIsItsAndTheFiguresTravel) {
  const std::string socket = dir_.Join("gpuman.sock");
  PrivateDaemon daemon;
  ASSERT_TRUE(daemon.Start({.scenario = scenario_,
                            .socket = socket,
                            .state_dir = dir_.Join("daemon-state"),
                            .env = CleanEnv(dir_.Join("state")),
                            .stderr_path = dir_.Join("daemon.log")}));
  auto client = [&](std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
    std::map<std::string, std::string> base{{"GPUMAN_SOCKET", socket},
                                            {"GPUMAN_CUDA_LIBRARY", kFakeCuda},
                                            {"GPUMAN_BENCH_FILE", BenchFile()},
                                            {"GPUMAN_FAKE_NVML_SCENARIO", scenario_}};
    for (const auto& [k, v] : env) base[k] = v;
    return RunGpuman(dir_.Join("state"), std::move(args), base);
  };
  auto before = client({"select", "-n", "1", "--prefer", "fastest", "--format", "index"});
  ASSERT_EQ(before.exit_code, 0) << before.err;
  EXPECT_EQ(before.out, "1\n");
  auto bench = client({"bench", "--json"}, kSlowerOnPaperIsFaster);
  ASSERT_EQ(bench.exit_code, 0) << bench.err;
  EXPECT_NEAR(json::parse(bench.out)["gpus"][0]["fp32_tflops"].get<double>(), 40, 0.05) << bench.out;
  auto leases = client({"leases", "--json"});
  EXPECT_EQ(json::parse(leases.out)["leases"].size(), 0u) << leases.out;
  auto after = client({"select", "-n", "1", "--prefer", "fastest", "--format", "index"});
  ASSERT_EQ(after.exit_code, 0) << after.err;
  EXPECT_EQ(after.out, "0\n");
}

}  // namespace
}  // namespace gpuman::e2e
