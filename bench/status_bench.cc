// Benchmark: median wall time of `gpuman --simulate SCENARIO status --json` against the
// floor program (bench/status_floor.cc) making the same NVML calls on the same stand-in,
// and their ratio. Goal (issue 2): gpuman within 1.5x of the floor.
// Usage: status_bench [--runs N] [--scenario NAME]
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_util.h"

using gpuman::bench::Median;
using gpuman::bench::RunOnceMs;

int main(int argc, char** argv) {
  int runs = 51;
  std::string scenario = "h100-8";
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--runs") runs = std::max(3, std::atoi(argv[i + 1]));
    else if (flag == "--scenario") scenario = argv[i + 1];
  }
  std::string scenario_path = std::string(GPUMAN_BENCH_SCENARIO_DIR) + "/" + scenario + ".json";
  setenv("GPUMAN_FAKE_NVML_SCENARIO", scenario_path.c_str(), 1);
  unsetenv("GPUMAN_SIMULATE");

  std::vector<std::string> gpuman = {GPUMAN_BENCH_GPUMAN, "--simulate", scenario, "status", "--json"};
  std::vector<std::string> floor = {GPUMAN_BENCH_FLOOR, GPUMAN_BENCH_SIM_LIBRARY};
  // Warm the page cache, then interleave the two so drift hits both alike.
  RunOnceMs(gpuman);
  RunOnceMs(floor);
  std::vector<double> g, f;
  for (int i = 0; i < runs; ++i) {
    g.push_back(RunOnceMs(gpuman));
    f.push_back(RunOnceMs(floor));
  }
  double gm = Median(g), fm = Median(f);
  std::printf("scenario            %s (%d runs each, median wall time per process)\n", scenario.c_str(), runs);
  std::printf("gpuman status --json  %8.3f ms\n", gm);
  std::printf("floor (same calls)    %8.3f ms\n", fm);
  std::printf("ratio                 %8.2fx  (goal <= 1.50x)\n", gm / fm);
  return 0;
}
