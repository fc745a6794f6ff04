// Golden-file comparison for tests (header-only). Golden files live under tests/ in the
// source tree; running a test binary with GPUMAN_UPDATE_GOLDEN=1 rewrites them from the
// actual output instead of comparing. Review the diff before checking them in.
#pragma once

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include <gtest/gtest.h>

namespace gpuman::test_support {

/// Absolute path of a file under tests/ ("render/golden/x.txt").
inline std::string TestSourcePath(std::string_view relative) {
#ifdef GPUMAN_TEST_SOURCE_DIR
  return std::string(GPUMAN_TEST_SOURCE_DIR) + "/" + std::string(relative);
#else
  return std::string(relative);
#endif
}

inline bool UpdateGoldenRequested() {
  const char* v = std::getenv("GPUMAN_UPDATE_GOLDEN");
  return v != nullptr && std::string_view(v) == "1";
}

/// Success when `actual` equals the golden file's contents byte for byte. On mismatch
/// the message names the first differing line. With GPUMAN_UPDATE_GOLDEN=1 the file is
/// (re)written and the check succeeds.
inline ::testing::AssertionResult MatchesGolden(std::string_view relative_path,
                                                std::string_view actual) {
  const std::string path = TestSourcePath(relative_path);
  if (UpdateGoldenRequested()) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << actual;
    if (!out) return ::testing::AssertionFailure() << "cannot write golden file " << path;
    return ::testing::AssertionSuccess();
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return ::testing::AssertionFailure()
           << "missing golden file " << path
           << " (run with GPUMAN_UPDATE_GOLDEN=1 to create it)";
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string expected = buffer.str();
  if (expected == actual) return ::testing::AssertionSuccess();

  // Report the first differing line, which is usually all a reader needs.
  std::istringstream e(expected);
  std::istringstream a{std::string(actual)};
  std::string el, al;
  int line = 1;
  for (;; ++line) {
    const bool has_e = static_cast<bool>(std::getline(e, el));
    const bool has_a = static_cast<bool>(std::getline(a, al));
    if (!has_e && !has_a) break;  // differ only in the final newline
    if (!has_e || !has_a || el != al) {
      if (!has_e) el = "<end of file>";
      if (!has_a) al = "<end of output>";
      break;
    }
  }
  return ::testing::AssertionFailure()
         << "output differs from " << path << " at line " << line << "\n  expected: " << el
         << "\n  actual:   " << al << "\n(GPUMAN_UPDATE_GOLDEN=1 rewrites the file)\n"
         << "full actual output:\n"
         << actual;
}

}  // namespace gpuman::test_support
