// `gpuman submit --backend slurm` and the queue commands on Slurm jobs: the translation of
// a gpuman job into sbatch's argv and batch script (pure), the parsing of what sbatch,
// squeue --json, scontrol show job -o, sacct -P and sinfo print (pure), and the few calls
// through the SlurmTools seam that combine them. docs/slurm.md, "Submitting through Slurm".
// Thread-safe (no state); the calls block on the Slurm commands.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "model/job.h"
#include "slurm/slurm_tools.h"

namespace gpuman::slurm {

/// A gpuman job as Slurm is asked to run it.
struct SbatchSpec {
  int gpus = 1;                           // -n: --gpus=N (or --gres=gpu:TYPE:N with gres_type)
  std::optional<std::string> gres_type;   // --model, as a Slurm GRES type
  std::optional<int64_t> time_limit_ms;   // --time-limit: -t
  std::vector<std::string> after;         // Slurm job ids: --dependency=afterok:A:B
  std::string name;                       // -J ("" -> the command's base name)
  std::optional<std::string> output;      // -o ("" -> gpuman-%j.log in cwd)
  bool requeue = false;                   // --requeue, else --no-requeue
  bool allow_shared = false;              // passed on to the node's `gpuman run`
  std::optional<std::string> mig_profile; // --mig: passed on to the node's `gpuman run` (gres_type holds it)
  std::string cwd;                        // -D
  std::string gpuman_exe;                 // the gpuman the node runs the job under
  std::vector<std::string> argv;          // the job's command
  std::optional<std::string> array;       // --array, already checked (model::ParseArraySpec): Slurm's own syntax
  std::optional<std::string> mail_user;   // --notify mail: --mail-type=END,FAIL --mail-user=USER
};

/// `text` quoted for a POSIX shell: '...' with every ' written '\''. Any byte but NUL
/// survives exactly (newlines, $, `, \, *, quotes).
std::string ShellQuote(std::string_view text);

/// A time limit for sbatch -t, "D-HH:MM:SS", rounded up to whole seconds.
std::string SlurmTimeLimit(int64_t ms);

/// sbatch's arguments for `spec` (the script comes on stdin): --parsable, -J, -D, -o,
/// --gpus or --gres, -t, --dependency=afterok + --kill-on-invalid-dep=yes, --[no-]requeue,
/// --mail-type and --mail-user.
std::vector<std::string> SbatchArgv(const SbatchSpec& spec);

/// The batch script: `exec <gpuman> run -q -n N [--allow-shared] -- <argv...>`, every word
/// quoted with ShellQuote, on the line right after `#!/bin/sh`, so that no argument can
/// become an #SBATCH directive (sbatch stops reading them at the first command).
std::string BatchScript(const SbatchSpec& spec);

/// The job id in `sbatch --parsable` output ("123" or "123;cluster").
/// Errors: kInternal when there is none.
Result<std::string> ParseSbatchJobId(std::string_view out);

/// The GPU types of `sinfo -h -o %G` ("gpu:a100:4(S:0-1),gpu:h100:2" -> a100, h100),
/// sorted, without duplicates.
std::vector<std::string> ParseSinfoGpuTypes(std::string_view text);

/// The GRES type for `--model TEXT`: TEXT spelled as `gpuman slurm gres-conf` spells
/// types (GresType: lower case, '_' for spaces), then the one configured type containing
/// it (gpuman's --model is a substring match). Without known types, the spelled TEXT.
/// Errors: kInvalidArgument when no type, or more than one, contains it.
Result<std::string> ResolveGresType(std::string_view model, const std::vector<std::string>& types);

/// One Slurm job, from whichever source knew it.
struct SlurmJob {
  std::string id;         // "123"
  std::string name;
  std::string user;
  std::string state;      // Slurm's JobState: PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, TIMEOUT, ...
  std::string reason;     // Slurm's Reason ("Resources", "Dependency", "None")
  std::optional<int> exit_code;  // ExitCode N:S -> N
  std::optional<int> signal;     // ExitCode N:S -> S (when not 0)
  int gpus = 0;
  std::string nodes;
  std::string time_limit;  // as Slurm prints it
  std::string submitted, started, ended;  // as Slurm prints them ("" when unknown)
  std::string output_path;  // StdOut (scontrol only)
  std::string cwd;
  std::string dependency;
  std::string source;  // "scontrol", "squeue", "sacct"
};

/// gpuman's state for a Slurm state: PENDING/REQUEUED -> queued, SUSPENDED/held ->
/// held, CONFIGURING -> starting, RUNNING/COMPLETING -> running, COMPLETED -> succeeded,
/// CANCELLED/PREEMPTED/DEADLINE -> cancelled, TIMEOUT -> timed_out, the rest -> failed.
model::JobState GpumanState(const SlurmJob& job);
/// Whether Slurm is done with the job.
bool IsFinalSlurmState(std::string_view state);

/// The Key=Value fields of one `scontrol show job -o` line. A value runs until the next
/// word that looks like a key ("[A-Z][A-Za-z0-9_:/]*="), so paths with spaces survive.
std::map<std::string, std::string> ParseScontrolFields(std::string_view line);
/// Errors: kNotFound when `text` holds no job.
Result<SlurmJob> JobFromScontrol(std::string_view text);
/// Every job of `squeue --json` (Slurm 22.05's v0.0.38; 23.x forms are accepted too).
/// Errors: kInternal for output that is not squeue's JSON.
Result<std::vector<SlurmJob>> JobsFromSqueueJson(std::string_view text);
/// The fields sacct is asked for (SacctArgv) and their parsing.
std::vector<std::string> SacctArgv(const std::string& id);
/// Errors: kNotFound when sacct knows no such job.
Result<SlurmJob> JobFromSacct(std::string_view text, const std::string& id);
/// The GPU count in a TRES string ("cpu=1,gres/gpu=2" or "gres/gpu:a100=2" -> 2) or
/// a TresPerJob/TresPerNode ("gres:gpu:2", "gres:gpu:a100:2", "gres/gpu:2"); 0 without.
int GpusInTres(std::string_view tres);

// Calls through the seam. They report a failing Slurm command with its own message.

/// sinfo's GPU types (empty when sinfo fails: the caller then spells --model itself).
std::vector<std::string> ConfiguredGpuTypes(SlurmTools& tools);
/// Submits; returns the Slurm job id. Errors: kNotFound (no sbatch), kInvalidArgument
/// (sbatch refused the job; its message).
Result<std::string> Submit(SlurmTools& tools, const SbatchSpec& spec);
/// The job from slurmctld (scontrol), else from accounting (sacct), else kNotFound.
Result<SlurmJob> FindJob(SlurmTools& tools, const std::string& id);
/// The job's Slurm state only (squeue -h -j ID -o %T; then FindJob when squeue has
/// forgotten it), for polling.
Result<std::string> JobState(SlurmTools& tools, const std::string& id);
/// Every job slurmctld knows (squeue --json); finished ones only with `all`.
Result<std::vector<SlurmJob>> ListJobs(SlurmTools& tools, bool all);
/// scancel / scontrol hold / scontrol release of one job, as the caller. Errors:
/// kPermissionDenied ("Access/permission denied"), kNotFound (unknown job), kInvalidArgument.
Status Cancel(SlurmTools& tools, const std::string& id);
Status Hold(SlurmTools& tools, const std::string& id, bool hold);

}  // namespace gpuman::slurm
