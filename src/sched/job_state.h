// The job state machine: which JobState may follow which, written down in one table
// (job_state.cc) so the daemon, the store and the tests agree. Pure; any thread.
// The states themselves live in model/job.h; this file only says how they connect.
#pragma once

#include <vector>

#include "base/result.h"
#include "model/job.h"

namespace gpuman::sched {

/// True when a job in `from` may move to `to`. A state never "moves" to itself.
bool CanTransition(model::JobState from, model::JobState to);

/// Ok when CanTransition(from, to). Errors: kConflict with a message such as
/// "job state running cannot become held (allowed: succeeded, failed, cancelled,
/// timed_out, queued)" or "job state succeeded is final".
Status CheckTransition(model::JobState from, model::JobState to);

/// The states `from` may move to, in table order; empty for final states.
std::vector<model::JobState> AllowedTransitions(model::JobState from);

}  // namespace gpuman::sched
