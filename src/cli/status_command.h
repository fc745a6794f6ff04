// `gpuman status`: one snapshot (or a stream of them with --watch), rendered as text or
// JSON. Registered with CLI11 by cli_options.cc; runs on the main thread.
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
};

/// Runs it. Returns the process exit code; prints errors itself as one line.
int RunStatus(const StatusArgs& args, Context& ctx);

}  // namespace gpuman::cli
