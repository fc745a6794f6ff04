// Configuration: one struct built in main from the config file, the environment and the
// command line, then passed down (code below main never calls getenv). See docs/cli.md
// "Configuration" for the file format and precedence.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "confine/cgroup.h"
#include "health/watch.h"
#include "monitor/alerts.h"
#include "monitor/idle.h"
#include "monitor/intruders.h"
#include "monitor/slice_watch.h"
#include "policy/lease_rules.h"
#include "policy/lease_rules.h"
#include "slurm/node_facts.h"

namespace gpuman::cli {

/// The [daemon] table.
struct DaemonConfig {
  std::optional<std::string> admin_group;        // members act on anyone's jobs, drain GPUs
  std::optional<int64_t> default_time_limit_ms;  // "24h" in the file
  std::optional<int> max_gpus_per_user;          // for everyone without an entry below
  std::map<std::string, int> user_max_gpus;      // [daemon.user_limits] alice = 2
  std::optional<std::string> metrics;            // Prometheus /metrics address; off when unset
  int64_t sample_interval_ms = 1000;             // collector period ("1s")
  int64_t history_fine_keep_ms = 3600LL * 1000;  // 1 s samples kept this long
  int64_t history_coarse_keep_ms = 31LL * 24 * 3600 * 1000;  // 1 min means kept this long
  size_t max_connections = 1024;         // all clients together (64 kept for root and the admin group)
  size_t max_connections_per_user = 64;  // one user's clients (root: only max_connections)
};

/// The [client] table: how clients that follow something over time behave.
struct ClientConfig {
  int64_t reconnect_timeout_ms = 60000;  // "60s": how long wait/logs -f/top/run --wait reconnect
};

/// The [submit] table.
struct SubmitConfig {
  std::string backend = "gpuman";  // "slurm": submit/queue/show/... go to Slurm (a login node)
};

/// The [slurm] table (docs/slurm.md).
struct SlurmConfig {
  std::optional<std::string> state_dir;  // job records (docs/slurm.md "Accounting")
  /// node = "auto" | "yes" | "no": whether this host is a Slurm compute node, where the
  /// daemon's per-GPU drains and idle-lease releases step aside (slurm::DetectSlurmNode).
  slurm::SlurmNodeMode node = slurm::SlurmNodeMode::kAuto;
};

/// The [launch] table (docs/python.md, "Rendezvous"): the range each lease's MASTER_PORT
/// comes from, `ports = "29500-29999"` (the default) or "off". A machine setting.
struct LaunchConfig {
  std::optional<policy::PortRange> ports = policy::PortRange{};
};

/// The [enforce] table (docs/enforce.md).
struct EnforceConfig {
  /// Device confinement of leases the daemon grants: "cgroup" (v2, else v1), "cgroup-v2",
  /// "cgroup-v1", "off". On by default; it takes effect only when the daemon runs as root.
  confine::DevicesSetting devices = confine::DevicesSetting::kCgroup;
  /// Processes on a GPU leased to someone else (docs/enforce.md, "Intruders"):
  /// foreign_processes = "report" (default) | "kill", grace = "10s" before SIGKILL.
  monitor::IntruderPolicy intruders;
};

/// The [notify] table (docs/scheduling.md, "End-of-job notifications"). A machine setting.
struct NotifyConfig {
  /// mail = "/usr/sbin/sendmail": the sendmail-compatible program `submit --notify mail`
  /// runs (as the job's owner); unset: no mail hook, and --notify mail is refused.
  std::optional<std::string> mail;
  int64_t timeout_ms = 60000;  // timeout = "60s": then SIGTERM, SIGKILL 5 s later
};

struct Config {
  std::string nvml_library = "libnvidia-ml.so.1";
  std::string kernel_log = "/dev/kmsg";  // where Xid lines are read from ($GPUMAN_KERNEL_LOG)
  std::string config_path;  // the file that was read, "" if none
  std::optional<std::string> lease_dir;  // the machine lease table's directory (lease_dir)
  DaemonConfig daemon;
  ClientConfig client;  // [client]; $GPUMAN_RECONNECT_TIMEOUT overrides reconnect_timeout
  SubmitConfig submit;  // [submit]
  health::HealthPolicy health;  // [health]
  monitor::IdlePolicy idle;     // [idle]
  std::vector<monitor::AlertRule> alerts;  // [[alert]]
  SlurmConfig slurm;                       // [slurm]
  EnforceConfig enforce;                   // [enforce]
  LaunchConfig launch;                     // [launch]
  policy::ShareRules share;                // [share] (docs/share.md): memory slices
  monitor::SlicePolicy slice_watch;        // [share] over_limit, over_limit_grace
  NotifyConfig notify;                     // [notify]
  std::vector<std::string> keys;           // the top-level keys the file set, sorted
  std::string personal_config_path;        // the user's own file read over it, "" if none
  /// The file the machine's rules came from (/etc/gpuman/config.toml, or a file root named
  /// with --config/$GPUMAN_CONFIG), "" when none was read: `doctor` checks who may write it.
  std::string machine_config_path;
  /// One line each, for stderr: machine settings a user's own file tried to set.
  std::vector<std::string> warnings;
};

/// The machine's config file: the one place its rules come from (docs/cli.md, "Configuration").
inline constexpr const char kMachineConfigPath[] = "/etc/gpuman/config.toml";

/// The environment variables gpuman reads, captured once in main.
struct Environment {
  std::map<std::string, std::string> vars;
  std::optional<std::string> Get(const std::string& name) const;
  static Environment FromProcess();
};

/// The configuration, in two layers (issue 23: the machine's rules come from the machine):
/// - the machine's file, /etc/gpuman/config.toml, or in its place a file named with
///   `explicit_path` (--config) or $GPUMAN_CONFIG when root names it or root owns it and
///   only root may write it;
/// - over it, the user's own file: a named file that is not the machine's, else
///   $XDG_CONFIG_HOME/gpuman/config.toml (or ~/.config/...). Only its [client] and
///   [submit] count; any other key is ignored with one line in `warnings`.
/// Named files must exist; the default locations may be absent. Then $GPUMAN_NVML_LIBRARY,
/// $GPUMAN_KERNEL_LOG and $GPUMAN_RECONNECT_TIMEOUT override the files.
/// Errors: kInvalidArgument for an unreadable named file, TOML syntax errors (with file,
/// line and column), unknown keys, or values of the wrong type, in either file.
Result<Config> LoadConfig(const Environment& env, const std::optional<std::string>& explicit_path);

/// LoadConfig with the machine's file and the caller's uid given (for tests).
Result<Config> LoadConfigFrom(const Environment& env, const std::optional<std::string>& explicit_path,
                              const std::string& machine_path, uint32_t caller_uid);

/// The machine's lease rules from [daemon] (caps by uid; user names that do not exist are
/// left out). Drains are the daemon's and are not part of the config.
policy::MachineRules MachineRulesFromConfig(const Config& config);

/// Parses config text (exposed for tests). `origin` names the source in messages.
Result<Config> ParseConfig(const std::string& text, const std::string& origin);

}  // namespace gpuman::cli
