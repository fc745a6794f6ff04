// A private tmux server for end-to-end tests of full-screen commands: its own socket in a
// temp dir, killed when the test ends. Keys go in with send-keys; the screen comes back with
// capture-pane, polled against a deadline rather than fixed sleeps.
#pragma once

#include <unistd.h>

#include <chrono>
#include <functional>
#include <optional>
#include <thread>

#include "e2e/e2e_util.h"

namespace gpuman::e2e {

inline const char kTmux[] = "/usr/bin/tmux";
inline constexpr auto kDeadline = std::chrono::seconds(10);

inline int CountLines(const std::string& text) { return static_cast<int>(std::count(text.begin(), text.end(), '\n')); }

class Tmux {
 public:
  explicit Tmux(const std::string& state_dir) : env_(CleanEnv(state_dir)) {
    env_["TERM"] = "xterm-256color";
    env_["LC_ALL"] = "C";  // ASCII bars: what the test greps does not depend on the locale
    env_["LANG"] = "";
    env_["TMUX"] = "";
    // A keeper session holds the server up, so remain-on-exit is set before gpuman runs.
    Cmd({"new-session", "-d", "-s", "keeper", "-x", "80", "-y", "24", "/bin/sleep", "600"});
    Cmd({"set-option", "-g", "remain-on-exit", "on"});
  }
  ~Tmux() { Cmd({"kill-server"}); }

  testing::RunResult Cmd(std::vector<std::string> args) {
    args.insert(args.begin(), {kTmux, "-S", sock_});
    return testing::Run(args, env_);
  }

  /// Starts `argv` in a new session `top` of the given size.
  void Start(const std::vector<std::string>& argv, int width, int height) {
    std::vector<std::string> args = {"new-session", "-d",  "-s", "top", "-x", std::to_string(width),
                                     "-y",          std::to_string(height)};
    args.insert(args.end(), argv.begin(), argv.end());
    auto r = Cmd(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }

  std::string Screen() { return Cmd({"capture-pane", "-p", "-t", "top"}).out; }
  void Keys(const std::vector<std::string>& keys) {
    std::vector<std::string> args = {"send-keys", "-t", "top"};
    args.insert(args.end(), keys.begin(), keys.end());
    Cmd(args);
  }
  /// "1 0" once the pane's process exited with status 0 ("1 " between the pty closing and
  /// tmux reaping the process).
  std::string PaneDead() { return Cmd({"display-message", "-p", "-t", "top", "#{pane_dead} #{pane_dead_status}"}).out; }

  /// Waits until the pane's process has exited; returns PaneDead(). tmux 3.3 sometimes
  /// never fills in pane_dead_status (always after resize-window), so "1 \n" is possible
  /// for a clean exit too; it is returned after a grace second.
  std::string WaitForExit() {
    const auto until = std::chrono::steady_clock::now() + kDeadline;
    std::optional<std::chrono::steady_clock::time_point> dead_since;
    std::string dead;
    while (std::chrono::steady_clock::now() < until) {
      dead = PaneDead();
      if (dead.rfind("1 ", 0) == 0) {
        if (dead != "1 \n") break;
        if (!dead_since) dead_since = std::chrono::steady_clock::now();
        if (std::chrono::steady_clock::now() - *dead_since > std::chrono::seconds(1)) break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return dead;
  }

  /// Polls the screen until `ok` holds or the deadline passes; returns the last screen.
  std::string WaitFor(const std::function<bool(const std::string&)>& ok) {
    const auto until = std::chrono::steady_clock::now() + kDeadline;
    std::string screen;
    while (std::chrono::steady_clock::now() < until) {
      screen = Screen();
      if (ok(screen)) return screen;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return screen;
  }
  std::string WaitForText(const std::string& needle) {
    return WaitFor([&](const std::string& s) { return s.find(needle) != std::string::npos; });
  }

 private:
  testing::TempDir dir_;
  std::string sock_ = dir_.Join("tmux.sock");
  std::map<std::string, std::string> env_;
};

}  // namespace gpuman::e2e
