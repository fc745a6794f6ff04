// `gpuman status`: one snapshot (or a stream of them with --watch), rendered as text,
// JSON, or nvidia-smi's CSV (--format csv, render/gpu_csv.h). Registered with CLI11 by
// cli_options.cc; runs on the main thread.
#pragma once

#include <optional>
#include <string>

#include "cli/context.h"

namespace gpuman::cli {

struct StatusArgs {
  bool json = false;
  double watch_seconds = 0;  // 0 = once
  int iterations = 0;        // with --watch: stop after this many refreshes (0 = forever)
  std::optional<std::string> gpus;  // --gpus filter; unset = all
  bool no_processes = false;
  bool no_color = false;
  bool allocation = false;  // --allocation: only the GPUs of the enclosing allocation
  /// --format: "text", "json" (as --json) or "csv" with nvidia-smi's modifiers
  /// ("csv,noheader,nounits"); unset = text, or JSON with --json.
  std::optional<std::string> format;
  std::optional<std::string> fields;  // --fields / --query-gpu: the CSV columns
  std::optional<std::string> units;   // --units: "mib" or "auto" (text memory figures)
  bool compact = false;  // --compact/-c: one line per GPU, users inline (gpustat's view)
};

/// Runs it. Returns the process exit code; prints errors itself as one line.
int RunStatus(const StatusArgs& args, Context& ctx);

}  // namespace gpuman::cli
