// `gpuman top`: the full-screen monitor. Parses its options, checks that a driver (or the
// simulator) answers and that there is a terminal, then hands the Context to a sampler
// thread (tui::Sampler) and runs the UI loop (tui::RunTopApp) on the main thread. From
// then on only the sampler thread touches the Context. Registered by cli_options.cc.
#pragma once

#include "cli/context.h"

namespace gpuman::cli {

struct TopArgs {
  double interval_seconds = 1.0;
  bool once = false;       // print one frame as text and exit (no terminal needed)
  bool no_color = false;
  bool ascii = false;      // ASCII bars even in a UTF-8 locale
};

/// Runs it. Exit codes: 0 after q; 3 without a driver (the same one line as `status`);
/// 2 when stdin/stdout is not a terminal (without --once).
int RunTop(const TopArgs& args, Context& ctx);

}  // namespace gpuman::cli
