// gpuman's optional modules (gpuman-metrics-http.so, gpuman-tui-curses.so): dlopen()ed, from
// InstalledLayout::module_dirs, only by the command that needs one, so that the libraries
// only they link (cpp-httplib, ncurses) are a Recommends of the .deb, not a Depends
// (docs/install.md). A module that cannot be loaded is one line naming what is missing and
// the Debian package that has it. Any thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace gpuman {

struct ModuleSpec {
  std::string_view file_name;  // "gpuman-metrics-http.so"
  std::string_view purpose;    // "the metrics endpoint": "<purpose> needs ..."
  std::string_view package;    // the Debian package of the library it links: "libcpp-httplib0.11"
};

/// dlopen()s (RTLD_NOW | RTLD_LOCAL) the first of `paths` that exists. The handle is the
/// caller's to keep. Errors: kUnavailable, with DescribeModuleFailure's line.
Result<void*> OpenModule(const std::vector<std::string>& paths, const ModuleSpec& spec);

/// The line for a module that could not be loaded (pure):
///   no `path` (none of `paths` exists):  "<purpose> needs <file_name>, which is not installed
///                                         (looked in <each path>)"
///   a library it links is missing (dlerror "libX.so.6: cannot open shared object file: ..."):
///                                        "<purpose> needs libX.so.6, which is not installed
///                                         (Debian package <package>: apt install <package>)"
///   anything else:                       "<purpose>: <path> could not be loaded: <dlerror>"
std::string DescribeModuleFailure(const ModuleSpec& spec, const std::vector<std::string>& paths,
                                  const std::string& path, const std::string& dlerror_text);

}  // namespace gpuman
