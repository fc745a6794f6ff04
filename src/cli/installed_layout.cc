#include "cli/installed_layout.h"

#include <filesystem>

namespace gpuman::cli {

InstalledLayout ThisInstallation() {
  const std::string exe = ReadExecutablePath();
  // The build tree's scenarios: build/scenarios, a link CMake makes to the source tree's
  // (no path is compiled in; a missing folder is skipped).
  const std::string build_tree =
      exe.empty() ? std::string() : std::filesystem::path(exe).parent_path().string() + "/scenarios";
  return InstalledLayout::ForExecutable(exe, build_tree);
}

}  // namespace gpuman::cli
