// The command line's one meeting with CLI11: cli_options.cc registers every command and
// option into plain argument structs (cli/command_args.h), parses argv, words a parse error
// as one line, and walks the tree for help, man pages and completion (cli/help_docs.h).
// It is the only unit that includes CLI11's header, which is slow to compile and defines
// its validators as globals that each including unit constructs at start-up. Main thread.
#pragma once

#include <optional>
#include <vector>

#include "base/result.h"
#include "cli/command_args.h"

namespace CLI {
class App;
}

namespace gpuman::cli {

struct ParsedCommandLine {
  /// The arguments of the command to run; `args.command` names it (on an error, the
  /// command named on the command line, whose exit policy the error takes).
  CommandArgs args;
  /// Nothing to run: --help or --version was printed; exit with this.
  std::optional<int> exit_code;
  /// A usage error (kInvalidArgument): one line, without "gpuman: error: ".
  std::optional<Error> error;
};

/// Parses the process's command line. Registers only the named command when it parses
/// cleanly (every command's options cost every run), else the whole tree, so help and
/// every error message are the whole tree's.
ParsedCommandLine ParseCommandLine(int argc, char** argv);

/// Registers the queue commands (daemon, submit, queue, ...) under `app`, bound to `args`;
/// returns them in the order --help lists them. (For tests of their options.)
std::vector<CLI::App*> AddQueueCommands(CLI::App& app, QueueArgs& args);

}  // namespace gpuman::cli
