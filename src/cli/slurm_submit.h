// The Slurm paths of the queue commands: `submit --backend slurm` (or `[submit] backend =
// "slurm"`) becomes sbatch, and `queue`, `show`, `cancel`, `hold`, `resume`, `logs`,
// `wait` on `slurm:ID` jobs go to squeue/scontrol/sacct/scancel and the job's output file.
// Every Slurm command runs as the calling user (Slurm decides what they may do). Main
// thread only. docs/slurm.md, "Submitting through Slurm".
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "cli/context.h"
#include "slurm/slurm_tools.h"

namespace gpuman::cli {

struct QueueArgs;

/// How a Slurm job's id is written where a gpuman job id could be: `slurm:ID`.
inline constexpr std::string_view kSlurmIdPrefix = "slurm:";

/// Whether command `name` goes to Slurm: `--backend`, else `slurm:` ids, else the
/// config's [submit] backend. Errors: kInvalidArgument for `slurm:` ids with
/// `--backend gpuman`, or `slurm:` and plain ids mixed.
Result<bool> UsesSlurm(const std::string& name, const QueueArgs& args, const Config& config);

/// What the Slurm paths need from outside, so tests can fake it.
struct SlurmCliDeps {
  slurm::SlurmTools* tools = nullptr;
  std::string cwd;                            // the job's working directory
  std::string gpuman_exe;                     // the gpuman the node runs the job under
  std::function<void(int64_t ms)> sleep_ms;   // wait and logs -f poll with it
};

/// Runs queue command `name` against Slurm. Returns the exit code (docs/cli.md; `wait`
/// follows "Exit codes of wait").
int RunSlurmQueueCommand(const std::string& name, const QueueArgs& args, Context& ctx, const SlurmCliDeps& deps);
/// The same with the real tools (sbatch & co. exec'd with SbatchEnvironment).
int RunSlurmQueueCommand(const std::string& name, const QueueArgs& args, Context& ctx);

/// The environment sbatch gets (and, with its default --export=ALL, the job): the caller's,
/// without what names the submitting machine's GPUs and leases
/// (visibility::MachineBoundVariables: CUDA_VISIBLE_DEVICES, NVIDIA_VISIBLE_DEVICES,
/// GPUMAN_LEASE_ID, GPUMAN_JOB_ID): a queued job is not confined by the submitting shell.
std::map<std::string, std::string> SbatchEnvironment(const std::map<std::string, std::string>& env);

/// The exit code of `wait` for a finished Slurm job (docs/cli.md, "Exit codes of wait").
int SlurmWaitExitCode(const std::string& slurm_state, std::optional<int> exit_code, std::optional<int> signal);

}  // namespace gpuman::cli
