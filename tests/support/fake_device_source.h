// FakeDeviceSource: the test side of the devices::DeviceSource seam. It answers every read
// with `snapshot` (build it with SnapshotBuilder), as changed by the test between reads,
// counts the reads, and can fail them all. Header-only test support; one thread.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "base/result.h"
#include "devices/device_source.h"
#include "support/snapshot_builder.h"

namespace gpuman::testing {

class FakeDeviceSource final : public devices::DeviceSource {
 public:
  explicit FakeDeviceSource(model::MachineSnapshot snap = {}) : snapshot(std::move(snap)) {}

  Result<model::MachineSnapshot> Snapshot(const devices::SnapshotOptions&) override {
    ++reads;
    if (error) return *error;
    model::MachineSnapshot out = snapshot;
    for (int index : lost) {
      if (index >= 0 && static_cast<size_t>(index) < out.gpus.size()) {
        out.gpus[static_cast<size_t>(index)].is_healthy = false;
        out.gpus[static_cast<size_t>(index)].health_problems = {kLostProblem};
      }
    }
    return out;
  }
  using devices::DeviceSource::Snapshot;

  /// Replaces the processes on GPU `index` by these pids (owners unknown).
  void SetPids(int index, const std::vector<uint32_t>& pids) {
    auto& processes = snapshot.gpus.at(static_cast<size_t>(index)).processes;
    processes.clear();
    for (uint32_t pid : pids) {
      model::GpuProcess p;
      p.pid = pid;
      processes.push_back(p);
    }
  }

  model::MachineSnapshot snapshot;  // what every read returns (but for `lost`)
  std::set<int> lost;               // GPUs (by index) that read as lost until taken out
  std::optional<Error> error;       // when set, every read fails with it
  int reads = 0;
};

}  // namespace gpuman::testing
