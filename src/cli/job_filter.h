// Which jobs `queue`, `cancel`, `hold` and `resume` act on when they are named by who,
// what state and what name instead of (or besides) by id: squeue's and scancel's
// --user, --me, --state and --name. Pure; the daemon still decides what a caller may do
// to each job it is sent.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "model/job.h"

namespace gpuman::cli {

struct JobFilterArgs {
  std::optional<std::string> user;  // --user NAME or uid
  bool me = false;                  // --me
  std::optional<std::string> states;  // --state queued,running (comma-separated)
  std::optional<std::string> name;    // --name: the job's name, exactly
  bool all = false;                   // cancel/hold/resume --all: every job of the user
};

struct JobFilter {
  std::optional<uint32_t> uid;           // only this user's jobs
  std::optional<std::string> user_name;  // or, when the name is not a local user, by name
  std::vector<model::JobState> states;   // empty: any
  std::optional<std::string> name;
  bool Empty() const { return !uid && !user_name && states.empty() && !name; }
};

/// The filter the options ask for. `my_uid` is the caller's (--me; and for cancel/hold/
/// resume by filter, the user unless --user names another). `for_ids` says whether the
/// command acts on jobs (cancel/hold/resume), where --all or a filter without --user
/// means "my jobs". Errors: kInvalidArgument (an unknown state, with "did you mean";
/// --me with --user).
Result<JobFilter> MakeJobFilter(const JobFilterArgs& args, uint32_t my_uid, bool for_ids);

bool Matches(const JobFilter& filter, const model::Job& job);

/// Whether a state the filter names is final (then `queue` reads finished jobs too).
bool WantsFinished(const JobFilter& filter);

}  // namespace gpuman::cli
