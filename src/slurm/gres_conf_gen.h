// `gpuman slurm gres-conf`: the gres.conf lines a node's GPUs need (Debian's Slurm has no
// NVML autodetection), and the check of what slurmd reports (`slurmd -G`) against NVML.
// Pure functions over a snapshot and text; thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/device_snapshot.h"

namespace gpuman::slurm {

/// Slurm's GRES type for an NVML name, as its NVML plugin spells it: lower case, spaces to
/// '_', without the "nvidia_" prefix ("NVIDIA H100 80GB HBM3" -> "h100_80gb_hbm3").
std::string GresType(std::string_view nvml_name);

struct GresConf {
  std::vector<std::string> lines;  // one gres.conf line per GPU, PCI (NVML) order
  std::string node_gres;           // slurm.conf NodeName's Gres= value, e.g. "gpu:h100_80gb_hbm3:8"
  std::vector<std::string> problems;  // GPUs left out, and why
};

/// One `NodeName=N Name=gpu Type=T File=/dev/nvidia<minor> [Cores=<cpus>] [Links=<l0,..>]`
/// line per GPU of `snap`, in NVML (= PCI bus) order, so that Slurm indices equal NVML
/// indices. Cores are the GPU's CPU affinity; Links (with snap.topology) the NVLink count
/// to each GPU in the same order, -1 for itself. A GPU without a minor number or name is
/// left out and named in `problems`.
GresConf GenerateGresConf(const model::MachineSnapshot& snap, std::string_view node_name);

/// One GPU record of `slurmd -G`: "slurmd: Gres Name=gpu Type=a100 Count=2 Index=0 ...
/// File=/dev/nvidia[0-1] ...". Files are expanded, in order.
struct SlurmdGres {
  std::optional<std::string> type;  // "(null)" -> nullopt
  int64_t count = 0;
  std::vector<std::string> files;
};
std::vector<SlurmdGres> ParseSlurmdGres(std::string_view text);

/// The mismatches between slurmd's GPUs and NVML's: counts, device files whose minor is no
/// NVML GPU, NVML GPUs no file names, a file named twice. `minor_of` reads a file's minor.
/// Empty when they agree.
std::vector<std::string> CheckGres(const std::vector<SlurmdGres>& slurmd, const model::MachineSnapshot& snap,
                                   const std::function<std::optional<int>(const std::string&)>& minor_of);

}  // namespace gpuman::slurm
