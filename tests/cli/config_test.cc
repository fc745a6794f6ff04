#include "cli/config.h"

#include <gtest/gtest.h>

#include "support/temp_dir.h"

namespace gpuman::cli {
namespace {

using gpuman::testing::TempDir;

TEST(ParseConfigTest, EmptyFileKeepsDefaults) {
  auto c = ParseConfig("", "/etc/gpuman/config.toml");
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->nvml_library, "libnvidia-ml.so.1");
}

TEST(ParseConfigTest, ReadsNvmlLibrary) {
  auto c = ParseConfig("# comment\nnvml_library = \"/opt/nvidia/libnvidia-ml.so.1\"\n", "x.toml");
  ASSERT_TRUE(c.has_value()) << c.error().message;
  EXPECT_EQ(c->nvml_library, "/opt/nvidia/libnvidia-ml.so.1");
}

TEST(ParseConfigTest, MonitoringSettings) {
  auto c = ParseConfig(R"(kernel_log = "/var/log/kern.log"
[daemon]
metrics = "0.0.0.0:9400"
sample_interval = "2s"
history_fine_keep = "2h"
history_coarse_keep = "7d"
[health]
drain_on_fatal = false
recheck_after = "5m"
xid_window = "1h"
[idle]
threshold_percent = 10
after = "15m"
release_after = "2h"
notify_command = ["/usr/bin/logger", "-t", "gpuman"]
[[alert]]
name = "hot"
metric = "temperature_c"
above = 85
for = "60s"
command = ["/usr/bin/logger"]
)",
                       "x.toml");
  ASSERT_TRUE(c.has_value()) << c.error().message;
  EXPECT_EQ(c->kernel_log, "/var/log/kern.log");
  EXPECT_EQ(c->daemon.metrics, "0.0.0.0:9400");
  EXPECT_EQ(c->daemon.sample_interval_ms, 2000);
  EXPECT_EQ(c->daemon.history_fine_keep_ms, 2 * 3600 * 1000);
  EXPECT_EQ(c->daemon.history_coarse_keep_ms, 7LL * 24 * 3600 * 1000);
  EXPECT_FALSE(c->health.drain_on_fatal);
  EXPECT_EQ(c->health.recheck_after_ms, 5 * 60 * 1000);
  EXPECT_EQ(c->health.xid_window_ms, 3600 * 1000);
  EXPECT_EQ(c->idle.threshold_percent, 10);
  EXPECT_EQ(c->idle.idle_after_ms, 15 * 60 * 1000);
  EXPECT_EQ(c->idle.release_after_ms, 2 * 3600 * 1000);
  EXPECT_EQ(c->idle.notify_command.size(), 3u);
  ASSERT_EQ(c->alerts.size(), 1u);
  EXPECT_EQ(c->alerts[0].name, "hot");
  EXPECT_EQ(c->alerts[0].for_ms, 60000);
}

TEST(ParseConfigTest, RejectsBadMonitoringSettings) {
  struct Case {
    const char* text;
    const char* message_part;
  } cases[] = {
      {"[daemon]\nsample_interval = \"10ms\"\n", "at least 100ms"},
      {"[daemon]\nmetrics = 9400\n", "daemon.metrics"},
      {"[health]\nrecheck_after = \"soon\"\n", "health.recheck_after"},
      {"[health]\nbogus = 1\n", "unknown key 'bogus'"},
      {"[[alert]]\nname = \"x\"\nmetric = \"temp\"\nabove = 1\ncommand = [\"/bin/true\"]\n", "unknown metric"},
      {"alert = 3\n", "array of tables"},
      {"kernel_log = \"\"\n", "kernel_log must be a path"},
  };
  for (const auto& tc : cases) {
    auto c = ParseConfig(tc.text, "x.toml");
    ASSERT_FALSE(c.has_value()) << tc.text;
    EXPECT_NE(c.error().message.find(tc.message_part), std::string::npos) << c.error().message;
    EXPECT_NE(c.error().message.find("x.toml"), std::string::npos) << c.error().message;
  }
}

TEST(ParseConfigTest, ClientReconnectTimeout) {
  auto defaults = ParseConfig("", "x.toml");
  ASSERT_TRUE(defaults.has_value());
  EXPECT_EQ(defaults->client.reconnect_timeout_ms, 60000) << "at least 60 s by default";
  auto c = ParseConfig("[client]\nreconnect_timeout = \"2s\"\n", "x.toml");
  ASSERT_TRUE(c.has_value()) << c.error().message;
  EXPECT_EQ(c->client.reconnect_timeout_ms, 2000);
  for (const char* bad : {"[client]\nreconnect_timeout = 5\n", "[client]\nreconnect_timeout = \"soon\"\n",
                          "[client]\nreconnect = \"5s\"\n", "client = 3\n"}) {
    auto r = ParseConfig(bad, "x.toml");
    ASSERT_FALSE(r.has_value()) << bad;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(r.error().message.find("client"), std::string::npos) << r.error().message;
  }
}

TEST(LoadConfigTest, ReconnectTimeoutFromTheEnvironment) {
  Environment env;
  env.vars["GPUMAN_CONFIG"] = "/dev/null";
  env.vars["GPUMAN_RECONNECT_TIMEOUT"] = "3s";
  auto c = LoadConfig(env, std::nullopt);
  ASSERT_TRUE(c.has_value()) << c.error().message;
  EXPECT_EQ(c->client.reconnect_timeout_ms, 3000);
  env.vars["GPUMAN_RECONNECT_TIMEOUT"] = "never";
  EXPECT_FALSE(LoadConfig(env, std::nullopt).has_value());
}

TEST(ParseConfigTest, RejectsBrokenInputWithPosition) {
  struct Case {
    const char* text;
    const char* message_part;
  } cases[] = {
      {"nvml_library = ", "x.toml:1:"},
      {"nvml_library = 3", "must be a non-empty string"},
      {"nvml_library = \"\"", "must be a non-empty string"},
      {"[nvml\nlibrary = 1", "x.toml:1:"},
      {"nvml_libary = \"a\"", "unknown key 'nvml_libary'"},
      {"\xff\xfe", "x.toml:1:"},
  };
  for (const auto& c : cases) {
    auto got = ParseConfig(c.text, "x.toml");
    ASSERT_FALSE(got.has_value()) << c.text;
    EXPECT_EQ(got.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(got.error().message.find(c.message_part), std::string::npos)
        << c.text << " -> " << got.error().message;
  }
}

TEST(LoadConfigTest, PrecedenceFlagThenEnvThenXdg) {
  TempDir dir;
  std::string xdg = dir.Write("xdg/gpuman/config.toml", "nvml_library = \"from-xdg\"\n");
  std::string env_file = dir.Write("env.toml", "nvml_library = \"from-env-file\"\n");
  std::string flag_file = dir.Write("flag.toml", "nvml_library = \"from-flag\"\n");
  Environment env;
  env.vars["XDG_CONFIG_HOME"] = dir.Join("xdg");
  EXPECT_EQ(LoadConfig(env, std::nullopt)->nvml_library, "from-xdg");
  env.vars["GPUMAN_CONFIG"] = env_file;
  EXPECT_EQ(LoadConfig(env, std::nullopt)->nvml_library, "from-env-file");
  EXPECT_EQ(LoadConfig(env, flag_file)->nvml_library, "from-flag");
  env.vars["GPUMAN_NVML_LIBRARY"] = "from-env-var";
  EXPECT_EQ(LoadConfig(env, flag_file)->nvml_library, "from-env-var");
}

TEST(LoadConfigTest, MissingDefaultIsFineMissingExplicitIsNot) {
  TempDir dir;
  Environment env;
  env.vars["XDG_CONFIG_HOME"] = dir.Join("nothing-here");
  auto c = LoadConfig(env, std::nullopt);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->config_path, "");
  auto missing = LoadConfig(env, dir.Join("absent.toml"));
  ASSERT_FALSE(missing.has_value());
  EXPECT_NE(missing.error().message.find("absent.toml: cannot read file"), std::string::npos);
}

TEST(LoadConfigTest, DirectoryIsNotAConfigFile) {
  TempDir dir;
  Environment env;
  env.vars["XDG_CONFIG_HOME"] = dir.Join("nothing-here");
  auto flagged = LoadConfig(env, dir.path());
  ASSERT_FALSE(flagged.has_value());
  EXPECT_EQ(flagged.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(flagged.error().message, "config " + dir.path() + ": is a directory, not a file");
  env.vars["GPUMAN_CONFIG"] = dir.path();
  EXPECT_FALSE(LoadConfig(env, std::nullopt).has_value());
  // A default location that is a directory is refused too, not read as an empty config.
  env.vars.erase("GPUMAN_CONFIG");
  dir.Write("xdg/gpuman/config.toml/keep", "");
  env.vars["XDG_CONFIG_HOME"] = dir.Join("xdg");
  auto found = LoadConfig(env, std::nullopt);
  ASSERT_FALSE(found.has_value());
  EXPECT_NE(found.error().message.find("config.toml: is a directory, not a file"), std::string::npos);
}

}  // namespace
}  // namespace gpuman::cli

namespace gpuman::cli {
namespace {

TEST(ParseConfigTest, DaemonConnectionCaps) {
  auto defaults = ParseConfig("", "x.toml");
  ASSERT_TRUE(defaults);
  EXPECT_EQ(defaults->daemon.max_connections, 1024u);
  EXPECT_EQ(defaults->daemon.max_connections_per_user, 64u);
  auto c = ParseConfig("[daemon]\nmax_connections = 300\nmax_connections_per_user = 8\n", "x.toml");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->daemon.max_connections, 300u);
  EXPECT_EQ(c->daemon.max_connections_per_user, 8u);
  auto bad = ParseConfig("[daemon]\nmax_connections_per_user = 0\n", "x.toml");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("max_connections_per_user must be a number from 1 to 1000000"), std::string::npos)
      << bad.error().message;
}

}  // namespace
}  // namespace gpuman::cli
