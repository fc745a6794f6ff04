// Shared helpers for end-to-end tests: run the real gpuman with a clean GPU-related
// environment (no config file, no simulate, a private state dir), a private daemon
// (PrivateDaemon) and small file helpers.
#pragma once

#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cerrno>
#include <cstring>

#include <algorithm>
#include <fstream>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace gpuman::e2e {

inline const std::string kGpuman = GPUMAN_TEST_BINARY;
inline const std::string kScenarios = GPUMAN_TEST_SCENARIO_DIR;

/// The sanitizers' settings of this test process (scripts/test.sh --sanitize sets them:
/// where reports go, leak checking), for every gpuman it starts, even those started with an
/// exact environment (users.h): without them a report of a child could go unseen.
inline void AddSanitizerOptions(std::map<std::string, std::string>& env) {
  for (const char* name : {"ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS", "TSAN_OPTIONS"}) {
    if (const char* value = std::getenv(name)) env[name] = value;
  }
}

/// The environment every test starts from: nothing GPU-related inherited.
inline std::map<std::string, std::string> CleanEnv(const std::string& state_dir) {
  static testing::TempDir empty_config_home;
  std::map<std::string, std::string> env{
      {"GPUMAN_SIMULATE", ""},        {"GPUMAN_NVML_LIBRARY", ""},   {"GPUMAN_CONFIG", ""},
      {"GPUMAN_FAKE_NVML_SCENARIO", ""}, {"XDG_CONFIG_HOME", empty_config_home.path()},
      {"NO_COLOR", ""},               {"COLUMNS", ""},               {"GPUMAN_STATE_DIR", state_dir},
      {"CUDA_VISIBLE_DEVICES", ""},   {"CUDA_DEVICE_ORDER", ""},     {"NVIDIA_VISIBLE_DEVICES", ""},
      {"SLURM_JOB_GPUS", ""},         {"SLURM_STEP_GPUS", ""},       {"GPUMAN_LEASE_ID", ""},
  };
  AddSanitizerOptions(env);
  return env;
}

inline testing::RunResult RunGpuman(const std::string& state_dir, std::vector<std::string> args,
                                    const std::map<std::string, std::string>& env = {}) {
  auto base = CleanEnv(state_dir);
  for (const auto& [k, v] : env) base[k] = v;
  args.insert(args.begin(), kGpuman);
  return testing::Run(args, base);
}

/// Starts gpuman ARGS in the background, with RunGpuman's environment (this process's,
/// CleanEnv(state_dir) and `env` over it; "" unsets), for a test that signals it or lets it
/// overlap others; its pid, for the test to wait for.
inline pid_t StartGpuman(const std::string& state_dir, std::vector<std::string> args,
                         const std::map<std::string, std::string>& env = {}) {
  auto overrides = CleanEnv(state_dir);
  for (const auto& [k, v] : env) overrides[k] = v;
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    if (!overrides.count(entry.substr(0, entry.find('=')))) env_strings.push_back(entry);
  }
  for (const auto& [k, v] : overrides) {
    if (!v.empty()) env_strings.push_back(k + "=" + v);
  }
  args.insert(args.begin(), kGpuman);
  // Made before fork: the child only calls execve.
  std::vector<char*> argv, envp;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  return pid;
}

/// True when something accepts connections on the Unix socket (a daemon that was killed
/// leaves its socket file behind, so the file existing is not enough).
inline bool DaemonAnswers(const std::string& socket_path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, socket_path.c_str(), sizeof addr.sun_path - 1);
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  close(fd);
  return ok;
}

inline std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// A copy of a shipped scenario with every process removed (all GPUs idle).
inline std::string IdleScenario(const testing::TempDir& dir, const std::string& name) {
  std::ifstream in(kScenarios + "/" + name + ".json");
  nlohmann::json s = nlohmann::json::parse(in);
  for (auto& g : s["gpus"]) g["processes"] = nlohmann::json::array();
  return dir.Write(name + "-idle.json", s.dump(2));
}

/// How to start a private daemon: `gpuman --simulate SCENARIO daemon --socket SOCKET
/// --state-dir STATE_DIR ARGS...`.
struct DaemonSpec {
  std::string scenario{};   // --simulate, unless empty (then NVML is GPUMAN_NVML_LIBRARY's)
  std::string socket{};     // waited for; also passed as --socket unless default_socket
  std::string state_dir{};  // --state-dir, unless empty
  /// The daemon finds its socket itself (the default path); `socket` is where it will be.
  bool default_socket = false;
  std::vector<std::string> args{};  // after the daemon's own (e.g. "--metrics", "127.0.0.1:9400")
  /// Set in the test's own environment ("" unsets); usually CleanEnv(...) and more.
  std::map<std::string, std::string> env{};
  /// `env` is the daemon's whole environment, nothing inherited.
  bool exact_env = false;
  std::string stdout_path{}, stderr_path{};  // "" = the test's own; a file is truncated first
  /// Started as this user (root only: initgroups, setgid, setuid before exec).
  const passwd* user = nullptr;
  int start_timeout_ms = 60000;  // generous: the machine may be loaded
};

/// A private `gpuman daemon` for one test (the one fork/exec/wait-for-socket of the e2e
/// tests). Start() returns once its socket answers; Stop() signals it and waits. The
/// destructor stops it (SIGTERM, then SIGKILL after 30 s), so a test that fails or
/// returns early never leaves a daemon behind.
class PrivateDaemon {
 public:
  PrivateDaemon() = default;
  ~PrivateDaemon() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    for (int i = 0; i < 600; ++i) {
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) return;
      usleep(50000);
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  PrivateDaemon(const PrivateDaemon&) = delete;
  PrivateDaemon& operator=(const PrivateDaemon&) = delete;

  /// Starts the daemon and waits until its socket answers (or it exits, or the timeout).
  /// Use as ASSERT_TRUE(daemon.Start(spec)); the failure names the log when there is one.
  ::testing::AssertionResult Start(const DaemonSpec& spec) {
    if (pid_ > 0) return ::testing::AssertionFailure() << "a daemon already runs (pid " << pid_ << ")";
    spec_ = spec;
    exit_code_.reset();
    std::vector<std::string> argv = {kGpuman};
    if (!spec.scenario.empty()) argv.insert(argv.end(), {"--simulate", spec.scenario});
    argv.push_back("daemon");
    if (!spec.default_socket) argv.insert(argv.end(), {"--socket", spec.socket});
    if (!spec.state_dir.empty()) argv.insert(argv.end(), {"--state-dir", spec.state_dir});
    argv.insert(argv.end(), spec.args.begin(), spec.args.end());
    std::vector<std::string> env_strings;
    for (const auto& [k, v] : spec.env) env_strings.push_back(k + "=" + v);
    // Everything the child needs is made before fork: it only calls async-signal-safe
    // functions (and setenv/unsetenv, as the copies this replaced did).
    std::vector<char*> args, envp;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    for (auto& e : env_strings) envp.push_back(e.data());
    envp.push_back(nullptr);
    pid_ = fork();
    if (pid_ == 0) {
      if (!spec.exact_env) {
        for (const auto& [k, v] : spec.env) {
          if (v.empty()) unsetenv(k.c_str());
          else setenv(k.c_str(), v.c_str(), 1);
        }
      }
      if (spec.user) {
        initgroups(spec.user->pw_name, spec.user->pw_gid);
        if (setgid(spec.user->pw_gid) != 0 || setuid(spec.user->pw_uid) != 0) _exit(126);
      }
      for (const auto& [fd, path] : {std::pair{1, &spec.stdout_path}, std::pair{2, &spec.stderr_path}}) {
        if (path->empty()) continue;
        if (fd == 2 && *path == spec.stdout_path) {
          dup2(1, 2);  // one file, one offset: neither overwrites the other
          continue;
        }
        int out = open(path->c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (out >= 0) dup2(out, fd);
      }
      if (spec.exact_env) execve(args[0], args.data(), envp.data());
      else execv(args[0], args.data());
      _exit(127);
    }
    if (pid_ < 0) return ::testing::AssertionFailure() << "fork: " << std::strerror(errno);
    for (int waited = 0; waited < spec.start_timeout_ms; waited += 20) {
      if (DaemonAnswers(spec.socket)) return ::testing::AssertionSuccess();
      if (auto code = Exited()) {
        return ::testing::AssertionFailure() << "the daemon did not come up: it exited (" << *code << ")" << Logs();
      }
      usleep(20000);
    }
    return ::testing::AssertionFailure() << "the daemon did not come up within " << spec.start_timeout_ms << " ms"
                                         << Logs();
  }

  /// Sends `sig` and waits for the daemon to end. Returns its exit code (128 + signal when
  /// killed), or nullopt when none ran.
  std::optional<int> Stop(int sig = SIGTERM) {
    if (pid_ <= 0) return std::nullopt;
    kill(pid_, sig);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return exit_code_;
  }

  /// Its exit code (128 + signal when killed) once it has ended, without waiting; nullopt
  /// while it runs or before it was started.
  std::optional<int> Exited() {
    int status = 0;
    if (pid_ > 0 && waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    return exit_code_;
  }

  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }
  const std::string& socket() const { return spec_.socket; }

 private:
  std::string Logs() const {
    std::string out;
    for (const std::string* path : {&spec_.stdout_path, &spec_.stderr_path}) {
      if (path->empty() || *path == "/dev/null" || (path == &spec_.stderr_path && *path == spec_.stdout_path)) continue;
      out += "\n" + *path + ":\n" + Slurp(*path);
    }
    return out;
  }

  DaemonSpec spec_;
  pid_t pid_ = -1;
  std::optional<int> exit_code_;
};

}  // namespace gpuman::e2e
