// `gpuman history` and `gpuman report --html`: read the daemon's GPU history db
// (store/history_store.h) read-only and print samples or write a self-contained HTML
// report. They never create the db and need no daemon connection. Main thread only.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cli/context.h"

namespace gpuman::cli {

struct HistoryArgs {
  std::string db;                 // --db; "" = look it up (FindHistoryDb)
  std::vector<std::string> gpus;  // --gpu, repeatable, each may be a comma list
  std::string since = "1h", until, step;
  std::string slurm_job;  // --slurm-job: that job's GPUs over its time (docs/slurm.md)
  bool intruders = false;  // --intruders: the intruder watch's events (docs/enforce.md)
  bool slices = false;     // --slices: the slice watch's events (docs/share.md)
  bool json = false, csv = false, no_color = false;
};
int RunHistory(const HistoryArgs& args, Context& ctx);

struct ReportArgs {
  std::string html;  // output file; "-" = stdout
  std::string db;
  std::string since = "24h", until;
  std::string slurm_job;  // --slurm-job
};
int RunReport(const ReportArgs& args, Context& ctx);

/// The history db to read: `explicit_path` (--db), else $GPUMAN_HISTORY_DB, else
/// history.db in the per-user daemon's state dir if it exists there, else the system
/// daemon's (/var/lib/gpuman/history.db). Errors: kNotFound ("no history yet: ...") when
/// the chosen file does not exist.
Result<std::string> FindHistoryDb(const std::string& explicit_path, const Environment& env);

/// A point in time for --since/--until: a duration before `now_unix_ms` ("90m", "7d") or
/// an ISO-8601 time ("2024-05-01", "2024-05-01T12:00", "2024-05-01 12:00:30Z",
/// "...+02:00"); times without a zone are UTC. Errors: kInvalidArgument.
Result<int64_t> ParseTimeArg(std::string_view text, int64_t now_unix_ms);

}  // namespace gpuman::cli
