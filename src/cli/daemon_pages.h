// The daemon's paged listings read whole: every page of `queue` and of `leases`
// (docs/protocol.md, "queue", "leases"), each reply at most one frame. Shared by `queue`,
// `leases` (through the daemon's LeaseBroker), `top` and `queue --watch`. Main thread, or
// top's sampler thread (one DaemonClient per thread).
#pragma once

#include <vector>

#include "base/result.h"
#include "model/job.h"
#include "model/lease.h"

namespace gpuman::cli {

class DaemonClient;

/// Every job of the queue (`all`: finished ones too), page after page. `resuming`: a
/// daemon restart under a page is ridden out (CallResuming; reads are safe to repeat).
/// Errors: the daemon's; kInternal when its pages do not advance.
Result<std::vector<model::Job>> FetchAllJobs(DaemonClient& daemon, bool all, bool resuming = false);

/// Every live lease, page after page, in id order (those taken without the daemon first:
/// their ids are negative). Errors as FetchAllJobs.
Result<std::vector<model::Lease>> FetchAllLeases(DaemonClient& daemon, bool resuming = false);

}  // namespace gpuman::cli
