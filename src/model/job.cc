#include "model/job.h"

namespace gpuman::model {

namespace {
constexpr std::pair<JobState, const char*> kNames[] = {
    {JobState::kQueued, "queued"},       {JobState::kHeld, "held"},
    {JobState::kStarting, "starting"},   {JobState::kRunning, "running"},
    {JobState::kSucceeded, "succeeded"}, {JobState::kFailed, "failed"},
    {JobState::kCancelled, "cancelled"}, {JobState::kTimedOut, "timed_out"},
};
}  // namespace

const char* JobStateName(JobState state) {
  for (const auto& [s, name] : kNames) {
    if (s == state) return name;
  }
  return "queued";
}

std::optional<JobState> ParseJobState(const std::string& name) {
  for (const auto& [s, n] : kNames) {
    if (name == n) return s;
  }
  return std::nullopt;
}

bool IsFinal(JobState state) {
  return state == JobState::kSucceeded || state == JobState::kFailed || state == JobState::kCancelled ||
         state == JobState::kTimedOut;
}

}  // namespace gpuman::model
