// `gpuman slurm gres-conf [--check] [--allow-missing]`, `healthcheck`, `prolog`, `epilog`: node-side help for
// Slurm admins (docs/slurm.md).
// Main thread only.
#pragma once

#include <string>

#include "cli/context.h"
#include "cli/slurm_hooks.h"

namespace gpuman::cli {

struct SlurmArgs {
  std::string subcommand;  // gres-conf | healthcheck | prolog | epilog | job-summary (the parser sets it)
  bool check = false;  // gres-conf --check: compare slurmd -G with NVML
  bool allow_missing = false;  // gres-conf: print the file even when a GPU is left out of it
  SlurmHookArgs hooks;  // healthcheck, prolog, epilog (cli/slurm_hooks.h)
  std::string summary_job_id;         // job-summary ID (cli/slurm_accounting.h)
};
int RunSlurm(const SlurmArgs& args, Context& ctx);

}  // namespace gpuman::cli
