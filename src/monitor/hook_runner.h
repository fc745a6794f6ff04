// HookRunner: runs the command hooks of alert rules and the idle policy, and the daemon's
// end-of-job notifications. Each hook is started as argv (never through a shell;
// base/spawn.h) in its own process group, gets its payload on stdin, and is killed when it
// runs past the timeout (SIGKILL to the group; or SIGTERM first, SIGKILL after a grace).
// A HookCommand may run as another user, in a directory, with its own environment and
// output file.
// Nothing here blocks: the daemon's event loop calls Run when an event fires and Reap once
// per tick. Not thread-safe; owned by the daemon's event-loop thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "base/clock.h"
#include "base/result.h"
#include "base/spawn.h"
#include "base/unique_fd.h"

namespace gpuman::monitor {

inline constexpr const char* kHookSearchPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

struct HookRunnerOptions {
  int max_concurrent = 4;       // more at once are dropped (and counted)
  int64_t timeout_ms = 30000;   // then SIGKILL to the hook's process group
  /// Where the hooks' stdout and stderr go (not owned, must stay open); -1: /dev/null.
  int output_fd = -1;
  /// A program named without a '/' is looked up in these directories (not in the
  /// daemon's own PATH).
  std::string search_path = kHookSearchPath;
  /// The hooks' whole environment ("KEY=VALUE").
  std::vector<std::string> env = {std::string("PATH=") + kHookSearchPath, "LANG=C.UTF-8"};
  /// Time for timeouts; null: CLOCK_MONOTONIC. Tests pass a fake.
  const Clock* clock = nullptr;
  /// 0: SIGKILL at the timeout. Otherwise SIGTERM at the timeout and SIGKILL this long after.
  int64_t kill_grace_ms = 0;
  /// What messages call a hook ("hook /usr/bin/x: exited with status 1").
  std::string label = "hook";
};

/// One hook to run, with what may differ from the runner's defaults.
struct HookCommand {
  std::vector<std::string> argv;
  /// Its stdin; nullopt: /dev/null.
  std::optional<std::string> payload;
  /// Its whole environment; nullopt: the runner's.
  std::optional<std::vector<std::string>> env;
  std::string cwd;  // empty: the daemon's
  /// Run as this user (setgroups, setgid, setuid); unset: as the daemon.
  std::optional<uid_t> uid;
  std::optional<gid_t> gid;
  std::optional<std::vector<gid_t>> groups;
  /// Its stdout and stderr appended to this file when it (as its user) can open it for
  /// writing, else /dev/null; empty: the runner's output_fd.
  std::string output_file;
  int64_t tag = 0;  // the caller's, given back in the outcome
};

/// The payload as hooks get it: compact JSON, one line plus "\n". Invalid UTF-8 (a command
/// line or kernel log text can hold any bytes) becomes U+FFFD instead of throwing.
std::string SerializePayload(const nlohmann::json& payload);

/// A hook that ended (or was killed), for the daemon's log.
struct HookOutcome {
  std::string program;
  int64_t tag = 0;               // HookCommand::tag
  pid_t pid = 0;
  bool ok = false;               // exited 0
  bool timed_out = false;        // killed after timeout_ms
  std::optional<int> exit_code;  // when it exited
  std::optional<int> signal;     // when a signal ended it
  std::string message;           // "hook /usr/bin/x: exited with status 1", ...
};

struct HookStats {
  int64_t started = 0;
  int64_t dropped = 0;    // refused because max_concurrent were running
  int64_t succeeded = 0;
  int64_t failed = 0;     // non-zero exit, signal, or exec failure (timeouts included)
  int64_t timed_out = 0;
};

class HookRunner {
 public:
  explicit HookRunner(HookRunnerOptions options = {});
  /// Kills (SIGKILL) and reaps hooks still running.
  ~HookRunner();
  HookRunner(const HookRunner&) = delete;
  HookRunner& operator=(const HookRunner&) = delete;

  /// Starts `argv` with `payload` on its stdin and returns at once.
  /// Errors: kInvalidArgument (empty argv), kNotFound (program not found or not
  /// executable: "hook PROGRAM: ..."), kPermissionDenied, kBusy (max_concurrent hooks
  /// running: the hook is dropped and counted), kIo (pipe or fork failed).
  Status Run(const std::vector<std::string>& argv, const std::string& payload);
  /// Run for one HookCommand. Errors: as Run.
  Status Start(const HookCommand& command);

  /// Feeds pending stdin, kills hooks past their timeout, and reaps those that ended.
  /// Returns what ended since the last call.
  std::vector<HookOutcome> Reap();

  int running() const { return static_cast<int>(hooks_.size()); }
  const HookStats& stats() const { return stats_; }

 private:
  struct Hook {
    pid_t pid = -1;
    std::string program;
    int64_t started_ms = 0;
    UniqueFd stdin_fd;        // our end of the child's stdin, non-blocking; closed once all written
    std::string pending;      // payload bytes not yet written
    SpawnedProcess process;   // its exec-error pipe
    int64_t tag = 0;
    bool terminated = false;  // SIGTERM sent at the timeout (kill_grace_ms)
    bool killed = false;
  };
  int64_t NowMs() const;
  void Feed(Hook& hook);
  HookOutcome Finish(Hook& hook, int status);

  HookRunnerOptions options_;
  std::vector<Hook> hooks_;
  HookStats stats_;
};

}  // namespace gpuman::monitor
