// The GPU environment of a child (visibility/child_env.h): one table over what the four
// callers ask for (a queued job, `run` with UUIDs or --index, a nested `run`, a
// `select --format env` preview), and the variables that must not leave the machine.
#include "visibility/child_env.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace gpuman::visibility {
namespace {

const std::string kA = "GPU-aaaaaaaa-0000-0000-0000-000000000000";
const std::string kB = "GPU-bbbbbbbb-0000-0000-0000-000000000000";

TEST(ChildGpuEnvTest, Table) {
  struct Case {
    const char* name;
    ChildGpuEnvRequest request;
    std::vector<EnvVar> want;
  };
  ChildGpuEnvRequest run_uuids{{kA, kB}, {0, 3}, GpuNumbering::kUuids, 12, std::nullopt, std::nullopt};
  ChildGpuEnvRequest run_indices{{kB, kA}, {3, 0}, GpuNumbering::kPciIndices, 12, std::nullopt, std::nullopt};
  // Inside lease 7 (GPUMAN_LEASE_ID of the caller): one GPU of it, the enclosing lease.
  ChildGpuEnvRequest nested{{kB}, {3}, GpuNumbering::kUuids, 7, std::nullopt, std::nullopt};
  // A queued job: its lease is added by the supervisor once it exists.
  ChildGpuEnvRequest job{{kA, kB}, {}, GpuNumbering::kUuids, std::nullopt, 42, std::nullopt};
  ChildGpuEnvRequest job_no_gpu{{}, {}, GpuNumbering::kUuids, std::nullopt, 43, std::nullopt};
  ChildGpuEnvRequest simulated{{kA}, {0}, GpuNumbering::kUuids, 3, 44, "/s/a100-4.json"};
  ChildGpuEnvRequest preview{{kA}, {0}, GpuNumbering::kUuids, std::nullopt, std::nullopt, std::nullopt};
  const std::string both = kA + "," + kB;
  const Case cases[] = {
      {"run, UUIDs",
       run_uuids,
       {{"CUDA_VISIBLE_DEVICES", both},
        {"CUDA_DEVICE_ORDER", "PCI_BUS_ID"},
        {"NVIDIA_VISIBLE_DEVICES", both},
        {"GPUMAN_LEASE_ID", "12"}}},
      {"run --index: sorted indices; the container variable keeps UUIDs",
       run_indices,
       {{"CUDA_VISIBLE_DEVICES", "0,3"},
        {"CUDA_DEVICE_ORDER", "PCI_BUS_ID"},
        {"NVIDIA_VISIBLE_DEVICES", kB + "," + kA},
        {"GPUMAN_LEASE_ID", "12"}}},
      {"nested run: the enclosing lease",
       nested,
       {{"CUDA_VISIBLE_DEVICES", kB},
        {"CUDA_DEVICE_ORDER", "PCI_BUS_ID"},
        {"NVIDIA_VISIBLE_DEVICES", kB},
        {"GPUMAN_LEASE_ID", "7"}}},
      {"queued job",
       job,
       {{"CUDA_VISIBLE_DEVICES", both},
        {"CUDA_DEVICE_ORDER", "PCI_BUS_ID"},
        {"NVIDIA_VISIBLE_DEVICES", both},
        {"GPUMAN_JOB_ID", "42"}}},
      {"queued job without GPUs: none visible, container runtime too",
       job_no_gpu,
       {{"CUDA_VISIBLE_DEVICES", ""},
        {"CUDA_DEVICE_ORDER", "PCI_BUS_ID"},
        {"NVIDIA_VISIBLE_DEVICES", "none"},
        {"GPUMAN_JOB_ID", "43"}}},
      {"simulated node",
       simulated,
       {{"CUDA_VISIBLE_DEVICES", kA},
        {"CUDA_DEVICE_ORDER", "PCI_BUS_ID"},
        {"NVIDIA_VISIBLE_DEVICES", kA},
        {"GPUMAN_LEASE_ID", "3"},
        {"GPUMAN_JOB_ID", "44"},
        {"GPUMAN_SIMULATE", "/s/a100-4.json"}}},
      {"select preview: no lease, no job",
       preview,
       {{"CUDA_VISIBLE_DEVICES", kA}, {"CUDA_DEVICE_ORDER", "PCI_BUS_ID"}, {"NVIDIA_VISIBLE_DEVICES", kA}}},
  };
  for (const Case& c : cases) {
    const std::vector<EnvVar> got = ChildGpuEnv(c.request);
    ASSERT_EQ(got.size(), c.want.size()) << c.name;
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].name, c.want[i].name) << c.name << " #" << i;
      EXPECT_EQ(got[i].value, c.want[i].value) << c.name << " #" << i;
    }
  }
}

TEST(ChildGpuEnvTest, IndicesNeedOnePerGpu) {
  ChildGpuEnvRequest bad{{kA, kB}, {0}, GpuNumbering::kPciIndices, std::nullopt, std::nullopt, std::nullopt};
  EXPECT_DEATH((void)ChildGpuEnv(bad), "indices");
}

TEST(ChildGpuEnvTest, MachineBoundVariablesAreTheOnesNamingGpusOrALease) {
  std::vector<std::string> names;
  for (std::string_view n : MachineBoundVariables()) names.emplace_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "GPUMAN_LEASE_ID",
                                             "GPUMAN_JOB_ID", "GPUMAN_ARRAY_JOB_ID", "GPUMAN_ARRAY_TASK_ID"}));
  // Everything the builder can set is either machine-bound or a setting that travels.
  ChildGpuEnvRequest all{{kA}, {0}, GpuNumbering::kUuids, 1, 2, "/s.json"};
  all.array_id = 2;
  all.array_task = 7;
  for (const EnvVar& v : ChildGpuEnv(all)) {
    const bool bound = std::find(names.begin(), names.end(), v.name) != names.end();
    EXPECT_EQ(bound, v.name != "CUDA_DEVICE_ORDER" && v.name != "GPUMAN_SIMULATE") << v.name;
  }
}

TEST(ChildGpuEnvTest, EnvEntry) {
  EXPECT_EQ(EnvEntry({"CUDA_VISIBLE_DEVICES", kA}), "CUDA_VISIBLE_DEVICES=" + kA);
  EXPECT_EQ(EnvEntry({"X", ""}), "X=");
}

TEST(ChildGpuEnvTest, ASliceTellsTheFrameworksItsSize) {
  ChildGpuEnvRequest req;
  req.uuids = {"GPU-a"};
  req.slice_bytes = int64_t{20} << 30;
  req.slice_of_total_bytes = int64_t{80} << 30;
  auto env = ChildGpuEnv(req);
  std::vector<std::string> tail;
  for (size_t i = 3; i < env.size(); ++i) tail.push_back(EnvEntry(env[i]));
  EXPECT_THAT(tail, ::testing::ElementsAre("GPUMAN_GPU_MEMORY=21474836480", "XLA_PYTHON_CLIENT_MEM_FRACTION=0.250",
                                           "XLA_PYTHON_CLIENT_PREALLOCATE=false", "TF_FORCE_GPU_ALLOW_GROWTH=true",
                                           "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"));
  // Rounded down, never above the slice; no fraction when the GPU's size is unknown.
  EXPECT_EQ(EnvEntry(SliceEnv(int64_t{30} << 30, int64_t{94} << 30)[1]), "XLA_PYTHON_CLIENT_MEM_FRACTION=0.319");
  EXPECT_EQ(SliceEnv(1, 0)[1].name, "XLA_PYTHON_CLIENT_PREALLOCATE");
  // A whole-GPU child gets none of them.
  req.slice_bytes.reset();
  for (const auto& var : ChildGpuEnv(req)) EXPECT_NE(var.name, "GPUMAN_GPU_MEMORY");
}

TEST(ChildGpuEnvTest, AnMpsLeaseMakesItsProcessesClientsOfItsGpusControl) {
  MpsClient where = MpsDirectories("/run/gpuman/mps/", "GPU-a");
  EXPECT_EQ(where.pipe_directory, "/run/gpuman/mps/GPU-a/pipe");
  EXPECT_EQ(where.log_directory, "/run/gpuman/mps/GPU-a/log");
  where.active_thread_percent = 25;
  ChildGpuEnvRequest req;
  req.uuids = {"GPU-a"};
  req.slice_bytes = int64_t{20} << 30;
  req.mps = where;
  std::vector<std::string> entries;
  for (const auto& var : ChildGpuEnv(req)) entries.push_back(EnvEntry(var));
  // After the slice's own variables: NVIDIA's, the limit on the client's device 0 in MiB.
  ASSERT_GE(entries.size(), 4u);
  EXPECT_THAT(std::vector<std::string>(entries.end() - 4, entries.end()),
              ::testing::ElementsAre("CUDA_MPS_PIPE_DIRECTORY=/run/gpuman/mps/GPU-a/pipe",
                                     "CUDA_MPS_LOG_DIRECTORY=/run/gpuman/mps/GPU-a/log",
                                     "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=20480M",
                                     "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25"));
  // A whole GPU under MPS: no pinned limit; no share: no percentage.
  where.active_thread_percent.reset();
  std::vector<std::string> whole;
  for (const auto& var : MpsEnv(where, std::nullopt)) whole.push_back(EnvEntry(var));
  EXPECT_THAT(whole, ::testing::ElementsAre("CUDA_MPS_PIPE_DIRECTORY=/run/gpuman/mps/GPU-a/pipe",
                                            "CUDA_MPS_LOG_DIRECTORY=/run/gpuman/mps/GPU-a/log"));
  // Rounded down to whole MiB, never 0.
  EXPECT_EQ(EnvEntry(MpsEnv(where, (int64_t{3} << 20) + 5)[2]), "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=3M");
  EXPECT_EQ(EnvEntry(MpsEnv(where, 1)[2]), "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=1M");
  // Not an MPS lease: none of them.
  req.mps.reset();
  for (const auto& var : ChildGpuEnv(req)) EXPECT_EQ(var.name.rfind("CUDA_MPS_", 0), std::string::npos);
}

}  // namespace
}  // namespace gpuman::visibility

namespace gpuman::visibility {
namespace {

// `run --per-gpu`: rank i uses cuda:i, so rank i's GPU (its NUMA binding) is the i-th one
// CUDA numbers: the listed order for UUIDs, PCI (index) order for --index.
TEST(RankEnvTest, CudaOrderIsTheOrderCudaNumbersTheGpus) {
  const std::string kC = "GPU-cccccccc-0000-0000-0000-000000000000";
  ChildGpuEnvRequest uuids;
  uuids.uuids = {kB, kA, kC};
  uuids.indices = {3, 0, 5};
  EXPECT_EQ(CudaOrder(uuids), (std::vector<std::string>{kB, kA, kC}));
  ChildGpuEnvRequest indices = uuids;
  indices.numbering = GpuNumbering::kPciIndices;
  EXPECT_EQ(CudaOrder(indices), (std::vector<std::string>{kA, kB, kC}));
  EXPECT_EQ(ChildGpuEnv(indices).front().value, "0,3,5") << "the same order as the variable";
}

TEST(RankEnvTest, TorchAndJaxVariablesOfARank) {
  EXPECT_EQ(RankEnv(2, 4, 29517), (std::vector<EnvVar>{{"RANK", "2"},
                                                       {"LOCAL_RANK", "2"},
                                                       {"WORLD_SIZE", "4"},
                                                       {"LOCAL_WORLD_SIZE", "4"},
                                                       {"GROUP_RANK", "0"},
                                                       {"GROUP_WORLD_SIZE", "1"},
                                                       {"JAX_COORDINATOR_ADDRESS", "127.0.0.1:29517"},
                                                       {"JAX_NUM_PROCESSES", "4"},
                                                       {"JAX_PROCESS_ID", "2"}}));
  // No rendezvous port (`[launch] ports = "off"`): no coordinator to name.
  const auto no_port = RankEnv(0, 1, std::nullopt);
  EXPECT_EQ(no_port.size(), 6u);
  EXPECT_EQ(no_port.back(), (EnvVar{"GROUP_WORLD_SIZE", "1"}));
}

}  // namespace
}  // namespace gpuman::visibility
