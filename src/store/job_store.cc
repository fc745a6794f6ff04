#include "store/job_store.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <string_view>
#include <type_traits>

#include "store/migrations.h"

namespace gpuman::store {

// Time of an event, from SQLite's clock (the store holds no Clock; events are a log).
#define GPUMAN_JOB_SQL_NOW_MS "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)"

// The columns of a job, in the order ReadJob reads them (id first) and insert_job binds
// them (without id, so column c is parameter c).
#define GPUMAN_JOB_COLUMNS_HEAD "id, name, uid, gid, user, "
#define GPUMAN_JOB_COLUMNS_TAIL                                                             \
  "cwd, output_path, req_count, req_gpus, "                                                 \
  "req_min_free_memory_bytes, req_max_utilization_percent, req_model, "                     \
  "req_min_compute_capability, req_exclude, req_allow_shared, priority, time_limit_ms, "    \
  "requeue, after, state, submitted_unix_ms, started_unix_ms, ended_unix_ms, exit_code, "   \
  "gpu_uuids, lease_id, supervisor_pid, supervisor_start_ticks, reason, failure, array_id, "      \
  "array_task, array_limit, notify_kind, notify_argv, notified_unix_ms, notify_outcome, req_gpu_memory_bytes, "   \
  "req_mps, req_gpu_share_percent, req_mig_profile"
#define GPUMAN_JOB_COLUMNS GPUMAN_JOB_COLUMNS_HEAD "argv, env, " GPUMAN_JOB_COLUMNS_TAIL
// A summary (JobFields::kSummary): argv and env read as empty, so that they are neither
// copied out of the page cache nor decoded (a sweep's 10,000 environments are megabytes).
#define GPUMAN_JOB_SUMMARY_COLUMNS GPUMAN_JOB_COLUMNS_HEAD "'', '', " GPUMAN_JOB_COLUMNS_TAIL
#define GPUMAN_JOB_ACTIVE "state IN ('queued', 'held', 'starting', 'running')"

// All SQL of the job store, prepared at open so a schema mismatch fails there.
struct JobStore::Statements {
  Statement select_job;
  Statement select_job_summary;
  Statement select_jobs;
  Statement select_job_summaries;
  Statement select_active;
  Statement select_active_summaries;
  Statement select_array;
  Statement select_task;
  Statement select_task_summary;
  Statement array_unfinished;
  Statement array_unsuccessful;
  Statement array_last;
  Statement data_version;
  Statement insert_job;
  Statement update_job;
  Statement update_output;
  Statement log_event;
  Statement prune_events;
  Statement add_usage;
  Statement prune_usage;
  Statement select_usage;
  Statement drain;
  Statement undrain;
  Statement select_drained;
  Statement select_notify_due;
  Statement mark_notified;
  Statement array_state_counts;
};

namespace {

constexpr int kJobEventsKept = 100000;
// Larger single additions are refused, so that sums stay far from int64 overflow.
constexpr double kMaxGpuSecondsPerAdd = 1e12;

enum Column {
  kId, kName, kUid, kGid, kUser, kArgv, kEnv, kCwd, kOutputPath, kReqCount, kReqGpus,
  kReqMinFreeMemory, kReqMaxUtilization, kReqModel, kReqMinComputeCapability, kReqExclude,
  kReqAllowShared, kPriority, kTimeLimit, kRequeue, kAfter, kState, kSubmitted, kStarted,
  kEnded, kExitCode, kGpuUuids, kLeaseId, kSupervisorPid, kSupervisorStartTicks, kReason,
  kFailure, kArrayId, kArrayTask, kArrayLimit, kNotifyKind, kNotifyArgv, kNotifiedAt, kNotifyOutcome,
  kReqGpuMemory, kReqMps, kReqGpuShare, kReqMigProfile, kColumnCount
};

// ---- Encodings of list columns (see migration 2)

// Each element as "<byte length>:<bytes>"; any byte may appear in an element.
std::string EncodeStrings(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) {
    out += std::to_string(item.size());
    out += ':';
    out += item;
  }
  return out;
}

std::optional<std::vector<std::string>> DecodeStrings(std::string_view text) {
  std::vector<std::string> out;
  while (!text.empty()) {
    size_t colon = text.find(':');
    if (colon == std::string_view::npos || colon == 0) return std::nullopt;
    size_t length = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + colon, length);
    if (ec != std::errc() || end != text.data() + colon) return std::nullopt;
    text.remove_prefix(colon + 1);
    if (length > text.size()) return std::nullopt;
    out.emplace_back(text.substr(0, length));
    text.remove_prefix(length);
  }
  return out;
}

std::string EncodeEnv(const std::map<std::string, std::string>& env) {
  std::vector<std::string> flat;
  for (const auto& [name, value] : env) {
    flat.push_back(name);
    flat.push_back(value);
  }
  return EncodeStrings(flat);
}

std::optional<std::map<std::string, std::string>> DecodeEnv(std::string_view text) {
  auto flat = DecodeStrings(text);
  if (!flat || flat->size() % 2 != 0) return std::nullopt;
  std::map<std::string, std::string> env;
  for (size_t i = 0; i < flat->size(); i += 2) env[(*flat)[i]] = (*flat)[i + 1];
  return env;
}

std::string EncodeIds(const std::vector<int64_t>& ids) {
  std::string out;
  for (int64_t id : ids) {
    if (!out.empty()) out += ',';
    out += std::to_string(id);
  }
  return out;
}

std::optional<std::vector<int64_t>> DecodeIds(std::string_view text) {
  std::vector<int64_t> out;
  if (text.empty()) return out;
  while (true) {
    size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    int64_t id = 0;
    auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), id);
    if (ec != std::errc() || end != item.data() + item.size() || item.empty()) {
      return std::nullopt;
    }
    out.push_back(id);
    if (comma == std::string_view::npos) return out;
    text.remove_prefix(comma + 1);
  }
}

// ---- Binding and reading optional values

void BindOptional(Statement& s, int index, const std::optional<int64_t>& value) {
  if (value) {
    s.Bind(index, *value);
  } else {
    s.BindNull(index);
  }
}

void BindOptional(Statement& s, int index, const std::optional<std::string>& value) {
  if (value) {
    s.Bind(index, *value);
  } else {
    s.BindNull(index);
  }
}

std::optional<int64_t> OptionalInt(const Statement& s, int column) {
  if (s.ColumnIsNull(column)) return std::nullopt;
  return s.ColumnInt64(column);
}

std::optional<std::string> OptionalText(const Statement& s, int column) {
  if (s.ColumnIsNull(column)) return std::nullopt;
  return s.ColumnText(column);
}

template <typename To>
std::optional<To> Narrow(const std::optional<int64_t>& value) {
  if (!value) return std::nullopt;
  return static_cast<To>(*value);
}

std::optional<int64_t> Widen(const std::optional<int32_t>& value) {
  if (!value) return std::nullopt;
  return *value;
}
static_assert(std::is_same_v<int, int32_t>);  // Widen serves exit_code and percentages too

// The fields of `job` that a Transition may change, in update_job's parameters 3..10 and 12..15.
void BindRunFields(Statement& s, const model::Job& job) {
  s.Bind(12, model::JobFailureName(job.failure));
  BindOptional(s, 3, job.started_unix_ms);
  BindOptional(s, 4, job.ended_unix_ms);
  BindOptional(s, 5, Widen(job.exit_code));
  s.Bind(6, EncodeStrings(job.gpu_uuids));
  BindOptional(s, 7, job.lease_id);
  BindOptional(s, 8, Widen(job.supervisor_pid));
  BindOptional(s, 9, job.supervisor_start_ticks);
  s.Bind(10, job.reason);
  s.Bind(13, static_cast<int64_t>(job.priority));
  BindOptional(s, 14, job.time_limit_ms);
  s.Bind(15, job.name);
}

Error Corrupt(const Database& db, int64_t id, const char* column) {
  return MakeError(ErrorCode::kIo, "state db " + db.path() + ": job " + std::to_string(id) +
                                       ": unreadable " + column + " column");
}

Result<model::Job> ReadJob(const Database& db, const Statement& s) {
  model::Job job;
  job.id = s.ColumnInt64(kId);
  job.name = s.ColumnText(kName);
  job.uid = static_cast<uint32_t>(s.ColumnInt64(kUid));
  job.gid = static_cast<uint32_t>(s.ColumnInt64(kGid));
  job.user = s.ColumnText(kUser);
  auto argv = DecodeStrings(s.ColumnText(kArgv));
  if (!argv) return Corrupt(db, job.id, "argv");
  job.argv = std::move(*argv);
  auto env = DecodeEnv(s.ColumnText(kEnv));
  if (!env) return Corrupt(db, job.id, "env");
  job.env = std::move(*env);
  job.cwd = s.ColumnText(kCwd);
  job.output_path = s.ColumnText(kOutputPath);

  model::GpuRequest& r = job.request;
  r.count = static_cast<int>(s.ColumnInt64(kReqCount));
  if (auto gpus = OptionalText(s, kReqGpus)) {
    auto decoded = DecodeStrings(*gpus);
    if (!decoded) return Corrupt(db, job.id, "req_gpus");
    r.gpus = std::move(*decoded);
  }
  r.min_free_memory_bytes = OptionalInt(s, kReqMinFreeMemory);
  r.gpu_memory_bytes = OptionalInt(s, kReqGpuMemory);
  r.mps = s.ColumnInt64(kReqMps) != 0;
  r.gpu_share_percent = Narrow<int>(OptionalInt(s, kReqGpuShare));
  r.mig_profile = OptionalText(s, kReqMigProfile);
  r.max_utilization_percent = Narrow<int>(OptionalInt(s, kReqMaxUtilization));
  r.model = OptionalText(s, kReqModel);
  r.min_compute_capability = OptionalText(s, kReqMinComputeCapability);
  auto exclude = DecodeStrings(s.ColumnText(kReqExclude));
  if (!exclude) return Corrupt(db, job.id, "req_exclude");
  r.exclude = std::move(*exclude);
  r.allow_shared = s.ColumnInt64(kReqAllowShared) != 0;

  job.priority = static_cast<int>(s.ColumnInt64(kPriority));
  job.time_limit_ms = OptionalInt(s, kTimeLimit);
  job.requeue = s.ColumnInt64(kRequeue) != 0;
  auto after = DecodeIds(s.ColumnText(kAfter));
  if (!after) return Corrupt(db, job.id, "after");
  job.after = std::move(*after);

  auto state = model::ParseJobState(s.ColumnText(kState));
  if (!state) return Corrupt(db, job.id, "state");
  job.state = *state;
  job.submitted_unix_ms = s.ColumnInt64(kSubmitted);
  job.started_unix_ms = OptionalInt(s, kStarted);
  job.ended_unix_ms = OptionalInt(s, kEnded);
  job.exit_code = Narrow<int>(OptionalInt(s, kExitCode));
  auto uuids = DecodeStrings(s.ColumnText(kGpuUuids));
  if (!uuids) return Corrupt(db, job.id, "gpu_uuids");
  job.gpu_uuids = std::move(*uuids);
  job.lease_id = OptionalInt(s, kLeaseId);
  job.supervisor_pid = Narrow<int32_t>(OptionalInt(s, kSupervisorPid));
  job.supervisor_start_ticks = OptionalInt(s, kSupervisorStartTicks);
  job.reason = s.ColumnText(kReason);
  auto failure = model::ParseJobFailure(s.ColumnText(kFailure));
  if (!failure) return Corrupt(db, job.id, "failure");
  job.failure = *failure;
  job.array_id = OptionalInt(s, kArrayId);
  job.array_task = OptionalInt(s, kArrayTask);
  job.array_limit = Narrow<int>(OptionalInt(s, kArrayLimit));
  const std::string notify_kind = s.ColumnText(kNotifyKind);
  if (!notify_kind.empty()) {
    if (notify_kind != "program" && notify_kind != "mail") return Corrupt(db, job.id, "notify_kind");
    auto notify_argv = DecodeStrings(s.ColumnText(kNotifyArgv));
    if (!notify_argv) return Corrupt(db, job.id, "notify_argv");
    job.notify = model::JobNotify{notify_kind == "mail", std::move(*notify_argv)};
  }
  job.notified_unix_ms = OptionalInt(s, kNotifiedAt);
  job.notify_outcome = s.ColumnText(kNotifyOutcome);
  return job;
}

// Floor division, so that times before 1970 land in the bucket below them too.
int64_t BucketStart(int64_t at_unix_ms, int64_t width_ms) {
  int64_t q = at_unix_ms / width_ms;
  if (at_unix_ms % width_ms < 0) --q;
  return q * width_ms;
}

}  // namespace

Result<std::unique_ptr<JobStore>> JobStore::Open(const std::string& path,
                                                 JobStoreOptions options) {
  if (options.usage_bucket.count() <= 0) {
    return MakeError(ErrorCode::kInvalidArgument, "open state db " + path +
                                                      ": usage bucket must be positive");
  }
  DatabaseOptions db_options;
  db_options.busy_timeout = options.busy_timeout;
  UseSchema(db_options, StateFileSchema());  // refuse a file that is not ours before writing
  auto db = Database::Open(path, db_options);
  if (!db) return db.error();
  if (auto migrated = Migrate(**db); !migrated) return migrated.error();
  return Attach(std::shared_ptr<Database>(std::move(*db)), std::move(options));
}

Result<std::unique_ptr<JobStore>> JobStore::Attach(std::shared_ptr<Database> db, JobStoreOptions options) {
  if (options.usage_bucket.count() <= 0) {
    return MakeError(ErrorCode::kInvalidArgument, "usage bucket must be positive");
  }
  auto stmts = std::make_unique<Statements>();
  const struct {
    Statement* target;
    const char* name;
    const char* sql;
  } specs[] = {
      {&stmts->select_job, "read job", "SELECT " GPUMAN_JOB_COLUMNS " FROM jobs WHERE id = ?1"},
      {&stmts->select_job_summary, "read job summary", "SELECT " GPUMAN_JOB_SUMMARY_COLUMNS " FROM jobs WHERE id = ?1"},
      {&stmts->select_jobs, "read jobs",
       "SELECT " GPUMAN_JOB_COLUMNS " FROM jobs "
       "WHERE (?1 OR " GPUMAN_JOB_ACTIVE ") AND (?2 IS NULL OR uid = ?2) AND id > ?3 ORDER BY id LIMIT ?4"},
      {&stmts->select_job_summaries, "read job summaries",
       "SELECT " GPUMAN_JOB_SUMMARY_COLUMNS " FROM jobs "
       "WHERE (?1 OR " GPUMAN_JOB_ACTIVE ") AND (?2 IS NULL OR uid = ?2) AND id > ?3 ORDER BY id LIMIT ?4"},
      {&stmts->select_active, "read active jobs",
       "SELECT " GPUMAN_JOB_COLUMNS " FROM jobs WHERE " GPUMAN_JOB_ACTIVE " ORDER BY id"},
      {&stmts->select_active_summaries, "read active job summaries",
       "SELECT " GPUMAN_JOB_SUMMARY_COLUMNS " FROM jobs WHERE " GPUMAN_JOB_ACTIVE " ORDER BY id"},
      {&stmts->select_array, "read array tasks",
       "SELECT " GPUMAN_JOB_SUMMARY_COLUMNS " FROM jobs WHERE array_id = ?1 ORDER BY array_task"},
      {&stmts->select_task, "read array task",
       "SELECT " GPUMAN_JOB_COLUMNS " FROM jobs WHERE array_id = ?1 AND array_task = ?2"},
      {&stmts->select_task_summary, "read array task summary",
       "SELECT " GPUMAN_JOB_SUMMARY_COLUMNS " FROM jobs WHERE array_id = ?1 AND array_task = ?2"},
      // In index order (jobs_array holds the state): no sort, and the rows are not read
      // until one is found.
      {&stmts->array_unfinished, "read an array's first unfinished task",
       "SELECT array_task, state, exit_code FROM jobs WHERE array_id = ?1 AND " GPUMAN_JOB_ACTIVE
       " ORDER BY array_task LIMIT 1"},
      {&stmts->array_unsuccessful, "read an array's first unsuccessful task",
       "SELECT array_task, state, exit_code FROM jobs WHERE array_id = ?1 AND state != 'succeeded' "
       "ORDER BY array_task LIMIT 1"},
      {&stmts->array_last, "read an array's last task",
       "SELECT array_task, state, exit_code FROM jobs WHERE array_id = ?1 ORDER BY array_task DESC LIMIT 1"},
      {&stmts->data_version, "read data version", "PRAGMA data_version"},
      {&stmts->insert_job, "insert job",
       "INSERT INTO jobs (" GPUMAN_JOB_COLUMNS ") VALUES (NULL, ?1, ?2, ?3, ?4, ?5, ?6, ?7, "
       "?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, "
       "?25, ?26, ?27, ?28, ?29, ?30, ?31, ?32, ?33, ?34, ?35, ?36, ?37, ?38, ?39, ?40, ?41, ?42)"},
      {&stmts->update_job, "update job",
       "UPDATE jobs SET state = ?2, started_unix_ms = ?3, ended_unix_ms = ?4, exit_code = ?5, "
       "gpu_uuids = ?6, lease_id = ?7, supervisor_pid = ?8, supervisor_start_ticks = ?9, "
       "reason = ?10, failure = ?12, priority = ?13, time_limit_ms = ?14, name = ?15 WHERE id = ?1 AND state = ?11"},
      {&stmts->update_output, "set job output and array",
       "UPDATE jobs SET output_path = ?2, array_id = ?3 WHERE id = ?1"},
      {&stmts->log_event, "log job event",
       "INSERT INTO job_events (at_unix_ms, job_id, kind, from_state, to_state, reason) "
       "VALUES (" GPUMAN_JOB_SQL_NOW_MS ", ?1, ?2, ?3, ?4, ?5)"},
      {&stmts->prune_events, "prune job events",
       "DELETE FROM job_events WHERE id <= (SELECT MAX(id) FROM job_events) - ?1"},
      {&stmts->add_usage, "add usage",
       "INSERT INTO usage (uid, bucket_unix_ms, gpu_us) VALUES (?1, ?2, ?3) "
       "ON CONFLICT (uid, bucket_unix_ms) DO UPDATE SET gpu_us = gpu_us + excluded.gpu_us"},
      {&stmts->prune_usage, "prune usage", "DELETE FROM usage WHERE bucket_unix_ms < ?1"},
      {&stmts->select_usage, "read usage",
       "SELECT uid, bucket_unix_ms, gpu_us FROM usage ORDER BY uid, bucket_unix_ms"},
      {&stmts->drain, "drain gpu",
       "INSERT INTO drained_gpus (gpu_uuid, reason, by_uid, since_unix_ms) "
       "VALUES (?1, ?2, ?3, ?4) ON CONFLICT (gpu_uuid) DO UPDATE SET reason = excluded.reason, "
       "by_uid = excluded.by_uid, since_unix_ms = excluded.since_unix_ms"},
      {&stmts->undrain, "undrain gpu", "DELETE FROM drained_gpus WHERE gpu_uuid = ?1"},
      {&stmts->select_drained, "read drained gpus",
       "SELECT gpu_uuid, reason, by_uid, since_unix_ms FROM drained_gpus ORDER BY gpu_uuid"},
      // The first three terms are jobs_notify_due's, so that only that index is read.
      {&stmts->select_notify_due, "read due notifications",
       "SELECT " GPUMAN_JOB_SUMMARY_COLUMNS " FROM jobs "
       "WHERE notify_kind != '' AND notified_unix_ms IS NULL AND (array_id IS NULL OR array_id = id) "
       "AND NOT " GPUMAN_JOB_ACTIVE " AND (array_id IS NULL OR NOT EXISTS "
       "(SELECT 1 FROM jobs t WHERE t.array_id = jobs.id AND t." GPUMAN_JOB_ACTIVE ")) "
       "AND id > ?1 ORDER BY id LIMIT ?2"},
      {&stmts->mark_notified, "mark job notified",
       "UPDATE jobs SET notified_unix_ms = ?2, notify_outcome = ?3 "
       "WHERE (id = ?1 OR array_id = ?1) AND notify_kind != '' AND notified_unix_ms IS NULL AND NOT " GPUMAN_JOB_ACTIVE},
      {&stmts->array_state_counts, "count an array's tasks by state",
       "SELECT state, COUNT(*) FROM jobs WHERE array_id = ?1 GROUP BY state"},
  };
  for (const auto& spec : specs) {
    auto stmt = db->Prepare(spec.name, spec.sql);
    if (!stmt) return stmt.error();
    *spec.target = std::move(*stmt);
  }
  return std::unique_ptr<JobStore>(new JobStore(std::move(db), std::move(stmts), std::move(options)));
}

JobStore::JobStore(std::shared_ptr<Database> db, std::unique_ptr<Statements> stmts,
                   JobStoreOptions options)
    : db_(std::move(db)), stmts_(std::move(stmts)), options_(std::move(options)) {}

JobStore::~JobStore() = default;

Result<std::vector<model::Job>> JobStore::ReadJobs(Statement& stmt) {
  std::vector<model::Job> out;
  while (true) {
    auto row = stmt.Step();
    if (!row) return row.error();
    if (!*row) return out;
    auto job = ReadJob(*db_, stmt);
    if (!job) return job.error();
    out.push_back(std::move(*job));
  }
}

Status JobStore::LogEventLocked(int64_t job_id, const char* kind,
                                std::optional<model::JobState> from, model::JobState to,
                                const std::string& reason) {
  {
    Statement& s = stmts_->log_event;
    auto use = s.Use();
    s.Bind(1, job_id).Bind(2, kind);
    if (from) {
      s.Bind(3, model::JobStateName(*from));
    } else {
      s.BindNull(3);
    }
    s.Bind(4, model::JobStateName(to)).Bind(5, reason);
    if (auto r = s.Run(); !r) return r;
  }
  Statement& s = stmts_->prune_events;
  auto use = s.Use();
  s.Bind(1, kJobEventsKept);
  return s.Run();
}

Result<model::Job> JobStore::Submit(model::Job draft) {
  auto jobs = SubmitTasks(std::move(draft), {}, std::nullopt);
  if (!jobs) return jobs.error();
  return std::move(jobs->front());
}

Result<std::vector<model::Job>> JobStore::SubmitArray(model::Job draft, const std::vector<int64_t>& tasks,
                                                      std::optional<int> limit) {
  if (tasks.empty()) return MakeError(ErrorCode::kInvalidArgument, "submit job array: no tasks");
  return SubmitTasks(std::move(draft), tasks, limit);
}

Result<std::vector<model::Job>> JobStore::SubmitTasks(model::Job draft, const std::vector<int64_t>& tasks,
                                                      std::optional<int> limit) {
  const char* context = tasks.empty() ? "submit job" : "submit job array";
  if (draft.argv.empty()) {
    return MakeError(ErrorCode::kInvalidArgument, std::string(context) + ": no command given");
  }
  if (draft.request.count < 1) {
    return MakeError(ErrorCode::kInvalidArgument,
                     std::string(context) + ": a job needs at least one GPU (asked for " +
                         std::to_string(draft.request.count) + ")");
  }
  model::Job job = std::move(draft);
  job.id = 0;
  job.state = model::JobState::kQueued;
  job.started_unix_ms.reset();
  job.ended_unix_ms.reset();
  job.exit_code.reset();
  job.gpu_uuids.clear();
  job.lease_id.reset();
  job.supervisor_pid.reset();
  job.supervisor_start_ticks.reset();
  job.failure = model::JobFailure::kNone;
  job.array_id.reset();
  job.array_task.reset();
  job.array_limit = tasks.empty() ? std::nullopt : limit;
  job.notified_unix_ms.reset();
  job.notify_outcome.clear();
  const std::string pattern = job.output_path;
  const std::string notify_argv = job.notify ? EncodeStrings(job.notify->argv) : std::string();
  // Encoded once: a sweep's tasks share them.
  const std::string argv = EncodeStrings(job.argv);
  const std::string env = EncodeEnv(job.env);

  auto tx = Transaction::BeginWrite(*db_);
  if (!tx) return tx.error().WithContext(context);
  const bool was_current = SummariesCurrentLocked();
  std::vector<model::Job> stored;
  stored.reserve(std::max<size_t>(1, tasks.size()));
  for (size_t i = 0; i < std::max<size_t>(1, tasks.size()); ++i) {
    if (!tasks.empty()) job.array_task = tasks[i];
    {
      Statement& s = stmts_->insert_job;
      const model::GpuRequest& r = job.request;
      auto use = s.Use();
      s.Bind(kName, job.name)
          .Bind(kUid, static_cast<int64_t>(job.uid))
          .Bind(kGid, static_cast<int64_t>(job.gid))
          .Bind(kUser, job.user)
          .Bind(kArgv, argv)
          .Bind(kEnv, env)
          .Bind(kCwd, job.cwd)
          .Bind(kOutputPath, pattern)
          .Bind(kReqCount, static_cast<int64_t>(r.count));
      BindOptional(s, kReqGpus,
                   r.gpus ? std::optional<std::string>(EncodeStrings(*r.gpus)) : std::nullopt);
      BindOptional(s, kReqMinFreeMemory, r.min_free_memory_bytes);
      BindOptional(s, kReqMaxUtilization, Widen(r.max_utilization_percent));
      BindOptional(s, kReqModel, r.model);
      BindOptional(s, kReqMinComputeCapability, r.min_compute_capability);
      s.Bind(kReqExclude, EncodeStrings(r.exclude))
          .Bind(kReqAllowShared, int64_t{r.allow_shared ? 1 : 0})
          .Bind(kPriority, static_cast<int64_t>(job.priority));
      BindOptional(s, kTimeLimit, job.time_limit_ms);
      s.Bind(kRequeue, int64_t{job.requeue ? 1 : 0})
          .Bind(kAfter, EncodeIds(job.after))
          .Bind(kState, model::JobStateName(job.state))
          .Bind(kSubmitted, job.submitted_unix_ms)
          .BindNull(kStarted)
          .BindNull(kEnded)
          .BindNull(kExitCode)
          .Bind(kGpuUuids, std::string())
          .BindNull(kLeaseId)
          .BindNull(kSupervisorPid)
          .BindNull(kSupervisorStartTicks)
          .Bind(kReason, job.reason)
          .Bind(kFailure, std::string());
      BindOptional(s, kArrayId, job.array_id);
      BindOptional(s, kArrayTask, job.array_task);
      BindOptional(s, kArrayLimit, Widen(job.array_limit));
      s.Bind(kNotifyKind, job.notify ? (job.notify->mail ? "mail" : "program") : "")
          .Bind(kNotifyArgv, notify_argv)
          .BindNull(kNotifiedAt)
          .Bind(kNotifyOutcome, std::string());
      BindOptional(s, kReqGpuMemory, r.gpu_memory_bytes);
      s.Bind(kReqMps, int64_t{r.mps ? 1 : 0});
      BindOptional(s, kReqGpuShare, Widen(r.gpu_share_percent));
      BindOptional(s, kReqMigProfile, r.mig_profile);
      static_assert(kReqMigProfile == kColumnCount - 1);
      if (auto run = s.Run(); !run) return run.error().WithContext(context);
      job.id = db_->LastInsertRowId();
    }
    // The first task's id names the array; it is known once that task is stored.
    const bool names_array = !tasks.empty() && i == 0;
    if (names_array) job.array_id = job.id;
    // --output's %j (and %u, %x, %A, %a) are filled in now that the id is known: the
    // stored path is the one the supervisor writes, `logs` reads and `show` prints.
    job.output_path = pattern;
    const bool expand = pattern.find('%') != std::string::npos;
    if (expand) {
      job.output_path = model::ExpandOutputPattern(pattern, job);
      if (job.output_path.size() > model::kMaxJobPathBytes) {
        return MakeError(ErrorCode::kInvalidArgument,
                         "--output: " + std::to_string(job.output_path.size()) +
                             " bytes once its patterns are filled in; the limit is " +
                             std::to_string(model::kMaxJobPathBytes) + " bytes");
      }
    }
    if (expand || names_array) {
      Statement& u = stmts_->update_output;
      auto use = u.Use();
      u.Bind(1, job.id).Bind(2, job.output_path);
      BindOptional(u, 3, job.array_id);
      if (auto run = u.Run(); !run) return run.error().WithContext(context);
    }
    if (auto s = LogEventLocked(job.id, "submitted", std::nullopt, job.state, job.reason); !s) {
      return s.error().WithContext(context);
    }
    stored.push_back(job);
    if (!tasks.empty()) {  // a sweep's tasks come back as summaries: argv and env once, not 10,000 times
      stored.back().argv.clear();
      stored.back().env.clear();
    }
  }
  if (auto s = tx->Commit(); !s) return s.error().WithContext(context);
  NoteOwnWrites(was_current, stored);
  return stored;
}

Result<std::vector<model::Job>> JobStore::ArrayTasks(int64_t array_id) {
  Statement& s = stmts_->select_array;
  auto use = s.Use();
  s.Bind(1, array_id);
  auto jobs = ReadJobs(s);
  if (!jobs) return jobs.error().WithContext("read the tasks of array " + std::to_string(array_id));
  return jobs;
}

Result<std::optional<JobStore::ArrayStanding>> JobStore::ArrayOutcome(int64_t array_id) {
  const std::string context = "read how array " + std::to_string(array_id) + " stands";
  auto tx = Transaction::BeginRead(*db_);  // both reads see one state
  if (!tx) return tx.error().WithContext(context);
  std::optional<ArrayStanding> out;
  for (Statement* s : {&stmts_->array_unfinished, &stmts_->array_unsuccessful, &stmts_->array_last}) {
    auto use = s->Use();
    s->Bind(1, array_id);
    auto row = s->Step();
    if (!row) return row.error().WithContext(context);
    if (!*row) continue;
    auto state = model::ParseJobState(s->ColumnText(1));
    if (!state) return MakeError(ErrorCode::kIo, context + ": unreadable state column");
    out = ArrayStanding{s->ColumnInt64(0), *state, Narrow<int>(OptionalInt(*s, 2))};
    break;
  }
  if (auto c = tx->Commit(); !c) return c.error().WithContext(context);
  return out;
}

Result<std::optional<model::Job>> JobStore::GetTask(int64_t array_id, int64_t task, JobFields fields) {
  Statement& s = fields == JobFields::kAll ? stmts_->select_task : stmts_->select_task_summary;
  auto use = s.Use();
  s.Bind(1, array_id).Bind(2, task);
  auto jobs = ReadJobs(s);
  if (!jobs) return jobs.error().WithContext("read job " + std::to_string(array_id) + "_" + std::to_string(task));
  if (jobs->empty()) return std::optional<model::Job>();
  return std::optional<model::Job>(std::move(jobs->front()));
}

Result<std::optional<model::Job>> JobStore::Get(int64_t id, JobFields fields) {
  Statement& s = fields == JobFields::kAll ? stmts_->select_job : stmts_->select_job_summary;
  auto use = s.Use();
  s.Bind(1, id);
  auto jobs = ReadJobs(s);
  if (!jobs) return jobs.error().WithContext("read job " + std::to_string(id));
  if (jobs->empty()) return std::optional<model::Job>();
  return std::optional<model::Job>(std::move(jobs->front()));
}

Result<std::vector<model::Job>> JobStore::List(bool include_final, std::optional<uint32_t> only_uid,
                                               int64_t after_id, int64_t limit, JobFields fields) {
  Statement& s = fields == JobFields::kAll ? stmts_->select_jobs : stmts_->select_job_summaries;
  auto use = s.Use();
  s.Bind(1, int64_t{include_final ? 1 : 0});
  BindOptional(s, 2, only_uid ? std::optional<int64_t>(*only_uid) : std::nullopt);
  s.Bind(3, after_id);
  s.Bind(4, limit < 0 ? int64_t{-1} : limit);
  auto jobs = ReadJobs(s);
  if (!jobs) return jobs.error().WithContext("list jobs");
  return jobs;
}

Result<std::vector<model::Job>> JobStore::Active() {
  Statement& s = stmts_->select_active;
  auto use = s.Use();
  auto jobs = ReadJobs(s);
  if (!jobs) return jobs.error().WithContext("list active jobs");
  return jobs;
}

Result<std::vector<model::Job>> JobStore::DueNotifications(int64_t after_id, int64_t limit) {
  Statement& s = stmts_->select_notify_due;
  auto use = s.Use();
  s.Bind(1, after_id).Bind(2, limit < 0 ? int64_t{-1} : limit);
  auto jobs = ReadJobs(s);
  if (!jobs) return jobs.error().WithContext("read the notifications due");
  return jobs;
}

Result<int64_t> JobStore::MarkNotified(int64_t id, int64_t at_unix_ms, const std::string& outcome) {
  const std::string context = "mark job " + std::to_string(id) + " notified";
  auto tx = Transaction::BeginWrite(*db_);
  if (!tx) return tx.error().WithContext(context);
  const bool was_current = SummariesCurrentLocked();
  int64_t marked = 0;
  {
    Statement& s = stmts_->mark_notified;
    auto use = s.Use();
    s.Bind(1, id).Bind(2, at_unix_ms).Bind(3, outcome);
    if (auto run = s.Run(); !run) return run.error().WithContext(context);
    marked = db_->Changes();
  }
  if (auto c = tx->Commit(); !c) return c.error().WithContext(context);
  // Only final jobs were touched, and none of them is in the active list: it stays current.
  if (was_current && summaries_) summaries_version_.total_changes = db_->TotalChanges();
  return marked;
}

Result<std::map<model::JobState, int64_t>> JobStore::ArrayStateCounts(int64_t array_id) {
  const std::string context = "count the tasks of array " + std::to_string(array_id);
  Statement& s = stmts_->array_state_counts;
  auto use = s.Use();
  s.Bind(1, array_id);
  std::map<model::JobState, int64_t> out;
  while (true) {
    auto row = s.Step();
    if (!row) return row.error().WithContext(context);
    if (!*row) return out;
    auto state = model::ParseJobState(s.ColumnText(0));
    if (!state) return MakeError(ErrorCode::kIo, context + ": unreadable state column");
    out[*state] = s.ColumnInt64(1);
  }
}

Result<int64_t> JobStore::DataVersionLocked() {
  Statement& v = stmts_->data_version;
  auto use = v.Use();
  auto row = v.Step();
  if (!row) return row.error();
  return *row ? v.ColumnInt64(0) : int64_t{0};
}

Result<JobStore::Version> JobStore::CurrentVersion() {
  auto tx = Transaction::BeginRead(*db_);
  if (!tx) return tx.error().WithContext("read the state db's version");
  auto data_version = DataVersionLocked();
  if (!data_version) return data_version.error().WithContext("read the state db's version");
  const Version version{*data_version, db_->TotalChanges()};
  if (auto s = tx->Commit(); !s) return s.error().WithContext("read the state db's version");
  return version;
}

Result<std::shared_ptr<const std::vector<model::Job>>> JobStore::ActiveSummaries() {
  auto version = CurrentVersion();
  if (!version) return version.error().WithContext("list active jobs");
  if (summaries_ && summaries_version_ == *version) return std::shared_ptr<const std::vector<model::Job>>(summaries_);
  Statement& s = stmts_->select_active_summaries;
  auto use = s.Use();
  auto jobs = ReadJobs(s);
  if (!jobs) return jobs.error().WithContext("list active jobs");
  summaries_ = std::make_shared<std::vector<model::Job>>(std::move(*jobs));
  summaries_version_ = *version;
  ++summaries_generation_;
  return std::shared_ptr<const std::vector<model::Job>>(summaries_);
}

bool JobStore::SummariesCurrentLocked() {
  if (!summaries_) return false;
  auto data_version = DataVersionLocked();
  return data_version && summaries_version_ == Version{*data_version, db_->TotalChanges()};
}

void JobStore::NoteOwnWrites(bool was_current, const std::vector<model::Job>& jobs) {
  if (jobs.size() < 8) {
    for (const model::Job& job : jobs) NoteOwnWrite(was_current, job);
    return;
  }
  ++summaries_generation_;
  if (!was_current || !summaries_) {
    summaries_.reset();
    return;
  }
  // One pass over the list rather than an erase or insert per job (10,000 tasks of an
  // array cancelled at once).
  std::map<int64_t, const model::Job*> by_id;
  for (const model::Job& job : jobs) by_id[job.id] = &job;
  auto list = std::make_shared<std::vector<model::Job>>();
  list->reserve(summaries_->size() + jobs.size());
  auto summary = [](const model::Job& job) {
    model::Job s = job;
    s.argv.clear();
    s.env.clear();
    return s;
  };
  auto next = by_id.begin();
  for (const model::Job& old : *summaries_) {
    for (; next != by_id.end() && next->first < old.id; ++next) {  // new rows before this one
      if (!model::IsFinal(next->second->state)) list->push_back(summary(*next->second));
    }
    if (next != by_id.end() && next->first == old.id) {
      if (!model::IsFinal(next->second->state)) list->push_back(summary(*next->second));
      ++next;
    } else {
      list->push_back(old);
    }
  }
  for (; next != by_id.end(); ++next) {
    if (!model::IsFinal(next->second->state)) list->push_back(summary(*next->second));
  }
  summaries_ = std::move(list);
  summaries_version_.total_changes = db_->TotalChanges();
}

void JobStore::NoteOwnWrite(bool was_current, const model::Job& job) {
  ++summaries_generation_;
  if (!was_current || !summaries_) {
    summaries_.reset();  // read again at the next ActiveSummaries
    return;
  }
  // Holders of the old list keep it as it was: change a copy.
  if (summaries_.use_count() > 1) summaries_ = std::make_shared<std::vector<model::Job>>(*summaries_);
  std::vector<model::Job>& list = *summaries_;
  auto at = std::lower_bound(list.begin(), list.end(), job.id,
                             [](const model::Job& j, int64_t id) { return j.id < id; });
  const bool present = at != list.end() && at->id == job.id;
  if (model::IsFinal(job.state)) {
    if (present) list.erase(at);
  } else {
    model::Job summary = job;
    summary.argv.clear();
    summary.env.clear();
    if (present) {
      *at = std::move(summary);
    } else {
      list.insert(at, std::move(summary));
    }
  }
  summaries_version_.total_changes = db_->TotalChanges();
}

namespace {
std::string TransitionContext(int64_t id, model::JobState from_expected, model::JobState to) {
  return "move job " + std::to_string(id) + " from " + model::JobStateName(from_expected) + " to " +
         model::JobStateName(to);
}
}  // namespace

Result<model::Job> JobStore::Transition(int64_t id, model::JobState from_expected,
                                        model::JobState to, const Update& update) {
  const std::string context = TransitionContext(id, from_expected, to);
  auto tx = Transaction::BeginWrite(*db_);
  if (!tx) return tx.error().WithContext(context);
  // Whether the cached summaries saw every commit before this one (then this change is
  // applied to them; otherwise they are read again).
  const bool was_current = SummariesCurrentLocked();
  auto job = TransitionLocked(id, from_expected, to, update, JobFields::kAll);
  if (!job) return job.error();
  if (auto s = tx->Commit(); !s) return s.error().WithContext(context);
  NoteOwnWrite(was_current, *job);
  return job;
}

Result<std::vector<Result<model::Job>>> JobStore::TransitionAll(const std::vector<TransitionRequest>& requests) {
  const char* context = "change jobs";
  auto tx = Transaction::BeginWrite(*db_);
  if (!tx) return tx.error().WithContext(context);
  const bool was_current = SummariesCurrentLocked();
  std::vector<Result<model::Job>> out;
  out.reserve(requests.size());
  std::vector<model::Job> changed;
  for (const TransitionRequest& r : requests) {
    // Summaries: the update writes no argv or env, and a sweep's are megabytes.
    auto job = TransitionLocked(r.id, r.from_expected, r.to, r.update, JobFields::kSummary);
    // Only a refusal of this one job is its own outcome; anything else fails the batch.
    if (!job && job.error().code != ErrorCode::kConflict && job.error().code != ErrorCode::kNotFound) {
      return job.error();
    }
    if (job) changed.push_back(*job);
    out.push_back(std::move(job));
  }
  if (auto s = tx->Commit(); !s) return s.error().WithContext(context);
  NoteOwnWrites(was_current, changed);
  return out;
}

Result<model::Job> JobStore::TransitionLocked(int64_t id, model::JobState from_expected, model::JobState to,
                                              const Update& update, JobFields fields) {
  const std::string job_name = "job " + std::to_string(id);
  const std::string context = TransitionContext(id, from_expected, to);
  model::Job job;
  {
    Statement& s = fields == JobFields::kAll ? stmts_->select_job : stmts_->select_job_summary;
    auto use = s.Use();
    s.Bind(1, id);
    auto jobs = ReadJobs(s);
    if (!jobs) return jobs.error().WithContext(context);
    if (jobs->empty()) return MakeError(ErrorCode::kNotFound, job_name + ": no such job");
    job = std::move(jobs->front());
  }
  // The compare-and-set. Under the write lock nobody can change the state between this
  // check and the UPDATE below (which checks it again anyway).
  if (job.state != from_expected) {
    if (model::IsFinal(job.state)) {
      return MakeError(ErrorCode::kConflict,
                       job_name + " is already " + model::JobStateName(job.state));
    }
    return MakeError(ErrorCode::kConflict, job_name + " is " + model::JobStateName(job.state) +
                                               ", not " + model::JobStateName(from_expected));
  }
  // A same-state call only updates fields: not a transition the table has to allow.
  if (options_.check_transition && to != from_expected) {
    if (auto ok = options_.check_transition(from_expected, to); !ok) {
      if (model::IsFinal(from_expected)) {
        return MakeError(ErrorCode::kConflict,
                         job_name + " is already " + model::JobStateName(from_expected));
      }
      return MakeError(ErrorCode::kConflict, job_name + ": " + ok.error().message);
    }
  }

  if (update.clear_run) {
    job.gpu_uuids.clear();
    job.lease_id.reset();
    job.supervisor_pid.reset();
    job.supervisor_start_ticks.reset();
    job.started_unix_ms.reset();
    job.ended_unix_ms.reset();
    job.exit_code.reset();
    job.failure = model::JobFailure::kNone;
  }
  if (update.gpu_uuids) job.gpu_uuids = *update.gpu_uuids;
  if (update.lease_id) job.lease_id = update.lease_id;
  if (update.supervisor_pid) job.supervisor_pid = update.supervisor_pid;
  if (update.supervisor_start_ticks) job.supervisor_start_ticks = update.supervisor_start_ticks;
  if (update.started_unix_ms) job.started_unix_ms = update.started_unix_ms;
  if (update.ended_unix_ms) job.ended_unix_ms = update.ended_unix_ms;
  if (update.exit_code) job.exit_code = update.exit_code;
  if (update.reason) job.reason = *update.reason;
  if (update.failure) job.failure = *update.failure;
  if (update.priority) job.priority = *update.priority;
  if (update.time_limit_ms) job.time_limit_ms = update.time_limit_ms;
  if (update.name) job.name = *update.name;
  job.state = to;
  {
    Statement& s = stmts_->update_job;
    auto use = s.Use();
    s.Bind(1, id).Bind(2, model::JobStateName(to)).Bind(11, model::JobStateName(from_expected));
    BindRunFields(s, job);
    if (auto r = s.Run(); !r) return r.error().WithContext(context);
    GPUMAN_CHECK(db_->Changes() == 1);  // we hold the write lock and saw the row
  }
  if (to != from_expected) {
    if (auto s = LogEventLocked(id, "state", from_expected, to, job.reason); !s) {
      return s.error().WithContext(context);
    }
  }
  return job;
}

Status JobStore::AddUsage(uint32_t uid, double gpu_seconds, int64_t at_unix_ms) {
  const std::string context = "add usage of uid " + std::to_string(uid);
  if (!std::isfinite(gpu_seconds) || gpu_seconds < 0 || gpu_seconds > kMaxGpuSecondsPerAdd) {
    return MakeError(ErrorCode::kInvalidArgument,
                     context + ": GPU-seconds must be between 0 and 1e12, not " +
                         std::to_string(gpu_seconds));
  }
  const int64_t gpu_us = std::llround(gpu_seconds * 1e6);
  if (gpu_us == 0) return {};
  const int64_t width = options_.usage_bucket.count();
  auto tx = Transaction::BeginWrite(*db_);
  if (!tx) return tx.error().WithContext(context);
  {
    Statement& s = stmts_->add_usage;
    auto use = s.Use();
    s.Bind(1, static_cast<int64_t>(uid)).Bind(2, BucketStart(at_unix_ms, width)).Bind(3, gpu_us);
    if (auto r = s.Run(); !r) return r.error().WithContext(context);
  }
  {
    Statement& s = stmts_->prune_usage;
    auto use = s.Use();
    s.Bind(1, BucketStart(at_unix_ms - options_.usage_retention.count(), width));
    if (auto r = s.Run(); !r) return r.error().WithContext(context);
  }
  if (auto s = tx->Commit(); !s) return s.error().WithContext(context);
  return {};
}

Result<std::vector<std::pair<uint32_t, double>>> JobStore::Usage(int64_t now_unix_ms,
                                                                 double half_life_s) {
  if (!std::isfinite(half_life_s) || half_life_s <= 0) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "read usage: half-life must be positive, not " + std::to_string(half_life_s));
  }
  std::vector<std::pair<uint32_t, double>> out;
  Statement& s = stmts_->select_usage;
  auto use = s.Use();
  while (true) {
    auto row = s.Step();
    if (!row) return row.error().WithContext("read usage");
    if (!*row) break;
    auto uid = static_cast<uint32_t>(s.ColumnInt64(0));
    double age_s = static_cast<double>(std::max<int64_t>(0, now_unix_ms - s.ColumnInt64(1))) / 1e3;
    double used = static_cast<double>(s.ColumnInt64(2)) / 1e6 * std::exp2(-age_s / half_life_s);
    if (out.empty() || out.back().first != uid) out.emplace_back(uid, 0.0);
    out.back().second += used;
  }
  return out;
}

Status JobStore::Drain(const std::string& uuid, const std::string& reason, uint32_t by_uid,
                       int64_t at_unix_ms) {
  const std::string context = "drain " + uuid;
  if (uuid.empty()) return MakeError(ErrorCode::kInvalidArgument, "drain: no GPU given");
  auto tx = Transaction::BeginWrite(*db_);
  if (!tx) return tx.error().WithContext(context);
  {
    Statement& s = stmts_->drain;
    auto use = s.Use();
    s.Bind(1, uuid).Bind(2, reason).Bind(3, static_cast<int64_t>(by_uid)).Bind(4, at_unix_ms);
    if (auto r = s.Run(); !r) return r.error().WithContext(context);
  }
  if (auto s = tx->Commit(); !s) return s.error().WithContext(context);
  return {};
}

Status JobStore::Undrain(const std::string& uuid) {
  const std::string context = "undrain " + uuid;
  auto tx = Transaction::BeginWrite(*db_);
  if (!tx) return tx.error().WithContext(context);
  {
    Statement& s = stmts_->undrain;
    auto use = s.Use();
    s.Bind(1, uuid);
    if (auto r = s.Run(); !r) return r.error().WithContext(context);
    if (db_->Changes() == 0) return MakeError(ErrorCode::kNotFound, context + ": not drained");
  }
  if (auto s = tx->Commit(); !s) return s.error().WithContext(context);
  return {};
}

Result<std::vector<DrainedGpu>> JobStore::DrainedDetails() {
  std::vector<DrainedGpu> out;
  Statement& s = stmts_->select_drained;
  auto use = s.Use();
  while (true) {
    auto row = s.Step();
    if (!row) return row.error().WithContext("read drained gpus");
    if (!*row) return out;
    out.push_back(DrainedGpu{s.ColumnText(0), s.ColumnText(1),
                             static_cast<uint32_t>(s.ColumnInt64(2)), s.ColumnInt64(3)});
  }
}

Result<std::map<std::string, std::string>> JobStore::Drained() {
  auto details = DrainedDetails();
  if (!details) return details.error();
  std::map<std::string, std::string> out;
  for (DrainedGpu& gpu : *details) out[gpu.uuid] = std::move(gpu.reason);
  return out;
}

}  // namespace gpuman::store
