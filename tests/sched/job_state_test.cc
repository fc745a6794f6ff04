// The job state table: every allowed edge, every forbidden one, and the messages.
#include "sched/job_state.h"

#include <gtest/gtest.h>

#include <set>
#include <utility>

namespace gpuman::sched {
namespace {

using model::JobState;

constexpr JobState kAll[] = {JobState::kQueued,    JobState::kHeld,   JobState::kStarting,
                             JobState::kRunning,   JobState::kSucceeded, JobState::kFailed,
                             JobState::kCancelled, JobState::kTimedOut};

const std::set<std::pair<JobState, JobState>> kAllowed = {
    {JobState::kQueued, JobState::kHeld},        {JobState::kQueued, JobState::kStarting},
    {JobState::kQueued, JobState::kCancelled},   {JobState::kHeld, JobState::kQueued},
    {JobState::kHeld, JobState::kCancelled},     {JobState::kStarting, JobState::kRunning},
    {JobState::kStarting, JobState::kFailed},    {JobState::kStarting, JobState::kQueued},
    {JobState::kStarting, JobState::kCancelled}, {JobState::kRunning, JobState::kSucceeded},
    {JobState::kRunning, JobState::kFailed},     {JobState::kRunning, JobState::kCancelled},
    {JobState::kRunning, JobState::kTimedOut},   {JobState::kRunning, JobState::kQueued},
};

TEST(JobStateTest, EveryPairMatchesTheTable) {
  for (JobState from : kAll) {
    for (JobState to : kAll) {
      bool expected = kAllowed.contains({from, to});
      EXPECT_EQ(CanTransition(from, to), expected)
          << model::JobStateName(from) << " -> " << model::JobStateName(to);
      EXPECT_EQ(CheckTransition(from, to).has_value(), expected);
    }
  }
}

TEST(JobStateTest, FinalStatesHaveNoWayOut) {
  for (JobState from : kAll) {
    if (!model::IsFinal(from)) continue;
    EXPECT_TRUE(AllowedTransitions(from).empty()) << model::JobStateName(from);
  }
}

TEST(JobStateTest, EveryNonFinalStateCanBeCancelled) {
  for (JobState from : kAll) {
    if (model::IsFinal(from)) continue;
    EXPECT_TRUE(CanTransition(from, JobState::kCancelled)) << model::JobStateName(from);
  }
}

TEST(JobStateTest, MessageNamesTheAllowedStates) {
  Status s = CheckTransition(JobState::kHeld, JobState::kRunning);
  ASSERT_FALSE(s.has_value());
  EXPECT_EQ(s.error().code, ErrorCode::kConflict);
  EXPECT_EQ(s.error().message, "job state held cannot become running (allowed: queued, cancelled)");
}

TEST(JobStateTest, MessageSaysFinal) {
  Status s = CheckTransition(JobState::kSucceeded, JobState::kQueued);
  ASSERT_FALSE(s.has_value());
  EXPECT_EQ(s.error().message, "job state succeeded is final, cannot become queued");
  EXPECT_EQ(CheckTransition(JobState::kFailed, JobState::kFailed).error().message,
            "job state failed is final");
}

}  // namespace
}  // namespace gpuman::sched
