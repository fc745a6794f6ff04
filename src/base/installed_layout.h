// InstalledLayout: where gpuman's pieces lie, relative to the running binary
// (docs/design.md, "Installed layout"). Computed once at start-up (cli::Main, from
// /proc/self/exe) and passed down by value to whoever loads a module, a scenario or the
// stand-in NVML, or starts gpuman again; nothing below main reads /proc/self/exe itself.
// A plain value; any thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace gpuman {

struct InstalledLayout {
  /// The running binary ("" when /proc/self/exe cannot be read: then every list is empty
  /// but for the build tree's scenario folder).
  std::string exe;
  /// Where gpuman's modules (gpuman-metrics-http.so, gpuman-tui-curses.so) are looked for,
  /// in order: <exe_dir>/../lib/gpuman (installed), then <exe_dir> (the build tree).
  std::vector<std::string> module_dirs;
  /// Where `--simulate NAME` looks for NAME.json, in order: <exe_dir>/../share/gpuman/scenarios
  /// (installed), then the build tree's folder given to ForExecutable (if any).
  std::vector<std::string> scenario_dirs;
  /// The stand-in libnvidia-ml.so.1, in order: <exe_dir>/../lib/gpuman/sim/ (installed),
  /// then <exe_dir>/sim/ (the build tree).
  std::vector<std::string> sim_libraries;
  /// Where gpuman's documents (cli.md, state.md, ...) are looked for, in order:
  /// <exe_dir>/../share/doc/gpuman (installed), then <exe_dir>/docs (the build tree's link to
  /// the source tree's docs/).
  std::vector<std::string> doc_dirs;

  /// `file_name` in each of module_dirs, in order.
  std::vector<std::string> ModulePaths(std::string_view file_name) const;

  /// The first of doc_dirs that is a directory (this reads the file system; only help
  /// texts and the messages that point to a document call it), or "" when none is.
  std::string FindDocDir() const;

  /// The layout around the binary `exe` (pure: nothing is read). `build_tree_scenarios`,
  /// when not empty, is the last scenario folder.
  static InstalledLayout ForExecutable(const std::string& exe, const std::string& build_tree_scenarios = "");
};

/// The running binary's path (/proc/self/exe), or "" when it cannot be read.
std::string ReadExecutablePath();

/// `text` with each reference to one of gpuman's documents, "docs/NAME" at the start of a
/// word, pointing into `doc_dir` ("/usr/share/doc/gpuman/NAME"): what help texts, man pages
/// and messages write as docs/NAME is where the installed product has it. Unchanged when
/// doc_dir is "". Pure.
std::string PointDocReferencesAt(std::string_view text, std::string_view doc_dir);

}  // namespace gpuman
