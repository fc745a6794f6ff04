#include "base/module.h"

#include <dlfcn.h>
#include <unistd.h>

namespace gpuman {

std::string DescribeModuleFailure(const ModuleSpec& spec, const std::vector<std::string>& paths,
                                  const std::string& path, const std::string& dlerror_text) {
  const std::string purpose(spec.purpose);
  if (path.empty()) {
    std::string looked;
    for (const auto& p : paths) looked += (looked.empty() ? "" : ", ") + p;
    return purpose + " needs " + std::string(spec.file_name) + ", which is not installed (looked in " +
           (looked.empty() ? std::string("no directory: gpuman's own path is unknown") : looked) + ")";
  }
  // glibc: "<file>: cannot open shared object file: <errno text>", where <file> is the module
  // itself or, when a library it links is missing, that library's name.
  constexpr std::string_view kCannotOpen = ": cannot open shared object file";
  if (const size_t at = dlerror_text.find(kCannotOpen); at != std::string::npos && at > 0) {
    const std::string library = dlerror_text.substr(0, at);
    if (library != path && library.find('/') == std::string::npos) {
      return purpose + " needs " + library + ", which is not installed (Debian package " + std::string(spec.package) +
             ": apt install " + std::string(spec.package) + ")";
    }
  }
  return purpose + ": " + path + " could not be loaded: " + dlerror_text;
}

Result<void*> OpenModule(const std::vector<std::string>& paths, const ModuleSpec& spec) {
  for (const std::string& path : paths) {
    if (access(path.c_str(), F_OK) != 0) continue;
    if (void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) return handle;
    const char* why = dlerror();
    return MakeError(ErrorCode::kUnavailable, DescribeModuleFailure(spec, paths, path, why ? why : "unknown error"));
  }
  return MakeError(ErrorCode::kUnavailable, DescribeModuleFailure(spec, paths, "", ""));
}

}  // namespace gpuman
