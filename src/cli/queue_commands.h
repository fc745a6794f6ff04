// The queue commands: `gpuman submit`, `queue`, `show`, `cancel`, `logs`, `wait`, `hold`,
// `resume`, `drain`, `undrain`, which talk to the daemon over its socket (DaemonClient), and
// the arguments of `gpuman daemon` too (cli/daemon_command.h runs it). Main thread only.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cli/context.h"
#include "cli/job_filter.h"
#include "cli/selection_options.h"

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
  bool per_gpu = false;  // refused: `run --per-gpu` only, for now
  std::vector<int64_t> after;
  std::vector<std::string> command;
  std::optional<std::string> array;  // --array 0-99%8
  std::optional<std::string> notify;  // --notify 'PROGRAM ARGS' or mail
  // update
  std::optional<int> new_priority;
  std::optional<std::string> new_name;  // (--time-limit: time_limit)
  // queue / show / ...
  bool all = false;
  bool json = false;
  std::optional<std::string> watch;  // queue --watch[=SECONDS]: "" = the default period
  int iterations = 0;                // with --watch: stop after this many refreshes (0 = forever)
  bool follow = false;
  bool expand = false;                // queue --expand: every task of an array on its own row
  std::vector<std::string> ids;       // job ids as typed: 12, or 12_7 (model::ParseJobRef)
  JobFilterArgs filter;  // queue, cancel, hold, resume: --user, --me, --state, --name, --all
  std::string gpu;
  std::string reason;
  // --backend and slurm:ID ids (cli/slurm_submit.h)
  std::optional<std::string> backend;
  int slurm_ids = 0;    // ids written slurm:N (the prefix is taken off)
  int slurm_after = 0;  // --after ids written slurm:N
};

/// Runs the chosen one (its name; not `daemon`). Returns the exit code.
int RunQueueCommand(const std::string& name, const QueueArgs& args, Context& ctx);

}  // namespace gpuman::cli
