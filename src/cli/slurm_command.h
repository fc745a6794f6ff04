// `gpuman slurm gres-conf [--check]`, `healthcheck`, `prolog`, `epilog`: node-side help for
// Slurm admins (docs/slurm.md).
// Main thread only.
#pragma once

#include <string>

#include "cli/context.h"
#include "cli/slurm_hooks.h"

namespace CLI {
class App;
}

namespace gpuman::cli {

struct SlurmArgs {
  bool check = false;  // gres-conf --check: compare slurmd -G with NVML
  CLI::App* gres_conf = nullptr;
  SlurmHookArgs hooks;  // healthcheck, prolog, epilog (cli/slurm_hooks.h)
  std::string summary_job_id;         // job-summary ID (cli/slurm_accounting.h)
  CLI::App* job_summary = nullptr;
};
CLI::App* AddSlurmCommand(CLI::App& app, SlurmArgs& args);
int RunSlurm(const SlurmArgs& args, Context& ctx);

}  // namespace gpuman::cli
