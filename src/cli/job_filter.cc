#include "cli/job_filter.h"

#include <pwd.h>

#include <algorithm>
#include <charconv>

#include "base/strings.h"

namespace gpuman::cli {
namespace {

constexpr model::JobState kAllStates[] = {
    model::JobState::kQueued,    model::JobState::kHeld,   model::JobState::kStarting,  model::JobState::kRunning,
    model::JobState::kSucceeded, model::JobState::kFailed, model::JobState::kCancelled, model::JobState::kTimedOut,
};

std::string StateNames() {
  std::string out;
  for (auto s : kAllStates) out += std::string(out.empty() ? "" : ", ") + model::JobStateName(s);
  return out;
}

// The closest state name by edit distance, when it is close (a typo).
std::optional<std::string> Closest(const std::string& word) {
  std::optional<std::string> best;
  size_t best_d = 3;
  for (auto s : kAllStates) {
    const std::string name = model::JobStateName(s);
    const size_t d = EditDistance(word, name);
    if (d < best_d) {
      best_d = d;
      best = name;
    }
  }
  return best;
}

}  // namespace

Result<JobFilter> MakeJobFilter(const JobFilterArgs& args, uint32_t my_uid, bool for_ids) {
  JobFilter f;
  if (args.me && args.user) return MakeError(ErrorCode::kInvalidArgument, "--me and --user name different users: give one");
  if (args.me) f.uid = my_uid;
  if (args.user) {
    const std::string& u = *args.user;
    uint32_t uid = 0;
    auto [end, ec] = std::from_chars(u.data(), u.data() + u.size(), uid);
    if (!u.empty() && ec == std::errc() && end == u.data() + u.size()) {
      f.uid = uid;
    } else if (passwd* pw = getpwnam(u.c_str())) {
      f.uid = pw->pw_uid;
    } else {
      f.user_name = u;  // not a local user: match the name the daemon recorded
    }
  }
  if (args.states) {
    for (const std::string& item : Split(*args.states, ',')) {
      const std::string word = ToLower(std::string(Trim(item)));
      if (word.empty()) continue;
      auto state = model::ParseJobState(word == "timed-out" ? "timed_out" : word);
      if (!state) {
        auto near = Closest(word);
        return MakeError(ErrorCode::kInvalidArgument,
                         "--state: unknown state '" + EscapeControl(word) + "'" +
                             (near ? " (did you mean '" + *near + "'?)" : " (one of " + StateNames() + ")"));
      }
      if (std::find(f.states.begin(), f.states.end(), *state) == f.states.end()) f.states.push_back(*state);
    }
  }
  if (args.name) f.name = *args.name;
  // scancel's rule: acting by filter touches one's own jobs unless --user says whose.
  if (for_ids && !f.uid && !f.user_name && (args.all || !f.Empty())) f.uid = my_uid;
  return f;
}

bool Matches(const JobFilter& filter, const model::Job& job) {
  if (filter.uid && job.uid != *filter.uid) return false;
  if (filter.user_name && job.user != *filter.user_name) return false;
  if (!filter.states.empty() && std::find(filter.states.begin(), filter.states.end(), job.state) == filter.states.end()) {
    return false;
  }
  if (filter.name && job.name != *filter.name) return false;
  return true;
}

bool WantsFinished(const JobFilter& filter) {
  return std::any_of(filter.states.begin(), filter.states.end(), [](model::JobState s) { return model::IsFinal(s); });
}

}  // namespace gpuman::cli
