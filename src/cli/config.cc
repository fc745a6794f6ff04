#include "cli/config.h"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <sstream>
#include <toml++/toml.h>

#include "base/duration.h"

extern char** environ;

namespace gpuman::cli {

std::optional<std::string> Environment::Get(const std::string& name) const {
  auto it = vars.find(name);
  if (it == vars.end()) return std::nullopt;
  return it->second;
}

Environment Environment::FromProcess() {
  Environment env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string kv(*e);
    size_t eq = kv.find('=');
    if (eq == std::string::npos) continue;
    env.vars.emplace(kv.substr(0, eq), kv.substr(eq + 1));
  }
  return env;
}

Result<Config> ParseConfig(const std::string& text, const std::string& origin) {
  Config config;
  config.config_path = origin;
  toml::table table;
  try {
    table = toml::parse(text, origin);
  } catch (const toml::parse_error& err) {
    const auto& where = err.source().begin;
    return MakeError(ErrorCode::kInvalidArgument,
                     "config " + origin + ":" + std::to_string(where.line) + ":" +
                         std::to_string(where.column) + ": " + std::string(err.description()));
  }
  static const std::set<std::string> kKnown = {"nvml_library", "kernel_log", "lease_dir", "daemon", "client", "health", "idle", "alert"};
  for (const auto& [key, value] : table) {
    std::string k(key.str());
    if (!kKnown.count(k)) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "config " + origin + ": unknown key '" + k +
                           "' (known: nvml_library, kernel_log, lease_dir, [daemon], [client], [health], [idle], [[alert]])");
    }
  }
  if (auto* node = table.get("daemon")) {
    auto* d = node->as_table();
    if (!d) return MakeError(ErrorCode::kInvalidArgument, "config " + origin + ": daemon must be a table");
    auto bad = [&](const std::string& what) {
      return MakeError(ErrorCode::kInvalidArgument, "config " + origin + ": daemon." + what);
    };
    for (const auto& [key, value] : *d) {
      std::string k(key.str());
      if (k == "admin_group") {
        auto v = value.value<std::string>();
        if (!v || v->empty()) return bad("admin_group must be a group name");
        config.daemon.admin_group = *v;
      } else if (k == "default_time_limit") {
        auto v = value.value<std::string>();
        auto ms = v ? ParseDurationMs(*v) : Result<int64_t>(MakeError(ErrorCode::kInvalidArgument, "not a string"));
        if (!ms || *ms <= 0) return bad("default_time_limit must be a duration such as \"24h\"");
        config.daemon.default_time_limit_ms = *ms;
      } else if (k == "max_gpus_per_user") {
        auto v = value.value<int64_t>();
        if (!v || *v < 0) return bad("max_gpus_per_user must be a number >= 0");
        config.daemon.max_gpus_per_user = static_cast<int>(*v);
      } else if (k == "max_connections" || k == "max_connections_per_user") {
        auto v = value.value<int64_t>();
        if (!v || *v < 1 || *v > 1'000'000) return bad(k + " must be a number from 1 to 1000000");
        if (k == "max_connections") config.daemon.max_connections = static_cast<size_t>(*v);
        else config.daemon.max_connections_per_user = static_cast<size_t>(*v);
      } else if (k == "user_limits") {
        auto* limits = value.as_table();
        if (!limits) return bad("user_limits must be a table of user = GPUs");
        for (const auto& [user, n] : *limits) {
          auto v = n.value<int64_t>();
          if (!v || *v < 0) return bad("user_limits." + std::string(user.str()) + " must be a number >= 0");
          config.daemon.user_max_gpus[std::string(user.str())] = static_cast<int>(*v);
        }
      } else if (k == "metrics") {
        auto v = value.value<std::string>();
        if (!v || v->empty()) return bad("metrics must be an address such as \"127.0.0.1:9400\"");
        config.daemon.metrics = *v;
      } else if (k == "sample_interval" || k == "history_fine_keep" || k == "history_coarse_keep") {
        auto v = value.value<std::string>();
        auto ms = v ? ParseDurationMs(*v) : Result<int64_t>(MakeError(ErrorCode::kInvalidArgument, "not a string"));
        if (!ms || *ms <= 0) return bad(k + " must be a duration such as \"1s\" or \"31d\"");
        if (k == "sample_interval") {
          if (*ms < 100) return bad("sample_interval must be at least 100ms");
          config.daemon.sample_interval_ms = *ms;
        } else if (k == "history_fine_keep") {
          config.daemon.history_fine_keep_ms = *ms;
        } else {
          config.daemon.history_coarse_keep_ms = *ms;
        }
      } else {
        return bad("unknown key '" + k +
                   "' (known: admin_group, default_time_limit, max_gpus_per_user, user_limits, metrics, "
                   "sample_interval, history_fine_keep, history_coarse_keep, max_connections, "
                   "max_connections_per_user)");
      }
    }
  }
  if (auto* node = table.get("client")) {
    auto* c = node->as_table();
    if (!c) return MakeError(ErrorCode::kInvalidArgument, "config " + origin + ": client must be a table");
    for (const auto& [key, value] : *c) {
      std::string k(key.str());
      if (k == "reconnect_timeout") {
        auto v = value.value<std::string>();
        auto ms = v ? ParseDurationMs(*v) : Result<int64_t>(MakeError(ErrorCode::kInvalidArgument, "not a string"));
        if (!ms || *ms < 0) {
          return MakeError(ErrorCode::kInvalidArgument,
                           "config " + origin + ": client.reconnect_timeout must be a duration such as \"60s\"");
        }
        config.client.reconnect_timeout_ms = *ms;
      } else {
        return MakeError(ErrorCode::kInvalidArgument,
                         "config " + origin + ": client: unknown key '" + k + "' (known: reconnect_timeout)");
      }
    }
  }
  if (auto* node = table.get("health")) {
    auto* h = node->as_table();
    if (!h) return MakeError(ErrorCode::kInvalidArgument, "config " + origin + ": health must be a table");
    auto bad = [&](const std::string& what) {
      return MakeError(ErrorCode::kInvalidArgument, "config " + origin + ": health." + what);
    };
    for (const auto& [key, value] : *h) {
      std::string k(key.str());
      if (k == "drain_on_fatal") {
        auto v = value.value<bool>();
        if (!v) return bad("drain_on_fatal must be true or false");
        config.health.drain_on_fatal = *v;
      } else if (k == "recheck_after" || k == "xid_window") {
        auto v = value.value<std::string>();
        auto ms = v ? ParseDurationMs(*v) : Result<int64_t>(MakeError(ErrorCode::kInvalidArgument, "not a string"));
        if (!ms || *ms < 0) return bad(k + " must be a duration such as \"10m\"");
        (k == "recheck_after" ? config.health.recheck_after_ms : config.health.xid_window_ms) = *ms;
      } else {
        return bad("unknown key '" + k + "' (known: drain_on_fatal, recheck_after, xid_window)");
      }
    }
  }
  if (auto* node = table.get("idle")) {
    auto* t = node->as_table();
    if (!t) return MakeError(ErrorCode::kInvalidArgument, "config " + origin + ": idle must be a table");
    auto idle = monitor::ParseIdlePolicy(*t, origin);
    if (!idle) return idle.error();
    config.idle = *idle;
  }
  if (auto* node = table.get("alert")) {
    auto* a = node->as_array();
    if (!a) return MakeError(ErrorCode::kInvalidArgument, "config " + origin + ": alert must be an array of tables ([[alert]])");
    auto rules = monitor::ParseAlertRules(*a, origin);
    if (!rules) return rules.error();
    config.alerts = std::move(*rules);
  }
  if (auto* node = table.get("kernel_log")) {
    auto value = node->value<std::string>();
    if (!value || value->empty()) {
      return MakeError(ErrorCode::kInvalidArgument, "config " + origin + ": kernel_log must be a path");
    }
    config.kernel_log = *value;
  }
  if (auto* node = table.get("lease_dir")) {
    auto value = node->value<std::string>();
    if (!value || value->empty() || (*value)[0] != '/') {
      return MakeError(ErrorCode::kInvalidArgument, "config " + origin + ": lease_dir must be an absolute path");
    }
    config.lease_dir = *value;
  }
  if (auto* node = table.get("nvml_library")) {
    auto value = node->value<std::string>();
    if (!value || value->empty()) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "config " + origin + ": nvml_library must be a non-empty string");
    }
    config.nvml_library = *value;
  }
  return config;
}

Result<Config> LoadConfig(const Environment& env, const std::optional<std::string>& explicit_path) {
  std::optional<std::string> path = explicit_path;
  bool must_exist = path.has_value();
  if (!path) {
    if (auto p = env.Get("GPUMAN_CONFIG"); p && !p->empty()) {
      path = *p;
      must_exist = true;
    }
  }
  if (!path) {
    std::string base;
    if (auto x = env.Get("XDG_CONFIG_HOME"); x && !x->empty()) base = *x;
    else if (auto h = env.Get("HOME"); h && !h->empty()) base = *h + "/.config";
    for (const std::string& candidate :
         {base.empty() ? std::string() : base + "/gpuman/config.toml", std::string("/etc/gpuman/config.toml")}) {
      if (!candidate.empty() && access(candidate.c_str(), F_OK) == 0) {
        path = candidate;
        break;
      }
    }
  }
  Config config;
  if (path) {
    // A directory opens as an empty stream on Linux and would read as an empty config.
    struct stat st{};
    // /dev/null is the usual way to say "no config file" (it reads as empty).
    if (stat(path->c_str(), &st) == 0 && !S_ISREG(st.st_mode) && *path != "/dev/null") {
      return MakeError(ErrorCode::kInvalidArgument,
                       "config " + *path + (S_ISDIR(st.st_mode) ? ": is a directory, not a file" : ": not a regular file"));
    }
    std::ifstream in(*path);
    if (!in) {
      if (must_exist || access(path->c_str(), F_OK) == 0) {
        return MakeError(ErrorCode::kInvalidArgument, "config " + *path + ": cannot read file");
      }
    } else {
      std::ostringstream ss;
      ss << in.rdbuf();
      auto parsed = ParseConfig(ss.str(), *path);
      if (!parsed) return parsed.error();
      config = *parsed;
    }
  }
  if (auto lib = env.Get("GPUMAN_NVML_LIBRARY"); lib && !lib->empty()) config.nvml_library = *lib;
  if (auto log = env.Get("GPUMAN_KERNEL_LOG"); log && !log->empty()) config.kernel_log = *log;
  if (auto t = env.Get("GPUMAN_RECONNECT_TIMEOUT"); t && !t->empty()) {
    auto ms = ParseDurationMs(*t);
    if (!ms || *ms < 0) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "GPUMAN_RECONNECT_TIMEOUT='" + *t + "' is not a duration such as \"60s\"");
    }
    config.client.reconnect_timeout_ms = *ms;
  }
  return config;
}

policy::MachineRules MachineRulesFromConfig(const Config& config) {
  policy::MachineRules rules;
  rules.default_max_gpus_per_user = config.daemon.max_gpus_per_user;
  for (const auto& [user, n] : config.daemon.user_max_gpus) {
    if (passwd* pw = getpwnam(user.c_str())) rules.max_gpus_per_user[pw->pw_uid] = n;
  }
  return rules;
}

}  // namespace gpuman::cli
