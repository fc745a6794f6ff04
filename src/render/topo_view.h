// `gpuman topo`: the GPU connection matrix as `nvidia-smi topo -m` shows it (X, NV#, PIX,
// PXB, PHB, NODE, SYS) with CPU affinity and NUMA node per GPU, as text or JSON.
// Pure functions; the snapshot must carry a topology.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <map>
#include <string>

#include "model/device_snapshot.h"
#include "render/status_view.h"

namespace gpuman::render {

/// {"schema_version": 1, "simulated", "gpus": [{index, uuid, name, cpu_affinity, numa_node}],
///  "matrix": [["X", "NV12", ...], ...], "pairs": [{"a", "b", "nvlinks", "pcie", "connection"}]}
nlohmann::ordered_json TopoToJson(const model::MachineSnapshot& snap, const StatusOptions& opts);

/// The matrix, one row per GPU, then a legend.
std::string RenderTopoText(const model::MachineSnapshot& snap, const StatusOptions& opts,
                           const TerminalInfo& term);

/// `topo --long`'s table of each GPU's peak throughput (model/peak.h: SMs, FP32 and dense
/// FP16/BF16 tensor TFLOPS, memory GB/s; "-" where an input is unknown), with a MEASURED
/// FP32 column when `gpuman bench` stored figures for any of them (`measured_fp32`, by UUID).
std::string RenderPeakTable(const model::MachineSnapshot& snap, const std::map<std::string, double>& measured_fp32);

}  // namespace gpuman::render
