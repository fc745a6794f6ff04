// Benchmark: the overhead of `gpuman run -n 1 -- true` over running `true` directly, on the
// idle 8-GPU scenario with a fresh state directory: median wall time of each and the
// difference, and the same for CPU time (user+sys of the process and its children: the run
// and the job it waits for), which a busy machine disturbs less. Goal (issues 3, 13): at
// most 5 ms.
// Usage: run_bench [--runs N]
#include <fcntl.h>
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
#include <vector>

#include "bench_util.h"

using gpuman::bench::IdleScenario;
using gpuman::bench::Median;
using gpuman::bench::RunOnceMs;

int main(int argc, char** argv) {
  int runs = 51;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::string(argv[i]) == "--runs") runs = std::max(3, std::atoi(argv[i + 1]));
  }
  char tmpl[] = "/tmp/gpuman-run-bench-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  std::string scenario_path = IdleScenario(GPUMAN_BENCH_SCENARIO_DIR, "h100-8", dir);
  setenv("GPUMAN_STATE_DIR", (dir + "/state").c_str(), 1);
  unsetenv("GPUMAN_SIMULATE");
  unsetenv("CUDA_VISIBLE_DEVICES");

  std::vector<std::string> gpuman = {GPUMAN_BENCH_GPUMAN, "--simulate", scenario_path, "run", "-q", "-n", "1", "--", "true"};
  std::vector<std::string> plain = {"true"};
  gpuman::bench::EvictFromPageCache(GPUMAN_BENCH_GPUMAN);  // read back as an installed one is (bench_util.h)
  RunOnceMs(gpuman);  // creates the state db; warms the page cache
  RunOnceMs(plain);
  std::vector<double> g, p, gc, pc;
  for (int i = 0; i < runs; ++i) {
    const auto gt = gpuman::bench::RunOnceTimes(gpuman);
    const auto pt = gpuman::bench::RunOnceTimes(plain);
    g.push_back(gt.wall_ms);
    p.push_back(pt.wall_ms);
    gc.push_back(gt.cpu_ms);
    pc.push_back(pt.cpu_ms);
  }
  double gm = Median(g), pm = Median(p);
  std::printf("gpuman run -n 1 -- true   %8.3f ms (median of %d)\n", gm, runs);
  std::printf("true                      %8.3f ms\n", pm);
  std::printf("overhead                  %8.3f ms  (goal <= 5 ms)\n", gm - pm);
  std::printf("cpu time (user+sys)       gpuman run %.3f ms, true %.3f ms, overhead %.3f ms\n", Median(gc), Median(pc),
              Median(gc) - Median(pc));

  // Release-to-start latency of `run --wait`: a holder takes all 8 GPUs until a file
  // appears; a waiter needs one. Time from creating the file to the waiter's job start.
  std::vector<double> latencies;
  for (int round = 0; round < 5; ++round) {
    std::string gate = dir + "/gate" + std::to_string(round), started = dir + "/started" + std::to_string(round);
    pid_t holder = fork();
    if (holder == 0) {
      execl(GPUMAN_BENCH_GPUMAN, GPUMAN_BENCH_GPUMAN, "--simulate", scenario_path.c_str(), "run", "-q", "-n", "8", "--",
            "sh", "-c", "while [ ! -e \"$1\" ]; do sleep 0.01; done", "sh", gate.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    usleep(300 * 1000);
    pid_t waiter = fork();
    if (waiter == 0) {
      int devnull = open("/dev/null", O_WRONLY);
      dup2(devnull, 2);
      execl(GPUMAN_BENCH_GPUMAN, GPUMAN_BENCH_GPUMAN, "--simulate", scenario_path.c_str(), "run", "-q", "--wait", "--",
            "sh", "-c", "date +%s%N > \"$1\"", "sh", started.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    usleep(1500 * 1000);  // the waiter is asleep by now
    timespec now{};
    clock_gettime(CLOCK_REALTIME, &now);
    double released_ns = now.tv_sec * 1e9 + now.tv_nsec;
    std::ofstream(gate) << "go";
    int status = 0;
    waitpid(holder, &status, 0);
    waitpid(waiter, &status, 0);
    std::ifstream stamp(started);
    double started_ns = 0;
    stamp >> started_ns;
    if (started_ns > 0) latencies.push_back((started_ns - released_ns) / 1e6);
  }
  if (!latencies.empty()) {
    std::printf("release -> waiting job start %8.1f ms (median of %zu; goal <= 1000 ms)\n", Median(latencies),
                latencies.size());
  }
  std::filesystem::remove_all(dir);
  return 0;
}
