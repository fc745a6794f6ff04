// The seam between gpuman and Slurm's client commands (sbatch, squeue, scontrol, scancel,
// sacct, sinfo): an interface with one real implementation that execs them as argv (never
// through a shell), as the calling user, and a fake in tests. Blocking; command thread only.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/result.h"

namespace gpuman::slurm {

/// What a Slurm command said.
struct ToolOutput {
  int exit_code = -1;  // 128+N when killed by signal N
  std::string out;     // stdout, at most 16 MiB
  std::string err;     // stderr, at most 1 MiB
};

class SlurmTools {
 public:
  virtual ~SlurmTools() = default;
  /// Runs `argv` (argv[0] a Slurm command looked up in PATH) with `input` on its stdin.
  /// Errors: kNotFound when argv[0] is not installed ("sbatch: not found"), kIo when
  /// fork or a pipe fails. A command that runs and fails is a ToolOutput, not an error.
  virtual Result<ToolOutput> Run(const std::vector<std::string>& argv, const std::string& input = "") = 0;
};

/// Execs the commands with `env` as their whole environment (sbatch exports it to the job,
/// as it does from a shell). Never changes user: Slurm decides what the caller may do.
class ExecSlurmTools final : public SlurmTools {
 public:
  explicit ExecSlurmTools(std::map<std::string, std::string> env) : env_(std::move(env)) {}
  Result<ToolOutput> Run(const std::vector<std::string>& argv, const std::string& input = "") override;

 private:
  std::map<std::string, std::string> env_;
};

}  // namespace gpuman::slurm
