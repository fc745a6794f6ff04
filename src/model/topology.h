// How the GPUs of one machine connect to each other and to the CPUs: NVLink counts and
// the closest common PCIe ancestor for every pair, as `nvidia-smi topo -m` shows them.
// Plain values, filled by a devices::DeviceSource; indices are positions in
// MachineSnapshot::gpus (which equal NVML indices for a full snapshot).
#pragma once

#include <string>
#include <vector>

namespace gpuman::model {

/// Closest common ancestor of two GPUs on the PCIe tree (NVML's nvmlGpuTopologyLevel_t),
/// ordered from closest to farthest.
enum class PcieLevel {
  kSelf = 0,        // X     the same GPU
  kSingleSwitch,    // PIX   at most one PCIe switch between them
  kMultipleSwitch,  // PXB   several switches, no host bridge
  kHostBridge,      // PHB   through a PCIe host bridge
  kNumaNode,        // NODE  several host bridges within one NUMA node
  kSystem,          // SYS   across NUMA nodes (SMP interconnect)
  kUnknown,
};

/// "X", "PIX", "PXB", "PHB", "NODE", "SYS" or "?".
const char* PcieLevelName(PcieLevel level);

struct Topology {
  /// nvlinks[i][j]: active NVLinks from GPU i to GPU j (0 when none; 0 on the diagonal).
  std::vector<std::vector<int>> nvlinks;
  /// pcie[i][j]: closest common ancestor; kSelf on the diagonal.
  std::vector<std::vector<PcieLevel>> pcie;

  size_t size() const { return pcie.size(); }
  /// nvidia-smi's cell text for the pair: "X", "NV12", or the PCIe level name.
  std::string CellName(size_t i, size_t j) const;
};

}  // namespace gpuman::model
