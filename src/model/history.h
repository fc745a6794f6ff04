// GPU history: per-GPU samples the daemon records once per sample period, and queue wait
// times of started jobs. Plain values shared by store/history_store (SQLite), the
// `history` and `report` commands and render/report_html. No I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpuman::model {

/// One GPU at one instant (1 s samples), or the mean over one step (1 min roll-ups: the
/// numbers are means, `user`/`job_id` the holder at the end of the step).
struct GpuSample {
  int64_t t_unix_ms = 0;
  std::string gpu_uuid;
  int gpu_index = 0;
  std::optional<double> utilization_percent;
  std::optional<double> memory_utilization_percent;
  std::optional<int64_t> memory_used_bytes;
  std::optional<int64_t> memory_total_bytes;
  std::optional<double> temperature_c;
  std::optional<double> power_w;
  std::string user;               // who held it (lease or job owner); "" when free
  std::optional<int64_t> job_id;  // queue job holding it, if any
};

/// How long a started job waited in the queue.
struct JobWait {
  int64_t job_id = 0;
  std::string user;
  int64_t submitted_unix_ms = 0;
  int64_t started_unix_ms = 0;
  int gpus = 0;
};

}  // namespace gpuman::model
