// The loader against the stand-in NVML, through the real dlopen path: symbol choice,
// fallbacks in the legacy variant, and init failures.
#include "nvml/library.h"

#include <dlfcn.h>

#include <string>

#include <gtest/gtest.h>

#include "nvml/nvml_test_util.h"

namespace gpuman::nvml {
namespace {

using gpuman::testing::TempDir;
using gpuman::testing::TestScenario;
using gpuman::testing::UseScenario;

TEST(NvmlLibraryTest, MissingLibraryNamesPathAndReason) {
  auto lib = NvmlLibrary::Load("/nonexistent/libnvidia-ml.so.1");
  ASSERT_FALSE(lib.has_value());
  EXPECT_EQ(lib.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(lib.error().message.find("/nonexistent/libnvidia-ml.so.1"), std::string::npos);
  EXPECT_NE(lib.error().message.find("No such file"), std::string::npos) << lib.error().message;
}

TEST(NvmlLibraryTest, NotNvmlAtAllIsRejected) {
  auto lib = NvmlLibrary::Load("libc.so.6");
  ASSERT_FALSE(lib.has_value());
  EXPECT_NE(lib.error().message.find("does not export nvmlInit_v2"), std::string::npos)
      << lib.error().message;
}

// The library's symbols are bound on first call (RTLD_LAZY), not all at load: a command
// pays only for what it calls (docs/design.md, "Start-up"). A library with an unresolved
// symbol in a function gpuman does not call loads and answers; binding everything at once
// (RTLD_NOW) refuses it, which is the control.
TEST(NvmlLibraryTest, SymbolsAreBoundOnFirstCallNotAtLoad) {
  dlerror();
  void* now = dlopen(GPUMAN_TEST_LAZY_BOUND_NVML, RTLD_NOW | RTLD_LOCAL);
  EXPECT_EQ(now, nullptr);
  if (now != nullptr) dlclose(now);
  const char* why = dlerror();
  ASSERT_NE(why, nullptr);
  EXPECT_NE(std::string(why).find("gpuman_test_symbol_that_nothing_defines"), std::string::npos) << why;

  auto lib = NvmlLibrary::Load(GPUMAN_TEST_LAZY_BOUND_NVML);
  ASSERT_TRUE(lib.has_value()) << lib.error().message;
  auto count = (*lib)->Get<nvmlDeviceGetCount_fn>(Sym::kDeviceGetCount);
  ASSERT_NE(count, nullptr);
  unsigned n = 7;
  EXPECT_EQ(count(&n), NVML_SUCCESS);
  EXPECT_EQ(n, 0u);
}

TEST(NvmlLibraryTest, DriverNotLoadedIsOneClearError) {
  unsetenv("GPUMAN_FAKE_NVML_SCENARIO");
  auto lib = NvmlLibrary::Load(GPUMAN_TEST_FAKE_NVML);
  ASSERT_FALSE(lib.has_value());
  EXPECT_EQ(lib.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(lib.error().message.find("nvmlInit_v2: driver not loaded"), std::string::npos)
      << lib.error().message;
  EXPECT_EQ(lib.error().message.find('\n'), std::string::npos);
}

TEST(NvmlLibraryTest, ShippedNoDriverScenario) {
  setenv("GPUMAN_FAKE_NVML_SCENARIO", GPUMAN_TEST_SCENARIO_DIR "/no-driver.json", 1);
  auto lib = NvmlLibrary::Load(GPUMAN_TEST_FAKE_NVML);
  ASSERT_FALSE(lib.has_value());
  EXPECT_NE(lib.error().message.find("driver not loaded"), std::string::npos) << lib.error().message;
}

// gpuman's stand-in reports a scenario it cannot load to the loader, which makes it the
// load's one error (gpuman --simulate: one line, exit 2), and prints nothing itself.
TEST(NvmlLibraryTest, StandInScenarioErrorIsTheLoadsErrorNotStderr) {
  TempDir dir;
  for (const std::string& text : {std::string("{\"gpus\": ["), std::string(R"({"gpus": [{"name": "no uuid"}]})")}) {
    SCOPED_TRACE(text);
    std::string path = dir.Write("bad.json", text);
    setenv("GPUMAN_FAKE_NVML_SCENARIO", path.c_str(), 1);
    ::testing::internal::CaptureStderr();
    auto lib = NvmlLibrary::Load(GPUMAN_TEST_FAKE_NVML);
    EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
    ASSERT_FALSE(lib.has_value());
    EXPECT_EQ(lib.error().code, ErrorCode::kInvalidArgument);
    EXPECT_EQ(lib.error().message.rfind("scenario " + path + ": ", 0), 0u) << lib.error().message;
    EXPECT_EQ(lib.error().message.find('\n'), std::string::npos);
  }
  // A good scenario after a bad one loads, with no error left over.
  UseScenario(dir, TestScenario(1));
  auto lib = NvmlLibrary::Load(GPUMAN_TEST_FAKE_NVML);
  EXPECT_TRUE(lib.has_value()) << lib.error().message;
}

// The stand-in hands over its scenario's host_processes member as it parsed it; a library
// without the hook (as every real NVML) has none.
TEST(NvmlLibraryTest, StandInHandsOverHostProcesses) {
  TempDir dir;
  nlohmann::json scenario = TestScenario(1);
  scenario["host_processes"] = {{"4242", {{"user", "alice"}, {"uid", 1001}, {"command", "python train.py"}}}};
  UseScenario(dir, scenario);
  {
    auto lib = NvmlLibrary::Load(GPUMAN_TEST_FAKE_NVML);
    ASSERT_TRUE(lib.has_value()) << lib.error().message;
    std::optional<std::string> table = (*lib)->SimulatedHostProcesses();
    ASSERT_TRUE(table.has_value());
    EXPECT_EQ(nlohmann::json::parse(*table), scenario["host_processes"]);
  }
  scenario.erase("host_processes");
  UseScenario(dir, scenario);
  auto lib = NvmlLibrary::Load(GPUMAN_TEST_FAKE_NVML);
  ASSERT_TRUE(lib.has_value()) << lib.error().message;
  EXPECT_EQ((*lib)->SimulatedHostProcesses(), std::optional<std::string>("{}"));
}

TEST(NvmlLibraryTest, PrefersNewestSymbols) {
  TempDir dir;
  UseScenario(dir, TestScenario(2));
  auto lib = NvmlLibrary::Load(GPUMAN_TEST_FAKE_NVML);
  ASSERT_TRUE(lib.has_value()) << lib.error().message;
  EXPECT_STREQ((*lib)->SymbolName(Sym::kInit), "nvmlInit_v2");
  EXPECT_STREQ((*lib)->SymbolName(Sym::kDeviceGetCount), "nvmlDeviceGetCount_v2");
  EXPECT_STREQ((*lib)->SymbolName(Sym::kDeviceGetHandleByIndex), "nvmlDeviceGetHandleByIndex_v2");
  EXPECT_STREQ((*lib)->SymbolName(Sym::kDeviceGetPciInfo), "nvmlDeviceGetPciInfo_v3");
  EXPECT_STREQ((*lib)->SymbolName(Sym::kDeviceGetComputeRunningProcesses),
               "nvmlDeviceGetComputeRunningProcesses_v3");
  EXPECT_STREQ((*lib)->SymbolName(Sym::kDeviceGetClocksEventReasons),
               "nvmlDeviceGetCurrentClocksEventReasons");
  EXPECT_EQ((*lib)->process_entry_size(), 24u);
}

TEST(NvmlLibraryTest, LegacyLibraryFallsBackToUnsuffixedSymbols) {
  TempDir dir;
  UseScenario(dir, TestScenario(2));
  auto lib = NvmlLibrary::Load(GPUMAN_TEST_FAKE_NVML_LEGACY);
  ASSERT_TRUE(lib.has_value()) << lib.error().message;
  EXPECT_STREQ((*lib)->SymbolName(Sym::kInit), "nvmlInit");
  EXPECT_STREQ((*lib)->SymbolName(Sym::kDeviceGetCount), "nvmlDeviceGetCount");
  EXPECT_STREQ((*lib)->SymbolName(Sym::kDeviceGetHandleByIndex), "nvmlDeviceGetHandleByIndex");
  EXPECT_STREQ((*lib)->SymbolName(Sym::kDeviceGetPciInfo), "nvmlDeviceGetPciInfo");
  EXPECT_STREQ((*lib)->SymbolName(Sym::kDeviceGetMemoryInfoV2), "");
  EXPECT_STREQ((*lib)->SymbolName(Sym::kDeviceGetComputeRunningProcesses),
               "nvmlDeviceGetComputeRunningProcesses");
  EXPECT_STREQ((*lib)->SymbolName(Sym::kDeviceGetClocksEventReasons),
               "nvmlDeviceGetCurrentClocksThrottleReasons");
  EXPECT_FALSE((*lib)->Has(Sym::kDeviceGetNumaNodeId));
  EXPECT_EQ((*lib)->process_entry_size(), 16u);
}

TEST(NvmlLibraryTest, ShutdownOnDestructionAllowsReload) {
  TempDir dir;
  UseScenario(dir, TestScenario(1));
  for (int i = 0; i < 3; ++i) {
    auto lib = NvmlLibrary::Load(GPUMAN_TEST_FAKE_NVML);
    ASSERT_TRUE(lib.has_value()) << "load " << i << ": " << lib.error().message;
  }
}

TEST(NvmlLibraryTest, ErrorStringIsLowerCaseAndKeepsAcronyms) {
  TempDir dir;
  UseScenario(dir, TestScenario(1));
  auto lib = NvmlLibrary::Load(GPUMAN_TEST_FAKE_NVML);
  ASSERT_TRUE(lib.has_value());
  EXPECT_EQ((*lib)->ErrorString(NVML_ERROR_GPU_IS_LOST), "GPU is lost");
  EXPECT_EQ((*lib)->ErrorString(NVML_ERROR_NOT_SUPPORTED), "not supported");
}

}  // namespace
}  // namespace gpuman::nvml
