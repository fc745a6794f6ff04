// Helpers shared by the benchmark programs: timing a command as a whole process, medians,
// and an idle copy of a shipped scenario in a temp directory. Header-only.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <utility>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace gpuman::bench {

/// Runs argv (PATH lookup) with stdout to /dev/null; milliseconds of wall time. Exits the
/// benchmark if the command fails: a figure for a failing command would be meaningless.
inline double RunOnceMs(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  auto start = std::chrono::steady_clock::now();
  pid_t pid = fork();
  if (pid == 0) {
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    execvp(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "bench: %s failed (status %d)\n", argv[0].c_str(), status);
    std::exit(1);
  }
  return ms;
}

/// Like RunOnceMs, and also the child's CPU time (user + system, from wait4) in
/// milliseconds: a figure that a busy machine disturbs less than wall time.
struct RunTimes {
  double wall_ms = 0;
  double cpu_ms = 0;
};
inline RunTimes RunOnceTimes(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  auto start = std::chrono::steady_clock::now();
  pid_t pid = fork();
  if (pid == 0) {
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    execvp(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  rusage ru{};
  wait4(pid, &status, 0, &ru);
  RunTimes t;
  t.wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  t.cpu_ms = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000.0 + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000.0;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "bench: %s failed (status %d)\n", argv[0].c_str(), status);
    std::exit(1);
  }
  return t;
}

/// Drops a file's clean pages from the page cache (posix_fadvise DONTNEED), so that the
/// next run reads it back from the disk. The programs a benchmark compares are evicted
/// together first: a binary the linker has just written stays cached in small folios,
/// while one read back from the disk (after a reboot, or a package install and a cache
/// drop) is cached in larger ones, and the same binary then starts 0.1-0.3 ms faster on
/// this project's VM (fewer page faults). Without this a freshly built gpuman was measured
/// against a floor that had been read back, and lost by that much (docs/design.md).
inline void EvictFromPageCache(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  (void)fdatasync(fd);
  (void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  close(fd);
}

inline double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

/// Writes <dir>/idle.json: the shipped scenario `name` with every process removed.
inline std::string IdleScenario(const std::string& scenario_dir, const std::string& name, const std::string& dir) {
  std::ifstream in(scenario_dir + "/" + name + ".json");
  nlohmann::json scenario = nlohmann::json::parse(in);
  for (auto& g : scenario["gpus"]) g["processes"] = nlohmann::json::array();
  std::string path = dir + "/idle.json";
  std::ofstream(path) << scenario.dump();
  return path;
}

/// The "total=N" of each line of a stand-in call log ($GPUMAN_FAKE_NVML_CALL_LOG, one line
/// per process that unloaded the stand-in), in order.
inline std::vector<long> CallLogTotals(const std::string& path) {
  std::ifstream in(path);
  std::vector<long> totals;
  std::string line;
  while (std::getline(in, line)) {
    size_t at = line.find(" total=");
    if (at != std::string::npos) totals.push_back(std::atol(line.c_str() + at + 7));
  }
  return totals;
}

/// A private `gpuman --simulate SCENARIO daemon` for a benchmark, with `config` as its
/// config file (GPUMAN_CONFIG) and `env` set in its environment; its stderr goes to
/// <dir>/<name>.log. Returns once its socket exists and its start is past (confinement is
/// prepared after the socket is bound).
struct BenchDaemon {
  pid_t pid = -1;
  std::string socket, log;
};
inline BenchDaemon StartDaemon(const std::string& dir, const std::string& scenario, const std::string& name,
                               const std::string& config,
                               const std::vector<std::pair<std::string, std::string>>& env = {}) {
  BenchDaemon d;
  d.socket = dir + "/" + name + ".sock";
  d.log = dir + "/" + name + ".log";
  const std::string config_path = dir + "/" + name + ".toml";
  std::ofstream(config_path) << config;
  std::ofstream(dir + "/" + name + ".kmsg") << "";
  d.pid = fork();
  if (d.pid == 0) {
    setenv("GPUMAN_CONFIG", config_path.c_str(), 1);
    setenv("GPUMAN_KERNEL_LOG", (dir + "/" + name + ".kmsg").c_str(), 1);
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    int out = open(d.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(out, 2);
    int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    execl(GPUMAN_BENCH_GPUMAN, GPUMAN_BENCH_GPUMAN, "--simulate", scenario.c_str(), "daemon", "--socket",
          d.socket.c_str(), "--state-dir", (dir + "/" + name + "-state").c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  for (int i = 0; i < 500 && access(d.socket.c_str(), F_OK) != 0; ++i) usleep(20 * 1000);
  usleep(300 * 1000);
  return d;
}
inline void StopDaemon(BenchDaemon& d) {
  if (d.pid <= 0) return;
  kill(d.pid, SIGTERM);
  waitpid(d.pid, nullptr, 0);
  d.pid = -1;
}
/// The daemon's log so far.
inline std::string DaemonLog(const BenchDaemon& d) {
  std::ifstream in(d.log);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace gpuman::bench
