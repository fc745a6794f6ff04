// LivenessCheck: the question the lease store asks about each process of a lease. The
// real answer comes from /proc (proc_liveness.h); tests pass lambdas.
#pragma once

#include <functional>

#include "model/lease.h"

namespace gpuman::store {

/// true if the process still exists with the same start time. Called inside a write
/// transaction, once per recorded process, so it must be cheap and must not touch the
/// state db (reading /proc/<pid>/stat is fine).
using LivenessCheck = std::function<bool(const model::LeaseProcess&)>;

}  // namespace gpuman::store
