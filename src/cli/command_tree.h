// The gpuman command line as one CLI11 tree: every visible subcommand with its options,
// bound to the argument structs (cli/command_args.h) the handlers read. The parser builds
// the root and the one command it was asked for (registering every command's options
// costs every run; it falls back to the whole tree for help, completion and errors); tests
// and the man page / completion generators (cli/help_docs.h) build the whole tree to walk
// it. Built in cli/cli_options.cc, the one unit that includes CLI11. One thread.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace CLI {
class App;
}

namespace gpuman::cli {

class CommandTree {
 public:
  /// Registers every command; nothing is parsed yet.
  CommandTree();
  /// The root (global options, --version) and only `command`'s App: a name that is not a
  /// command of its own gets the queue commands (daemon, submit, ...), "" none at all.
  /// Has(command) says whether it was one.
  explicit CommandTree(std::string_view command);
  ~CommandTree();
  CommandTree(const CommandTree&) = delete;
  CommandTree& operator=(const CommandTree&) = delete;

  CLI::App& app();
  /// Whether the tree has a subcommand named `command`.
  bool Has(std::string_view command);
  /// Its commands, in the order --help lists them (hidden ones included).
  std::vector<std::string> CommandNames();

  struct Parts;  // the root App and the argument structs (cli_options.cc)
  Parts& parts() { return *parts_; }

 private:
  std::unique_ptr<Parts> parts_;
};

}  // namespace gpuman::cli
