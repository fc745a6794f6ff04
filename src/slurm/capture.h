// Runs a Slurm tool (slurmd -G, scontrol) as argv, never through a shell, and collects its
// stdout and stderr, optionally within a deadline. Blocking; call from the command's thread.
#pragma once

#include <cstdint>
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

/// Like RunCapture, but the tool gets at most `timeout_ms`: past it, the tool (and its
/// process group) gets SIGKILL and the call fails with kUnavailable ("scontrol: no answer
/// within 10 s"). Health checks and prolog/epilog use it: Slurm kills them at its own limit.
Result<Captured> RunCapture(const std::vector<std::string>& argv, int64_t timeout_ms);

}  // namespace gpuman::slurm
