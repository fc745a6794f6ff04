#include "lease/force_release.h"

#include <csignal>

namespace gpuman::lease {

int64_t ForceEndStep(int64_t lease_id, const std::vector<pid_t>& live, int64_t now_ms, ForceEnding& ending) {
  if (live.empty()) {
    ending.erase(lease_id);
    return 0;
  }
  auto [it, first] = ending.try_emplace(lease_id, now_ms);
  // An attempt abandoned long ago (its client went away) starts over with SIGTERM.
  if (!first && (now_ms - it->second > 12 * kForceReleaseGraceMs || now_ms < it->second)) {
    it->second = now_ms;
    first = true;
  }
  const bool overdue = now_ms - it->second >= kForceReleaseGraceMs;
  if (first || overdue) {
    for (pid_t pid : live) {
      if (pid > 0) kill(pid, overdue ? SIGKILL : SIGTERM);
    }
  }
  return static_cast<int64_t>(live.size());
}

}  // namespace gpuman::lease
