#include "model/intruders.h"

#include <algorithm>

namespace gpuman::model {

const Lease* IntrudedLease(const DeviceSnapshot& gpu, const GpuProcess& process, const std::vector<Lease>& leases) {
  if (!gpu.uuid) return nullptr;
  for (const Lease& lease : leases) {
    if (std::find(lease.gpu_uuids.begin(), lease.gpu_uuids.end(), *gpu.uuid) == lease.gpu_uuids.end()) continue;
    if (process.uid && *process.uid == lease.uid) return nullptr;
    return &lease;
  }
  return nullptr;
}

}  // namespace gpuman::model
