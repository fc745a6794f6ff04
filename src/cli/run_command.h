// `gpuman run`: lease GPUs atomically, run a command on them with the right environment,
// forward signals, release the lease when the job ends. Main thread only.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cli/context.h"
#include "cli/selection_options.h"

namespace gpuman::cli {

struct RunArgs {
  SelectionArgs selection;
  std::optional<std::string> wait;
  bool index = false;       // CUDA_VISIBLE_DEVICES as PCI-ordered indices instead of UUIDs
  bool bind_numa = false;   // CPU and memory affinity to the GPUs' NUMA node
  bool quiet = false;
  std::vector<std::string> command;
};

int RunRun(const RunArgs& args, Context& ctx);

}  // namespace gpuman::cli
