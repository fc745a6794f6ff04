// End to end: `gpuman daemon --metrics` on the stand-in NVML, scraped by a real Prometheus
// server (/usr/bin/prometheus, Debian package `prometheus`), and read back through
// Prometheus's HTTP API. Skipped when Prometheus is not installed.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <httplib.h>
#include <optional>
#include <thread>

#include "e2e/e2e_util.h"

namespace gpuman::e2e {
namespace {

using nlohmann::json;
using testing::TempDir;

const std::string kPrometheus = "/usr/bin/prometheus";

// A free TCP port on loopback: bind port 0, read it back, close. Another process could take
// it before we use it; the daemon then fails to start and the test says so.
int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

// A child process with its output in a file; SIGTERM (then SIGKILL) when it goes away, so
// nothing outlives a failed test.
class Child {
 public:
  Child(std::vector<std::string> argv, const std::map<std::string, std::string>& env, const std::string& log)
      : log_(log) {
    pid_ = fork();
    if (pid_ == 0) {
      for (const auto& [k, v] : env) {
        if (v.empty()) unsetenv(k.c_str());
        else setenv(k.c_str(), v.c_str(), 1);
      }
      FILE* out = freopen(log.c_str(), "w", stdout);
      if (out) dup2(fileno(stdout), 2);
      std::vector<char*> args;
      for (auto& a : argv) args.push_back(a.data());
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
  }
  ~Child() { Stop(); }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  /// Exit status once it has ended, without waiting; nullopt while it runs.
  std::optional<int> Exited() {
    if (pid_ <= 0) return status_;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      pid_ = -1;
    }
    return status_;
  }
  void Stop() {
    if (Exited() || pid_ <= 0) return;
    kill(pid_, SIGTERM);
    for (int i = 0; i < 200 && !Exited(); ++i) usleep(50000);
    if (!Exited()) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }
  std::string Log() const { return Slurp(log_); }

 private:
  pid_t pid_ = -1;
  std::optional<int> status_;
  std::string log_;
};

bool WaitFor(const std::function<bool()>& done, int seconds) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return done();
}

class MetricsE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    if (access(kPrometheus.c_str(), X_OK) != 0) GTEST_SKIP() << kPrometheus << " not installed";
    // h100-8 with only bob's process on GPU 0 left: GPUs 1-7 are free for a job.
    std::ifstream in(kScenarios + "/h100-8.json");
    scenario_json_ = json::parse(in);
    for (size_t i = 1; i < scenario_json_["gpus"].size(); ++i) scenario_json_["gpus"][i]["processes"] = json::array();
    scenario_ = dir_.Write("h100-8.json", scenario_json_.dump(2));
    socket_ = dir_.Join("gpuman.sock");
    metrics_port_ = FreePort();
    ASSERT_GT(metrics_port_, 0);
    ASSERT_TRUE(daemon_.Start({.scenario = scenario_,
                               .socket = socket_,
                               .state_dir = dir_.Join("state"),
                               .args = {"--metrics", "127.0.0.1:" + std::to_string(metrics_port_)},
                               .env = CleanEnv(dir_.Join("leases")),
                               .stdout_path = dir_.Join("daemon.log"),
                               .stderr_path = dir_.Join("daemon.log")}));
  }

  void TearDown() override {
    if (job_ > 0) Gpuman({"cancel", std::to_string(job_)});
    if (prometheus_) prometheus_->Stop();
    daemon_.Stop();
  }

  // A second daemon, expected to refuse to start: a plain child, not waited for.
  std::unique_ptr<Child> StartDaemon(const std::string& socket, const std::string& state, int port,
                                     const std::string& log) {
    return std::make_unique<Child>(
        std::vector<std::string>{kGpuman, "--simulate", scenario_, "daemon", "--socket", socket, "--state-dir",
                                 dir_.Join(state), "--metrics", "127.0.0.1:" + std::to_string(port)},
        CleanEnv(dir_.Join("leases")), dir_.Join(log));
  }


  testing::RunResult Gpuman(std::vector<std::string> args) {
    return RunGpuman(dir_.Join("leases"), std::move(args), {{"GPUMAN_SOCKET", socket_}});
  }

  void StartPrometheus() {
    prometheus_port_ = FreePort();
    ASSERT_GT(prometheus_port_, 0);
    std::string config = dir_.Write("prometheus.yml",
                                    "global:\n"
                                    "  scrape_interval: 1s\n"
                                    "  scrape_timeout: 1s\n"
                                    "scrape_configs:\n"
                                    "  - job_name: gpuman\n"
                                    "    static_configs:\n"
                                    "      - targets: ['127.0.0.1:" + std::to_string(metrics_port_) + "']\n");
    prometheus_ = std::make_unique<Child>(
        std::vector<std::string>{kPrometheus, "--config.file=" + config, "--storage.tsdb.path=" + dir_.Join("tsdb"),
                                 "--web.listen-address=127.0.0.1:" + std::to_string(prometheus_port_),
                                 "--log.level=warn"},
        std::map<std::string, std::string>{}, dir_.Join("prometheus.log"));
  }

  // Prometheus's instant query: the samples of `query`, as (labels, value). Empty while
  // nothing has been scraped yet or Prometheus is still starting.
  std::vector<std::pair<json, double>> Query(const std::string& query) {
    httplib::Client client("127.0.0.1", prometheus_port_);
    client.set_connection_timeout(2);
    client.set_read_timeout(5);
    auto r = client.Get("/api/v1/query", httplib::Params{{"query", query}}, httplib::Headers{});
    if (!r || r->status != 200) return {};
    json body = json::parse(r->body, nullptr, /*allow_exceptions=*/false);
    if (!body.is_object() || body.value("status", "") != "success") return {};
    std::vector<std::pair<json, double>> out;
    for (const auto& sample : body["data"]["result"]) {
      out.emplace_back(sample["metric"], std::stod(sample["value"][1].get<std::string>()));
    }
    return out;
  }
  // Polls until `query` has exactly `n` samples (60 s at most).
  std::vector<std::pair<json, double>> QueryUntil(const std::string& query, size_t n) {
    std::vector<std::pair<json, double>> result;
    WaitFor([&] { return (result = Query(query)).size() == n; }, 60);
    return result;
  }
  // Polls until `query` gives one sample equal to `want` (60 s at most); returns the
  // last value seen, nullopt when there never was exactly one sample.
  std::optional<double> Eventually(const std::string& query, double want) {
    std::optional<double> last;
    WaitFor(
        [&] {
          auto result = Query(query);
          if (result.size() == 1) last = result[0].second;
          return last == want;
        },
        60);
    return last;
  }
  std::string Logs() {
    return "\n--- daemon:\n" + Slurp(dir_.Join("daemon.log")) + "\n--- prometheus:\n" + (prometheus_ ? prometheus_->Log() : "");
  }

  TempDir dir_;
  json scenario_json_;
  std::string scenario_, socket_;
  int metrics_port_ = 0, prometheus_port_ = 0;
  int64_t job_ = -1;
  PrivateDaemon daemon_;
  std::unique_ptr<Child> prometheus_;
};

TEST_F(MetricsE2E, DaemonServesTheExpositionFormat) {
  httplib::Client client("127.0.0.1", metrics_port_);
  client.set_read_timeout(5);
  ASSERT_TRUE(WaitFor([&] { auto r = client.Get("/metrics"); return r && r->status == 200; }, 60)) << Logs();
  auto r = client.Get("/metrics");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_NE(r->body.find("\ngpuman_nvml_up 1\n"), std::string::npos) << r->body;
  EXPECT_NE(r->body.find("# TYPE gpuman_gpu_memory_total_bytes gauge\n"), std::string::npos);
  auto other = client.Get("/");
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 404);
}

TEST_F(MetricsE2E, PrometheusScrapesTheDaemon) {
  StartPrometheus();
  auto totals = QueryUntil("gpuman_gpu_memory_total_bytes", 8);
  ASSERT_EQ(totals.size(), 8u) << Logs();
  std::map<std::string, double> total_by_uuid;
  for (const auto& [labels, value] : totals) {
    EXPECT_EQ(labels["job"], "gpuman");
    EXPECT_EQ(labels["name"], "NVIDIA H100 80GB HBM3");
    total_by_uuid[labels["uuid"]] = value;
  }
  for (const auto& g : scenario_json_["gpus"]) {
    EXPECT_EQ(total_by_uuid[g["uuid"].get<std::string>()], g["memory"]["total"].get<double>()) << g["uuid"];
  }
  const json& gpu0 = scenario_json_["gpus"][0];
  auto expect = [&](const std::string& query, double want) { EXPECT_EQ(Eventually(query, want), want) << query; };
  expect("up{job=\"gpuman\"}", 1);  // Prometheus accepted the scrapes
  expect("gpuman_nvml_up", 1);
  expect("gpuman_gpu_temperature_celsius{gpu=\"0\"}", gpu0["temperature"].get<double>());
  expect("gpuman_gpu_power_watts{gpu=\"0\"}", gpu0["power_usage_mw"].get<double>() / 1000);
  expect("gpuman_gpu_utilization_ratio{gpu=\"0\"}", gpu0["utilization"]["gpu"].get<double>() / 100);
  const json& bob = gpu0["processes"][0];
  expect("gpuman_process_gpu_memory_bytes{gpu=\"0\",pid=\"" + std::to_string(bob["pid"].get<int>()) + "\"}",
         bob["used_memory"].get<double>());
  expect("count(gpuman_process_gpu_memory_bytes)", 1);  // the other GPUs are idle
  expect("sum(gpuman_gpu_healthy)", 8);
  expect("sum(gpuman_gpu_ecc_errors_total)", 0);

  // The queue: one running job holding 2 GPUs.
  auto submitted = Gpuman({"submit", "--output", dir_.Join("job.log"), "-n", "2", "--", "sleep", "300"});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.err;
  job_ = std::stoll(submitted.out);
  expect("gpuman_jobs{state=\"running\"}", 1);
  expect("gpuman_jobs{state=\"queued\"}", 0);
  expect("gpuman_gpus_held", 2);
  expect("gpuman_job_wait_seconds_count", 1);

  // The machine changes under the daemon (the stand-in NVML rereads a replaced file).
  json hot = scenario_json_;
  hot["gpus"][0]["temperature"] = 87;
  dir_.Write("h100-8.json", hot.dump(2));
  expect("gpuman_gpu_temperature_celsius{gpu=\"0\"}", 87);
  if (HasFailure()) ADD_FAILURE() << Logs();
}

TEST_F(MetricsE2E, ASecondDaemonOnTheSamePortFailsWithAClearError) {
  auto second = StartDaemon(dir_.Join("second.sock"), "state2", metrics_port_, "second.log");
  ASSERT_TRUE(WaitFor([&] { return second->Exited().has_value(); }, 60)) << "it should refuse to start";
  EXPECT_NE(second->Exited(), 0);
  std::string expected = "metrics address '127.0.0.1:" + std::to_string(metrics_port_) + "': address already in use";
  EXPECT_NE(second->Log().find(expected), std::string::npos) << second->Log();
  EXPECT_FALSE(daemon_.Exited()) << "the first daemon keeps running";
}

}  // namespace
}  // namespace gpuman::e2e
