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
  std::vector<int> missing;           // NVML indices of the GPUs left out, in order
  /// GPUs in MIG mode (docs/slurm.md, "MIG"): never a whole-GPU File= line (Slurm would hand
  /// the GPU out whole); comment lines instead, naming each MIG device and recommending
  /// AutoDetect=nvml, with which slurmd finds them as Type=<profile>. Empty without MIG.
  std::vector<std::string> mig_comments;
  /// The Gres= entries for the MIG devices under AutoDetect=nvml ("gpu:2g.20gb:2,gpu:3g.40gb:1").
  std::string mig_node_gres;
};

/// One `NodeName=N Name=gpu Type=T File=/dev/nvidia<minor> [Cores=<cpus>] [Links=<l0,..>]`
/// line per GPU of `snap`, in NVML (= PCI bus) order, so that Slurm indices equal NVML
/// indices. Cores are the GPU's CPU affinity; Links (with snap.topology) the NVLink count
/// to each GPU in the same order, -1 for itself. A GPU without a minor number or name (a
/// lost GPU answers neither) is left out, named in `problems` (with its health problems)
/// and in `missing`: every GPU after it then has a Slurm index one lower than its NVML
/// index, which `gpuman slurm gres-conf` refuses without --allow-missing.
/// A GPU in MIG mode gets no line (see GresConf::mig_comments) and is not `missing`: it is
/// left out on purpose; a warning in `problems` says that the GPUs after it then get
/// other Slurm indices unless the node uses AutoDetect=nvml.
GresConf GenerateGresConf(const model::MachineSnapshot& snap, std::string_view node_name);

/// One GPU record of `slurmd -G`: "slurmd: Gres Name=gpu Type=a100 Count=2 Index=0 ...
/// File=/dev/nvidia[0-1] Cores=0-31 CoreCnt=64 Links=-1,12". Files are expanded, in order.
/// A value slurmd prints as "(null)" is nullopt.
struct SlurmdGres {
  std::optional<std::string> type;
  int64_t count = 0;
  std::vector<std::string> files;
  std::optional<std::string> cores;  // as printed, "0-31,64-95"
  std::optional<std::string> links;  // as printed, "-1,12,0,0"
};
std::vector<SlurmdGres> ParseSlurmdGres(std::string_view text);

struct GresCheck {
  /// What slurmd declares wrong, one line per difference (exit 6).
  std::vector<std::string> mismatches;
  /// What slurmd leaves out that NVML knows (no Cores=, no Links= where NVML sees NVLinks):
  /// not wrong, but Slurm then cannot use it. One line per kind.
  std::vector<std::string> notes;
};

/// Compares slurmd's GPUs with NVML's: counts, device files whose minor is no NVML GPU,
/// NVML GPUs no file names, a file named twice; then, for each file that is an NVML GPU,
/// Cores= against the GPU's CPU affinity (as CPU lists) and Links= against NVML's NVLink
/// counts, entry j of Links= being the link count to slurmd's GPU j (-1 for itself).
/// `minor_of` reads a file's minor. No mismatches when they agree.
GresCheck CheckGres(const std::vector<SlurmdGres>& slurmd, const model::MachineSnapshot& snap,
                    const std::function<std::optional<int>(const std::string&)>& minor_of);

}  // namespace gpuman::slurm
