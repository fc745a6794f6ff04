// `gpuman release --force` (root and the admin group, policy::CheckForceRelease): what still
// runs on a lease is ended, then the lease is freed. One step at a time, so that the daemon
// never waits: each step signals and says how many processes still live; the client asks
// again until none does (docs/cli.md, `release`).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <vector>

namespace gpuman::lease {

/// SIGTERM first; SIGKILL to what still lives this long after it.
inline constexpr int64_t kForceReleaseGraceMs = 5000;

/// The leases being ended: lease id -> when their SIGTERM went.
using ForceEnding = std::map<int64_t, int64_t>;

/// `live`: the pids still running on lease `lease_id` (its processes, its cgroup's),
/// without the caller. Sends SIGTERM to them the first time, SIGKILL once
/// kForceReleaseGraceMs has passed since; forgets the lease when `live` is empty.
/// Returns live.size(): 0 means the lease may be freed now.
int64_t ForceEndStep(int64_t lease_id, const std::vector<pid_t>& live, int64_t now_ms, ForceEnding& ending);

}  // namespace gpuman::lease
