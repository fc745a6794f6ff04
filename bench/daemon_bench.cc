// Benchmark of the queue daemon on the idle 8-GPU scenario: submit throughput over one
// connection, and release-to-start latency (a running 8-GPU job is cancelled; how long until
// the next queued 8-GPU job's command runs). Goal (issue 4): start within 100 ms.
// Usage: daemon_bench [--submits N]
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "cli/daemon_client.h"

using gpuman::cli::DaemonClient;
namespace protocol = gpuman::protocol;

namespace {

double NowNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

protocol::SubmitArgs Job(std::vector<std::string> argv, const std::string& dir) {
  protocol::SubmitArgs s;
  s.argv = std::move(argv);
  s.cwd = dir;
  s.output = dir + "/bench.log";
  s.env = {{"PATH", "/usr/bin:/bin"}};
  s.request.count = 8;
  return s;
}

std::optional<gpuman::model::JobState> StateOf(DaemonClient& c, int64_t id) {
  auto r = c.Call<protocol::ShowResult>(protocol::ShowArgs{id});
  if (!r) return std::nullopt;
  return r->job.state;
}

}  // namespace

int main(int argc, char** argv) {
  int submits = 500;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--submits") submits = std::max(1, std::atoi(argv[i + 1]));
  }
  char tmpl[] = "/tmp/gpuman-daemon-bench-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  std::string scenario_path = gpuman::bench::IdleScenario(GPUMAN_BENCH_SCENARIO_DIR, "h100-8", dir);
  std::string socket = dir + "/gpuman.sock";

  pid_t daemon = fork();
  if (daemon == 0) {
    unsetenv("GPUMAN_SIMULATE");
    execl(GPUMAN_BENCH_GPUMAN, GPUMAN_BENCH_GPUMAN, "--simulate", scenario_path.c_str(), "daemon", "--socket",
          socket.c_str(), "--state-dir", (dir + "/state").c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  std::unique_ptr<DaemonClient> client;
  for (int i = 0; i < 250 && !client; ++i) {
    if (auto c = DaemonClient::Connect(socket)) client = std::move(*c);
    else std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!client) {
    std::fprintf(stderr, "daemon_bench: the daemon did not start\n");
    return 1;
  }
  // A blocker holds all 8 GPUs, so the submitted jobs stay queued.
  auto blocker = client->Call<protocol::SubmitResult>(Job({"sleep", "300"}, dir));
  for (int i = 0; i < 200 && StateOf(*client, blocker->id) != gpuman::model::JobState::kRunning; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < submits; ++i) {
    auto r = client->Call<protocol::SubmitResult>(Job({"true"}, dir));
    if (!r) {
      std::fprintf(stderr, "daemon_bench: submit: %s\n", r.error().message.c_str());
      return 1;
    }
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("submit throughput        %8.0f jobs/s (%d submits over one connection, %d queued)\n",
              submits / seconds, submits, submits);
  std::vector<gpuman::model::JobRef> ids;
  if (auto q = client->Call<protocol::QueueResult>(protocol::QueueArgs{false})) {
    for (const auto& j : q->jobs) {
      if (j.id != blocker->id) ids.push_back(j.id);
    }
  }
  (void)client->Call<protocol::IdsResult>(protocol::CancelArgs{ids});

  // Release-to-start: a job that stamps its start time, queued behind a running blocker.
  std::vector<double> latencies;
  int64_t current = blocker->id;
  for (int round = 0; round < 5; ++round) {
    std::string stamp = dir + "/stamp" + std::to_string(round);
    auto next = client->Call<protocol::SubmitResult>(Job({"sh", "-c", "date +%s%N > " + stamp + "; sleep 300"}, dir));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    // The supervisor ends the blocker; its lease goes when it exits.
    double cancelled_at = NowNs();
    (void)client->Call<protocol::IdsResult>(protocol::CancelArgs{{current}});
    double started_ns = 0;
    for (int i = 0; i < 500 && started_ns == 0; ++i) {
      std::ifstream s(stamp);
      s >> started_ns;
      if (started_ns == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (started_ns > 0) latencies.push_back((started_ns - cancelled_at) / 1e6);
    current = next->id;
  }
  (void)client->Call<protocol::IdsResult>(protocol::CancelArgs{{current}});
  std::sort(latencies.begin(), latencies.end());
  if (!latencies.empty()) {
    std::printf("cancel -> next job runs  %8.1f ms median of %zu (includes SIGTERM of the old job, its exit,\n"
                "                                  the lease release, the pass, the supervisor exec; goal 100 ms)\n",
                latencies[latencies.size() / 2], latencies.size());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  kill(daemon, SIGTERM);
  int status = 0;
  waitpid(daemon, &status, 0);
  std::filesystem::remove_all(dir);
  return 0;
}
