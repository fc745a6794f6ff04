// Benchmark: median wall time of `gpuman --simulate SCENARIO status --json` against the
// floor program (bench/status_floor.cc) making the same NVML calls on the same stand-in,
// and their ratio, and how many NVML calls each makes (the stand-in's call log). Run without
// a daemon and with an empty lease directory, so that the machine's own state (a lease table
// in /run/gpuman, a daemon socket) does not change the figure. Goal (issue 13): gpuman
// within 1.2x of the floor.
// Then the same command served by a private daemon on the same stand-in (`gpuman status
// --json` with GPUMAN_SOCKET: the daemon's snapshot op, no NVML in the client), against the
// floor again. Goal (issue 13): below the floor.
// Usage: status_bench [--runs N] [--scenario NAME] [--no-daemon]
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>

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

namespace {

bool Answers(const std::string& socket_path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, socket_path.c_str(), sizeof addr.sun_path - 1);
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  close(fd);
  return ok;
}

// `status --json` served by a private daemon on the same scenario, against the floor
// (interleaved again, so both see the same load). Returns false when the daemon did not
// come up or did not serve the snapshot (a figure for the NVML path would mislead).
bool DaemonFigures(const std::string& scenario_path, const std::vector<std::string>& floor, int runs) {
  char tmpl[] = "/tmp/gpuman-status-bench-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string socket_path = dir + "/gpuman.sock";
  std::ofstream(dir + "/kmsg") << "";
  pid_t daemon = fork();
  if (daemon == 0) {
    unsetenv("GPUMAN_CONFIG");
    setenv("XDG_CONFIG_HOME", dir.c_str(), 1);
    setenv("GPUMAN_KERNEL_LOG", (dir + "/kmsg").c_str(), 1);
    int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    execl(GPUMAN_BENCH_GPUMAN, GPUMAN_BENCH_GPUMAN, "--simulate", scenario_path.c_str(), "daemon", "--socket",
          socket_path.c_str(), "--state-dir", (dir + "/state").c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  for (int i = 0; i < 600 && !Answers(socket_path); ++i) usleep(50000);
  bool ok = Answers(socket_path);
  if (ok) {
    setenv("GPUMAN_SOCKET", socket_path.c_str(), 1);
    setenv("GPUMAN_STATE_DIR", (dir + "/client").c_str(), 1);
    unsetenv("GPUMAN_FAKE_NVML_SCENARIO");  // the client must not need NVML at all
    // Served by the daemon, not read from NVML: the source says so.
    std::string check = std::string(GPUMAN_BENCH_GPUMAN) + " status --json";
    std::string out;
    if (FILE* p = popen(check.c_str(), "r")) {
      char buf[4096];
      size_t n;
      while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
      pclose(p);
    }
    ok = out.find("\"source\": \"daemon\"") != std::string::npos;
    if (!ok) std::fprintf(stderr, "status_bench: the daemon did not serve the snapshot\n");
  }
  if (ok) {
    std::vector<std::string> served = {GPUMAN_BENCH_GPUMAN, "status", "--json"};
    std::string scenario_env = scenario_path;
    RunOnceMs(served);
    std::vector<double> d, f, dc, fc;
    for (int i = 0; i < runs; ++i) {
      auto dt = gpuman::bench::RunOnceTimes(served);
      setenv("GPUMAN_FAKE_NVML_SCENARIO", scenario_env.c_str(), 1);  // the floor reads the stand-in
      auto ft = gpuman::bench::RunOnceTimes(floor);
      unsetenv("GPUMAN_FAKE_NVML_SCENARIO");
      d.push_back(dt.wall_ms);
      f.push_back(ft.wall_ms);
      dc.push_back(dt.cpu_ms);
      fc.push_back(ft.cpu_ms);
    }
    const double dm = Median(d), fm = Median(f);
    std::printf("with a daemon serving it (snapshot op, no NVML in the client):\n");
    std::printf("gpuman status --json  %8.3f ms\n", dm);
    std::printf("floor (same calls)    %8.3f ms\n", fm);
    std::printf("ratio                 %8.2fx  (goal < 1.00x)  %s\n", dm / fm, dm < fm ? "ok" : "OVER");
    std::printf("cpu time (user+sys)   gpuman %.3f ms, floor %.3f ms (the daemon's own sampling not counted)\n",
                Median(dc), Median(fc));
    // The client's own NVML calls (the stand-in's call log has a line per process that
    // loaded it): none while a daemon serves.
    const std::string log = dir + "/client-calls.log";
    setenv("GPUMAN_FAKE_NVML_CALL_LOG", log.c_str(), 1);
    RunOnceMs(served);
    unsetenv("GPUMAN_FAKE_NVML_CALL_LOG");
    const std::vector<long> calls = gpuman::bench::CallLogTotals(log);
    long total = 0;
    for (long c : calls) total += c;
    std::printf("NVML calls            gpuman %ld (%zu processes loaded the library; goal 0)\n", total, calls.size());
    setenv("GPUMAN_FAKE_NVML_SCENARIO", scenario_env.c_str(), 1);
    unsetenv("GPUMAN_SOCKET");
    unsetenv("GPUMAN_STATE_DIR");
  }
  kill(daemon, SIGTERM);
  waitpid(daemon, nullptr, 0);
  std::string cleanup = "rm -rf '" + dir + "'";
  (void)!std::system(cleanup.c_str());
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 51;
  std::string scenario = "h100-8";
  bool with_daemon = true;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "--no-daemon") with_daemon = false;
    else if (flag == "--runs" && i + 1 < argc) runs = std::max(3, std::atoi(argv[++i]));
    else if (flag == "--scenario" && i + 1 < argc) scenario = argv[++i];
    // What each NVML call of the stand-in costs, for every process (gpuman, the floor and
    // the daemon alike): docs/scenarios.md, "What a call costs" (real: 25 and 20000).
    else if (flag == "--call-us" && i + 1 < argc) setenv("GPUMAN_FAKE_NVML_CALL_US", argv[++i], 1);
    else if (flag == "--init-us" && i + 1 < argc) setenv("GPUMAN_FAKE_NVML_INIT_US", argv[++i], 1);
  }
  const char* call_us = std::getenv("GPUMAN_FAKE_NVML_CALL_US");
  const char* init_us = std::getenv("GPUMAN_FAKE_NVML_INIT_US");
  std::printf("stand-in            %s us a call, %s us more an nvmlInit\n", call_us ? call_us : "0", init_us ? init_us : "0");
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
  // The same floor binding the library's symbols on first call, as gpuman does (RTLD_LAZY):
  // a second reference, so that the ratio is not read as gpuman's own work alone.
  std::vector<std::string> lazy_floor = {GPUMAN_BENCH_FLOOR, GPUMAN_BENCH_SIM_LIBRARY, "lazy"};
  // Read every program back from the disk the same way (bench_util.h), warm the page
  // cache, then interleave them so drift hits all alike.
  for (const char* file : {GPUMAN_BENCH_GPUMAN, GPUMAN_BENCH_FLOOR, GPUMAN_BENCH_SIM_LIBRARY}) {
    gpuman::bench::EvictFromPageCache(file);
  }
  RunOnceMs(gpuman);
  RunOnceMs(floor);
  RunOnceMs(lazy_floor);
  std::vector<double> g, f, gc, fc, lf, lfc;
  for (int i = 0; i < runs; ++i) {
    auto gt = gpuman::bench::RunOnceTimes(gpuman);
    auto ft = gpuman::bench::RunOnceTimes(floor);
    auto lt = gpuman::bench::RunOnceTimes(lazy_floor);
    g.push_back(gt.wall_ms);
    f.push_back(ft.wall_ms);
    lf.push_back(lt.wall_ms);
    gc.push_back(gt.cpu_ms);
    fc.push_back(ft.cpu_ms);
    lfc.push_back(lt.cpu_ms);
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
  const double lfm = Median(lf), lfcm = Median(lfc);
  std::printf("lazy-binding floor    %8.3f ms wall, %.3f ms cpu: gpuman %.2fx wall, %.2fx cpu (RTLD_LAZY, as gpuman)\n", lfm,
              lfcm, lfm > 0 ? gm / lfm : 0.0, lfcm > 0 ? gcm / lfcm : 0.0);
  if (calls.size() == 2) {
    std::printf("NVML calls            gpuman %ld, floor %ld\n", calls[0], calls[1]);
  }
  if (with_daemon && !DaemonFigures(scenario_path, floor, runs)) return 1;
  std::filesystem::remove_all(dir);
  return 0;
}
