#include "base/installed_layout.h"

#include <filesystem>

namespace gpuman {

std::vector<std::string> InstalledLayout::ModulePaths(std::string_view file_name) const {
  std::vector<std::string> out;
  for (const auto& dir : module_dirs) out.push_back(dir + "/" + std::string(file_name));
  return out;
}

InstalledLayout InstalledLayout::ForExecutable(const std::string& exe, const std::string& build_tree_scenarios) {
  InstalledLayout layout;
  layout.exe = exe;
  if (!exe.empty()) {
    const std::filesystem::path dir = std::filesystem::path(exe).parent_path();
    const std::filesystem::path prefix = dir.parent_path();
    layout.module_dirs = {(prefix / "lib" / "gpuman").string(), dir.string()};
    layout.scenario_dirs = {dir.string() + "/../share/gpuman/scenarios"};
    layout.sim_libraries = {dir.string() + "/../lib/gpuman/sim/libnvidia-ml.so.1",
                            dir.string() + "/sim/libnvidia-ml.so.1"};
  }
  if (!build_tree_scenarios.empty()) layout.scenario_dirs.push_back(build_tree_scenarios);
  return layout;
}

std::string ReadExecutablePath() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.string();
}

}  // namespace gpuman
