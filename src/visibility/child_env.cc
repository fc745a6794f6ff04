// The GPU environment of a child: see child_env.h for the rules and why.
#include "visibility/child_env.h"

#include <algorithm>
#include <array>
#include <cstdio>

#include "base/result.h"
#include "visibility/cuda_visible_devices.h"

namespace gpuman::visibility {
namespace {

std::string JoinInts(std::vector<int> values) {
  std::sort(values.begin(), values.end());  // NVML index order is PCI bus order
  std::string out;
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(values[i]);
  }
  return out;
}

constexpr std::array<std::string_view, 6> kMachineBound = {kCudaVisibleDevices, kNvidiaVisibleDevices, kLeaseIdVariable,
                                                           kJobIdVariable,      kArrayJobIdVariable,   kArrayTaskIdVariable};

}  // namespace

std::vector<EnvVar> ChildGpuEnv(const ChildGpuEnvRequest& request) {
  const std::string uuids = FormatCudaVisibleDevices(request.uuids);
  std::vector<EnvVar> env;
  // MIG devices are named by UUID whatever the numbering: an index would be their GPU's.
  const bool mig = std::any_of(request.uuids.begin(), request.uuids.end(),
                               [](const std::string& u) { return u.starts_with("MIG-"); });
  if (request.numbering == GpuNumbering::kPciIndices && !mig) {
    GPUMAN_CHECK(request.indices.size() == request.uuids.size());
    env.push_back({std::string(kCudaVisibleDevices), JoinInts(request.indices)});
  } else {
    env.push_back({std::string(kCudaVisibleDevices), uuids});
  }
  env.push_back({std::string(kCudaDeviceOrder), "PCI_BUS_ID"});
  env.push_back({std::string(kNvidiaVisibleDevices), request.uuids.empty() ? std::string("none") : uuids});
  if (request.lease_id) env.push_back({std::string(kLeaseIdVariable), std::to_string(*request.lease_id)});
  if (request.job_id) env.push_back({std::string(kJobIdVariable), std::to_string(*request.job_id)});
  if (request.array_id) env.push_back({std::string(kArrayJobIdVariable), std::to_string(*request.array_id)});
  if (request.array_task) env.push_back({std::string(kArrayTaskIdVariable), std::to_string(*request.array_task)});
  if (request.simulated_scenario) env.push_back({std::string(kSimulateVariable), *request.simulated_scenario});
  if (request.master_port) {
    for (auto& var : LaunchEnv(*request.master_port, request.uuids.size())) env.push_back(std::move(var));
  }
  if (request.slice_bytes) {
    for (auto& var : SliceEnv(*request.slice_bytes, request.slice_of_total_bytes)) env.push_back(std::move(var));
  }
  if (request.mps) {
    for (auto& var : MpsEnv(*request.mps, request.slice_bytes)) env.push_back(std::move(var));
  }
  return env;
}

MpsClient MpsDirectories(const std::string& run_dir, const std::string& uuid) {
  std::string base = run_dir;
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  base += "/" + uuid;
  return MpsClient{base + "/pipe", base + "/log", std::nullopt};
}

std::vector<EnvVar> MpsEnv(const MpsClient& mps, std::optional<int64_t> slice_bytes) {
  std::vector<EnvVar> env = {{"CUDA_MPS_PIPE_DIRECTORY", mps.pipe_directory},
                             {"CUDA_MPS_LOG_DIRECTORY", mps.log_directory}};
  if (slice_bytes) {
    const int64_t mib = std::max<int64_t>(1, *slice_bytes / (int64_t{1} << 20));
    env.push_back({"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0=" + std::to_string(mib) + "M"});
  }
  if (mps.active_thread_percent) {
    env.push_back({"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", std::to_string(*mps.active_thread_percent)});
  }
  return env;
}

std::vector<EnvVar> SliceEnv(int64_t bytes, int64_t total_bytes) {
  std::vector<EnvVar> env = {{"GPUMAN_GPU_MEMORY", std::to_string(bytes)}};
  if (total_bytes > 0) {
    // Rounded down: JAX's pool must fit inside the slice, never exceed it.
    const int64_t thousandths = std::clamp<int64_t>(bytes * 1000 / total_bytes, 1, 1000);
    char text[16];
    std::snprintf(text, sizeof text, "%lld.%03lld", static_cast<long long>(thousandths / 1000),
                  static_cast<long long>(thousandths % 1000));
    env.push_back({"XLA_PYTHON_CLIENT_MEM_FRACTION", text});
  }
  env.push_back({"XLA_PYTHON_CLIENT_PREALLOCATE", "false"});
  env.push_back({"TF_FORCE_GPU_ALLOW_GROWTH", "true"});
  env.push_back({"PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"});
  return env;
}

std::vector<EnvVar> LaunchEnv(int master_port, size_t gpus) {
  std::vector<EnvVar> env = {{"MASTER_ADDR", "127.0.0.1"},
                             {"MASTER_PORT", std::to_string(master_port)},
                             {"PET_MASTER_PORT", std::to_string(master_port)}};
  if (gpus > 0) env.push_back({"PET_NPROC_PER_NODE", std::to_string(gpus)});
  return env;
}

std::vector<std::string> CudaOrder(const ChildGpuEnvRequest& request) {
  if (request.numbering != GpuNumbering::kPciIndices) return request.uuids;
  GPUMAN_CHECK(request.indices.size() == request.uuids.size());
  std::vector<std::pair<int, std::string>> by_index;
  for (size_t i = 0; i < request.uuids.size(); ++i) by_index.emplace_back(request.indices[i], request.uuids[i]);
  std::sort(by_index.begin(), by_index.end());
  std::vector<std::string> out;
  for (auto& [index, uuid] : by_index) out.push_back(std::move(uuid));
  return out;
}

std::vector<EnvVar> RankEnv(int rank, int ranks, std::optional<int> master_port) {
  const std::string r = std::to_string(rank), n = std::to_string(ranks);
  std::vector<EnvVar> env = {{"RANK", r},        {"LOCAL_RANK", r},      {"WORLD_SIZE", n},
                             {"LOCAL_WORLD_SIZE", n}, {"GROUP_RANK", "0"}, {"GROUP_WORLD_SIZE", "1"}};
  if (master_port) {
    env.push_back({"JAX_COORDINATOR_ADDRESS", "127.0.0.1:" + std::to_string(*master_port)});
    env.push_back({"JAX_NUM_PROCESSES", n});
    env.push_back({"JAX_PROCESS_ID", r});
  }
  return env;
}

std::span<const std::string_view> MachineBoundVariables() { return kMachineBound; }

std::string EnvEntry(const EnvVar& var) { return var.name + "=" + var.value; }

}  // namespace gpuman::visibility
