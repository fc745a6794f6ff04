// The operations of the gpuman protocol: one args struct and one result struct per op, and
// their JSON forms (docs/protocol.md lists them). The envelopes around them live in
// envelope.h. Pure value types; ToJson never throws, FromJson never throws. Any thread.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "model/device_snapshot.h"
#include "model/drain.h"
#include "model/job.h"
#include "model/lease.h"
#include "protocol/error_codes.h"

namespace gpuman::protocol {

/// The version this build speaks, in "v" of every message and in hello.
inline constexpr int kProtocolVersion = 1;
/// Most bytes of log data the daemon puts in one logs reply. JSON escaping can grow data
/// up to 6x, so this keeps a reply under kMaxMessageBytes.
inline constexpr int64_t kMaxLogChunkBytes = 128 * 1024;

/// In the order of RequestArgs's alternatives (envelope.h).
enum class Op {
  kHello,
  kSubmit,
  kQueue,
  kShow,
  kCancel,
  kHold,
  kResume,
  kWait,
  kLogs,
  kDrain,
  kUndrain,
  kLeases,
  kAcquire,
  kAddProcesses,
  kRelease,
  kStatus,
  kHealth,
  kDrains,
  kSnapshot,
  kPreview,
  kUpdate,
};

/// "hello", "submit", ..., "add_processes", "release", "status", "health", "drains", "snapshot",
/// "preview", "update".
const char* OpName(Op op);
/// The inverse of OpName; nullopt for an unknown name.
std::optional<Op> ParseOp(std::string_view name);

// ---- hello: must be the first request on a connection.
struct HelloArgs {
  std::string client = "gpuman";  // e.g. "gpuman 0.1.0"; informational
  int protocol = kProtocolVersion;
};
struct HelloResult {
  int protocol = kProtocolVersion;
  uint32_t uid = 0;  // the caller as the daemon sees it (SO_PEERCRED)
  std::string user;
  std::string daemon;  // e.g. "gpumand 0.1.0"; informational
};
/// unsupported_version when the client speaks another protocol version; nullopt when fine.
std::optional<WireError> CheckHello(const HelloArgs& hello);

// ---- submit: queue a job.
struct SubmitArgs {
  std::string name;                        // "" lets the daemon name it after argv[0]
  std::vector<std::string> argv;           // non-empty; no NUL bytes
  std::map<std::string, std::string> env;  // keys non-empty, without '=' or NUL
  std::string cwd;                         // absolute
  std::optional<std::string> output;       // log path (absolute or relative to cwd); null: default
  model::GpuRequest request;
  int priority = 0;
  std::optional<int64_t> time_limit_ms;  // >= 1 or null
  bool requeue = false;
  std::vector<int64_t> after;  // job ids >= 1
  /// `--array` as typed ("0-99%8", model::ParseArraySpec): the job is an array of tasks.
  /// The daemon parses it, so that its limits bind every client.
  std::optional<std::string> array = std::nullopt;
  /// `--notify`: run at the job's end as its owner (model::JobNotify; argv[0] absolute,
  /// resolved by the client on the submitter's PATH). Checked by the daemon
  /// (model::CheckNotify; mail only where the machine configures a mail program).
  std::optional<model::JobNotify> notify = std::nullopt;
};
struct SubmitResult {
  int64_t id = 0;  // the job's id; for an array, the array's id (its first task's)
  std::optional<int64_t> tasks = std::nullopt;  // an array: how many tasks it has
};

// ---- queue: list jobs (summaries: JobToJson(job, false)), one page at a time.
/// The most jobs one queue reply holds (a larger `limit` is lowered to it).
inline constexpr int64_t kMaxQueuePage = 500;
struct QueueArgs {
  bool all = false;               // include finished jobs
  int64_t after_id = 0;           // only jobs with a larger id (0: from the first)
  std::optional<int64_t> limit = std::nullopt;  // at most this many (>= 1); nullopt: kMaxQueuePage
};
struct QueueResult {
  std::vector<model::Job> jobs;  // private fields are not sent and come back empty
  /// Set when more jobs may follow: ask again with after_id = *next. nullopt: this was
  /// the last page (and what a daemon from before paging sends).
  std::optional<int64_t> next = std::nullopt;
};

// Job references on the wire: a plain id is a JSON integer (as before arrays), a task of
// an array is a string "12_7" (model::JobRef). A plain id that is an array's id names the
// whole array.

// ---- show: one job, or a whole array.
struct ShowArgs {
  model::JobRef id;
};
/// An array in `show`: its tasks by state, as ranges ("0-4,7").
struct ArrayInfo {
  int64_t id = 0;
  std::optional<int> limit;
  int64_t tasks = 0;
  std::map<std::string, std::string> by_state;  // state name -> task ranges; only states with tasks
};
struct ShowResult {
  model::Job job;                // for an array, its first task
  bool include_private = false;  // sender: send argv/env/cwd/output_path; receiver: they were sent
  std::optional<ArrayInfo> array = std::nullopt;  // the reference named a whole array
};

// ---- cancel, hold, resume: act on several jobs, one outcome each.
struct CancelArgs {
  std::vector<model::JobRef> ids;  // non-empty, each id >= 1
};
struct HoldArgs {
  std::vector<model::JobRef> ids;
};
struct ResumeArgs {
  std::vector<model::JobRef> ids;
};
struct IdOutcome {
  model::JobRef id;                // as the request named it
  std::optional<WireError> error;  // nullopt: done
};
struct IdsResult {
  std::vector<IdOutcome> results;  // in the order of the request's ids
};

// ---- wait: until the job is final.
struct WaitArgs {
  model::JobRef id;
};
/// For an array: final when every task is; then the outcome of its first task that did
/// not succeed (or of its last task), named by `of`.
struct WaitResult {
  model::JobState state = model::JobState::kQueued;
  std::optional<int> exit_code;
  std::optional<model::JobRef> of = std::nullopt;  // the task the outcome is of (an array)
};

// ---- logs: a chunk of the job's output file.
struct LogsArgs {
  model::JobRef id;
  int64_t offset = 0;  // byte offset in the log file
};
struct LogsResult {
  std::string data;         // at most kMaxLogChunkBytes; invalid UTF-8 arrives as U+FFFD
  int64_t next_offset = 0;  // byte offset in the file to ask for next (not offset + data.size())
  bool eof = false;         // the job is final and everything was sent
};

// ---- drain / undrain: take a GPU out of (or back into) scheduling.
struct DrainArgs {
  std::string gpu;  // UUID (or unique prefix) or NVML index as a string, e.g. "2"
  std::string reason;
};
struct UndrainArgs {
  std::string gpu;
  std::string reason;
};
struct DrainResult {
  std::string gpu_uuid;  // the GPU `gpu` named
};

// ---- leases: the current leases, one page at a time, in id order. Leases taken without
// the daemon (the machine lease table's) have negative ids, so they come first.
/// The most leases one leases reply holds (a larger `limit` is lowered to it).
inline constexpr int64_t kMaxLeasePage = 500;
struct LeasesArgs {
  std::optional<int64_t> after_id = std::nullopt;  // only leases with a larger id; nullopt: from the first
  std::optional<int64_t> limit = std::nullopt;     // at most this many (>= 1); nullopt: kMaxLeasePage
};
struct LeasesResult {
  std::vector<model::Lease> leases;
  /// Set when more leases may follow: ask again with after_id = *next. nullopt: this was
  /// the last page (and what a daemon from before paging sends).
  std::optional<int64_t> next = std::nullopt;
};

// ---- acquire: `gpuman run` through the daemon.
struct AcquireArgs {
  model::GpuRequest request;
  std::string command;             // for display, e.g. "python train.py"
  int32_t pid = 0;                 // the runner; >= 1
  int64_t start_time_ticks = 0;    // of `pid`, field 22 of /proc/<pid>/stat
  std::optional<int64_t> wait_ms;  // null: fail at once when busy; >= 0 otherwise
  std::optional<int64_t> within_lease_id;  // GPUMAN_LEASE_ID: choose inside this lease of the caller
  std::string kind = "run";  // recorded with the lease: "run" or "select" (`select --lease`)
  /// More processes of the lease (run's command, held at its start barrier), recorded
  /// with it and confined with it as add_processes would: one round trip fewer.
  std::vector<model::LeaseProcess> processes;
  /// Also answer with the GPUs' indices and names and the environment a child of the lease
  /// gets (visibility::ChildGpuEnv): for a client that runs no gpuman (the Python package).
  bool describe = false;
};
/// One GPU of a described lease.
struct AcquiredGpu {
  int index = -1;  // NVML index (a MIG device: its parent's)
  std::string uuid;
  std::optional<std::string> name;
  bool operator==(const AcquiredGpu&) const = default;
};
struct AcquireResult {
  int64_t lease_id = 0;
  std::vector<std::string> gpu_uuids;
  bool nested = false;  // lease_id is the enclosing lease: the caller joined it, not a new one
  /// The daemon took `processes` (one from before this member did not: the client then
  /// calls add_processes), and where it confined them (unset when it did not).
  bool processes_added = false;
  std::optional<std::string> cgroup;
  std::optional<int> master_port;  // the lease's rendezvous port (the enclosing one's when nested)
  /// An MPS lease (--mps): the pipe and log directories of the control daemon the daemon
  /// runs for its GPU (CUDA_MPS_PIPE_DIRECTORY, CUDA_MPS_LOG_DIRECTORY of its processes).
  std::optional<std::string> mps_pipe_directory;
  std::optional<std::string> mps_log_directory;
  /// With `describe`: the GPUs in gpu_uuids' order, and the child's environment.
  std::vector<AcquiredGpu> gpus;
  std::vector<std::pair<std::string, std::string>> env;
};

// ---- add_processes: more processes that keep a lease alive.
struct AddProcessesArgs {
  int64_t lease_id = 0;
  std::vector<model::LeaseProcess> processes;  // non-empty
};
/// The result of add_processes: where the daemon confined them (docs/enforce.md), so
/// that `run` can end what its command leaves there; unset when it did not.
struct AddProcessesResult {
  std::optional<std::string> cgroup;  // the lease's cgroup directory
};
// ---- release: give a lease back.
struct ReleaseArgs {
  int64_t lease_id = 0;
  /// `release --force` (root and the admin group): end what still runs on it first.
  bool force = false;
};
/// The result of release: {} once it is freed; with force, {"ending": N} while N of its
/// processes still live (they were signalled; ask again).
struct ReleaseResult {
  int64_t ending = 0;
};
/// The result of release: {}.
struct EmptyResult {};

// ---- status: free-form, passed through as a JSON object each way.
struct StatusArgs {
  nlohmann::json options = nlohmann::json::object();
};
struct StatusResult {
  nlohmann::json status = nlohmann::json::object();
};

// ---- health: the daemon's health report (findings, quarantined GPUs), free-form JSON in
// the schema of `gpuman health --json` (docs/json.md).
struct HealthArgs {};
struct HealthResult {
  nlohmann::json report = nlohmann::json::object();
};

// ---- drains: every drained GPU (an admin's drain or the health watch's), for any caller.
struct DrainsArgs {};
struct DrainsResult {
  std::vector<model::GpuDrain> drains;  // in uuid order
};

// ---- snapshot: the daemon's latest device sample with what `status` and `top` show
// beside it (leases, active jobs, drains), in one round trip instead of an NVML session
// of the client's own. Processes of other users carry only what the caller's /proc would
// show it (docs/protocol.md, "Processes through the daemon").
struct SnapshotArgs {
  bool processes = true;  // false: every GPU's process list comes back empty
  bool topology = false;  // true: the machine's NVLink/PCIe topology comes with it
  /// true: only the sample (no leases, jobs or drains beside it): what a client that needs
  /// GPU facts and not the holders asks (`run`, `select`, `explain`: docs/design.md).
  bool gpus_only = false;
};
struct SnapshotResult {
  /// The sample; nullopt when the daemon has none (its device read failed: `error`).
  std::optional<model::MachineSnapshot> snapshot;
  std::string error;                 // why there is no snapshot; "" otherwise
  int64_t sample_interval_ms = 0;    // the daemon's sampling period
  std::optional<std::string> scenario;  // the daemon runs on the stand-in NVML (--simulate)
  std::vector<model::Lease> leases;  // as the leases op: every live lease, idle marks set
  std::vector<model::Job> jobs;      // as queue without --all: summaries of active jobs
  std::vector<model::GpuDrain> drains;  // as the drains op
};

// ---- preview: what an acquire would be granted now, without taking anything (plain
// `gpuman select`): the same step as acquire, so the answer is the one `run` would get.
// ---- update: change what queued or held jobs asked for (`gpuman update`).
struct UpdateArgs {
  std::vector<model::JobRef> ids;               // non-empty; an array's id: its waiting tasks
  std::optional<int> priority;                  // above the default only for the admin group and root
  std::optional<int64_t> time_limit_ms;         // >= 1
  std::optional<std::string> name;              // non-empty, at most kMaxJobNameBytes
};

struct PreviewArgs {
  model::GpuRequest request;
  std::optional<int64_t> within_lease_id;  // as acquire's
};
struct PreviewResult {
  std::vector<std::string> gpu_uuids;  // in index order
  std::string placement;               // "NVLink (NV12)", "single GPU", ...
  std::optional<int64_t> lease_id;     // the enclosing lease when nested; else null
  bool nested = false;
};

/// The text DumpJson(ToJson(v)) would write for `v` carrying a snapshot whose
/// DumpJson(MachineSnapshotToJson(...)) text is `snapshot_json`; v.snapshot must be nullopt
/// (it is not read). The daemon keeps the encoded snapshot of each sample per caller view.
std::string EncodeSnapshotResult(const SnapshotResult& v, std::string_view snapshot_json);

// ---- JSON forms. ToJson gives the value of "args" or "result".
nlohmann::json ToJson(const HelloArgs& v);
nlohmann::json ToJson(const HelloResult& v);
nlohmann::json ToJson(const SubmitArgs& v);
nlohmann::json ToJson(const SubmitResult& v);
nlohmann::json ToJson(const QueueArgs& v);
nlohmann::json ToJson(const QueueResult& v);
nlohmann::json ToJson(const ShowArgs& v);
nlohmann::json ToJson(const ShowResult& v);
nlohmann::json ToJson(const CancelArgs& v);
nlohmann::json ToJson(const HoldArgs& v);
nlohmann::json ToJson(const ResumeArgs& v);
nlohmann::json ToJson(const IdsResult& v);
nlohmann::json ToJson(const WaitArgs& v);
nlohmann::json ToJson(const WaitResult& v);
nlohmann::json ToJson(const LogsArgs& v);
nlohmann::json ToJson(const LogsResult& v);
nlohmann::json ToJson(const DrainArgs& v);
nlohmann::json ToJson(const UndrainArgs& v);
nlohmann::json ToJson(const DrainResult& v);
nlohmann::json ToJson(const LeasesArgs& v);
nlohmann::json ToJson(const LeasesResult& v);
nlohmann::json ToJson(const AcquireArgs& v);
nlohmann::json ToJson(const AcquireResult& v);
nlohmann::json ToJson(const AddProcessesArgs& v);
nlohmann::json ToJson(const ReleaseArgs& v);
nlohmann::json ToJson(const EmptyResult& v);
nlohmann::json ToJson(const ReleaseResult& v);
nlohmann::json ToJson(const AddProcessesResult& v);
nlohmann::json ToJson(const StatusArgs& v);
nlohmann::json ToJson(const StatusResult& v);
nlohmann::json ToJson(const HealthArgs& v);
nlohmann::json ToJson(const HealthResult& v);
nlohmann::json ToJson(const DrainsArgs& v);
nlohmann::json ToJson(const DrainsResult& v);
nlohmann::json ToJson(const SnapshotArgs& v);
nlohmann::json ToJson(const SnapshotResult& v);
nlohmann::json ToJson(const PreviewArgs& v);
nlohmann::json ToJson(const UpdateArgs& v);
nlohmann::json ToJson(const PreviewResult& v);
nlohmann::json ToJson(const WireError& v);

/// Reads an "args" (paths start with "args") or "result" (paths start with "result")
/// object. Unknown members are ignored; optional members may be missing.
/// Errors: kInvalidArgument naming the first bad member, e.g.
/// "args.request.count: expected integer >= 1", "args.argv: missing".
/// Defined for every args and result type above and for WireError (path "error").
template <typename T>
Result<T> FromJson(const nlohmann::json& j);
template <>
Result<HelloArgs> FromJson<HelloArgs>(const nlohmann::json& j);
template <>
Result<HelloResult> FromJson<HelloResult>(const nlohmann::json& j);
template <>
Result<SubmitArgs> FromJson<SubmitArgs>(const nlohmann::json& j);
template <>
Result<SubmitResult> FromJson<SubmitResult>(const nlohmann::json& j);
template <>
Result<QueueArgs> FromJson<QueueArgs>(const nlohmann::json& j);
template <>
Result<QueueResult> FromJson<QueueResult>(const nlohmann::json& j);
template <>
Result<ShowArgs> FromJson<ShowArgs>(const nlohmann::json& j);
template <>
Result<ShowResult> FromJson<ShowResult>(const nlohmann::json& j);
template <>
Result<CancelArgs> FromJson<CancelArgs>(const nlohmann::json& j);
template <>
Result<HoldArgs> FromJson<HoldArgs>(const nlohmann::json& j);
template <>
Result<ResumeArgs> FromJson<ResumeArgs>(const nlohmann::json& j);
template <>
Result<IdsResult> FromJson<IdsResult>(const nlohmann::json& j);
template <>
Result<WaitArgs> FromJson<WaitArgs>(const nlohmann::json& j);
template <>
Result<WaitResult> FromJson<WaitResult>(const nlohmann::json& j);
template <>
Result<LogsArgs> FromJson<LogsArgs>(const nlohmann::json& j);
template <>
Result<LogsResult> FromJson<LogsResult>(const nlohmann::json& j);
template <>
Result<DrainArgs> FromJson<DrainArgs>(const nlohmann::json& j);
template <>
Result<UndrainArgs> FromJson<UndrainArgs>(const nlohmann::json& j);
template <>
Result<DrainResult> FromJson<DrainResult>(const nlohmann::json& j);
template <>
Result<LeasesArgs> FromJson<LeasesArgs>(const nlohmann::json& j);
template <>
Result<LeasesResult> FromJson<LeasesResult>(const nlohmann::json& j);
template <>
Result<AcquireArgs> FromJson<AcquireArgs>(const nlohmann::json& j);
template <>
Result<AcquireResult> FromJson<AcquireResult>(const nlohmann::json& j);
template <>
Result<AddProcessesArgs> FromJson<AddProcessesArgs>(const nlohmann::json& j);
template <>
Result<ReleaseArgs> FromJson<ReleaseArgs>(const nlohmann::json& j);
template <>
Result<EmptyResult> FromJson<EmptyResult>(const nlohmann::json& j);
template <>
Result<ReleaseResult> FromJson<ReleaseResult>(const nlohmann::json& j);
template <>
Result<AddProcessesResult> FromJson<AddProcessesResult>(const nlohmann::json& j);
template <>
Result<StatusArgs> FromJson<StatusArgs>(const nlohmann::json& j);
template <>
Result<StatusResult> FromJson<StatusResult>(const nlohmann::json& j);
template <>
Result<HealthArgs> FromJson<HealthArgs>(const nlohmann::json& j);
template <>
Result<HealthResult> FromJson<HealthResult>(const nlohmann::json& j);
template <>
Result<DrainsArgs> FromJson<DrainsArgs>(const nlohmann::json& j);
template <>
Result<DrainsResult> FromJson<DrainsResult>(const nlohmann::json& j);
template <>
Result<SnapshotArgs> FromJson<SnapshotArgs>(const nlohmann::json& j);
template <>
Result<SnapshotResult> FromJson<SnapshotResult>(const nlohmann::json& j);
template <>
Result<PreviewArgs> FromJson<PreviewArgs>(const nlohmann::json& j);
template <>
Result<UpdateArgs> FromJson<UpdateArgs>(const nlohmann::json& j);
template <>
Result<PreviewResult> FromJson<PreviewResult>(const nlohmann::json& j);
template <>
Result<WireError> FromJson<WireError>(const nlohmann::json& j);

}  // namespace gpuman::protocol
