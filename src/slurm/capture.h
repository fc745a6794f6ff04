// Runs a Slurm tool (slurmd -G, later scontrol) as argv, never through a shell, and
// collects its stdout and stderr. Blocking; call from the command's thread.
#pragma once

#include <string>
#include <vector>

#include "base/result.h"

namespace gpuman::slurm {

struct Captured {
  int exit_code = -1;  // 128+N when killed by signal N
  std::string output;  // stdout and stderr together, at most 1 MiB
};

/// Runs `argv` (argv[0] looked up in PATH) with stdin from /dev/null. Errors: kNotFound
/// when argv[0] cannot be run ("slurmd: not found"), kIo when fork or pipe fails.
Result<Captured> RunCapture(const std::vector<std::string>& argv);

}  // namespace gpuman::slurm
