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

}  // namespace
}  // namespace gpuman::cli
