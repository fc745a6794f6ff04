#include "cli/slurm_accounting.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

namespace gpuman::cli {

namespace {

using nlohmann::json;

struct GpuStats {
  double util_sum = 0;
  int util_n = 0;
  std::optional<double> util_max;
  std::optional<int64_t> mem_max;
  int samples = 0;
};

double Round1(double v) { return std::round(v * 10.0) / 10.0; }

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace

std::string SlurmAdminComment(const slurm::SlurmJobRecord& rec, const std::vector<model::GpuSample>& samples,
                              int64_t now_unix_ms) {
  std::map<std::string, GpuStats> stats;
  for (const auto& u : rec.gpu_uuids) stats[u];
  int counted = 0;
  for (const auto& s : samples) {
    if (!rec.HeldAt(s.t_unix_ms)) continue;
    auto it = stats.find(s.gpu_uuid);
    if (it == stats.end()) continue;
    GpuStats& g = it->second;
    ++g.samples;
    ++counted;
    if (s.utilization_percent) {
      g.util_sum += *s.utilization_percent;
      ++g.util_n;
      g.util_max = std::max(g.util_max.value_or(*s.utilization_percent), *s.utilization_percent);
    }
    if (s.memory_used_bytes) g.mem_max = std::max(g.mem_max.value_or(*s.memory_used_bytes), *s.memory_used_bytes);
  }
  const int64_t end = rec.ended_unix_ms.value_or(now_unix_ms);
  json head = json::object();
  head["gpuman_job_summary"] = 1;
  head["job"] = rec.job_id;
  head["user"] = rec.user;
  head["host"] = rec.host;
  head["duration_s"] = std::max<int64_t>(0, end - rec.started_unix_ms) / 1000;
  head["ended"] = rec.ended_unix_ms.has_value();
  head["source"] = counted > 0 ? "history" : "record";
  json gpus = json::array();
  for (const auto& u : rec.gpu_uuids) {
    const GpuStats& g = stats[u];
    json e = {{"uuid", u}};
    if (counted > 0) {
      e["util_mean"] = g.util_n > 0 ? json(Round1(g.util_sum / g.util_n)) : json(nullptr);
      e["util_max"] = g.util_max ? json(Round1(*g.util_max)) : json(nullptr);
      e["mem_max_mib"] = g.mem_max ? json(*g.mem_max / (1024 * 1024)) : json(nullptr);
      e["samples"] = g.samples;
    }
    gpus.push_back(std::move(e));
  }
  // Cut the per-GPU list from the end until the line fits.
  size_t keep = gpus.size();
  for (;;) {
    json out = head;
    json kept = json::array();
    for (size_t i = 0; i < keep; ++i) kept.push_back(gpus[i]);
    out["gpus"] = std::move(kept);
    if (keep < gpus.size()) out["gpus_omitted"] = gpus.size() - keep;
    std::string line = Dump(out);
    if (line.size() <= kAdminCommentMaxBytes) return line;
    if (keep == 0) break;
    --keep;
  }
  // Even the header is too long (an absurd user or host name): the bare minimum.
  json minimal = {{"gpuman_job_summary", 1}, {"job", rec.job_id}, {"gpus_omitted", gpus.size()}};
  return Dump(minimal);
}

}  // namespace gpuman::cli
