#include "model/intruders.h"

#include <algorithm>

namespace gpuman::model {

const Lease* IntrudedLease(const DeviceSnapshot& gpu, const GpuProcess& process, const std::vector<Lease>& leases) {
  if (!gpu.uuid) return nullptr;
  // A GPU shared by memory slices (docs/share.md) has several holders: a process of any of
  // them is no intruder; one of nobody's intrudes on the first lease of the GPU.
  const Lease* first = nullptr;
  for (const Lease& lease : leases) {
    if (std::find(lease.gpu_uuids.begin(), lease.gpu_uuids.end(), *gpu.uuid) == lease.gpu_uuids.end()) continue;
    if (process.uid && *process.uid == lease.uid) return nullptr;
    if (!first) first = &lease;
  }
  return first;
}

std::vector<SliceOverrun> SliceOverruns(const DeviceSnapshot& gpu, const std::vector<Lease>& leases) {
  std::vector<SliceOverrun> out;
  if (!gpu.uuid) return out;
  for (const Lease& lease : leases) {
    if (!lease.gpu_memory_bytes) continue;
    if (std::find(lease.gpu_uuids.begin(), lease.gpu_uuids.end(), *gpu.uuid) == lease.gpu_uuids.end()) continue;
    auto it = std::find_if(out.begin(), out.end(), [&](const SliceOverrun& o) { return o.uid == lease.uid; });
    if (it == out.end()) {
      out.push_back({lease.id, lease.uid, 0, 0});
      it = out.end() - 1;
    }
    it->declared_bytes += *lease.gpu_memory_bytes;
  }
  for (const GpuProcess& p : gpu.processes) {
    if (!p.uid || !p.used_memory_bytes) continue;
    for (SliceOverrun& o : out) {
      if (o.uid == *p.uid) o.used_bytes += *p.used_memory_bytes;
    }
  }
  std::erase_if(out, [](const SliceOverrun& o) { return o.used_bytes <= o.declared_bytes; });
  return out;
}

}  // namespace gpuman::model
