// Jobs of the queue (`gpuman submit`): what was asked for, by whom, and where the job is in
// its life. Plain values shared by the job store, the scheduler and the protocol. The
// allowed state transitions are written down in sched/ (job_state.h), not here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace gpuman::model {

enum class JobState {
  kQueued,     // waiting for GPUs (or for --after, or held)
  kHeld,       // `gpuman hold`: not eligible until `gpuman resume`
  kStarting,   // GPUs reserved, supervisor being started
  kRunning,    // supervisor reported the job's process started
  kSucceeded,  // exited 0
  kFailed,     // exited non-zero, was killed, or could not start
  kCancelled,  // `gpuman cancel` (before or while running)
  kTimedOut,   // ran past --time-limit
};

/// "queued", "held", "starting", "running", "succeeded", "failed", "cancelled", "timed_out".
const char* JobStateName(JobState state);
/// The inverse of JobStateName; nullopt for an unknown name.
std::optional<JobState> ParseJobState(const std::string& name);
/// True for succeeded, failed, cancelled, timed_out.
bool IsFinal(JobState state);

/// The reason of a job that failed because one of its GPUs failed while it ran (the
/// supervisor ended it): `wait` tells it from a job that failed by itself.
inline constexpr char kGpuLostReason[] = "one of its GPUs failed while it ran";

/// Why a failed job never ran its command (set only then; `reason` says it in words).
/// `wait` maps these to the exit codes scripts know from shells and env(1).
enum class JobFailure {
  kNone,             // the command ran (or the job has not failed)
  kCommandNotFound,  // argv[0] is on none of the job's PATH directories (a shell's 127)
  kCannotExecute,    // found but not executable: permission, not a binary (a shell's 126)
  kCannotStart,      // its directory, its output file or its owner's credentials (env's 125)
};

/// "", "command_not_found", "cannot_execute", "cannot_start".
const char* JobFailureName(JobFailure failure);
/// The inverse of JobFailureName; nullopt for an unknown name.
std::optional<JobFailure> ParseJobFailure(const std::string& name);

/// The largest fields a submit may carry (checked by the daemon, so every client is bound;
/// docs/protocol.md). Bytes, not characters.
inline constexpr size_t kMaxJobNameBytes = 256;
inline constexpr size_t kMaxJobArgBytes = 64 * 1024;       // one element of argv
inline constexpr size_t kMaxJobArgvBytes = 128 * 1024;     // all of argv together
inline constexpr size_t kMaxJobArgs = 4096;                // elements of argv
inline constexpr size_t kMaxJobEnvBytes = 256 * 1024;      // every NAME=VALUE together
inline constexpr size_t kMaxJobPathBytes = 4096;           // cwd and the output path (PATH_MAX)

/// The first field of a submitted job over its limit or unusable for exec (a NUL byte in
/// argv, an environment name that is empty or holds '=' or NUL), as one line naming the
/// field and the limit ("--name: 600 bytes; the limit is 256 bytes"); nullopt when all fit.
std::optional<std::string> CheckJobFields(const std::string& name, const std::vector<std::string>& argv,
                                          const std::map<std::string, std::string>& env, const std::string& cwd,
                                          const std::string& output_path);

/// What the GPUs must be like: the selection options of `select`, `run` and `submit` as
/// data, the one shape used by the CLI, the wire, the job store and policy::Select. Every
/// filter is optional; the defaults ask for one idle GPU.
struct GpuRequest {
  int count = 1;  // -n/--count (>= 1); 0 only together with gpus == none (empty vector)
  std::optional<std::vector<std::string>> gpus;  // --gpus: only these UUIDs; empty = "none"
  std::optional<int64_t> min_free_memory_bytes;  // --min-free-memory
  std::optional<int> max_utilization_percent;    // --max-utilization, 0..100
  std::optional<std::string> model;              // --model: case-insensitive substring of name
  std::optional<std::string> min_compute_capability;  // "8.0"; compared as major.minor
  std::vector<std::string> exclude;                   // --exclude UUIDs
  bool allow_shared = false;  // foreign processes do not make a GPU busy (leases still do)
  /// --gpu-memory: a slice of this much memory on each GPU instead of whole GPUs
  /// (docs/share.md). Slices share a GPU with other slices, never with a whole-GPU lease.
  std::optional<int64_t> gpu_memory_bytes;
  /// --prefer fastest: among the eligible GPUs, the fastest by peak figures first
  /// (model/peak.h; docs/selection.md). Not for the queue: `submit` refuses it.
  bool prefer_fastest = false;
  /// With prefer_fastest: FP32 TFLOPS `gpuman bench` measured, by GPU UUID (the machine's
  /// file and the caller's own; docs/selection.md). A ranking preference, not a rule.
  std::map<std::string, double> measured_fp32_tflops;
  /// --mps: the lease's processes are MPS clients of a control daemon gpuman runs for the
  /// GPU (docs/share.md, "MPS"). One GPU per MPS request.
  bool mps = false;
  /// --gpu-share PERCENT (1..100, with mps only): CUDA_MPS_ACTIVE_THREAD_PERCENTAGE.
  std::optional<int> gpu_share_percent;
  /// --mig PROFILE: `count` MIG devices of this profile ("1g.10gb") instead of whole GPUs
  /// (docs/share.md, "MIG"). `gpus` naming MIG UUIDs ("MIG-…") asks for those MIG devices.
  /// A GPU in MIG mode is never leased whole.
  std::optional<std::string> mig_profile;

  // The fields below are never on the wire nor in the job store: whoever knows them
  // fills them in where the request is judged.

  /// Enclosing allocation (Slurm, container, outer CUDA_VISIBLE_DEVICES): only these
  /// UUIDs. UUIDs that are not on this machine are ignored. Travels to a daemon as
  /// exclusions (WithAllowedAsExclusions).
  std::optional<std::vector<std::string>> allowed;
  /// Drained GPUs (UUID -> the drain's reason): never eligible, with the reason
  /// "drained (<reason>)". A "now" reason: drains are lifted (kBusy, not kNotFound).
  /// Filled in by whoever knows the drains (the daemon, the CLI).
  std::map<std::string, std::string> drained;
  /// GPUs the machine's [share] gpus leaves out of slicing (UUID -> why): never eligible
  /// for a slice request. Filled in with the drains.
  std::map<std::string, std::string> not_sliceable;
  /// Who asks (for MPS's one-user-per-GPU rule: a GPU running MPS for another user is not
  /// eligible for an MPS request). Filled in by ApplyLeaseRules and the scheduler.
  std::optional<uint32_t> uid;
};

/// Whether the request asks for MIG devices (--mig, or MIG UUIDs in --gpus).
bool IsMigRequest(const GpuRequest& request);

/// Queued jobs cannot ask for MIG devices yet (the job store keeps no profile): the one
/// line that says so, or nullopt for a request that is not a MIG one. Used by the CLI and
/// the daemon alike.
std::optional<std::string> RefuseMigInQueue(const GpuRequest& request);

/// `request` as it may travel (wire, job store): `allowed` folded into `exclude` using
/// `machine_uuids` (the UUIDs of the machine's GPUs; every one of them not allowed and not
/// yet excluded is appended), `allowed` and `drained` cleared.
GpuRequest WithAllowedAsExclusions(GpuRequest request, const std::vector<std::string>& machine_uuids);

/// `submit --notify`: what runs once the job (or the whole array) is final, as the job's
/// owner (docs/scheduling.md, "End-of-job notifications"). Either the machine's mail hook
/// or the user's own program, as argv (argv[0] an absolute path, resolved at submit; the
/// %j, %x, %u, %s, %e patterns of model/job_notify.h are filled in when it runs).
struct JobNotify {
  bool mail = false;
  std::vector<std::string> argv;  // empty for mail
  bool operator==(const JobNotify&) const = default;
};
/// The most a --notify command may hold (checked by the daemon).
inline constexpr size_t kMaxNotifyArgs = 256;
inline constexpr size_t kMaxNotifyArgvBytes = 16 * 1024;

struct Job {
  int64_t id = 0;
  std::string name;
  uint32_t uid = 0;
  uint32_t gid = 0;
  std::string user;
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;  // submit-time environment
  std::string cwd;
  std::string output_path;                 // stdout+stderr log
  GpuRequest request;
  int priority = 0;                        // higher runs first
  std::optional<int64_t> time_limit_ms;
  bool requeue = false;                    // requeue instead of failing when a GPU is lost
  std::vector<int64_t> after;              // start only after these jobs succeeded

  JobState state = JobState::kQueued;
  int64_t submitted_unix_ms = 0;
  std::optional<int64_t> started_unix_ms;
  std::optional<int64_t> ended_unix_ms;
  std::optional<int> exit_code;
  std::vector<std::string> gpu_uuids;      // while starting/running, and after
  std::optional<int64_t> lease_id;
  std::optional<int32_t> supervisor_pid;
  std::optional<int64_t> supervisor_start_ticks;
  std::string reason;                      // why it waits / why it failed
  JobFailure failure = JobFailure::kNone;  // why it never ran, for a job failed before exec
  std::optional<int64_t> idle_since_unix_ms;  // running but idle (daemon's idle watch)

  // A task of a job array (`submit --array 0-99%8`): every task is a job of its own, and
  // array_id is the id of the array's first task (Slurm's ArrayJobID). Unset otherwise.
  std::optional<int64_t> array_id;
  std::optional<int64_t> array_task;   // the task's index: GPUMAN_ARRAY_TASK_ID, %a
  std::optional<int> array_limit;      // %N: at most this many tasks of the array at once

  // `submit --notify`: the same on every task of an array, which is notified once.
  std::optional<JobNotify> notify;
  std::optional<int64_t> notified_unix_ms;  // when its notification ended (ran, or could not)
  std::string notify_outcome;               // "exited with status 0", "timed out", ...
};

/// How a command names a job: `12` (a job, or every task of array 12) or `12_7` (task 7 of
/// array 12), as Slurm's commands do.
struct JobRef {
  JobRef() = default;
  JobRef(int64_t job_id, std::optional<int64_t> task_index = std::nullopt)  // NOLINT: a plain id is a ref
      : id(job_id), task(task_index) {}
  int64_t id = 0;
  std::optional<int64_t> task;
  bool operator==(const JobRef&) const = default;
};
/// "12" or "12_7". Errors: kInvalidArgument ("'x': not a job ID (12, or 12_7 for task 7
/// of array 12)").
Result<JobRef> ParseJobRef(std::string_view text);
std::string FormatJobRef(const JobRef& ref);
/// How a job is named: its task reference for a task of an array ("12_7"), else its id.
JobRef RefOf(const Job& job);
/// "12_7" for a task of array 12, else "12".
std::string JobName(const Job& job);
/// Whether `job` is the first task of its array, whose id names the whole array.
inline bool IsArrayHead(const Job& job) { return job.array_id && *job.array_id == job.id; }
/// Whether `ref` names `job`: the job itself, its task reference, or (a plain id) the
/// array it is a task of.
bool RefNames(const JobRef& ref, const Job& job);

/// The tasks `submit --array SPEC` asks for: Slurm's syntax, comma-separated items of N,
/// N-M or N-M:STEP, then optionally %LIMIT (how many run at once). Task indices are
/// 0..kMaxArrayTaskIndex, at most kMaxArrayTasks of them, ascending without duplicates.
struct ArraySpec {
  std::vector<int64_t> tasks;
  std::optional<int> limit;
};
inline constexpr int64_t kMaxArrayTaskIndex = 4000000;  // Slurm's largest MaxArraySize - 1
inline constexpr size_t kMaxArrayTasks = 10000;
/// Errors: kInvalidArgument, one line naming the item ("--array: '5-2': the range is
/// backwards").
Result<ArraySpec> ParseArraySpec(std::string_view spec);
/// Tasks as ranges: {0,1,2,5,7,8} -> "0-2,5,7-8".
std::string FormatTaskRanges(const std::vector<int64_t>& tasks);

/// A job's --output with Slurm's patterns filled in: %j the job id, %u the user, %x the
/// job's name ('/' in it written '_', so that a name never makes a directory), %A the
/// array's id and %a the task's index (for a job that is not an array task, %A is its id
/// and %a is "0", as Slurm has it), %% one '%'. Any other '%' sequence is kept as
/// written. Needs job.id, user, name and the array fields.
std::string ExpandOutputPattern(const std::string& pattern, const Job& job);

}  // namespace gpuman::model
