#include "base/installed_layout.h"

#include <cctype>
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
    layout.doc_dirs = {(prefix / "share" / "doc" / "gpuman").string(), dir.string() + "/docs"};
  }
  if (!build_tree_scenarios.empty()) layout.scenario_dirs.push_back(build_tree_scenarios);
  return layout;
}

std::string InstalledLayout::FindDocDir() const {
  for (const auto& dir : doc_dirs) {
    std::error_code ec;
    if (std::filesystem::is_directory(dir, ec)) return dir;
  }
  return {};
}

std::string PointDocReferencesAt(std::string_view text, std::string_view doc_dir) {
  if (doc_dir.empty()) return std::string(text);
  constexpr std::string_view kDocs = "docs/";
  std::string out;
  size_t from = 0;
  for (size_t at = text.find(kDocs); at != std::string_view::npos; at = text.find(kDocs, at + kDocs.size())) {
    // Only at the start of a word: "src/docs/x" or "mydocs/x" are some other path.
    if (at > 0) {
      const unsigned char before = static_cast<unsigned char>(text[at - 1]);
      if (std::isalnum(before) || before == '_' || before == '-' || before == '.' || before == '/') continue;
    }
    out.append(text.substr(from, at - from));
    out.append(doc_dir);
    out.push_back('/');
    from = at + kDocs.size();
  }
  out.append(text.substr(from));
  return out;
}

std::string ReadExecutablePath() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.string();
}

}  // namespace gpuman
