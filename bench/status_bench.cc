// Benchmark: median wall time of `gpuman --simulate SCENARIO status --json` against the
// floor program (bench/status_floor.cc) making the same NVML calls on the same stand-in,
// and their ratio, and how many NVML calls each makes (the stand-in's call log). Run without
// a daemon and with an empty lease directory, so that the machine's own state (a lease table
// in /run/gpuman, a daemon socket) does not change the figure. Goal (issue 13): gpuman
// within 1.2x of the floor.
// Usage: status_bench [--runs N] [--scenario NAME]
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
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
  char tmpl[] = "/tmp/gpuman-status-bench-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  setenv("GPUMAN_LEASE_DIR", (dir + "/leases").c_str(), 1);
  setenv("GPUMAN_STATE_DIR", (dir + "/state").c_str(), 1);
  unsetenv("GPUMAN_SOCKET");
  if (access("/run/gpuman/gpuman.sock", F_OK) == 0) {
    std::fprintf(stderr, "status_bench: a daemon socket exists at /run/gpuman/gpuman.sock; this measures without one\n");
  }

  std::vector<std::string> gpuman = {GPUMAN_BENCH_GPUMAN, "--simulate", scenario, "status", "--json"};
  std::vector<std::string> floor = {GPUMAN_BENCH_FLOOR, GPUMAN_BENCH_SIM_LIBRARY};
  // Warm the page cache, then interleave the two so drift hits both alike.
  RunOnceMs(gpuman);
  RunOnceMs(floor);
  std::vector<double> g, f, gc, fc;
  for (int i = 0; i < runs; ++i) {
    auto gt = gpuman::bench::RunOnceTimes(gpuman);
    auto ft = gpuman::bench::RunOnceTimes(floor);
    g.push_back(gt.wall_ms);
    f.push_back(ft.wall_ms);
    gc.push_back(gt.cpu_ms);
    fc.push_back(ft.cpu_ms);
  }
  // One more run of each with the stand-in's call log (written when the library unloads).
  const std::string log = dir + "/calls.log";
  setenv("GPUMAN_FAKE_NVML_CALL_LOG", log.c_str(), 1);
  RunOnceMs(gpuman);
  RunOnceMs(floor);
  unsetenv("GPUMAN_FAKE_NVML_CALL_LOG");
  std::vector<long> calls = gpuman::bench::CallLogTotals(log);
  double gm = Median(g), fm = Median(f);
  std::printf("scenario            %s (%d runs each, median wall time per process)\n", scenario.c_str(), runs);
  std::printf("gpuman status --json  %8.3f ms\n", gm);
  std::printf("floor (same calls)    %8.3f ms\n", fm);
  std::printf("ratio                 %8.2fx  (goal <= 1.20x)\n", gm / fm);
  const double gcm = Median(gc), fcm = Median(fc);
  std::printf("cpu time (user+sys)   gpuman %.3f ms, floor %.3f ms, ratio %.2fx\n", gcm, fcm, fcm > 0 ? gcm / fcm : 0.0);
  if (calls.size() == 2) {
    std::printf("NVML calls            gpuman %ld, floor %ld\n", calls[0], calls[1]);
  }
  std::filesystem::remove_all(dir);
  return 0;
}
