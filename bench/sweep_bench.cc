// A hyperparameter sweep against a real daemon (issue 26): thousands of 1-GPU jobs queued
// behind a running 8-GPU job on the idle 8-GPU scenario. Prints what the users of such a
// queue see: the submit round trip (median, p99) as the queue grows, the time of all the
// submits, the idle daemon's CPU with the queue full, and the wall time of `gpuman queue`
// and of `gpuman submit` (a whole CLI process) at that depth, of `submit --array` of as
// many tasks (twice) and of `cancel --all` of everything.
// Goals (issue 26, at 10,000 queued): idle daemon <= 0.5 % of a core; submit round trip
// <= 10 ms median and <= 50 ms p99; 10,000 submits <= 60 s; `queue` <= 0.5 s.
// Usage: sweep_bench [--jobs N] [--idle-seconds S]
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "cli/daemon_client.h"

using gpuman::cli::DaemonClient;
namespace protocol = gpuman::protocol;
namespace bench = gpuman::bench;

namespace {

protocol::SubmitArgs Job(std::vector<std::string> argv, const std::string& dir, int gpus, int index) {
  protocol::SubmitArgs s;
  s.argv = std::move(argv);
  s.cwd = dir;
  s.output = dir + "/sweep-%j.log";
  // A real shell's environment is about this size: the daemon stores it with every job.
  s.env = {{"PATH", "/usr/bin:/bin"}, {"HOME", dir}, {"LANG", "C.UTF-8"}, {"SWEEP_INDEX", std::to_string(index)}};
  for (int i = 0; i < 30; ++i) s.env["SWEEP_VAR_" + std::to_string(i)] = std::string(40, 'x');
  s.request.count = gpus;
  return s;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t at = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(at, v.size() - 1)];
}

// The daemon's CPU time so far (user + system), in seconds.
double CpuSeconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(in, line);
  size_t close = line.rfind(')');
  if (close == std::string::npos) return 0;
  std::vector<std::string> fields;
  std::string field;
  for (char c : line.substr(close + 2)) {
    if (c == ' ') {
      fields.push_back(field);
      field.clear();
    } else {
      field += c;
    }
  }
  // After "pid (comm) ": state is field 0, utime 11, stime 12.
  if (fields.size() < 13) return 0;
  return (std::stod(fields[11]) + std::stod(fields[12])) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

std::unique_ptr<DaemonClient> Connect(const std::string& socket) {
  for (int i = 0; i < 250; ++i) {
    if (auto c = DaemonClient::Connect(socket)) return std::move(*c);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // figures as they come (a profiler waits for them)
  int jobs = 10000;
  int idle_seconds = 10;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--jobs") jobs = std::max(1, std::atoi(argv[i + 1]));
    if (std::string(argv[i]) == "--idle-seconds") idle_seconds = std::max(1, std::atoi(argv[i + 1]));
  }
  char tmpl[] = "/dev/shm/gpuman-sweep-bench-XXXXXX";
  const char* made = mkdtemp(tmpl);
  if (!made) {
    std::perror("sweep_bench: mkdtemp");
    return 1;
  }
  const std::string dir = made;
  const std::string scenario = bench::IdleScenario(GPUMAN_BENCH_SCENARIO_DIR, "h100-8", dir);
  unsetenv("GPUMAN_SIMULATE");
  bench::BenchDaemon daemon = bench::StartDaemon(dir, scenario, "sweep", "");
  auto client = Connect(daemon.socket);
  if (!client) {
    std::fprintf(stderr, "sweep_bench: the daemon did not start:\n%s", bench::DaemonLog(daemon).c_str());
    return 1;
  }
  // A blocker holds all 8 GPUs, so the sweep stays queued.
  auto blocker = client->Call<protocol::SubmitResult>(Job({"sleep", "3600"}, dir, 8, -1));
  if (!blocker) {
    std::fprintf(stderr, "sweep_bench: submit: %s\n", blocker.error().message.c_str());
    return 1;
  }
  for (int i = 0; i < 250; ++i) {
    auto r = client->Call<protocol::ShowResult>(protocol::ShowArgs{blocker->id});
    if (r && r->job.state == gpuman::model::JobState::kRunning) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  client.reset();

  std::printf("sweep_bench: daemon pid %d\n", static_cast<int>(daemon.pid));
  std::fflush(stdout);
  std::printf("sweep_bench: %d 1-GPU jobs queued behind a running 8-GPU job, h100-8 (idle), one new\n"
              "connection per submit as the CLI makes; the daemon's state on /dev/shm\n\n", jobs);
  // The daemon with nothing queued, for comparison: sampling the stand-in NVML (and its
  // event wait, which polls) costs something whatever the queue holds.
  auto idle_percent = [&] {
    const double cpu0 = CpuSeconds(daemon.pid);
    const auto wall0 = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(std::chrono::seconds(idle_seconds));
    const double cpu = CpuSeconds(daemon.pid) - cpu0;
    return 100.0 * cpu / std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  };
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const double idle_empty = idle_percent();
  std::printf("idle daemon, empty queue  %5.2f %% of a core over %d s\n\n", idle_empty, idle_seconds);
  std::printf("%-16s %10s %10s %10s\n", "queued before", "median ms", "p99 ms", "max ms");
  std::vector<double> all, window;
  const int step = std::max(1, jobs / 5);
  const double cpu_before = CpuSeconds(daemon.pid);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < jobs; ++i) {
    const auto start = std::chrono::steady_clock::now();
    auto c = DaemonClient::Connect(daemon.socket);
    if (!c) {
      std::fprintf(stderr, "sweep_bench: connect: %s\n", c.error().message.c_str());
      return 1;
    }
    auto r = (*c)->Call<protocol::SubmitResult>(Job({"true"}, dir, 1, i));
    if (!r) {
      std::fprintf(stderr, "sweep_bench: submit %d: %s\n", i, r.error().message.c_str());
      return 1;
    }
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    all.push_back(ms);
    window.push_back(ms);
    if ((i + 1) % step == 0 || i + 1 == jobs) {
      std::printf("%7d-%-8d %10.2f %10.2f %10.2f\n", i + 1 - static_cast<int>(window.size()), i, Percentile(window, 0.5),
                  Percentile(window, 0.99), Percentile(window, 1.0));
      std::fflush(stdout);
      window.clear();
    }
  }
  const double submit_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double submit_cpu = CpuSeconds(daemon.pid) - cpu_before;
  std::printf("\nall %d submits      %8.1f s   (median %.2f ms, p99 %.2f ms; goal 60 s, 10 ms, 50 ms at 10,000)\n",
              jobs, submit_s, Percentile(all, 0.5), Percentile(all, 0.99));
  std::printf("daemon CPU during them %6.1f s   (%.2f ms a submit)\n", submit_cpu, submit_cpu * 1000 / jobs);

  // Let the daemon settle (a pass after the last submit), then watch it idle.
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const double idle_full = idle_percent();
  std::printf("idle daemon            %6.2f %% of a core over %d s, %d queued (goal 0.5 %%; %+.2f over the empty queue)\n",
              idle_full, idle_seconds, jobs, idle_full - idle_empty);

  // What a user types, as whole processes.
  setenv("GPUMAN_SOCKET", daemon.socket.c_str(), 1);
  std::vector<double> queue_ms, cli_submit_ms;
  for (int i = 0; i < 5; ++i) queue_ms.push_back(bench::RunOnceMs({GPUMAN_BENCH_GPUMAN, "queue"}));
  for (int i = 0; i < 20; ++i) {
    cli_submit_ms.push_back(bench::RunOnceMs({GPUMAN_BENCH_GPUMAN, "submit", "--output", dir + "/cli.log", "--", "true"}));
  }
  std::printf("gpuman queue           %8.1f ms median of 5 (all %d rows; goal 500 ms)\n", bench::Median(queue_ms), jobs + 1);
  std::printf("gpuman submit -- true  %8.1f ms median of 20 (a whole CLI process)\n", bench::Median(cli_submit_ms));
  // A sweep as one array, twice (the first large request of a daemon used to pay for the
  // heap shrinking and growing again: docs/design.md), then the whole queue cancelled the
  // way users do it, every job named by the filter.
  const std::string tasks = "0-" + std::to_string(jobs - 1);
  const std::vector<std::string> array = {GPUMAN_BENCH_GPUMAN, "submit", "--array", tasks, "--output", dir + "/a-%j.log", "--", "true"};
  const double first_array = bench::RunOnceMs(array);
  const double second_array = bench::RunOnceMs(array);
  std::printf("gpuman submit --array  %8.1f ms the first, %.1f ms the second (%d tasks each)\n", first_array, second_array, jobs);
  const double cancel_all = bench::RunOnceMs({GPUMAN_BENCH_GPUMAN, "cancel", "--all"});
  std::printf("gpuman cancel --all    %8.1f ms (%d queued jobs and the running one)\n", cancel_all, 3 * jobs + 20);

  // The blocker's supervisor outlives the daemon: cancel it first.
  if (auto c = DaemonClient::Connect(daemon.socket)) {
    (void)(*c)->Call<protocol::IdsResult>(protocol::CancelArgs{{blocker->id}});
    for (int i = 0; i < 250; ++i) {
      auto r = (*c)->Call<protocol::ShowResult>(protocol::ShowArgs{blocker->id});
      if (!r || gpuman::model::IsFinal(r->job.state)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  bench::StopDaemon(daemon);
  std::filesystem::remove_all(dir);
  return 0;
}
