// Job states and the transitions between them.
//
//   queued ──► starting ──► running ──► succeeded | failed | cancelled | timed_out
//     │  ▲        │  │         │
//     ▼  │        │  └─► queued (a GPU went away before the job started: try again)
//    held         │            └─► queued (a GPU was lost and the job asked for --requeue)
//                 └─► failed | cancelled
//
// queued and held may also be cancelled. Final states (succeeded, failed, cancelled,
// timed_out) have no way out: a job that should run again is submitted again, so the
// history of a job id never rewrites an ending. "Requeue only after GPU loss" for
// running -> queued is the daemon's decision (Job::requeue); the table only says the
// edge exists.

#include "sched/job_state.h"

#include <string>

namespace gpuman::sched {
namespace {

using model::JobState;

struct Edge {
  JobState from;
  JobState to;
};

// The one place the allowed transitions are written down.
constexpr Edge kEdges[] = {
    {JobState::kQueued, JobState::kHeld},
    {JobState::kQueued, JobState::kStarting},
    {JobState::kQueued, JobState::kCancelled},
    {JobState::kHeld, JobState::kQueued},
    {JobState::kHeld, JobState::kCancelled},
    {JobState::kStarting, JobState::kRunning},
    {JobState::kStarting, JobState::kFailed},
    {JobState::kStarting, JobState::kQueued},  // GPU problem before the process started
    {JobState::kStarting, JobState::kCancelled},
    {JobState::kRunning, JobState::kSucceeded},
    {JobState::kRunning, JobState::kFailed},
    {JobState::kRunning, JobState::kCancelled},
    {JobState::kRunning, JobState::kTimedOut},
    {JobState::kRunning, JobState::kQueued},  // GPU lost and the job asked for --requeue
};

}  // namespace

bool CanTransition(JobState from, JobState to) {
  for (const Edge& e : kEdges) {
    if (e.from == from && e.to == to) return true;
  }
  return false;
}

std::vector<JobState> AllowedTransitions(JobState from) {
  std::vector<JobState> out;
  for (const Edge& e : kEdges) {
    if (e.from == from) out.push_back(e.to);
  }
  return out;
}

Status CheckTransition(JobState from, JobState to) {
  if (CanTransition(from, to)) return {};
  std::string message = std::string("job state ") + model::JobStateName(from);
  std::vector<JobState> allowed = AllowedTransitions(from);
  if (allowed.empty()) {
    message += " is final";
    if (from != to) message += std::string(", cannot become ") + model::JobStateName(to);
    return MakeError(ErrorCode::kConflict, message);
  }
  message += std::string(" cannot become ") + model::JobStateName(to) + " (allowed: ";
  for (size_t i = 0; i < allowed.size(); ++i) {
    if (i > 0) message += ", ";
    message += model::JobStateName(allowed[i]);
  }
  return MakeError(ErrorCode::kConflict, message + ")");
}

}  // namespace gpuman::sched
