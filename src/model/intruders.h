// Intruders (issue 23, docs/enforce.md): a process on a GPU leased to someone else. The one
// rule every view applies (status text and JSON, top, explain), on the daemon's sample or
// a local read alike.
#pragma once

#include <vector>

#include "model/device_snapshot.h"
#include "model/lease.h"

namespace gpuman::model {

/// The live lease `process` on `gpu` intrudes on: the lease that holds the GPU, when the
/// process is not its holder's (another user's, root's included, or one whose owner this
/// PID namespace cannot see). nullptr when no lease holds the GPU or the process is the
/// holder's own (a holder's process outside its lease uses what is theirs). A GPU shared
/// by memory slices has a holder per slice: a process of any of them is no intruder.
const Lease* IntrudedLease(const DeviceSnapshot& gpu, const GpuProcess& process, const std::vector<Lease>& leases);

/// A memory slice's holder using more of a GPU than they declared (docs/share.md,
/// "Declared memory is watched").
struct SliceOverrun {
  int64_t lease_id = 0;        // the holder's first slice of the GPU
  uint32_t uid = 0;
  int64_t used_bytes = 0;      // what the holder's processes on the GPU use
  int64_t declared_bytes = 0;  // what the holder's slices of the GPU declare, together
};

/// The holders of slices of `gpu` whose processes there (by owner, as IntrudedLease
/// attributes them) use more memory than their slices declare. Pure; no NVML call.
std::vector<SliceOverrun> SliceOverruns(const DeviceSnapshot& gpu, const std::vector<Lease>& leases);

}  // namespace gpuman::model
