#include "cli/slurm_accounting.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>


#include "base/strings.h"
#include "cli/exit_codes.h"
#include "cli/history_commands.h"
#include "store/history_store.h"

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
    // Rows the daemon tagged with the job (a coarse row's time is its minute's start, which
    // may precede the job); untagged rows inside the job's window; never another job's.
    if (s.slurm_job_id.empty() ? !rec.HeldAt(s.t_unix_ms) : s.slurm_job_id != rec.job_id) continue;
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

namespace {

std::string ShortHost() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) return "";
  std::string name = host;
  if (const size_t dot = name.find('.'); dot != std::string::npos) name.resize(dot);
  return name;
}

}  // namespace

std::string SlurmStateDirOf(const Context& ctx) {
  const auto env = ctx.env().Get("GPUMAN_SLURM_DIR");
  return slurm::SlurmStateDir(ctx.config().slurm.state_dir, env ? env->c_str() : nullptr);
}

Result<SlurmJobHistory> ReadSlurmJobHistory(store::HistoryStore& store, const std::string& job_id,
                                            const std::optional<slurm::SlurmJobRecord>& rec,
                                            std::optional<int64_t> step_ms, int64_t now) {
  auto span = store.SlurmJob(job_id);
  if (!span) return span.error();
  SlurmJobHistory out;
  out.job_id = job_id;
  store::HistoryStore::Query q;
  q.step_ms = step_ms;
  if (*span) {
    out.source = "history";
    out.user = (*span)->user;
    out.gpu_uuids = (*span)->gpu_uuids;
    out.since_unix_ms = (*span)->first_unix_ms;
    out.until_unix_ms = (*span)->last_unix_ms;
    // The record's window when it is wider (a coarse row's time is its minute's start).
    if (rec) {
      out.since_unix_ms = std::min(out.since_unix_ms, rec->started_unix_ms);
      out.until_unix_ms = std::max(out.until_unix_ms, rec->ended_unix_ms.value_or(out.until_unix_ms));
    }
    q.slurm_job_id = job_id;
  } else if (rec) {
    out.source = "record";
    out.user = rec->user;
    out.gpu_uuids = rec->gpu_uuids;
    out.since_unix_ms = rec->started_unix_ms;
    out.until_unix_ms = rec->ended_unix_ms.value_or(now);
  } else {
    return MakeError(ErrorCode::kNotFound, "no samples of slurm job " + job_id + " in " + store.path() +
                                               " and no record of it");
  }
  q.since_unix_ms = out.since_unix_ms;
  q.until_unix_ms = out.until_unix_ms;
  q.gpu_uuids = out.gpu_uuids;
  if (q.gpu_uuids.empty()) return out;  // a record without GPUs on this node
  auto rows = store.Samples(q);
  if (!rows) return rows.error();
  if (out.source == "record") {
    std::erase_if(*rows, [&](const model::GpuSample& s) { return !s.slurm_job_id.empty() && s.slurm_job_id != job_id; });
  }
  out.samples = std::move(*rows);
  return out;
}

std::string SlurmJobSummaryLine(const slurm::SlurmJobRecord& rec, Context& ctx, int64_t now) {
  std::vector<model::GpuSample> samples;
  if (auto path = FindHistoryDb("", ctx.env())) {
    if (auto store = store::HistoryStore::Open(*path, /*read_only=*/true)) {
      if (auto h = ReadSlurmJobHistory(**store, rec.job_id, rec, std::nullopt, now)) samples = std::move(h->samples);
    }
  }
  return SlurmAdminComment(rec, samples, now);
}

std::optional<slurm::SlurmJobRecord> ReadJobRecordOrWarn(const std::string& dir, const std::string& job_id,
                                                         Context& ctx) {
  auto read = slurm::ReadJobRecord(dir, job_id);
  if (read) return std::move(*read);
  if (read.error().code != ErrorCode::kNotFound) ctx.err() << "gpuman: warning: " << read.error().message << "\n";
  return std::nullopt;
}

int RunSlurmJobSummary(const std::string& job_id, Context& ctx) {
  // A missing record is not a usage mistake: exit 1, as history's (the `slurm` row is plain).
  auto fail = [&](const Error& e) { return ReportError(ctx.err(), e, ExitPolicy::kHistory); };
  if (!slurm::LooksLikeSlurmJobId(job_id) || !slurm::IsValidJobId(job_id)) {
    // A usage mistake (docs/slurm.md: exit 2), unlike an unknown job (exit 1).
    return ReportError(ctx.err(),
                       MakeError(ErrorCode::kInvalidArgument, "slurm job id '" + EscapeControl(job_id) +
                                                                  "' is not valid (digits, as 1234, 1234_7 or 1234+1)"),
                       ExitPolicy::kPlain);
  }
  const int64_t now = ctx.clock().NowUnixMs();
  const std::string dir = SlurmStateDirOf(ctx);
  std::optional<slurm::SlurmJobRecord> rec = ReadJobRecordOrWarn(dir, job_id, ctx);
  std::vector<model::GpuSample> samples;
  std::string history_note;
  if (auto path = FindHistoryDb("", ctx.env())) {
    auto store = store::HistoryStore::Open(*path, /*read_only=*/true);
    if (store) {
      auto h = ReadSlurmJobHistory(**store, job_id, rec, std::nullopt, now);
      if (h) {
        samples = std::move(h->samples);
        if (!rec) {  // the record is gone (a reboot cleared /run): the history's view of the job
          slurm::SlurmJobRecord made;
          made.job_id = job_id;
          made.user = h->user;
          made.host = ShortHost();
          made.gpu_uuids = h->gpu_uuids;
          made.started_unix_ms = h->since_unix_ms;
          made.ended_unix_ms = h->until_unix_ms;
          rec = std::move(made);
        }
      } else if (h.error().code != ErrorCode::kNotFound) {
        history_note = h.error().message;
      }
    } else {
      history_note = store.error().message;
    }
  } else {
    history_note = path.error().message;
  }
  if (!rec) {
    return fail(MakeError(ErrorCode::kNotFound, "slurm job " + job_id + ": no record in " + dir +
                                                    (history_note.empty() ? " and no samples in the history"
                                                                          : " (history: " + history_note + ")")));
  }
  ctx.out() << SlurmAdminComment(*rec, samples, now) << "\n";
  return kExitOk;
}

}  // namespace gpuman::cli
