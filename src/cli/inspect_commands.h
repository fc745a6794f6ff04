// `gpuman topo` and `gpuman explain`: read-only views of how GPUs connect and what a
// process will see through containers, Slurm and CUDA's variables. Main thread only.
#pragma once

#include <string>
#include <vector>

#include "cli/context.h"

namespace gpuman::cli {

struct TopoArgs {
  bool json = false;
  bool long_form = false;  // --long: each GPU's peak throughput too
  bool no_color = false;
};
int RunTopo(const TopoArgs& args, Context& ctx);

/// `gpuman list`: one line per GPU, as `nvidia-smi -L` prints them.
int RunList(Context& ctx);

struct ExplainArgs {
  bool json = false;
  bool no_color = false;
  std::vector<std::string> env;  // "K=V K2=V2" strings; replaces the current environment
};
int RunExplain(const ExplainArgs& args, Context& ctx);

/// Parses `--env` values ("CUDA_VISIBLE_DEVICES=0,1 CUDA_DEVICE_ORDER=PCI_BUS_ID").
/// Errors: kInvalidArgument for a word without '=' or with an empty name.
Result<std::map<std::string, std::string>> ParseEnvAssignments(const std::vector<std::string>& values);

}  // namespace gpuman::cli
