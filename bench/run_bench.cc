// Benchmark: the overhead of `gpuman run -n 1 -- true` over running `true` directly, on the
// idle 8-GPU scenario: median wall time of each and the difference, and the same for CPU
// time (user+sys of the process and its children: the run and the job it waits for),
// which a busy machine disturbs less; and how many NVML calls (and nvmlInit calls) one such
// `run` makes in its own process, from the stand-in's call log.
//
// Measured four ways: without a daemon (the machine lease table) and through a private
// daemon on the same stand-in (its default settings: confined where it runs as root and the
// kernel allows), each with a stand-in that answers for free and with one whose calls cost
// what real ones do (docs/scenarios.md, "What a call costs": 25 us a call, 20 ms an
// nvmlInit; every process that loads it pays, the daemon's sampling too).
// Goals (issues 3, 13, 27): at most 5 ms more than `true`; through a daemon, 0 NVML calls
// in the client; without one, at most one nvmlInit.
//
// Then the release-to-start latency of `run --wait` (no daemon, free calls).
// Usage: run_bench [--runs N] [--call-us US --init-us US (only this cost)] [--no-daemon]
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "bench_util.h"

namespace {

using gpuman::bench::BenchDaemon;
using gpuman::bench::Median;
using gpuman::bench::RunOnceMs;

struct Cost {
  long call_us = 0, init_us = 0;
  std::string Name() const {
    if (call_us == 0 && init_us == 0) return "free calls";
    return std::to_string(call_us) + " us a call, " + std::to_string(init_us / 1000) + " ms an init";
  }
};

// NVML calls of one process from the call log's only line: total and nvmlInit*.
struct Calls {
  size_t processes = 0;  // lines: processes that loaded the stand-in
  long total = 0, inits = 0;
};
Calls CountCalls(const std::string& log) {
  Calls c;
  std::ifstream in(log);
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    ++c.processes;
    size_t at = line.find(" total=");
    if (at != std::string::npos) c.total += std::atol(line.c_str() + at + 7);
    for (size_t i = line.find("nvmlInit"); i != std::string::npos; i = line.find("nvmlInit", i + 1)) {
      size_t eq = line.find('=', i);
      if (eq != std::string::npos) c.inits += std::atol(line.c_str() + eq + 1);
    }
  }
  return c;
}

void SetCost(const Cost& cost) {
  setenv("GPUMAN_FAKE_NVML_CALL_US", std::to_string(cost.call_us).c_str(), 1);
  setenv("GPUMAN_FAKE_NVML_INIT_US", std::to_string(cost.init_us).c_str(), 1);
}

// One figure: `run` against `true`, interleaved, then one more `run` with the call log.
// `socket`: through that daemon; empty: without one.
void Measure(const std::string& what, const std::vector<std::string>& gpuman, int runs, const std::string& log) {
  const std::vector<std::string> plain = {"true"};
  RunOnceMs(gpuman);  // warms the page cache (and the table's recorded topology)
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
  std::filesystem::remove(log);
  setenv("GPUMAN_FAKE_NVML_CALL_LOG", log.c_str(), 1);
  RunOnceMs(gpuman);
  unsetenv("GPUMAN_FAKE_NVML_CALL_LOG");
  const Calls calls = CountCalls(log);
  const double gm = Median(g), pm = Median(p);
  std::printf("%s\n", what.c_str());
  std::printf("  gpuman run -n 1 -- true %8.3f ms, true %.3f ms (medians of %d)\n", gm, pm, runs);
  std::printf("  overhead                %8.3f ms  (goal <= 5 ms)  %s\n", gm - pm, gm - pm <= 5.0 ? "ok" : "OVER");
  std::printf("  cpu time (user+sys)     run %.3f ms, true %.3f ms, overhead %.3f ms\n", Median(gc), Median(pc),
              Median(gc) - Median(pc));
  std::printf("  NVML in the client      %ld calls, %ld nvmlInit (%zu process%s loaded the library)\n", calls.total,
              calls.inits, calls.processes, calls.processes == 1 ? "" : "es");
}

void WaitLatency(const std::string& dir, const std::string& scenario_path) {
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
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 51;
  bool with_daemon = true;
  std::optional<Cost> only;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--no-daemon") with_daemon = false;
    else if (flag == "--runs" && i + 1 < argc) runs = std::max(3, std::atoi(argv[++i]));
    else if (flag == "--call-us" && i + 1 < argc) (only ? *only : only.emplace()).call_us = std::atol(argv[++i]);
    else if (flag == "--init-us" && i + 1 < argc) (only ? *only : only.emplace()).init_us = std::atol(argv[++i]);
  }
  const std::vector<Cost> costs = only ? std::vector<Cost>{*only} : std::vector<Cost>{Cost{}, Cost{25, 20000}};
  char tmpl[] = "/tmp/gpuman-run-bench-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  chmod(dir.c_str(), 0755);
  std::string scenario_path = gpuman::bench::IdleScenario(GPUMAN_BENCH_SCENARIO_DIR, "h100-8", dir);
  setenv("GPUMAN_STATE_DIR", (dir + "/state").c_str(), 1);
  // The lease table on a tmpfs, as the machine's is (/run/gpuman): on a disk its WAL
  // checkpoints' fdatasyncs (about 6 ms each) would be most of the figure's noise.
  char lease_tmpl[] = "/dev/shm/gpuman-run-bench-XXXXXX";
  const char* lease_dir = mkdtemp(lease_tmpl);
  const std::string leases = lease_dir ? std::string(lease_dir) : dir + "/leases";
  setenv("GPUMAN_LEASE_DIR", leases.c_str(), 1);
  unsetenv("GPUMAN_SIMULATE");
  unsetenv("GPUMAN_SOCKET");
  unsetenv("CUDA_VISIBLE_DEVICES");
  unsetenv("GPUMAN_LEASE_ID");
  gpuman::bench::EvictFromPageCache(GPUMAN_BENCH_GPUMAN);  // read back as an installed one is (bench_util.h)

  const std::vector<std::string> run = {GPUMAN_BENCH_GPUMAN, "--simulate", scenario_path, "run", "-q", "-n", "1", "--", "true"};
  const std::vector<std::string> served = {GPUMAN_BENCH_GPUMAN, "run", "-q", "-n", "1", "--", "true"};
  for (const Cost& cost : costs) {
    SetCost(cost);
    Measure("no daemon, " + cost.Name(), run, runs, dir + "/calls.log");
    if (!with_daemon) continue;
    BenchDaemon daemon = gpuman::bench::StartDaemon(dir, scenario_path, "daemon", "");
    std::string said = gpuman::bench::DaemonLog(daemon);
    const size_t at = said.find("device confinement ");
    const std::string confinement = at == std::string::npos ? "?" : said.substr(at + 19, said.find_first_of(":\n", at) - at - 19);
    setenv("GPUMAN_SOCKET", daemon.socket.c_str(), 1);
    // The client is given no scenario: through a daemon it must not need NVML at all.
    Measure("through a daemon (confinement " + confinement + "), " + cost.Name(), served, runs, dir + "/calls.log");
    unsetenv("GPUMAN_SOCKET");
    gpuman::bench::StopDaemon(daemon);
    std::filesystem::remove_all(dir + "/daemon-state");
  }
  SetCost(Cost{});
  WaitLatency(dir, scenario_path);
  std::filesystem::remove_all(dir);
  if (lease_dir) std::filesystem::remove_all(leases);
  return 0;
}
