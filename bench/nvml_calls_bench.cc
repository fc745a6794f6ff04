// nvml_calls_bench: how many NVML calls gpuman makes, counted by the stand-in (issue 13).
//
//  1. In this process: the NvmlDeviceSource sampling the 8-GPU scenario once per simulated
//     second with top's fields and with the daemon collector's (health and settings a minute
//     old), and one-shot `status` (text) and `status --json` snapshots: calls of the first
//     sample and calls per second after it. Goal: <= 100 calls/s for top and the collector.
//  2. Whole processes, from the stand-in's call log: `gpuman top` in a tmux pane and
//     `gpuman daemon`, each for --seconds: calls per second (start-up included) and top's
//     CPU share of one core (utime + stime over wall time).
//
//   build/bench/nvml_calls_bench [--seconds N] [--samples N]
#include <dlfcn.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "bench_util.h"
#include "nvml/nvml_device_source.h"

namespace {

class StepClock final : public gpuman::Clock {
 public:
  int64_t NowUnixMs() const override { return now_ms; }
  int64_t now_ms = 1764400000000;
};

unsigned long TotalCalls() {
  void* h = dlopen(GPUMAN_BENCH_SIM_LIBRARY, RTLD_NOW | RTLD_NOLOAD);
  if (!h) return 0;
  auto fn = reinterpret_cast<unsigned long (*)()>(dlsym(h, "fake_nvml_total_call_count"));
  unsigned long n = fn ? fn() : 0;
  dlclose(h);
  return n;
}

void InProcess(gpuman::nvml::NvmlLibrary& lib, const char* what, const gpuman::devices::SnapshotOptions& options,
               int samples) {
  StepClock clock;
  gpuman::nvml::NvmlDeviceSource source(lib, clock);
  unsigned long t0 = TotalCalls();
  (void)source.Snapshot(options);
  unsigned long t1 = TotalCalls();
  for (int i = 0; i < samples; ++i) {
    clock.now_ms += 1000;
    (void)source.Snapshot(options);
  }
  unsigned long t2 = TotalCalls();
  std::printf("  %-26s first %4lu, then %6.1f calls/s (%d samples at 1 Hz)%s\n", what, t1 - t0,
              static_cast<double>(t2 - t1) / samples, samples,
              options.slow_max_age.count() > 0 ? ((t2 - t1) <= 100.0 * samples ? "  ok" : "  OVER") : "");
}

// CPU time of every thread of `pid` in seconds, from schedstat (nanoseconds; utime and
// stime count in 10 ms ticks, too coarse for a process that works a millisecond a second).
double CpuSeconds(pid_t pid) {
  double total = 0;
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    std::ifstream in(task.path() / "schedstat");
    long long ns = 0;
    if (in >> ns) total += static_cast<double>(ns) / 1e9;
  }
  return total;
}

int Sh(const std::string& cmd) { return std::system(cmd.c_str()); }

std::string Read(const std::string& cmd) {
  std::string out;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[256];
    while (fgets(buf, sizeof buf, p)) out += buf;
    pclose(p);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int seconds = 20, samples = 300;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--seconds") seconds = std::max(2, std::atoi(argv[i + 1]));
    else if (a == "--samples") samples = std::max(1, std::atoi(argv[i + 1]));
  }
  const std::string scenario = std::string(GPUMAN_BENCH_SCENARIO_DIR) + "/h100-8.json";
  setenv("GPUMAN_FAKE_NVML_SCENARIO", scenario.c_str(), 1);
  unsetenv("GPUMAN_FAKE_NVML_CALL_LOG");

  std::printf("nvml_calls_bench: h100-8 scenario (8 GPUs, 6 with processes), stand-in NVML\n");
  {
    auto lib = gpuman::nvml::NvmlLibrary::Load(GPUMAN_BENCH_SIM_LIBRARY);
    if (!lib) {
      std::fprintf(stderr, "nvml_calls_bench: %s\n", lib.error().message.c_str());
      return 1;
    }
    using namespace gpuman::devices;
    std::printf("in process (NvmlDeviceSource):\n");
    InProcess(**lib, "top (kTopFields)", MonitorOptions(kTopFields), samples);
    InProcess(**lib, "collector (kCollectorFields)", MonitorOptions(kCollectorFields), samples);
    InProcess(**lib, "status (text, every sample)", FieldOptions(kStatusTextFields), samples);
    InProcess(**lib, "status --json (every sample)", FieldOptions(kStatusJsonFields), samples);
  }

  char tmpl[] = "/tmp/gpuman-calls-bench-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const std::string log = dir + "/calls.log";
  setenv("GPUMAN_FAKE_NVML_CALL_LOG", log.c_str(), 1);
  setenv("GPUMAN_LEASE_DIR", (dir + "/leases").c_str(), 1);
  setenv("GPUMAN_STATE_DIR", (dir + "/state").c_str(), 1);
  unsetenv("GPUMAN_SIMULATE");
  unsetenv("GPUMAN_SOCKET");
  std::printf("whole processes (%d s each, start-up included):\n", seconds);

  // top in a detached tmux session, 120x50, quit with 'q' so the stand-in writes its log.
  if (Sh("command -v tmux >/dev/null") == 0) {
    const std::string session = "gpuman-calls-bench-" + std::to_string(getpid());
    Sh("tmux -L " + session + " new-session -d -s " + session + " -x 120 -y 50 \"env GPUMAN_FAKE_NVML_CALL_LOG=" + log +
       " GPUMAN_LEASE_DIR=" + dir + "/leases GPUMAN_STATE_DIR=" + dir + "/state " + GPUMAN_BENCH_GPUMAN +
       " --simulate h100-8 top --interval 1; sleep 2\"");
    pid_t pid = 0;
    for (int i = 0; i < 50 && pid <= 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      pid = static_cast<pid_t>(
          std::atol(Read("pgrep -n -f -- '^" + std::string(GPUMAN_BENCH_GPUMAN) + " --simulate h100-8 top'").c_str()));
    }
    const double cpu0 = pid > 0 ? CpuSeconds(pid) : 0;
    const auto t0 = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(std::chrono::seconds(seconds));
    const double cpu = pid > 0 ? CpuSeconds(pid) - cpu0 : -1;
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    Sh("tmux -L " + session + " send-keys -t " + session + " q");
    for (int i = 0; i < 50 && pid > 0 && kill(pid, 0) == 0; ++i) usleep(100000);
    Sh("tmux -L " + session + " kill-server 2>/dev/null");
    auto totals = gpuman::bench::CallLogTotals(log);
    if (totals.empty() || pid <= 0) {
      std::printf("  top: did not run (no call log)\n");
    } else {
      std::printf("  gpuman top --interval 1    %6.1f calls/s   cpu %.2f %% of one core\n",
                  totals.back() / (wall + 0.5), 100.0 * cpu / wall);
    }
  } else {
    std::printf("  top: skipped (no tmux)\n");
  }

  // The daemon, idle (no jobs): its collector samples at 1 Hz.
  std::filesystem::remove(log);
  std::fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    setenv("XDG_CONFIG_HOME", dir.c_str(), 1);
    setenv("GPUMAN_KERNEL_LOG", "/dev/null", 1);
    freopen("/dev/null", "w", stdout);
    freopen("/dev/null", "w", stderr);
    execl(GPUMAN_BENCH_GPUMAN, GPUMAN_BENCH_GPUMAN, "--simulate", "h100-8", "daemon", "--socket",
          (dir + "/gpuman.sock").c_str(), "--state-dir", (dir + "/state").c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  const auto t0 = std::chrono::steady_clock::now();
  const double cpu0 = CpuSeconds(pid);
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
  const double cpu = CpuSeconds(pid) - cpu0;
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  auto totals = gpuman::bench::CallLogTotals(log);
  if (totals.empty()) {
    std::printf("  daemon: no call log (status %d)\n", status);
  } else {
    std::printf("  gpuman daemon (idle)       %6.1f calls/s   cpu %.2f %% of one core\n", totals.back() / wall,
                100.0 * cpu / wall);
  }
  if (std::getenv("NVML_CALLS_BENCH_VERBOSE")) std::printf("%s\n", Read("tr ' ' '\\n' < " + log).c_str());
  std::filesystem::remove_all(dir);
  return 0;
}
