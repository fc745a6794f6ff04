// `gpuman run`: lease GPUs atomically, run a command on them with the right environment
// (or, with --per-gpu, one process per GPU with its rank), forward signals, release the
// lease when the job ends. Main thread only.
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
  bool per_gpu = false;     // one process per leased GPU, torchrun-style ranks (docs/cli.md)
  std::vector<std::string> command;
};

int RunRun(const RunArgs& args, Context& ctx);

}  // namespace gpuman::cli
