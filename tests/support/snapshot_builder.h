// SnapshotBuilder: model snapshots for tests, built fluently instead of field by field.
// Every GPU starts idle and healthy ("Test GPU", 80 GiB free, 0 % busy, nothing running);
// setters change the GPUs added after them, Edit/Lost/Process one GPU already added.
//   auto snap = SnapshotBuilder().Model("NVIDIA A100-SXM4-80GB", "8.0").Add(4)
//                   .ForEach([](model::DeviceSnapshot& g) { g.numa_node = g.index / 2; })
//                   .Lost(3).Build();
// Header-only test support (model/ only: pure layers may use it).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "model/device_snapshot.h"
#include "model/topology.h"

namespace gpuman::testing {

/// "GPU-3": short UUIDs, for pure layers that only compare them.
inline std::string ShortUuid(int index) { return "GPU-" + std::to_string(index); }
/// "GPU-00000003-0000-0000-0000-000000000000": UUID-shaped, for code that parses ids.
inline std::string LongUuid(int index) {
  return "GPU-0000000" + std::to_string(index) + "-0000-0000-0000-000000000000";
}

/// An n x n topology from two functions of a pair (a < b); kSelf on the diagonal.
inline model::Topology MakeTopology(int n, const std::function<int(int, int)>& nvlinks,
                                    const std::function<model::PcieLevel(int, int)>& pcie) {
  model::Topology t;
  t.nvlinks.assign(n, std::vector<int>(n, 0));
  t.pcie.assign(n, std::vector<model::PcieLevel>(n, model::PcieLevel::kSelf));
  for (int a = 0; a < n; ++a) {
    for (int b = a + 1; b < n; ++b) {
      t.nvlinks[a][b] = t.nvlinks[b][a] = nvlinks(a, b);
      t.pcie[a][b] = t.pcie[b][a] = pcie(a, b);
    }
  }
  return t;
}

/// What a lost GPU looks like in a snapshot (NVML's GPU_IS_LOST, as the source records it).
inline constexpr char kLostProblem[] = "nvmlDeviceGetMemoryInfo: GPU is lost";

class SnapshotBuilder {
 public:
  static constexpr int64_t kGiB = int64_t{1} << 30;

  SnapshotBuilder() {
    next_.name = "Test GPU";
    next_.memory_total_bytes = 80 * kGiB;
    next_.memory_used_bytes = 0;
    next_.memory_free_bytes = 80 * kGiB;
    next_.gpu_utilization_percent = 0;
  }

  // ---- the GPUs added next

  /// How a GPU's UUID follows from its index (ShortUuid unless told).
  SnapshotBuilder& Uuids(std::string (*uuid_of)(int index)) {
    uuid_of_ = uuid_of;
    return *this;
  }
  SnapshotBuilder& Model(std::string name, std::optional<std::string> compute_capability = std::nullopt) {
    next_.name = std::move(name);
    next_.compute_capability = std::move(compute_capability);
    return *this;
  }
  /// Total memory, all of it free.
  SnapshotBuilder& MemoryGiB(int64_t gib) {
    next_.memory_total_bytes = gib * kGiB;
    next_.memory_used_bytes = 0;
    next_.memory_free_bytes = gib * kGiB;
    return *this;
  }
  SnapshotBuilder& Numa(std::optional<int> node) {
    next_.numa_node = node;
    return *this;
  }
  /// Appends `n` GPUs like the ones described so far; index = position, UUID from it.
  SnapshotBuilder& Add(int n = 1) {
    for (int i = 0; i < n; ++i) {
      model::DeviceSnapshot g = next_;
      g.index = static_cast<int>(snap_.gpus.size());
      g.uuid = uuid_of_(g.index);
      snap_.gpus.push_back(std::move(g));
    }
    return *this;
  }

  // ---- GPUs already added (by index = position)

  SnapshotBuilder& Edit(int index, const std::function<void(model::DeviceSnapshot&)>& edit) {
    edit(snap_.gpus.at(static_cast<size_t>(index)));
    return *this;
  }
  SnapshotBuilder& ForEach(const std::function<void(model::DeviceSnapshot&)>& edit) {
    for (auto& g : snap_.gpus) edit(g);
    return *this;
  }
  /// Unhealthy, as a source records a lost GPU.
  SnapshotBuilder& Lost(int index, std::string problem = kLostProblem) {
    return Edit(index, [&](model::DeviceSnapshot& g) {
      g.is_healthy = false;
      g.health_problems = {problem};
    });
  }
  /// A process on the GPU (owner unknown unless `user`).
  SnapshotBuilder& Process(int index, uint32_t pid, std::optional<std::string> user = std::nullopt) {
    return Edit(index, [&](model::DeviceSnapshot& g) {
      model::GpuProcess p;
      p.pid = pid;
      p.user = user;
      g.processes.push_back(std::move(p));
    });
  }
  /// The topology of the GPUs added so far (see MakeTopology).
  SnapshotBuilder& Topology(const std::function<int(int, int)>& nvlinks,
                            const std::function<model::PcieLevel(int, int)>& pcie) {
    snap_.topology = MakeTopology(static_cast<int>(snap_.gpus.size()), nvlinks, pcie);
    return *this;
  }

  // ---- results

  const std::vector<model::DeviceSnapshot>& Gpus() const { return snap_.gpus; }
  model::MachineSnapshot Build() const { return snap_; }

 private:
  model::DeviceSnapshot next_;
  std::string (*uuid_of_)(int) = ShortUuid;
  model::MachineSnapshot snap_;
};

}  // namespace gpuman::testing
