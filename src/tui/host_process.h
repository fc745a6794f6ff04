// Host-side figures of a GPU process for `gpuman top` (as nvitop shows them): CPU time and
// resident memory from /proc/<pid>/stat and /proc/<pid>/statm. Reading happens on the
// sampler thread; CpuPercent is pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace gpuman::tui {

struct HostProcessStat {
  int64_t cpu_ticks = 0;    // utime + stime, in clock ticks
  int64_t start_ticks = 0;  // start time since boot, in clock ticks (tells a recycled pid)
  int64_t rss_bytes = 0;
};

/// Reads `proc_root`/<pid>/stat and statm. nullopt when the process is not visible to the
/// caller (gone, another PID namespace, hidepid) or a file is malformed.
std::optional<HostProcessStat> ReadHostProcessStat(const std::string& proc_root, uint32_t pid, int64_t page_bytes);

/// CPU % (100 = one core) between two readings of the same process `ms` apart; nullopt
/// without an earlier reading, when the pid now is another process, or when no time passed.
std::optional<double> CpuPercent(const HostProcessStat* before, const HostProcessStat& now, int64_t ms,
                                 int64_t ticks_per_s);

}  // namespace gpuman::tui
