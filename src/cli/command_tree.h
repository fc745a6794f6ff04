// The whole gpuman command line as one CLI11 tree: every visible subcommand with its options,
// bound to the argument structs the Run* functions read. Main builds one per run; tests and
// the man page / completion generators (cli/help_docs.h) build one to walk it. One thread.
#pragma once

#include <memory>

namespace CLI {
class App;
}

namespace gpuman::cli {

class CommandTree {
 public:
  /// Registers every command (app.cc); nothing is parsed yet.
  CommandTree();
  ~CommandTree();
  CommandTree(const CommandTree&) = delete;
  CommandTree& operator=(const CommandTree&) = delete;

  CLI::App& app();

  struct Parts;  // the App, each command's App* and argument struct (app.cc)
  Parts& parts() { return *parts_; }

 private:
  std::unique_ptr<Parts> parts_;
};

}  // namespace gpuman::cli
