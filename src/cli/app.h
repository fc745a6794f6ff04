// The gpuman command line: its command table, and Main, which parses (cli/cli_options.h),
// wires the real implementations into a Context and dispatches through the table.
// Called once from main(); not thread-safe (it installs signal handlers).
#pragma once

#include <span>
#include <string_view>

#include "cli/command_args.h"
#include "cli/exit_codes.h"

namespace gpuman::cli {

/// One row of the command table, as ninja's kTools: a command's name, its handler, how its
/// errors become exit codes, and whether it needs the config (help and completion work on
/// a machine whose config is broken).
struct Command {
  std::string_view name;
  /// Runs the command; prints its errors itself (Context::Fail) and returns the exit code.
  int (*run)(const CommandArgs& args, Context& ctx);
  ExitPolicy exit_policy = ExitPolicy::kPlain;
  bool needs_config = true;
};

/// Every command that runs, in the order --help lists them.
std::span<const Command> Commands();
/// The row named `name`, or nullptr.
const Command* FindCommand(std::string_view name);
/// The exit policy of command `name`: kPlain for a name that is no command.
ExitPolicy ExitPolicyOf(std::string_view name);

/// Runs gpuman with the process's argv and environment; returns the exit code.
int Main(int argc, char** argv);

}  // namespace gpuman::cli
