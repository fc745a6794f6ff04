// The queue commands: `gpuman daemon`, `submit`, `queue`, `show`, `cancel`, `logs`,
// `wait`, `hold`, `resume`, `drain`, `undrain`. All but `daemon` talk to the daemon over
// its socket (DaemonClient). Main thread only.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cli/context.h"
#include "cli/selection_options.h"

namespace CLI {
class App;
}

namespace gpuman::cli {

struct QueueArgs {
  // daemon
  std::optional<std::string> socket;
  std::optional<std::string> state_dir;
  std::optional<std::string> metrics;  // daemon --metrics [ADDRESS]; "" = the default address
  // submit
  SelectionArgs selection;
  std::string name;
  int priority = 0;
  std::optional<std::string> time_limit;
  std::optional<std::string> output;
  bool requeue = false;
  std::vector<int64_t> after;
  std::vector<std::string> command;
  // queue / show / ...
  bool all = false;
  bool json = false;
  bool follow = false;
  std::vector<int64_t> ids;
  std::string gpu;
  std::string reason;
  // --backend and slurm:ID ids (cli/slurm_submit.h)
  std::optional<std::string> backend;
  int slurm_ids = 0;    // ids written slurm:N (the prefix is taken off)
  int slurm_after = 0;  // --after ids written slurm:N
};

/// Registers every queue command; returns them so app.cc can tell which one was chosen.
std::vector<CLI::App*> AddQueueCommands(CLI::App& app, QueueArgs& args);

/// Runs the chosen one (its name). Returns the exit code.
int RunQueueCommand(const std::string& name, const QueueArgs& args, Context& ctx);

}  // namespace gpuman::cli
