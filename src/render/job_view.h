// The queue's jobs as text: `gpuman queue`'s table and `gpuman show`'s detail. Pure (jobs
// and the time in, text out). Names, commands, users and reasons are other users' text:
// control characters and terminal escapes in them are shown escaped, never sent (the
// JSON forms, in protocol/model_json.h, carry them exactly). Any thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "model/job.h"

namespace gpuman::render {

/// The selection options a job was submitted with, as `submit` flags ("-n 2 --model A100").
std::string DescribeRequest(const model::GpuRequest& request);

/// `gpuman show ID`: the job, one field a line.
std::string JobDetailText(const model::Job& job);

/// `gpuman show ARRAY`: an array as a whole: its tasks by state (state name -> task
/// ranges), then what `first` (its first task) says of all of them.
std::string ArrayDetailText(const model::Job& first, int64_t tasks, std::optional<int> limit,
                            const std::map<std::string, std::string>& by_state);

/// `gpuman queue`: a header and one line per job (why it waits, or how long it ran or has
/// been queued, relative to `now_unix_ms`), each cut to `width` columns; "no jobs" when
/// there are none. With `cut` false (output to a pipe or a file) nothing is cut: USER and
/// NAME grow to the longest of them and the reason is written whole. The waiting tasks of
/// an array share one row per state ("12_[5-99%8]", with the reason of the first) unless
/// `expand_arrays`.
std::string QueueTable(const std::vector<model::Job>& jobs, int64_t now_unix_ms, int width, bool cut = true,
                       bool expand_arrays = false);

}  // namespace gpuman::render
