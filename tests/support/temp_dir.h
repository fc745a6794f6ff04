// TempDir: a private directory under $TMPDIR, removed with everything in it when the
// object goes away. Header-only test support.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace gpuman::testing {

class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "gpuman-test-XXXXXX").string();
    char* made = mkdtemp(pattern.data());
    path_ = made ? made : "";
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string Join(const std::string& name) const { return path_ + "/" + name; }

  /// Writes `text` to `name` atomically (write a sibling, then rename), creating parents.
  std::string Write(const std::string& name, const std::string& text) const {
    std::string target = Join(name);
    std::filesystem::create_directories(std::filesystem::path(target).parent_path());
    std::string tmp = target + ".tmp";
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out << text;
    }
    std::filesystem::rename(tmp, target);
    return target;
  }

 private:
  std::string path_;
};

}  // namespace gpuman::testing
