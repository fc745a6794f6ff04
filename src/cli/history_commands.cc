#include "cli/history_commands.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <regex>

#include <nlohmann/json.hpp>


#include "base/posix_error.h"
#include "base/duration.h"
#include "base/strings.h"
#include "cli/exit_codes.h"
#include "cli/slurm_accounting.h"
#include "daemon/daemon.h"
#include "devices/gpu_ids.h"
#include "render/format.h"
#include "render/history_view.h"
#include "render/report_html.h"
#include "store/history_store.h"

namespace gpuman::cli {
namespace {

constexpr const char* kNoHistory =
    "no history yet: the gpuman daemon records it; start it with `gpuman daemon`";


// Present, or present but hidden behind a directory we may not search (then opening it
// reports the permission problem, which is more useful than "no history").
bool MayExist(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 || errno == EACCES;
}

Result<std::unique_ptr<store::HistoryStore>> OpenHistory(const std::string& explicit_path,
                                                         Context& ctx) {
  auto path = FindHistoryDb(explicit_path, ctx.env());
  if (!path) return path.error();
  auto store = store::HistoryStore::Open(*path, /*read_only=*/true);
  if (!store && store.error().code == ErrorCode::kNotFound) {
    return MakeError(ErrorCode::kNotFound, std::string(kNoHistory) + " (" + store.error().message + ")");
  }
  return store;
}

struct Window {
  std::optional<int64_t> since, until;
};

Result<Window> ParseWindow(const std::string& since, const std::string& until, int64_t now_ms) {
  Window w;
  if (!since.empty()) {
    auto t = ParseTimeArg(since, now_ms);
    if (!t) return t.error().WithContext("--since");
    w.since = *t;
  }
  if (!until.empty()) {
    auto t = ParseTimeArg(until, now_ms);
    if (!t) return t.error().WithContext("--until");
    w.until = *t;
  }
  if (w.since && w.until && *w.since > *w.until) {
    return MakeError(ErrorCode::kInvalidArgument, "--since is after --until");
  }
  return w;
}

// --gpu values (indices, UUIDs, UUID prefixes; comma lists) -> UUIDs, against the GPUs
// the history knows (no driver needed: the db has both indices and UUIDs).
Result<std::vector<std::string>> ResolveGpus(const std::vector<std::string>& ids,
                                             store::HistoryStore& store) {
  std::vector<std::string> uuids;
  if (ids.empty()) return uuids;
  auto known = store.Gpus();
  if (!known) return known.error();
  std::vector<model::DeviceSnapshot> gpus;
  for (const auto& g : *known) {
    model::DeviceSnapshot s;
    s.index = g.index;
    s.uuid = g.uuid;
    gpus.push_back(std::move(s));
  }
  std::string list;
  for (const auto& id : ids) list += (list.empty() ? "" : ",") + id;
  auto picked = devices::ResolveGpuIds(list, gpus);
  if (!picked) return picked.error().WithContext("--gpu (GPUs in the history)");
  for (size_t i : *picked) uuids.push_back(*gpus[i].uuid);
  return uuids;
}

// A step that keeps a chart to at most ~720 points: the smallest round step that does.
int64_t ChartStep(int64_t range_ms) {
  static constexpr int64_t kSteps[] = {1000,    5000,    10000,    30000,    60000,    120000,
                                       300000,  600000,  900000,   1800000,  3600000,  7200000,
                                       10800000, 21600000, 43200000, 86400000};
  for (int64_t step : kSteps) {
    if (range_ms / step <= 720) return step;
  }
  return kSteps[std::size(kSteps) - 1];
}

// --slurm-job ID: the job's record (if any) and its rows in the history.
Result<SlurmJobHistory> SlurmJobRows(const std::string& job_id, store::HistoryStore& store,
                                     std::optional<int64_t> step, Context& ctx) {
  if (!slurm::IsValidJobId(job_id)) {
    return MakeError(ErrorCode::kInvalidArgument, "--slurm-job: '" + EscapeControl(job_id) + "' is not a slurm job id");
  }
  const std::string dir = SlurmStateDirOf(ctx);
  const std::optional<slurm::SlurmJobRecord> rec = ReadJobRecordOrWarn(dir, job_id, ctx);
  auto rows = ReadSlurmJobHistory(store, job_id, rec, step, ctx.clock().NowUnixMs());
  if (!rows && rows.error().code == ErrorCode::kNotFound) {
    return MakeError(ErrorCode::kNotFound, rows.error().message + " in " + dir);
  }
  return rows;
}

std::string HostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "";
  return buf;
}

}  // namespace

Result<std::string> FindHistoryDb(const std::string& explicit_path, const Environment& env) {
  std::string chosen = explicit_path;
  if (chosen.empty()) chosen = env.Get("GPUMAN_HISTORY_DB").value_or("");
  if (!chosen.empty()) {
    if (!MayExist(chosen)) {
      return MakeError(ErrorCode::kNotFound, std::string(kNoHistory) + " (no file " + chosen + ")");
    }
    return chosen;
  }
  const std::string user_db = daemon::DefaultDaemonStateDir(false, env.vars) + "/history.db";
  const std::string system_db = daemon::DefaultDaemonStateDir(true, env.vars) + "/history.db";
  struct stat st {};
  if (::stat(user_db.c_str(), &st) == 0) return user_db;
  if (MayExist(system_db)) return system_db;
  return MakeError(ErrorCode::kNotFound, std::string(kNoHistory) + " (looked for " + user_db +
                                             " and " + system_db + ")");
}

Result<int64_t> ParseTimeArg(std::string_view text, int64_t now_unix_ms) {
  const std::string s(Trim(text));
  // YYYY-MM-DD[(T| )HH:MM[:SS[.fff]]][Z|(+|-)HH[:]MM]
  static const std::regex kIso(
      R"(^(\d{4})-(\d{2})-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,3})\d*)?)?)?\s*([Zz]|[+-]\d{2}:?\d{2})?$)");
  std::smatch m;
  if (std::regex_match(s, m, kIso)) {
    auto num = [&](int i) { return m[i].matched ? std::stoi(m[i].str()) : 0; };
    std::tm tm{};
    tm.tm_year = num(1) - 1900;
    tm.tm_mon = num(2) - 1;
    tm.tm_mday = num(3);
    tm.tm_hour = num(4);
    tm.tm_min = num(5);
    tm.tm_sec = num(6);
    const std::tm asked = tm;
    const time_t secs = ::timegm(&tm);
    if (tm.tm_year != asked.tm_year || tm.tm_mon != asked.tm_mon || tm.tm_mday != asked.tm_mday ||
        tm.tm_hour != asked.tm_hour || tm.tm_min != asked.tm_min || tm.tm_sec != asked.tm_sec) {
      return MakeError(ErrorCode::kInvalidArgument, "'" + s + "' is not a valid time");
    }
    int64_t ms = static_cast<int64_t>(secs) * 1000;
    if (m[7].matched) {
      std::string frac = m[7].str();
      while (frac.size() < 3) frac += '0';
      ms += std::stoi(frac);
    }
    if (m[8].matched && m[8].str() != "Z" && m[8].str() != "z") {
      std::string zone = m[8].str();
      const int sign = zone[0] == '-' ? -1 : 1;
      zone.erase(std::remove(zone.begin(), zone.end(), ':'), zone.end());
      const int hours = std::stoi(zone.substr(1, 2)), minutes = std::stoi(zone.substr(3, 2));
      ms -= sign * (hours * 3600LL + minutes * 60LL) * 1000;
    }
    return ms;
  }
  auto ago = ParseDurationMs(s);
  if (!ago) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "'" + s + "' is neither a duration (\"1h\", \"30m\", \"7d\") nor an ISO time "
                               "(\"2024-05-01T12:00Z\")");
  }
  return now_unix_ms - *ago;
}

namespace {

// `history --intruders`: the intruder watch's events, oldest first (docs/enforce.md).
int PrintIntruders(store::HistoryStore& store, const Window& window, bool as_json, Context& ctx) {
  auto events = store.IntruderEvents(window.since, window.until);
  if (!events) return ctx.Fail(events.error());
  if (as_json) {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const auto& e : *events) {
      list.push_back({{"time", render::FormatIsoUtcSeconds(e.t_unix_ms / 1000)},
                      {"t_unix_ms", e.t_unix_ms},
                      {"event", e.event},
                      {"gpu_index", e.gpu_index},
                      {"gpu_uuid", e.gpu_uuid},
                      {"pid", e.pid},
                      {"user", e.user.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(e.user)},
                      {"command", e.command.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(e.command)},
                      {"lease_id", e.lease_id},
                      {"lease_user", e.lease_user}});
    }
    ctx.out() << nlohmann::ordered_json{{"intruders", list}}.dump(2) << "\n";
    return kExitOk;
  }
  if (events->empty()) {
    ctx.out() << "no intruders recorded in this window\n";
    return kExitOk;
  }
  ctx.out() << "TIME                  EVENT  GPU      PID  USER        LEASE  COMMAND\n";
  for (const auto& e : *events) {
    char line[160];
    std::snprintf(line, sizeof line, "%-20s  %-5s  %3d  %7u  %-10s  %5lld  ", render::FormatIsoUtcSeconds(e.t_unix_ms / 1000).c_str(),
                  e.event.c_str(), e.gpu_index, e.pid, EscapeControl(e.user.empty() ? "?" : e.user).substr(0, 10).c_str(),
                  static_cast<long long>(e.lease_id));
    ctx.out() << line << EscapeControl(e.command)
              << (e.lease_id == 0 ? std::string(" (no lease: unleased GPU use)")
                                  : " (lease of " + EscapeControl(e.lease_user) + ")")
              << "\n";
  }
  return kExitOk;
}

// `history --slices`: the slice watch's events, oldest first (docs/share.md).
int PrintSlices(store::HistoryStore& store, const Window& window, bool as_json, Context& ctx) {
  auto events = store.SliceEvents(window.since, window.until);
  if (!events) return ctx.Fail(events.error());
  if (as_json) {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const auto& e : *events) {
      list.push_back({{"time", render::FormatIsoUtcSeconds(e.t_unix_ms / 1000)},
                      {"t_unix_ms", e.t_unix_ms},
                      {"event", e.event},
                      {"gpu_index", e.gpu_index},
                      {"gpu_uuid", e.gpu_uuid},
                      {"user", e.user},
                      {"lease_id", e.lease_id},
                      {"job_id", e.job_id ? nlohmann::ordered_json(*e.job_id) : nlohmann::ordered_json(nullptr)},
                      {"used_bytes", e.used_bytes},
                      {"declared_bytes", e.declared_bytes},
                      {"pids", e.pids}});
    }
    ctx.out() << nlohmann::ordered_json{{"slices", list}}.dump(2) << "\n";
    return kExitOk;
  }
  if (events->empty()) {
    ctx.out() << "no slice over its memory recorded in this window\n";
    return kExitOk;
  }
  ctx.out() << "TIME                  EVENT   GPU  USER        LEASE    JOB      USED  DECLARED  PIDS\n";
  for (const auto& e : *events) {
    std::string pids;
    for (uint32_t pid : e.pids) pids += (pids.empty() ? "" : ",") + std::to_string(pid);
    char line[200];
    std::snprintf(line, sizeof line, "%-20s  %-6s  %3d  %-10s  %5lld  %5s  %8s  %8s  ",
                  render::FormatIsoUtcSeconds(e.t_unix_ms / 1000).c_str(), e.event.c_str(), e.gpu_index,
                  EscapeControl(e.user).substr(0, 10).c_str(), static_cast<long long>(e.lease_id),
                  e.job_id ? std::to_string(*e.job_id).c_str() : "-", render::FormatBytes(e.used_bytes).c_str(),
                  render::FormatBytes(e.declared_bytes).c_str());
    ctx.out() << line << (pids.empty() ? "-" : pids) << "\n";
  }
  return kExitOk;
}

}  // namespace

int RunHistory(const HistoryArgs& args, Context& ctx) {
  const int64_t now = ctx.clock().NowUnixMs();
  auto window = ParseWindow(args.since, args.until, now);
  if (!window) return ctx.Fail(window.error());
  std::optional<int64_t> step;
  if (!args.step.empty()) {
    auto parsed = ParseDurationMs(args.step);
    if (!parsed || *parsed <= 0) {
      return ctx.Fail(MakeError(ErrorCode::kInvalidArgument,
                                 "--step: '" + args.step + "' is not a positive duration"));
    }
    step = *parsed;
  }
  auto store = OpenHistory(args.db, ctx);
  if (!store) return ctx.Fail(store.error());
  if (args.intruders) return PrintIntruders(**store, *window, args.json, ctx);
  if (args.slices) return PrintSlices(**store, *window, args.json, ctx);
  auto gpus = ResolveGpus(args.gpus, **store);
  if (!gpus) return ctx.Fail(gpus.error());
  std::optional<SlurmJobHistory> job;
  std::vector<model::GpuSample> samples;
  if (!args.slurm_job.empty()) {
    auto rows = SlurmJobRows(args.slurm_job, **store, step, ctx);
    if (!rows) return ctx.Fail(rows.error());
    job = std::move(*rows);
    samples = std::move(job->samples);
    if (!gpus->empty()) {  // --gpu narrows it further
      std::erase_if(samples, [&](const model::GpuSample& s) {
        return std::find(gpus->begin(), gpus->end(), s.gpu_uuid) == gpus->end();
      });
    }
    window->since = job->since_unix_ms;
    window->until = job->until_unix_ms;
  } else {
    store::HistoryStore::Query q;
    q.since_unix_ms = window->since;
    q.until_unix_ms = window->until;
    q.step_ms = step;
    q.gpu_uuids = *gpus;
    auto rows = (*store)->Samples(q);
    if (!rows) return ctx.Fail(rows.error());
    samples = std::move(*rows);
  }

  render::HistoryView view{window->since, window->until, step, std::move(samples)};
  if (args.json) {
    nlohmann::json doc = render::HistoryToJson(view);
    if (job) {
      doc["slurm_job"] = {{"job_id", job->job_id}, {"user", job->user},       {"gpus", job->gpu_uuids},
                          {"since_unix_ms", job->since_unix_ms}, {"until_unix_ms", job->until_unix_ms},
                          {"source", job->source}};
    }
    ctx.out() << doc.dump(2) << "\n";
  } else if (args.csv) {
    ctx.out() << render::HistoryToCsv(view.samples);
  } else {
    if (job) {
      ctx.out() << "slurm job " << EscapeControl(job->job_id) << " of " << EscapeControl(job->user) << ": "
                << job->gpu_uuids.size() << " GPU(s), " << FormatIsoUtc(job->since_unix_ms / 1000) << " to "
                << FormatIsoUtc(job->until_unix_ms / 1000)
                << (job->source == "record" ? " (samples of its GPUs in its time: the daemon did not tag them)" : "")
                << "\n";
    }
    ctx.out() << render::RenderHistoryText(view, ctx.Terminal(args.no_color));
  }
  return kExitOk;
}

int RunReport(const ReportArgs& args, Context& ctx) {
  const int64_t now = ctx.clock().NowUnixMs();
  auto window = ParseWindow(args.since, args.until, now);
  if (!window) return ctx.Fail(window.error());
  auto store = OpenHistory(args.db, ctx);
  if (!store) return ctx.Fail(store.error());

  render::ReportData data;
  data.generated_unix_ms = now;
  data.until_unix_ms = window->until.value_or(now);
  data.since_unix_ms = window->since.value_or(data.until_unix_ms - 24 * 3600 * 1000LL);
  if (!window->since) {  // "--since ''": everything there is
    if (auto range = (*store)->TimeRange(); range && *range) data.since_unix_ms = (*range)->first;
  }
  data.host = HostName();
  if (!args.slurm_job.empty()) {
    // The job's GPUs over its time; GPU-hours are its user's (and free time) on them.
    auto first = SlurmJobRows(args.slurm_job, **store, std::nullopt, ctx);
    if (!first) return ctx.Fail(first.error());
    data.since_unix_ms = first->since_unix_ms;
    data.until_unix_ms = std::max(first->until_unix_ms, first->since_unix_ms + 1000);
    const int64_t step = ChartStep(data.until_unix_ms - data.since_unix_ms);
    data.step_ms = step;
    auto rows = step > 1000 ? SlurmJobRows(args.slurm_job, **store, step, ctx) : std::move(first);
    if (!rows) return ctx.Fail(rows.error());
    data.host += (data.host.empty() ? "" : ", ") + std::string("slurm job ") + rows->job_id + " of " + rows->user;
    data.gpu_hours_by_user = store::HeldMsByUser(rows->samples, data.until_unix_ms);
    for (auto& [who, ms] : data.gpu_hours_by_user) ms /= 3600000.0;
    data.samples = std::move(rows->samples);
  } else {
    store::HistoryStore::Query q;
    q.since_unix_ms = data.since_unix_ms;
    q.until_unix_ms = data.until_unix_ms;
    const int64_t step = ChartStep(data.until_unix_ms - data.since_unix_ms);
    if (step > 1000) q.step_ms = step;
    data.step_ms = step;
    auto samples = (*store)->Samples(q);
    if (!samples) return ctx.Fail(samples.error());
    data.samples = std::move(*samples);
    auto hours = (*store)->GpuHoursByUser(data.since_unix_ms, data.until_unix_ms);
    if (!hours) return ctx.Fail(hours.error());
    data.gpu_hours_by_user = std::move(*hours);
    auto waits = (*store)->JobWaits(data.since_unix_ms);
    if (!waits) return ctx.Fail(waits.error());
    std::erase_if(*waits, [&](const model::JobWait& w) { return w.started_unix_ms > data.until_unix_ms; });
    data.waits = std::move(*waits);
  }

  const std::string html = render::RenderReportHtml(data);
  if (args.html == "-") {
    ctx.out() << html;
    return kExitOk;
  }
  // Written beside the target and renamed, so a reader never sees half a report.
  const std::string tmp = args.html + ".tmp-" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << html;
    out.close();
    if (!out) {
      ::unlink(tmp.c_str());
      return ctx.Fail(MakeError(ErrorCode::kIo, "write " + args.html + ": cannot write " + tmp));
    }
  }
  if (std::rename(tmp.c_str(), args.html.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return ctx.Fail(MakeError(ErrorCode::kIo, "write " + args.html + ": " + PosixErrorText(err)));
  }
  ctx.err() << "gpuman: wrote " << args.html << " (" << data.samples.size() << " points, "
            << FormatDurationMs(data.until_unix_ms - data.since_unix_ms) << ")\n";
  return kExitOk;
}

}  // namespace gpuman::cli
