// The GPU environment gpuman gives a process it hands GPUs to: one builder for every
// caller (a queued job's supervisor, `run`'s child, the `export` lines of
// `select --format env`, and the variables `submit --backend slurm` keeps away from sbatch).
// It returns (name, value) pairs in a fixed order; each caller formats them (an env
// vector, shell `export` lines). Pure: no I/O, no getenv.
//
// The rules (docs/visibility.md, "The environment gpuman gives a child"; reference
// cuda-visible-devices.md section 6):
// - Identity is the UUID. CUDA_VISIBLE_DEVICES holds the GPUs' full UUIDs, comma-separated,
//   no spaces, in the order given (a selection is in index order). Only when the caller
//   asks for indices (`run --index`) does it hold NVML indices instead, sorted (PCI bus
//   order), and then only together with CUDA_DEVICE_ORDER=PCI_BUS_ID, which makes CUDA's
//   numbering nvidia-smi's.
// - CUDA_DEVICE_ORDER=PCI_BUS_ID always, in both modes: tools that print ordinals agree
//   with nvidia-smi.
// - NVIDIA_VISIBLE_DEVICES: the same UUIDs, always UUIDs (never indices: the container
//   runtime reads host NVML indices, which are not stable), so that a container the child
//   starts with the variable passed through (enroot, apptainer --nvccli, `docker run -e
//   NVIDIA_VISIBLE_DEVICES`) gets the same GPUs. An empty set is "none", the toolkit's
//   value for no GPU ("" would mean plain runc, and gpuman's resolver reads it as no
//   restriction).
// - GPUMAN_LEASE_ID: the lease the child lives in (for a nested `run`, the enclosing
//   lease), when there is one. A queued job's lease exists only after its supervisor
//   started (the lease holds the supervisor's pid), so for jobs the supervisor adds it at
//   its go (sched/supervisor.cc); the daemon builds the rest here without it.
// - GPUMAN_JOB_ID: a queued job's id; nothing else sets it (a `run` inside a job keeps the
//   job's, inherited).
// - GPUMAN_ARRAY_JOB_ID, GPUMAN_ARRAY_TASK_ID: for a task of a job array, the array's id
//   and the task's index (Slurm's SLURM_ARRAY_JOB_ID and SLURM_ARRAY_TASK_ID).
// - GPUMAN_SIMULATE: the scenario file of a simulated node, so that a gpuman inside the
//   child sees the same (simulated) GPUs its lease names.
// Every variable set here replaces an inherited one of the same name. The ones that name
// one machine's GPUs or lease (MachineBoundVariables) must not follow a job to another
// machine (`submit --backend slurm` drops them from sbatch's environment); the
// CUDA_DEVICE_ORDER and GPUMAN_SIMULATE settings are no machine's and stay.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gpuman::visibility {

/// One environment variable a child gets.
struct EnvVar {
  std::string name;
  std::string value;
  bool operator==(const EnvVar&) const = default;
};

/// How CUDA_VISIBLE_DEVICES names the GPUs.
enum class GpuNumbering {
  kUuids,       // full UUIDs (the default everywhere)
  kPciIndices,  // NVML indices in PCI bus order, with CUDA_DEVICE_ORDER=PCI_BUS_ID (`run --index`)
};

/// Where an MPS lease's control daemon lives (MpsDirectories), and the client's share.
struct MpsClient {
  std::string pipe_directory;  // CUDA_MPS_PIPE_DIRECTORY
  std::string log_directory;   // CUDA_MPS_LOG_DIRECTORY
  std::optional<int> active_thread_percent;  // --gpu-share: CUDA_MPS_ACTIVE_THREAD_PERCENTAGE
  bool operator==(const MpsClient&) const = default;
};

/// The pipe and log directories of the MPS control daemon gpuman runs for GPU `uuid`
/// under `run_dir` (`[share] mps_dir`, /run/gpuman/mps by default): RUN_DIR/UUID/pipe and
/// RUN_DIR/UUID/log. One place, so that the daemon and its clients agree.
MpsClient MpsDirectories(const std::string& run_dir, const std::string& uuid);

struct ChildGpuEnvRequest {
  std::vector<std::string> uuids;  // the child's GPUs; may be empty (a job with no GPU)
  std::vector<int> indices;        // their NVML indices, same order; needed for kPciIndices only
  GpuNumbering numbering = GpuNumbering::kUuids;
  std::optional<int64_t> lease_id;                 // GPUMAN_LEASE_ID
  std::optional<int64_t> job_id;                   // GPUMAN_JOB_ID
  std::optional<std::string> simulated_scenario;   // GPUMAN_SIMULATE: a scenario file's path
  std::optional<int> master_port;                  // the lease's rendezvous port: LaunchEnv's variables
  std::optional<int64_t> array_id;                 // GPUMAN_ARRAY_JOB_ID
  std::optional<int64_t> array_task;               // GPUMAN_ARRAY_TASK_ID
  /// A slice lease (`--gpu-memory`): the declared memory per GPU, and the smallest total
  /// memory among its GPUs (0 when unknown): SliceEnv's variables.
  std::optional<int64_t> slice_bytes;
  int64_t slice_of_total_bytes = 0;
  /// An MPS lease (`--mps`): MpsEnv's variables (the pinned memory limit from slice_bytes).
  std::optional<MpsClient> mps;
};

inline constexpr std::string_view kCudaVisibleDevices = "CUDA_VISIBLE_DEVICES";
inline constexpr std::string_view kCudaDeviceOrder = "CUDA_DEVICE_ORDER";
inline constexpr std::string_view kNvidiaVisibleDevices = "NVIDIA_VISIBLE_DEVICES";
inline constexpr std::string_view kLeaseIdVariable = "GPUMAN_LEASE_ID";
inline constexpr std::string_view kJobIdVariable = "GPUMAN_JOB_ID";
inline constexpr std::string_view kArrayJobIdVariable = "GPUMAN_ARRAY_JOB_ID";
inline constexpr std::string_view kArrayTaskIdVariable = "GPUMAN_ARRAY_TASK_ID";
inline constexpr std::string_view kSimulateVariable = "GPUMAN_SIMULATE";

/// The variables, in this order: CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER,
/// NVIDIA_VISIBLE_DEVICES, then GPUMAN_LEASE_ID, GPUMAN_JOB_ID, GPUMAN_ARRAY_JOB_ID,
/// GPUMAN_ARRAY_TASK_ID and GPUMAN_SIMULATE when
/// given, then LaunchEnv(master_port, the GPU count) when a port is given, then SliceEnv
/// for a slice. kPciIndices with `indices` not matching `uuids` in size is a broken invariant
/// (GPUMAN_CHECK).
std::vector<EnvVar> ChildGpuEnv(const ChildGpuEnvRequest& request);

/// What a distributed launch on one machine reads (docs/python.md, "Rendezvous"), for a
/// lease with `gpus` GPUs and rendezvous port `master_port`: MASTER_ADDR=127.0.0.1,
/// MASTER_PORT and torchrun's PET_MASTER_PORT, and PET_NPROC_PER_NODE (the GPU count; not
/// set for 0). A launcher's own flags (torchrun --master-port) still win over them.
std::vector<EnvVar> LaunchEnv(int master_port, size_t gpus);

/// What keeps the frameworks inside a memory slice of `bytes` per GPU on GPUs of
/// `total_bytes` (docs/share.md, "What a slice's processes get"): GPUMAN_GPU_MEMORY (the
/// bytes), XLA_PYTHON_CLIENT_MEM_FRACTION (the slice's share of the GPU, rounded down to
/// a thousandth; left out when `total_bytes` is 0) and XLA_PYTHON_CLIENT_PREALLOCATE=false
/// for JAX, TF_FORCE_GPU_ALLOW_GROWTH=true for TensorFlow, and
/// PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True for PyTorch (which is not a cap).
std::vector<EnvVar> SliceEnv(int64_t bytes, int64_t total_bytes);

/// The lease's UUIDs in the order CUDA numbers them under ChildGpuEnv(request)'s
/// CUDA_VISIBLE_DEVICES: cuda:0 first (the given order; PCI order for kPciIndices).
std::vector<std::string> CudaOrder(const ChildGpuEnvRequest& request);

/// What rank `rank` of `run --per-gpu` (one process per GPU of the lease, `ranks` in all,
/// one machine) gets on top of ChildGpuEnv (docs/python.md, "One process per GPU"): torch
/// elastic's RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK=0,
/// GROUP_WORLD_SIZE=1, and, with a rendezvous port, JAX's JAX_COORDINATOR_ADDRESS
/// (127.0.0.1:PORT), JAX_NUM_PROCESSES and JAX_PROCESS_ID.
std::vector<EnvVar> RankEnv(int rank, int ranks, std::optional<int> master_port);

/// What makes a process an MPS client of its lease's control daemon (docs/share.md, "MPS"):
/// CUDA_MPS_PIPE_DIRECTORY, CUDA_MPS_LOG_DIRECTORY; for a slice (`slice_bytes`)
/// CUDA_MPS_PINNED_DEVICE_MEM_LIMIT as NVIDIA writes it, "0=20480M" (device ordinal 0 of
/// the client's visible GPUs, an MPS lease has one; whole MiB, rounded down, at least 1);
/// CUDA_MPS_ACTIVE_THREAD_PERCENTAGE with --gpu-share.
std::vector<EnvVar> MpsEnv(const MpsClient& mps, std::optional<int64_t> slice_bytes);

/// The variables that name the GPUs or the lease of the machine they were set on:
/// CUDA_VISIBLE_DEVICES, NVIDIA_VISIBLE_DEVICES, GPUMAN_LEASE_ID, GPUMAN_JOB_ID and the
/// array's two.
std::span<const std::string_view> MachineBoundVariables();

/// "NAME=VALUE", as execve's envp wants it.
std::string EnvEntry(const EnvVar& var);

}  // namespace gpuman::visibility
