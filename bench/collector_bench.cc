// collector_bench: what the daemon's monitoring costs when it samples 8 GPUs at 1 Hz
// (snapshot + health watch + idle watch + alerts + history row + Prometheus text + an HTTP
// scrape every 5 s), measured on a real `gpuman daemon` process against the stand-in NVML:
// CPU share of one core (utime + stime over wall time, from /proc/PID/stat) and peak RSS
// (VmHWM). Goal (issue 5): <= 1 % of one core and <= 15 MB.
//
//   build/bench/collector_bench [--seconds N] [--no-metrics]
//
// The stand-in answers from memory, so the NVML share of a real driver (ioctls, ~tens of
// microseconds per call) is not in these figures; gpuman's own work is.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "bench_util.h"

namespace {

double CpuSeconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), {});
  size_t close = text.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream rest(text.substr(close + 2));
  std::string field;
  long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::atoll(field.c_str());
    if (i == 15) stime = std::atoll(field.c_str());
  }
  return static_cast<double>(utime + stime) / sysconf(_SC_CLK_TCK);
}

long StatusKb(pid_t pid, const char* key) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) return std::atol(line.c_str() + std::strlen(key) + 1);
  }
  return -1;
}

bool Answers(const std::string& socket_path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, socket_path.c_str(), sizeof addr.sun_path - 1);
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  close(fd);
  return ok;
}

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  int port = ntohs(a.sin_port);
  close(fd);
  return port;
}

// One plain HTTP/1.0 GET of /metrics; returns the body size.
size_t Scrape(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return 0;
  }
  const char req[] = "GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n";
  (void)!write(fd, req, sizeof req - 1);
  size_t total = 0;
  char buf[8192];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) total += static_cast<size_t>(n);
  close(fd);
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  int seconds = 30;
  bool metrics = true;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--seconds" && i + 1 < argc) seconds = std::atoi(argv[++i]);
    else if (a == "--no-metrics") metrics = false;
    else {
      std::fprintf(stderr, "usage: collector_bench [--seconds N] [--no-metrics]\n");
      return 2;
    }
  }
  char tmpl[] = "/tmp/gpuman-collector-bench-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  std::string scenario = gpuman::bench::IdleScenario(GPUMAN_BENCH_SCENARIO_DIR, "h100-8", dir);
  std::string socket_path = dir + "/gpuman.sock";
  std::string kmsg = dir + "/kmsg.txt";
  std::ofstream(kmsg) << "";
  const int port = FreePort();
  pid_t pid = fork();
  if (pid == 0) {
    unsetenv("GPUMAN_CONFIG");
    unsetenv("GPUMAN_SIMULATE");
    setenv("XDG_CONFIG_HOME", dir.c_str(), 1);
    setenv("GPUMAN_KERNEL_LOG", kmsg.c_str(), 1);
    std::string addr = "127.0.0.1:" + std::to_string(port);
    int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    if (metrics) {
      execl(GPUMAN_BENCH_GPUMAN, GPUMAN_BENCH_GPUMAN, "--simulate", scenario.c_str(), "daemon", "--socket",
            socket_path.c_str(), "--state-dir", (dir + "/state").c_str(), "--metrics", addr.c_str(),
            static_cast<char*>(nullptr));
    } else {
      execl(GPUMAN_BENCH_GPUMAN, GPUMAN_BENCH_GPUMAN, "--simulate", scenario.c_str(), "daemon", "--socket",
            socket_path.c_str(), "--state-dir", (dir + "/state").c_str(), static_cast<char*>(nullptr));
    }
    _exit(127);
  }
  for (int i = 0; i < 600 && !Answers(socket_path); ++i) usleep(50000);
  if (!Answers(socket_path)) {
    std::fprintf(stderr, "collector_bench: the daemon did not come up\n");
    kill(pid, SIGKILL);
    return 1;
  }
  std::this_thread::sleep_for(std::chrono::seconds(3));  // warm-up: first samples, db created
  const double cpu0 = CpuSeconds(pid);
  const auto t0 = std::chrono::steady_clock::now();
  size_t scraped = 0;
  int scrapes = 0;
  for (int s = 0; s < seconds; ++s) {
    std::this_thread::sleep_for(std::chrono::seconds(1));
    if (metrics && s % 5 == 4) {
      scraped = Scrape(port);
      ++scrapes;
    }
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double cpu = CpuSeconds(pid) - cpu0;
  const long hwm_kb = StatusKb(pid, "VmHWM:"), rss_kb = StatusKb(pid, "VmRSS:");
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  std::string cleanup = "rm -rf '" + dir + "'";
  (void)!std::system(cleanup.c_str());

  const double share = 100.0 * cpu / wall;
  std::printf("collector_bench: gpuman daemon sampling 8 simulated GPUs at 1 Hz for %.0f s%s\n", wall,
              metrics ? " (+ /metrics scraped every 5 s)" : "");
  std::printf("  cpu:        %.3f s = %.2f %% of one core   (goal <= 1 %%)  %s\n", cpu, share,
              share <= 1.0 ? "ok" : "OVER");
  std::printf("  peak rss:   %.1f MB (VmHWM), now %.1f MB   (goal <= 15 MB)  %s\n", hwm_kb / 1024.0, rss_kb / 1024.0,
              hwm_kb / 1024.0 <= 15.0 ? "ok" : "OVER");
  if (metrics) std::printf("  /metrics:   %d scrapes, last %zu bytes\n", scrapes, scraped);
  return 0;
}
