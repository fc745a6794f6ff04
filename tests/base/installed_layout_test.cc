#include "base/installed_layout.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

namespace gpuman {
namespace {

using Strings = std::vector<std::string>;

TEST(InstalledLayoutTest, InstalledPrefix) {
  const InstalledLayout l = InstalledLayout::ForExecutable("/opt/gpuman/bin/gpuman");
  EXPECT_EQ(l.exe, "/opt/gpuman/bin/gpuman");
  EXPECT_EQ(l.module_dirs, (Strings{"/opt/gpuman/lib/gpuman", "/opt/gpuman/bin"}));
  EXPECT_EQ(l.scenario_dirs, (Strings{"/opt/gpuman/bin/../share/gpuman/scenarios"}));
  EXPECT_EQ(l.sim_libraries, (Strings{"/opt/gpuman/bin/../lib/gpuman/sim/libnvidia-ml.so.1",
                                      "/opt/gpuman/bin/sim/libnvidia-ml.so.1"}));
  EXPECT_EQ(l.ModulePaths("gpuman-tui-curses.so"),
            (Strings{"/opt/gpuman/lib/gpuman/gpuman-tui-curses.so", "/opt/gpuman/bin/gpuman-tui-curses.so"}));
  EXPECT_EQ(l.doc_dirs, (Strings{"/opt/gpuman/share/doc/gpuman", "/opt/gpuman/bin/docs"}));
}

TEST(InstalledLayoutTest, FindDocDirTakesTheFirstThatExists) {
  const std::string tmp = ::testing::TempDir() + "installed_layout_docs";
  std::filesystem::remove_all(tmp);
  InstalledLayout l = InstalledLayout::ForExecutable(tmp + "/bin/gpuman");
  EXPECT_EQ(l.FindDocDir(), "");
  std::filesystem::create_directories(tmp + "/bin/docs");
  EXPECT_EQ(l.FindDocDir(), tmp + "/bin/docs");
  std::filesystem::create_directories(tmp + "/share/doc/gpuman");
  EXPECT_EQ(l.FindDocDir(), tmp + "/share/doc/gpuman");
  std::filesystem::remove_all(tmp);
}

TEST(InstalledLayoutTest, PointDocReferencesAt) {
  EXPECT_EQ(PointDocReferencesAt("Node-side tools (docs/slurm.md)", "/usr/share/doc/gpuman"),
            "Node-side tools (/usr/share/doc/gpuman/slurm.md)");
  EXPECT_EQ(PointDocReferencesAt("docs/cli.md, \"The daemon\"; see docs/state.md.", "/d"),
            "/d/cli.md, \"The daemon\"; see /d/state.md.");
  // Only at the start of a word.
  EXPECT_EQ(PointDocReferencesAt("src/docs/x mydocs/y my-docs/z", "/d"), "src/docs/x mydocs/y my-docs/z");
  EXPECT_EQ(PointDocReferencesAt("no documents here", "/d"), "no documents here");
  // No directory: the text as written.
  EXPECT_EQ(PointDocReferencesAt("(docs/slurm.md)", ""), "(docs/slurm.md)");
}

TEST(InstalledLayoutTest, BuildTreeScenariosComeLast) {
  const InstalledLayout l = InstalledLayout::ForExecutable("/src/build/gpuman", "/src/scenarios");
  EXPECT_EQ(l.scenario_dirs, (Strings{"/src/build/../share/gpuman/scenarios", "/src/scenarios"}));
  EXPECT_EQ(l.ModulePaths("gpuman-metrics-http.so").back(), "/src/build/gpuman-metrics-http.so");
}

TEST(InstalledLayoutTest, UnknownExecutableLeavesOnlyTheBuildTree) {
  const InstalledLayout none = InstalledLayout::ForExecutable("");
  EXPECT_TRUE(none.exe.empty());
  EXPECT_TRUE(none.module_dirs.empty());
  EXPECT_TRUE(none.scenario_dirs.empty());
  EXPECT_TRUE(none.sim_libraries.empty());
  EXPECT_TRUE(none.ModulePaths("x.so").empty());
  EXPECT_EQ(InstalledLayout::ForExecutable("", "/src/scenarios").scenario_dirs, (Strings{"/src/scenarios"}));
}

TEST(InstalledLayoutTest, ReadsThisProcess) {
  const std::string exe = ReadExecutablePath();
  ASSERT_FALSE(exe.empty());
  EXPECT_EQ(exe.front(), '/');
  EXPECT_NE(exe.find("base_test"), std::string::npos) << exe;
}

}  // namespace
}  // namespace gpuman
