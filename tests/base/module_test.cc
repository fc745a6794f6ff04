// Optional modules (base/module.h): the one line a missing module, or a missing library it
// links, is reported with.
#include "base/module.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace gpuman {
namespace {

constexpr ModuleSpec kSpec{"gpuman-metrics-http.so", "the metrics endpoint", "libcpp-httplib0.11"};

TEST(ModuleTest, AMissingLibraryNamesItAndItsPackage) {
  EXPECT_EQ(DescribeModuleFailure(kSpec, {"/usr/lib/gpuman/gpuman-metrics-http.so"}, "/usr/lib/gpuman/gpuman-metrics-http.so",
                                  "libcpp-httplib.so.0.11: cannot open shared object file: No such file or directory"),
            "the metrics endpoint needs libcpp-httplib.so.0.11, which is not installed "
            "(Debian package libcpp-httplib0.11: apt install libcpp-httplib0.11)");
}

TEST(ModuleTest, TheModuleItselfUnreadableIsNotAMissingLibrary) {
  // dlerror names the module's own path when the module itself cannot be opened.
  const std::string path = "/usr/lib/gpuman/gpuman-metrics-http.so";
  EXPECT_EQ(DescribeModuleFailure(kSpec, {path}, path, path + ": cannot open shared object file: Permission denied"),
            "the metrics endpoint: " + path + " could not be loaded: " + path +
                ": cannot open shared object file: Permission denied");
}

TEST(ModuleTest, NoModuleFoundListsWhereItLooked) {
  EXPECT_EQ(DescribeModuleFailure(kSpec, {"/p/lib/gpuman/gpuman-metrics-http.so", "/p/bin/gpuman-metrics-http.so"}, "", ""),
            "the metrics endpoint needs gpuman-metrics-http.so, which is not installed (looked in "
            "/p/lib/gpuman/gpuman-metrics-http.so, /p/bin/gpuman-metrics-http.so)");
}

TEST(ModuleTest, OpenModuleWithNoFileIsUnavailable) {
  const std::string dir = ::testing::TempDir() + "module_test_none";
  auto opened = OpenModule({dir + "/a/gpuman-metrics-http.so", dir + "/b/gpuman-metrics-http.so"}, kSpec);
  ASSERT_FALSE(opened.has_value());
  EXPECT_EQ(opened.error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(opened.error().message, "the metrics endpoint needs gpuman-metrics-http.so, which is not installed (looked in " +
                                        dir + "/a/gpuman-metrics-http.so, " + dir + "/b/gpuman-metrics-http.so)");
}

TEST(ModuleTest, OpenModuleReportsTheFirstThatExistsAndFails) {
  // A file that is no shared object: dlopen refuses it, and the line says which and why;
  // the next candidate is not tried in its stead (it would hide a broken install).
  const std::string dir = ::testing::TempDir() + "module_test_bad";
  std::filesystem::create_directories(dir);
  const std::string bad = dir + "/gpuman-metrics-http.so";
  std::ofstream(bad) << "not an ELF file\n";
  auto opened = OpenModule({dir + "/missing.so", bad}, kSpec);
  ASSERT_FALSE(opened.has_value());
  EXPECT_EQ(opened.error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(opened.error().message.rfind("the metrics endpoint: " + bad + " could not be loaded: ", 0), 0u)
      << opened.error().message;
  EXPECT_EQ(opened.error().message.find("not installed"), std::string::npos) << opened.error().message;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpuman
