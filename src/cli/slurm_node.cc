#include "cli/slurm_node.h"

#include <unistd.h>

#include "slurm/node_facts.h"

namespace gpuman::cli {

std::optional<visibility::SlurmNode> SlurmNodeForJob(const visibility::Environment& env,
                                                     const model::MachineSnapshot& snap) {
  if (!slurm::InSlurmJob(env)) return std::nullopt;
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  visibility::SlurmNode node = slurm::ReadSlurmNode(env, host);
  if (node.job_id) {
    std::vector<uint32_t> pids;
    for (const model::DeviceSnapshot& gpu : snap.gpus) {
      for (const model::GpuProcess& p : gpu.processes) pids.push_back(p.pid);
    }
    node.job_pids = slurm::JobPids(*node.job_id, pids);
  }
  return node;
}

}  // namespace gpuman::cli
