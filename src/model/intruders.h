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
/// holder's own (a holder's process outside its lease uses what is theirs).
const Lease* IntrudedLease(const DeviceSnapshot& gpu, const GpuProcess& process, const std::vector<Lease>& leases);

}  // namespace gpuman::model
