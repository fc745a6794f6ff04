// Choosing jobs by who, state and name (cli/job_filter.h): scancel's rule that a filter
// without --user means one's own jobs, and squeue's --state words.
#include "cli/job_filter.h"

#include <gtest/gtest.h>

namespace gpuman::cli {
namespace {

model::Job JobOf(uint32_t uid, model::JobState state, const std::string& name) {
  model::Job j;
  j.uid = uid;
  j.user = uid == 1000 ? "ada" : "bob";
  j.state = state;
  j.name = name;
  return j;
}

TEST(JobFilterTest, ActingByFilterMeansOnesOwnJobsUnlessAUserIsNamed) {
  JobFilterArgs args;
  args.all = true;
  auto mine = MakeJobFilter(args, 1000, /*for_ids=*/true);
  ASSERT_TRUE(mine.has_value());
  EXPECT_TRUE(Matches(*mine, JobOf(1000, model::JobState::kRunning, "x")));
  EXPECT_FALSE(Matches(*mine, JobOf(1001, model::JobState::kQueued, "x")));

  args.all = false;
  args.name = "sweep";
  auto by_name = MakeJobFilter(args, 1000, true);
  ASSERT_TRUE(by_name.has_value());
  EXPECT_FALSE(Matches(*by_name, JobOf(1001, model::JobState::kQueued, "sweep"))) << "someone else's sweep";
  EXPECT_TRUE(Matches(*by_name, JobOf(1000, model::JobState::kQueued, "sweep")));
  EXPECT_FALSE(Matches(*by_name, JobOf(1000, model::JobState::kQueued, "sweep2"))) << "names match exactly";

  // `queue` shows everyone's.
  auto listing = MakeJobFilter(args, 1000, /*for_ids=*/false);
  ASSERT_TRUE(listing.has_value());
  EXPECT_TRUE(Matches(*listing, JobOf(1001, model::JobState::kQueued, "sweep")));

  args.user = "1001";
  auto theirs = MakeJobFilter(args, 1000, true);
  ASSERT_TRUE(theirs.has_value());
  EXPECT_TRUE(Matches(*theirs, JobOf(1001, model::JobState::kQueued, "sweep")));
  EXPECT_FALSE(Matches(*theirs, JobOf(1000, model::JobState::kQueued, "sweep")));
}

TEST(JobFilterTest, StatesAreQueuesWordsAndTyposGetASuggestion) {
  JobFilterArgs args;
  args.states = "queued, HELD,timed-out";
  auto f = MakeJobFilter(args, 0, false);
  ASSERT_TRUE(f.has_value());
  EXPECT_TRUE(Matches(*f, JobOf(1, model::JobState::kHeld, "")));
  EXPECT_TRUE(Matches(*f, JobOf(1, model::JobState::kTimedOut, "")));
  EXPECT_FALSE(Matches(*f, JobOf(1, model::JobState::kRunning, "")));
  EXPECT_TRUE(WantsFinished(*f));
  args.states = "canceled";
  auto typo = MakeJobFilter(args, 0, false);
  ASSERT_FALSE(typo.has_value());
  EXPECT_EQ(typo.error().message, "--state: unknown state 'canceled' (did you mean 'cancelled'?)");
  args.states = "zzz";
  EXPECT_NE(MakeJobFilter(args, 0, false).error().message.find("(one of queued, held"), std::string::npos);
  JobFilterArgs both;
  both.me = true;
  both.user = "bob";
  EXPECT_FALSE(MakeJobFilter(both, 0, false).has_value());
}

}  // namespace
}  // namespace gpuman::cli
