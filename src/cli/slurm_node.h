// The CLI's one door to the node side of Slurm: inside a Slurm job, reads what
// slurm::ReadSlurmNode knows (gres.conf, device confinement) plus which GPU processes of
// `snap` are the job's. Called from the command's thread; does file I/O.
#pragma once

#include <optional>

#include "model/device_snapshot.h"
#include "visibility/ids.h"
#include "visibility/slurm_gpus.h"

namespace gpuman::cli {

/// nullopt outside a Slurm job (slurm::InSlurmJob(env) false).
std::optional<visibility::SlurmNode> SlurmNodeForJob(const visibility::Environment& env,
                                                     const model::MachineSnapshot& snap);

}  // namespace gpuman::cli
