// The history db: why it looks the way it does.
//
// Two tiers of samples. The daemon records one row per GPU per second into fine_samples;
// once a coarse step (a minute) of sample time has passed, its rows are averaged into one
// coarse_samples row per GPU. Fine rows are kept for an hour, coarse rows for a month.
// Both tables are WITHOUT ROWID with the primary key (t_unix_ms, gpu): rows arrive in time
// order, so inserts append to the right edge of the b-tree, a time window is one range
// scan, and pruning deletes a prefix. A GPU is a small integer (gpus.id) rather than its
// 40-byte UUID in every row, and numbers are stored as integers in fixed units (hundredths
// of a percent or degree, milliwatts), which SQLite packs into 1-4 bytes where a REAL
// takes 8. docs/history.md has the measured size of a full month of 8 GPUs.
//
// Holders. Each sample row names its main holder (user, holder_kind, job_id). A row with
// more than one holder (several users outside gpuman on one GPU, or a minute whose holder
// changed) also has rows in fine_shares / coarse_shares, one per holder, with a weight:
// the holder's share is its weight over the sum of the row's weights. Single-holder rows,
// the common case, cost nothing extra, and rows written before the shares existed (schema
// 1) read as "the main holder held all of it", which is what they meant. The roll-up is
// done here in C++ (RebucketSamples, the same code that answers --step) rather than in
// SQL, because the shares of a minute are a per-holder sum across rows.
//
// There is no clock here: "now" is the time of the samples being recorded, so tests (and
// a daemon whose clock jumps) decide what is old. Rolling up and pruning happen inside
// Record's one short transaction; pruning at most once per coarse step.
//
// Readers (`gpuman history`, `gpuman report`) open the file read-only through a
// "file:...?mode=ro" URI, as users who cannot write the file or its -wal and -shm files.
// SQLite (3.22 and later) supports that for a WAL database as long as the -wal and -shm
// files exist; they do while the daemon has the file open, and stay afterwards because
// the connection wrapper disables the checkpoint-on-close that would delete them. SQLite
// creates them with the database file's mode, so 0644 here makes all three readable.
#include "base/posix_error.h"
#include "base/unique_fd.h"
#include "base/strings.h"
#include "store/history_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <set>
#include <span>
#include <tuple>

#include "store/migrations.h"

namespace gpuman::store {

namespace {

constexpr Migration kHistoryMigrations[] = {
    {1, "per-GPU samples in two tiers, the GPUs they belong to, and queue wait times",
     R"sql(
CREATE TABLE gpus (
  id        INTEGER PRIMARY KEY,
  uuid      TEXT    NOT NULL UNIQUE,
  gpu_index INTEGER NOT NULL                   -- NVML index it was last recorded with
);
-- One row per GPU per sample (fine) or per GPU per coarse step (means; t = step start).
-- Units: *_cpct hundredths of a percent, temp_ccel hundredths of a degree Celsius,
-- power_mw milliwatts. NULL: the GPU did not report it.
CREATE TABLE fine_samples (
  t_unix_ms       INTEGER NOT NULL,
  gpu             INTEGER NOT NULL,            -- gpus.id (no foreign key: never deleted)
  gpu_index       INTEGER NOT NULL,
  util_cpct       INTEGER,
  mem_util_cpct   INTEGER,
  mem_used_bytes  INTEGER,
  mem_total_bytes INTEGER,
  temp_ccel       INTEGER,
  power_mw        INTEGER,
  user            TEXT    NOT NULL,            -- holder; '' when free
  job_id          INTEGER,
  PRIMARY KEY (t_unix_ms, gpu)
) WITHOUT ROWID;
CREATE TABLE coarse_samples (
  t_unix_ms       INTEGER NOT NULL,
  gpu             INTEGER NOT NULL,
  gpu_index       INTEGER NOT NULL,
  util_cpct       INTEGER,
  mem_util_cpct   INTEGER,
  mem_used_bytes  INTEGER,
  mem_total_bytes INTEGER,
  temp_ccel       INTEGER,
  power_mw        INTEGER,
  user            TEXT    NOT NULL,            -- holder at the end of the step
  job_id          INTEGER,
  PRIMARY KEY (t_unix_ms, gpu)
) WITHOUT ROWID;
CREATE TABLE job_waits (
  started_unix_ms   INTEGER NOT NULL,
  job_id            INTEGER NOT NULL,
  user              TEXT    NOT NULL,
  submitted_unix_ms INTEGER NOT NULL,
  gpus              INTEGER NOT NULL,
  PRIMARY KEY (started_unix_ms, job_id)
) WITHOUT ROWID;
)sql"},
    {2, "holder kinds (lease, job, outside gpuman, free) and per-holder shares of a sample",
     R"sql(
-- holder_kind: 0 free, 1 lease, 2 job, 3 outside gpuman (processes on a GPU no lease
-- holds; user is their Unix user). Rows of schema 1 only knew leases and jobs.
ALTER TABLE fine_samples ADD COLUMN holder_kind INTEGER NOT NULL DEFAULT 0;
ALTER TABLE coarse_samples ADD COLUMN holder_kind INTEGER NOT NULL DEFAULT 0;
UPDATE fine_samples SET holder_kind = CASE WHEN job_id IS NULL THEN 1 ELSE 2 END WHERE user <> '';
UPDATE coarse_samples SET holder_kind = CASE WHEN job_id IS NULL THEN 1 ELSE 2 END WHERE user <> '';
-- Every holder of a sample that had more than one; share = weight / sum of the sample's
-- weights. Fine: equal weights (several users outside gpuman on one GPU). Coarse: the
-- milliseconds of the step each holder (free time under holder_kind 0, user '') had.
CREATE TABLE fine_shares (
  t_unix_ms   INTEGER NOT NULL,
  gpu         INTEGER NOT NULL,
  holder_kind INTEGER NOT NULL,
  user        TEXT    NOT NULL,
  weight      INTEGER NOT NULL,
  PRIMARY KEY (t_unix_ms, gpu, holder_kind, user)
) WITHOUT ROWID;
CREATE TABLE coarse_shares (
  t_unix_ms   INTEGER NOT NULL,
  gpu         INTEGER NOT NULL,
  holder_kind INTEGER NOT NULL,
  user        TEXT    NOT NULL,
  held_ms     INTEGER NOT NULL,
  PRIMARY KEY (t_unix_ms, gpu, holder_kind, user)
) WITHOUT ROWID;
)sql"},
    {3, "the Slurm job (and its user) that held each sample's GPU",
     R"sql(
-- From the job records of `gpuman slurm prolog` (docs/slurm.md "Accounting"); NULL when no
-- Slurm job held the GPU. A coarse row carries the job that tagged most of its fine rows.
ALTER TABLE fine_samples ADD COLUMN slurm_job TEXT;
ALTER TABLE fine_samples ADD COLUMN slurm_user TEXT;
ALTER TABLE coarse_samples ADD COLUMN slurm_job TEXT;
ALTER TABLE coarse_samples ADD COLUMN slurm_user TEXT;
-- `history --slurm-job`: a job's rows without a scan. Partial: off a Slurm node no row
-- has a job, and the index stays empty.
CREATE INDEX fine_slurm_job ON fine_samples (slurm_job, t_unix_ms) WHERE slurm_job IS NOT NULL;
CREATE INDEX coarse_slurm_job ON coarse_samples (slurm_job, t_unix_ms) WHERE slurm_job IS NOT NULL;
)sql"},
    {4, "intruders: processes on GPUs leased to someone else, as the daemon's watch saw them",
     R"sql(
-- One row per step of the intruder watch (monitor/intruders.h): event 'seen', 'term' and
-- 'kill' (signals of foreign_processes = "kill"), 'gone'. user/command: '' when unseen.
CREATE TABLE intruder_events (
  t_unix_ms  INTEGER NOT NULL,
  event      TEXT    NOT NULL,
  gpu_uuid   TEXT    NOT NULL,
  gpu_index  INTEGER NOT NULL,
  pid        INTEGER NOT NULL,
  user       TEXT    NOT NULL,
  command    TEXT    NOT NULL,
  lease_id   INTEGER NOT NULL,
  lease_user TEXT    NOT NULL
);
CREATE INDEX intruder_events_t ON intruder_events (t_unix_ms);
)sql"},
    {5, "memory slices: holders over their declared GPU memory, as the daemon's slice watch saw them",
     R"sql(
-- One row per step of the slice watch (monitor/slice_watch.h): event 'over' (first seen
-- over), 'term' and 'kill' (signals of [share] over_limit = "kill"), 'within' (back within,
-- or the slices ended). lease_id: the holder's first slice of the GPU; job_id: the gpuman job
-- that lease runs, NULL for a `run`/`select --lease`/Python lease. pids: the holder's
-- processes on the GPU, comma-separated ('' for 'over' and 'within').
CREATE TABLE slice_events (
  t_unix_ms      INTEGER NOT NULL,
  event          TEXT    NOT NULL,
  gpu_uuid       TEXT    NOT NULL,
  gpu_index      INTEGER NOT NULL,
  user           TEXT    NOT NULL,
  lease_id       INTEGER NOT NULL,
  job_id         INTEGER,
  used_bytes     INTEGER NOT NULL,
  declared_bytes INTEGER NOT NULL,
  pids           TEXT    NOT NULL
);
CREATE INDEX slice_events_t ON slice_events (t_unix_ms);
)sql"},
};

constexpr int kLatestVersion = static_cast<int>(std::size(kHistoryMigrations));

const FileSchema kHistorySchema{"gpuman history database", kHistoryApplicationId, kHistoryMigrations};

#define GPUMAN_HISTORY_SAMPLE_COLUMNS_V1                                                  \
  "t_unix_ms, gpu, gpu_index, util_cpct, mem_util_cpct, mem_used_bytes, mem_total_bytes, " \
  "temp_ccel, power_mw, user, job_id"
#define GPUMAN_HISTORY_SAMPLE_COLUMNS_V2 GPUMAN_HISTORY_SAMPLE_COLUMNS_V1 ", holder_kind"
#define GPUMAN_HISTORY_SAMPLE_COLUMNS GPUMAN_HISTORY_SAMPLE_COLUMNS_V2 ", slurm_job, slurm_user"
// A schema 1 or 2 file read without migrating it (a reader is never allowed to write):
// the kind that migration 2 would give its rows, and no Slurm job.
#define GPUMAN_HISTORY_SAMPLE_COLUMNS_OF_V1 \
  GPUMAN_HISTORY_SAMPLE_COLUMNS_V1          \
  ", CASE WHEN user = '' THEN 0 WHEN job_id IS NULL THEN 1 ELSE 2 END, NULL, NULL"
#define GPUMAN_HISTORY_SAMPLE_COLUMNS_OF_V2 GPUMAN_HISTORY_SAMPLE_COLUMNS_V2 ", NULL, NULL"

enum SampleColumn {
  kT, kGpu, kIndex, kUtil, kMemUtil, kMemUsed, kMemTotal, kTemp, kPower, kUser, kJob, kHolderKind,
  kSlurmJob, kSlurmUser
};

model::HolderKind KindFromColumn(int64_t v) {
  switch (v) {
    case 1: return model::HolderKind::kLease;
    case 2: return model::HolderKind::kJob;
    case 3: return model::HolderKind::kOutside;
    default: return model::HolderKind::kFree;
  }
}
int64_t KindColumn(model::HolderKind kind) { return static_cast<int64_t>(kind); }

constexpr int64_t kMinMs = std::numeric_limits<int64_t>::min();
constexpr int64_t kMaxMs = std::numeric_limits<int64_t>::max();

std::optional<int64_t> Scaled(const std::optional<double>& v, double scale) {
  if (!v || !std::isfinite(*v)) return std::nullopt;
  double x = *v * scale;
  if (std::fabs(x) > 9e15) return std::nullopt;  // nonsense from a driver; not worth an error
  return std::llround(x);
}

std::optional<double> Unscaled(const Statement& s, int column, double scale) {
  if (s.ColumnIsNull(column)) return std::nullopt;
  return static_cast<double>(s.ColumnInt64(column)) / scale;
}

std::optional<int64_t> OptionalInt(const Statement& s, int column) {
  if (s.ColumnIsNull(column)) return std::nullopt;
  return s.ColumnInt64(column);
}

void BindOptional(Statement& s, int index, const std::optional<int64_t>& v) {
  if (v) {
    s.Bind(index, *v);
  } else {
    s.BindNull(index);
  }
}

int64_t FloorTo(int64_t t, int64_t step) {
  int64_t q = t / step;
  if (t % step != 0 && t < 0) --q;
  return q * step;
}

// "file:" URI for a read-only open; SQLite wants '%', '?' and '#' (and more) escaped.
std::string ReadOnlyUri(const std::string& path) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string uri = "file:";
  for (unsigned char c : path) {
    if (std::isalnum(c) || c == '/' || c == '-' || c == '_' || c == '.' || c == '~') {
      uri += static_cast<char>(c);
    } else {
      uri += '%';
      uri += kHex[c >> 4];
      uri += kHex[c & 15];
    }
  }
  return uri + "?mode=ro";
}

// Creates the file with mode 0644 (whatever the umask), so that SQLite gives the -wal and
// -shm files the same mode. An existing file we own is set back to 0644 too.
Status PrepareWritableFile(const std::string& path) {
  const std::string context = "create history db " + path;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (st.st_uid == ::geteuid() && (st.st_mode & 07777) != 0644) {
      for (const char* suffix : {"", "-wal", "-shm"}) {
        ::chmod((path + suffix).c_str(), 0644);  // best effort: readers get a clear error
      }
    }
    return {};
  }
  std::error_code ec;
  auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (ec) {
    return MakeError(ErrorCode::kIo, context + ": create directory " + parent.string() + ": " +
                                         ec.message());
  }
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (!fd) {
    int err = errno;
    if (err == EEXIST) return {};
    return MakeError(err == EACCES || err == EPERM ? ErrorCode::kPermissionDenied : ErrorCode::kIo,
                     context + ": " + PosixErrorText(err));
  }
  ::fchmod(fd.get(), 0644);
  return {};
}

}  // namespace

// All SQL of the history store, prepared at open so that schema drift fails there.
struct HistoryStore::Statements {
  Statement select_gpus;
  Statement insert_gpu;
  Statement update_gpu_index;
  Statement insert_fine;
  Statement insert_fine_share;
  Statement delete_fine_shares;
  Statement insert_coarse;
  Statement insert_coarse_share;
  Statement delete_coarse_shares;
  Statement max_coarse_t;
  Statement min_fine_t;
  Statement any_coarse_between;
  Statement select_fine;
  Statement select_coarse;
  Statement select_fine_shares;    // unprepared when reading a schema 1 file
  Statement select_coarse_shares;  // likewise
  Statement prune_fine;
  Statement prune_fine_shares;
  Statement prune_coarse;
  Statement prune_coarse_shares;
  Statement prune_waits;
  Statement insert_wait;
  Statement select_waits;
  Statement time_range;
  Statement slurm_job_range;  // unprepared when reading a file before schema 3
  Statement slurm_job_gpus;   // likewise
  Statement insert_intruder;   // unprepared when reading a file before schema 4
  Statement select_intruders;  // likewise
  Statement prune_intruders;   // likewise
  Statement insert_slice;      // unprepared when reading a file before schema 5
  Statement select_slices;     // likewise
  Statement prune_slices;      // likewise
};

HistoryStore::HistoryStore(std::string path, bool read_only, HistoryRetention retention,
                           std::unique_ptr<Database> db, std::unique_ptr<Statements> stmts,
                           bool has_shares, bool has_slurm)
    : path_(std::move(path)),
      read_only_(read_only),
      has_shares_(has_shares),
      has_slurm_(has_slurm),
      retention_(retention),
      db_(std::move(db)),
      stmts_(std::move(stmts)) {}

HistoryStore::~HistoryStore() = default;

Result<std::unique_ptr<HistoryStore>> HistoryStore::Open(const std::string& path, bool read_only,
                                                         HistoryRetention retention) {
  const std::string context = "open history db " + path;
  if (retention.fine_keep_ms <= 0 || retention.coarse_step_ms <= 0 ||
      retention.coarse_keep_ms <= 0 || retention.fine_keep_ms < retention.coarse_step_ms) {
    return MakeError(ErrorCode::kInvalidArgument,
                     context + ": retention must be positive, and fine samples must be kept "
                               "for at least one coarse step");
  }
  std::unique_ptr<Database> db;
  if (read_only) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
      int err = errno;
      return MakeError(err == ENOENT ? ErrorCode::kNotFound
                       : err == EACCES ? ErrorCode::kPermissionDenied
                                       : ErrorCode::kIo,
                       context + ": " + PosixErrorText(err));
    }
  }
  DatabaseOptions options;
  options.label = "history db";
  options.display_path = path;
  UseSchema(options, kHistorySchema);  // refuse a file that is not ours before writing
  if (read_only) {
    options.create = false;
    auto opened = Database::Open(ReadOnlyUri(path), options);
    if (!opened) return opened.error();
    db = std::move(*opened);
  } else {
    if (auto made = PrepareWritableFile(path); !made) return made.error();
    auto opened = Database::Open(path, options);
    if (!opened) return opened.error();
    db = std::move(*opened);
  }

  int version = kLatestVersion;
  if (read_only) {
    auto read = db->Prepare("read schema version", "PRAGMA user_version");
    if (!read) return read.error();
    auto use = read->Use();
    auto row = read->Step();
    if (!row) return row.error();
    version = *row ? static_cast<int>(read->ColumnInt64(0)) : 0;
    if (version == 0) {
      return MakeError(ErrorCode::kNotFound, context + ": no history recorded yet (empty file)");
    }
    // A reader never migrates: it reads the schema 1 layout as it is (until the daemon
    // migrates the file), and refuses what a newer gpuman wrote.
    if (version > kLatestVersion) {
      return MakeError(ErrorCode::kInvalidArgument,
                       context + ": schema version " + std::to_string(version) +
                           "; this gpuman reads versions up to " + std::to_string(kLatestVersion));
    }
  } else {
    if (auto migrated = Migrate(*db, kHistorySchema); !migrated) {
      return migrated.error();
    }
  }
  const bool has_shares = version >= 2;
  const bool has_slurm = version >= 3;
  const std::string columns = has_slurm    ? GPUMAN_HISTORY_SAMPLE_COLUMNS
                              : has_shares ? GPUMAN_HISTORY_SAMPLE_COLUMNS_OF_V2
                                           : GPUMAN_HISTORY_SAMPLE_COLUMNS_OF_V1;
  const std::string select_fine = "SELECT " + columns +
                                  " FROM fine_samples WHERE t_unix_ms >= ?1 AND t_unix_ms <= ?2 "
                                  "ORDER BY t_unix_ms, gpu_index";
  const std::string select_coarse = "SELECT " + columns +
                                    " FROM coarse_samples WHERE t_unix_ms >= ?1 AND t_unix_ms <= ?2 "
                                    "ORDER BY t_unix_ms, gpu_index";

  auto stmts = std::make_unique<Statements>();
  struct Sql {
    Statement* target;
    const char* name;
    std::string sql;
    bool needs_shares = false;  // a statement of schema 2 or later
    bool needs_slurm = false;   // a statement of schema 3 or later
    bool needs_intruders = false;  // a statement of schema 4 or later
    bool needs_slices = false;     // a statement of schema 5 or later
  };
  const Sql all[] = {
      {&stmts->select_gpus, "read gpus", "SELECT id, uuid, gpu_index FROM gpus"},
      {&stmts->insert_gpu, "insert gpu", "INSERT INTO gpus (uuid, gpu_index) VALUES (?1, ?2)"},
      {&stmts->update_gpu_index, "update gpu index", "UPDATE gpus SET gpu_index = ?2 WHERE id = ?1"},
      {&stmts->insert_fine, "insert sample",
       "INSERT OR REPLACE INTO fine_samples (" GPUMAN_HISTORY_SAMPLE_COLUMNS
       ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
       true, true},
      {&stmts->insert_fine_share, "insert sample share",
       "INSERT OR REPLACE INTO fine_shares (t_unix_ms, gpu, holder_kind, user, weight) "
       "VALUES (?1, ?2, ?3, ?4, ?5)",
       true},
      {&stmts->delete_fine_shares, "replace sample shares",
       "DELETE FROM fine_shares WHERE t_unix_ms = ?1 AND gpu = ?2", true},
      {&stmts->insert_coarse, "insert coarse sample",
       "INSERT OR REPLACE INTO coarse_samples (" GPUMAN_HISTORY_SAMPLE_COLUMNS
       ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
       true, true},
      {&stmts->insert_coarse_share, "insert coarse share",
       "INSERT OR REPLACE INTO coarse_shares (t_unix_ms, gpu, holder_kind, user, held_ms) "
       "VALUES (?1, ?2, ?3, ?4, ?5)",
       true},
      {&stmts->delete_coarse_shares, "replace coarse shares",
       "DELETE FROM coarse_shares WHERE t_unix_ms >= ?1 AND t_unix_ms < ?2", true},
      {&stmts->max_coarse_t, "read newest coarse sample", "SELECT max(t_unix_ms) FROM coarse_samples"},
      {&stmts->min_fine_t, "read oldest fine sample", "SELECT min(t_unix_ms) FROM fine_samples"},
      {&stmts->any_coarse_between, "find coarse samples",
       "SELECT 1 FROM coarse_samples WHERE t_unix_ms >= ?1 AND t_unix_ms < ?2 LIMIT 1"},
      {&stmts->select_fine, "read samples", select_fine},
      {&stmts->select_coarse, "read coarse samples", select_coarse},
      {&stmts->select_fine_shares, "read sample shares",
       "SELECT t_unix_ms, gpu, holder_kind, user, weight FROM fine_shares "
       "WHERE t_unix_ms >= ?1 AND t_unix_ms <= ?2",
       true},
      {&stmts->select_coarse_shares, "read coarse shares",
       "SELECT t_unix_ms, gpu, holder_kind, user, held_ms FROM coarse_shares "
       "WHERE t_unix_ms >= ?1 AND t_unix_ms <= ?2",
       true},
      {&stmts->prune_fine, "prune samples", "DELETE FROM fine_samples WHERE t_unix_ms < ?1"},
      {&stmts->prune_fine_shares, "prune sample shares", "DELETE FROM fine_shares WHERE t_unix_ms < ?1",
       true},
      {&stmts->prune_coarse, "prune coarse samples", "DELETE FROM coarse_samples WHERE t_unix_ms < ?1"},
      {&stmts->prune_coarse_shares, "prune coarse shares",
       "DELETE FROM coarse_shares WHERE t_unix_ms < ?1", true},
      {&stmts->prune_waits, "prune job waits", "DELETE FROM job_waits WHERE started_unix_ms < ?1"},
      {&stmts->insert_wait, "insert job wait",
       "INSERT OR REPLACE INTO job_waits (started_unix_ms, job_id, user, submitted_unix_ms, gpus) "
       "VALUES (?1, ?2, ?3, ?4, ?5)"},
      {&stmts->select_waits, "read job waits",
       "SELECT job_id, user, submitted_unix_ms, started_unix_ms, gpus FROM job_waits "
       "WHERE started_unix_ms >= ?1 ORDER BY started_unix_ms, job_id"},
      {&stmts->time_range, "read time range",
       "SELECT min(a), max(b) FROM ("
       "  SELECT min(t_unix_ms) AS a, max(t_unix_ms) AS b FROM fine_samples"
       "  UNION ALL SELECT min(t_unix_ms), max(t_unix_ms) FROM coarse_samples)"},
      {&stmts->slurm_job_range, "read slurm job range",
       "SELECT min(t), max(t), max(u) FROM ("
       "  SELECT t_unix_ms AS t, slurm_user AS u FROM fine_samples WHERE slurm_job = ?1"
       "  UNION ALL SELECT t_unix_ms, slurm_user FROM coarse_samples WHERE slurm_job = ?1)",
       true, true},
      {&stmts->slurm_job_gpus, "read slurm job gpus",
       "SELECT gpu FROM fine_samples WHERE slurm_job = ?1"
       " UNION SELECT gpu FROM coarse_samples WHERE slurm_job = ?1",
       true, true},
      {&stmts->insert_intruder, "insert intruder event",
       "INSERT INTO intruder_events (t_unix_ms, event, gpu_uuid, gpu_index, pid, user, command, lease_id, lease_user) "
       "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
       false, false, true},
      {&stmts->select_intruders, "read intruder events",
       "SELECT t_unix_ms, event, gpu_uuid, gpu_index, pid, user, command, lease_id, lease_user FROM intruder_events "
       "WHERE t_unix_ms >= ?1 AND t_unix_ms <= ?2 ORDER BY t_unix_ms, rowid",
       false, false, true},
      {&stmts->prune_intruders, "prune intruder events", "DELETE FROM intruder_events WHERE t_unix_ms < ?1", false,
       false, true},
      {&stmts->insert_slice, "insert slice event",
       "INSERT INTO slice_events (t_unix_ms, event, gpu_uuid, gpu_index, user, lease_id, job_id, used_bytes, "
       "declared_bytes, pids) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
       false, false, false, true},
      {&stmts->select_slices, "read slice events",
       "SELECT t_unix_ms, event, gpu_uuid, gpu_index, user, lease_id, job_id, used_bytes, declared_bytes, pids "
       "FROM slice_events WHERE t_unix_ms >= ?1 AND t_unix_ms <= ?2 ORDER BY t_unix_ms, rowid",
       false, false, false, true},
      {&stmts->prune_slices, "prune slice events", "DELETE FROM slice_events WHERE t_unix_ms < ?1", false, false,
       false, true},
  };
  for (const Sql& s : all) {
    if (s.needs_shares && !has_shares) continue;  // a read-only schema 1 file: never used
    if (s.needs_slurm && !has_slurm) continue;    // a read-only file before schema 3
    if (s.needs_intruders && version < 4) continue;  // a read-only file before schema 4
    if (s.needs_slices && version < 5) continue;     // a read-only file before schema 5
    auto prepared = db->Prepare(s.name, s.sql);
    if (!prepared) return prepared.error();
    *s.target = std::move(*prepared);
  }
  std::unique_ptr<HistoryStore> store(new HistoryStore(path, read_only, retention, std::move(db),
                                                       std::move(stmts), has_shares, has_slurm));
  store->has_intruders_ = version >= 4;
  store->has_slices_ = version >= 5;
  return store;
}


// ---- Writing

Result<int64_t> HistoryStore::GpuIdLocked(const model::GpuSample& s) {
  auto it = gpu_ids_.find(s.gpu_uuid);
  if (it == gpu_ids_.end()) {
    auto known = GpuMapLocked();
    if (!known) return known.error();
    for (const auto& [id, gpu] : *known) gpu_ids_[gpu.uuid] = {id, gpu.index};
    it = gpu_ids_.find(s.gpu_uuid);
  }
  if (it == gpu_ids_.end()) {
    Statement& ins = stmts_->insert_gpu;
    auto use = ins.Use();
    ins.Bind(1, s.gpu_uuid).Bind(2, static_cast<int64_t>(s.gpu_index));
    if (auto run = ins.Run(); !run) return run.error();
    it = gpu_ids_.emplace(s.gpu_uuid, std::make_pair(db_->LastInsertRowId(), s.gpu_index)).first;
  } else if (it->second.second != s.gpu_index) {
    Statement& upd = stmts_->update_gpu_index;
    auto use = upd.Use();
    upd.Bind(1, it->second.first).Bind(2, static_cast<int64_t>(s.gpu_index));
    if (auto run = upd.Run(); !run) return run.error();
    it->second.second = s.gpu_index;
  }
  return it->second.first;
}

// One sample row and, when it has several holders, its share rows, weighted by `scale`
// (shares are stored as integers: millionths of a fine sample, milliseconds of a step).
Status HistoryStore::WriteRowLocked(Statement& row, Statement& share, int64_t gpu_id,
                                    const model::GpuSample& s, double scale) {
  {
    auto use = row.Use();
    row.Bind(1, s.t_unix_ms).Bind(2, gpu_id).Bind(3, static_cast<int64_t>(s.gpu_index));
    BindOptional(row, 4, Scaled(s.utilization_percent, 100));
    BindOptional(row, 5, Scaled(s.memory_utilization_percent, 100));
    BindOptional(row, 6, s.memory_used_bytes);
    BindOptional(row, 7, s.memory_total_bytes);
    BindOptional(row, 8, Scaled(s.temperature_c, 100));
    BindOptional(row, 9, Scaled(s.power_w, 1000));
    row.Bind(10, s.user);
    BindOptional(row, 11, s.job_id);
    row.Bind(12, KindColumn(s.holder_kind));
    if (s.slurm_job_id.empty()) {
      row.BindNull(13).BindNull(14);
    } else {
      row.Bind(13, s.slurm_job_id).Bind(14, s.slurm_user);
    }
    if (auto run = row.Run(); !run) return run;
  }
  if (s.holders.size() < 2) return {};
  for (const auto& h : s.holders) {
    const int64_t weight = std::llround(std::clamp(h.share, 0.0, 1.0) * scale);
    if (weight <= 0) continue;
    auto use = share.Use();
    share.Bind(1, s.t_unix_ms).Bind(2, gpu_id).Bind(3, KindColumn(h.kind)).Bind(4, h.user).Bind(5, weight);
    if (auto run = share.Run(); !run) return run;
  }
  return {};
}

Status HistoryStore::RollUpLocked(int64_t now_ms) {
  const int64_t step = retention_.coarse_step_ms;
  const int64_t step_end = FloorTo(now_ms, step);
  if (!rolled_until_ms_) {
    Statement& q = stmts_->max_coarse_t;
    auto use = q.Use();
    auto row = q.Step();
    if (!row) return row.error();
    if (*row && !q.ColumnIsNull(0)) {
      rolled_until_ms_ = q.ColumnInt64(0) + step;
    } else {
      Statement& f = stmts_->min_fine_t;
      auto use_f = f.Use();
      auto frow = f.Step();
      if (!frow) return frow.error();
      rolled_until_ms_ = (*frow && !f.ColumnIsNull(0)) ? FloorTo(f.ColumnInt64(0), step) : step_end;
    }
  }
  if (*rolled_until_ms_ >= step_end) return {};
  // Means per GPU and step, each holder's share of the step's samples, and the main
  // holder (largest share): RebucketSamples, the rule --step uses too.
  auto gpus = GpuMapLocked();
  if (!gpus) return gpus.error();
  std::map<std::string, int64_t> ids;
  for (const auto& [id, gpu] : *gpus) ids[gpu.uuid] = id;
  auto fine = ReadRows(stmts_->select_fine, &stmts_->select_fine_shares, *rolled_until_ms_,
                       step_end - 1, *gpus);
  if (!fine) return fine.error();
  {
    Statement& del = stmts_->delete_coarse_shares;
    auto use = del.Use();
    del.Bind(1, *rolled_until_ms_).Bind(2, step_end);
    if (auto run = del.Run(); !run) return run;
  }
  for (const auto& s : RebucketSamples(*fine, step)) {
    auto id = ids.find(s.gpu_uuid);
    if (id == ids.end()) continue;  // a fine row of an unknown GPU: cannot happen
    if (auto written = WriteRowLocked(stmts_->insert_coarse, stmts_->insert_coarse_share,
                                      id->second, s, static_cast<double>(step));
        !written) {
      return written;
    }
  }
  rolled_until_ms_ = step_end;
  return {};
}

Status HistoryStore::PruneLocked(int64_t now_ms) {
  if (last_prune_ms_ && now_ms >= *last_prune_ms_ &&
      now_ms - *last_prune_ms_ < retention_.coarse_step_ms) {
    return {};
  }
  // Fine rows are only dropped once rolled up (rolled_until_ms_ is set by RollUpLocked).
  int64_t fine_cut = now_ms - retention_.fine_keep_ms;
  if (rolled_until_ms_) fine_cut = std::min(fine_cut, *rolled_until_ms_);
  const int64_t coarse_cut = now_ms - retention_.coarse_keep_ms;
  for (auto [stmt, cut] : {std::pair{&stmts_->prune_fine, fine_cut},
                           std::pair{&stmts_->prune_fine_shares, fine_cut},
                           std::pair{&stmts_->prune_coarse, coarse_cut},
                           std::pair{&stmts_->prune_coarse_shares, coarse_cut},
                           std::pair{&stmts_->prune_waits, coarse_cut},
                           std::pair{&stmts_->prune_intruders, coarse_cut},
                           std::pair{&stmts_->prune_slices, coarse_cut}}) {
    auto use = stmt->Use();
    stmt->Bind(1, cut);
    if (auto run = stmt->Run(); !run) return run;
  }
  last_prune_ms_ = now_ms;
  return {};
}

namespace {

// Free exactly when nobody is named.
std::optional<std::string> HolderProblem(model::HolderKind kind, const std::string& user) {
  if (kind == model::HolderKind::kFree && !user.empty()) {
    return "holder kind free with user '" + user + "'";
  }
  if (kind != model::HolderKind::kFree && user.empty()) {
    return std::string("holder kind ") + model::HolderKindName(kind) + " without a user";
  }
  return std::nullopt;
}

}  // namespace

Status HistoryStore::Record(const std::vector<model::GpuSample>& samples) {
  if (read_only_) {
    return MakeError(ErrorCode::kPermissionDenied, "history db " + path_ + ": opened read-only");
  }
  if (samples.empty()) return {};
  int64_t now_ms = samples.front().t_unix_ms;
  for (const auto& s : samples) {
    const std::string what =
        "history db " + path_ + ": record sample: GPU " + std::to_string(s.gpu_index);
    if (s.gpu_uuid.empty()) {
      return MakeError(ErrorCode::kInvalidArgument, what + " has no UUID");
    }
    auto problem = HolderProblem(s.holder_kind, s.user);
    for (const auto& h : s.holders) {
      if (!problem) problem = HolderProblem(h.kind, h.user);
    }
    if (problem) return MakeError(ErrorCode::kInvalidArgument, what + ": " + *problem);
    now_ms = std::max(now_ms, s.t_unix_ms);
  }
  auto work = [&]() -> Status {
    auto tx = Transaction::BeginWrite(*db_);
    if (!tx) return tx.error();
    for (const auto& s : samples) {
      auto id = GpuIdLocked(s);
      if (!id) return id.error();
      {
        Statement& del = stmts_->delete_fine_shares;  // a replaced sample's old shares
        auto use = del.Use();
        del.Bind(1, s.t_unix_ms).Bind(2, *id);
        if (auto run = del.Run(); !run) return run;
      }
      if (auto written = WriteRowLocked(stmts_->insert_fine, stmts_->insert_fine_share, *id, s, 1e6);
          !written) {
        return written;
      }
    }
    if (auto rolled = RollUpLocked(now_ms); !rolled) return rolled;
    if (auto pruned = PruneLocked(now_ms); !pruned) return pruned;
    return tx->Commit();
  };
  Status done = work();
  if (!done) {
    // The rollback may have undone new GPU rows and a roll-up: forget what we cached.
    gpu_ids_.clear();
    rolled_until_ms_.reset();
    last_prune_ms_.reset();
    return done.error();
  }
  return {};
}

Status HistoryStore::RecordJobWait(const model::JobWait& wait) {
  if (read_only_) {
    return MakeError(ErrorCode::kPermissionDenied, "history db " + path_ + ": opened read-only");
  }
  Statement& ins = stmts_->insert_wait;
  auto use = ins.Use();
  ins.Bind(1, wait.started_unix_ms)
      .Bind(2, wait.job_id)
      .Bind(3, wait.user)
      .Bind(4, wait.submitted_unix_ms)
      .Bind(5, static_cast<int64_t>(wait.gpus));
  if (auto run = ins.Run(); !run) return run.error();
  return {};
}

Status HistoryStore::RecordIntruder(const model::IntruderEvent& e) {
  if (read_only_) {
    return MakeError(ErrorCode::kPermissionDenied, "history db " + path_ + ": opened read-only");
  }
  Statement& ins = stmts_->insert_intruder;
  auto use = ins.Use();
  ins.Bind(1, e.t_unix_ms)
      .Bind(2, e.event)
      .Bind(3, e.gpu_uuid)
      .Bind(4, static_cast<int64_t>(e.gpu_index))
      .Bind(5, static_cast<int64_t>(e.pid))
      .Bind(6, e.user)
      .Bind(7, e.command)
      .Bind(8, e.lease_id)
      .Bind(9, e.lease_user);
  if (auto run = ins.Run(); !run) return run.error();
  return {};
}

Result<std::vector<model::IntruderEvent>> HistoryStore::IntruderEvents(std::optional<int64_t> since_unix_ms,
                                                                       std::optional<int64_t> until_unix_ms) {
  std::vector<model::IntruderEvent> out;
  if (!has_intruders_) return out;  // a read-only file before schema 4: none were recorded
  Statement& q = stmts_->select_intruders;
  auto use = q.Use();
  q.Bind(1, since_unix_ms.value_or(kMinMs)).Bind(2, until_unix_ms.value_or(std::numeric_limits<int64_t>::max()));
  while (true) {
    auto row = q.Step();
    if (!row) return row.error();
    if (!*row) break;
    model::IntruderEvent e;
    e.t_unix_ms = q.ColumnInt64(0);
    e.event = q.ColumnText(1);
    e.gpu_uuid = q.ColumnText(2);
    e.gpu_index = static_cast<int>(q.ColumnInt64(3));
    e.pid = static_cast<uint32_t>(q.ColumnInt64(4));
    e.user = q.ColumnText(5);
    e.command = q.ColumnText(6);
    e.lease_id = q.ColumnInt64(7);
    e.lease_user = q.ColumnText(8);
    out.push_back(std::move(e));
  }
  return out;
}

Status HistoryStore::RecordSlice(const model::SliceEvent& e) {
  if (read_only_) {
    return MakeError(ErrorCode::kPermissionDenied, "history db " + path_ + ": opened read-only");
  }
  std::string pids;
  for (uint32_t pid : e.pids) pids += (pids.empty() ? "" : ",") + std::to_string(pid);
  Statement& ins = stmts_->insert_slice;
  auto use = ins.Use();
  ins.Bind(1, e.t_unix_ms)
      .Bind(2, e.event)
      .Bind(3, e.gpu_uuid)
      .Bind(4, static_cast<int64_t>(e.gpu_index))
      .Bind(5, e.user)
      .Bind(6, e.lease_id);
  if (e.job_id) ins.Bind(7, *e.job_id);
  else ins.BindNull(7);
  ins.Bind(8, e.used_bytes).Bind(9, e.declared_bytes).Bind(10, pids);
  if (auto run = ins.Run(); !run) return run.error();
  return {};
}

Result<std::vector<model::SliceEvent>> HistoryStore::SliceEvents(std::optional<int64_t> since_unix_ms,
                                                                 std::optional<int64_t> until_unix_ms) {
  std::vector<model::SliceEvent> out;
  if (!has_slices_) return out;  // a read-only file before schema 5: none were recorded
  Statement& q = stmts_->select_slices;
  auto use = q.Use();
  q.Bind(1, since_unix_ms.value_or(kMinMs)).Bind(2, until_unix_ms.value_or(std::numeric_limits<int64_t>::max()));
  while (true) {
    auto row = q.Step();
    if (!row) return row.error();
    if (!*row) break;
    model::SliceEvent e;
    e.t_unix_ms = q.ColumnInt64(0);
    e.event = q.ColumnText(1);
    e.gpu_uuid = q.ColumnText(2);
    e.gpu_index = static_cast<int>(q.ColumnInt64(3));
    e.user = q.ColumnText(4);
    e.lease_id = q.ColumnInt64(5);
    if (!q.ColumnIsNull(6)) e.job_id = q.ColumnInt64(6);
    e.used_bytes = q.ColumnInt64(7);
    e.declared_bytes = q.ColumnInt64(8);
    for (const auto& part : Split(q.ColumnText(9), ',')) {
      if (!part.empty()) e.pids.push_back(static_cast<uint32_t>(std::stoul(part)));
    }
    out.push_back(std::move(e));
  }
  return out;
}

// ---- Reading

Result<std::map<int64_t, HistoryGpu>> HistoryStore::GpuMapLocked() {
  std::map<int64_t, HistoryGpu> gpus;
  Statement& q = stmts_->select_gpus;
  auto use = q.Use();
  while (true) {
    auto row = q.Step();
    if (!row) return row.error();
    if (!*row) break;
    gpus[q.ColumnInt64(0)] = HistoryGpu{q.ColumnText(1), static_cast<int>(q.ColumnInt64(2))};
  }
  return gpus;
}

Result<std::vector<model::GpuSample>> HistoryStore::ReadRows(
    Statement& stmt, Statement* shares, int64_t since, int64_t until,
    const std::map<int64_t, HistoryGpu>& gpus) {
  std::vector<model::GpuSample> out;
  if (since > until) return out;
  // Share rows first: few (only rows with several holders have them), so a month of
  // single-holder rows costs no lookup table.
  std::map<std::pair<int64_t, int64_t>, std::vector<std::pair<model::HolderShare, int64_t>>> weighted;
  if (shares && has_shares_) {
    auto use = shares->Use();
    shares->Bind(1, since).Bind(2, until);
    while (true) {
      auto row = shares->Step();
      if (!row) return row.error();
      if (!*row) break;
      const int64_t weight = shares->ColumnInt64(4);
      if (weight <= 0) continue;
      weighted[{shares->ColumnInt64(0), shares->ColumnInt64(1)}].push_back(
          {model::HolderShare{KindFromColumn(shares->ColumnInt64(2)), shares->ColumnText(3), 0}, weight});
    }
  }
  auto use = stmt.Use();
  stmt.Bind(1, since).Bind(2, until);
  while (true) {
    auto row = stmt.Step();
    if (!row) return row.error();
    if (!*row) break;
    model::GpuSample s;
    s.t_unix_ms = stmt.ColumnInt64(kT);
    auto gpu = gpus.find(stmt.ColumnInt64(kGpu));
    s.gpu_uuid = gpu != gpus.end() ? gpu->second.uuid : "";
    s.gpu_index = static_cast<int>(stmt.ColumnInt64(kIndex));
    s.utilization_percent = Unscaled(stmt, kUtil, 100);
    s.memory_utilization_percent = Unscaled(stmt, kMemUtil, 100);
    s.memory_used_bytes = OptionalInt(stmt, kMemUsed);
    s.memory_total_bytes = OptionalInt(stmt, kMemTotal);
    s.temperature_c = Unscaled(stmt, kTemp, 100);
    s.power_w = Unscaled(stmt, kPower, 1000);
    s.user = stmt.ColumnText(kUser);
    s.job_id = OptionalInt(stmt, kJob);
    s.holder_kind = KindFromColumn(stmt.ColumnInt64(kHolderKind));
    if (!stmt.ColumnIsNull(kSlurmJob)) {
      s.slurm_job_id = stmt.ColumnText(kSlurmJob);
      s.slurm_user = stmt.ColumnIsNull(kSlurmUser) ? "" : stmt.ColumnText(kSlurmUser);
    }
    if (!weighted.empty()) {
      auto it = weighted.find({s.t_unix_ms, stmt.ColumnInt64(kGpu)});
      if (it != weighted.end() && it->second.size() >= 2) {  // one holder: the row says it all
        double total = 0;
        for (const auto& [h, w] : it->second) total += static_cast<double>(w);
        for (auto& [h, w] : it->second) {
          h.share = static_cast<double>(w) / total;
          s.holders.push_back(std::move(h));
        }
        SortShares(s.holders);
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

Result<std::vector<model::GpuSample>> HistoryStore::Samples(const Query& q) {
  const int64_t since = q.since_unix_ms.value_or(kMinMs);
  const int64_t until = q.until_unix_ms.value_or(kMaxMs);
  const int64_t step = retention_.coarse_step_ms;
  auto work = [&]() -> Result<std::vector<model::GpuSample>> {
    auto tx = Transaction::BeginRead(*db_);  // one snapshot for both tiers
    if (!tx) return tx.error();
    auto gpus = GpuMapLocked();
    if (!gpus) return gpus.error();

    bool coarse = q.step_ms && *q.step_ms >= step;
    if (!coarse) {
      Statement& f = stmts_->min_fine_t;
      auto use = f.Use();
      auto row = f.Step();
      if (!row) return row.error();
      if (!*row || f.ColumnIsNull(0)) {
        coarse = true;  // no fine rows at all: whatever there is, is coarse
      } else {
        // Fine rows answer when no coarse row lies in the part of the window before them.
        const int64_t oldest_fine = f.ColumnInt64(0);
        Statement& c = stmts_->any_coarse_between;
        auto use_c = c.Use();
        c.Bind(1, since).Bind(2, oldest_fine);
        auto found = c.Step();
        if (!found) return found.error();
        coarse = *found;
      }
    }
    std::vector<model::GpuSample> rows;
    if (!coarse) {
      auto fine = ReadRows(stmts_->select_fine, &stmts_->select_fine_shares, since, until, *gpus);
      if (!fine) return fine.error();
      rows = std::move(*fine);
    } else {
      auto old = ReadRows(stmts_->select_coarse, &stmts_->select_coarse_shares, since, until, *gpus);
      if (!old) return old.error();
      rows = std::move(*old);
      // The newest fine rows that are not rolled up yet, averaged the same way.
      int64_t coarse_end = kMinMs;
      {
        Statement& m = stmts_->max_coarse_t;
        auto use = m.Use();
        auto row = m.Step();
        if (!row) return row.error();
        if (*row && !m.ColumnIsNull(0)) coarse_end = m.ColumnInt64(0) + step;
      }
      auto tail = ReadRows(stmts_->select_fine, &stmts_->select_fine_shares,
                           std::max(since, coarse_end), until, *gpus);
      if (!tail) return tail.error();
      for (auto& s : RebucketSamples(*tail, step)) rows.push_back(std::move(s));
    }
    if (q.slurm_job_id) {
      std::erase_if(rows, [&](const model::GpuSample& s) { return s.slurm_job_id != *q.slurm_job_id; });
    }
    if (!q.gpu_uuids.empty()) {
      std::set<std::string> wanted(q.gpu_uuids.begin(), q.gpu_uuids.end());
      std::erase_if(rows, [&](const model::GpuSample& s) { return !wanted.count(s.gpu_uuid); });
    }
    if (q.step_ms && *q.step_ms > 0) rows = RebucketSamples(rows, *q.step_ms);
    if (auto done = tx->Commit(); !done) return done.error();
    return rows;
  };
  auto rows = work();
  if (!rows) return rows.error();
  return rows;
}

Result<std::vector<model::JobWait>> HistoryStore::JobWaits(std::optional<int64_t> since_unix_ms) {
  std::vector<model::JobWait> out;
  Statement& q = stmts_->select_waits;
  auto use = q.Use();
  q.Bind(1, since_unix_ms.value_or(kMinMs));
  while (true) {
    auto row = q.Step();
    if (!row) return row.error();
    if (!*row) break;
    model::JobWait w;
    w.job_id = q.ColumnInt64(0);
    w.user = q.ColumnText(1);
    w.submitted_unix_ms = q.ColumnInt64(2);
    w.started_unix_ms = q.ColumnInt64(3);
    w.gpus = static_cast<int>(q.ColumnInt64(4));
    out.push_back(std::move(w));
  }
  return out;
}

Result<std::map<model::UsageKey, double>> HistoryStore::GpuHoursByUser(
    std::optional<int64_t> since, std::optional<int64_t> until) {
  Query q;
  q.since_unix_ms = since;
  q.until_unix_ms = until;
  auto rows = Samples(q);
  if (!rows) return rows.error();
  std::map<model::UsageKey, double> hours;
  for (const auto& [who, ms] : HeldMsByUser(*rows, until)) hours[who] = ms / 3600000.0;
  return hours;
}

Result<std::vector<HistoryGpu>> HistoryStore::Gpus() {
  auto gpus = GpuMapLocked();
  if (!gpus) return gpus.error();
  std::vector<HistoryGpu> out;
  for (auto& [id, gpu] : *gpus) out.push_back(gpu);
  std::sort(out.begin(), out.end(), [](const HistoryGpu& a, const HistoryGpu& b) {
    return std::tie(a.index, a.uuid) < std::tie(b.index, b.uuid);
  });
  return out;
}

Result<std::optional<std::pair<int64_t, int64_t>>> HistoryStore::TimeRange() {
  Statement& q = stmts_->time_range;
  auto use = q.Use();
  auto row = q.Step();
  if (!row) return row.error();
  if (!*row || q.ColumnIsNull(0)) return std::optional<std::pair<int64_t, int64_t>>();
  return std::optional<std::pair<int64_t, int64_t>>(std::pair{q.ColumnInt64(0), q.ColumnInt64(1)});
}

Result<std::optional<SlurmJobSpan>> HistoryStore::SlurmJob(const std::string& job_id) {
  if (job_id.empty()) return std::optional<SlurmJobSpan>();
  if (!has_slurm_) return std::optional<SlurmJobSpan>();  // a read-only file before schema 3
  auto work = [&]() -> Result<std::optional<SlurmJobSpan>> {
    auto tx = Transaction::BeginRead(*db_);
    if (!tx) return tx.error();
    SlurmJobSpan span;
    {
      Statement& q = stmts_->slurm_job_range;
      auto use = q.Use();
      q.Bind(1, job_id);
      auto row = q.Step();
      if (!row) return row.error();
      if (!*row || q.ColumnIsNull(0)) return std::optional<SlurmJobSpan>();
      span.first_unix_ms = q.ColumnInt64(0);
      span.last_unix_ms = q.ColumnInt64(1);
      span.user = q.ColumnIsNull(2) ? "" : q.ColumnText(2);
    }
    auto gpus = GpuMapLocked();
    if (!gpus) return gpus.error();
    std::vector<HistoryGpu> held;
    {
      Statement& q = stmts_->slurm_job_gpus;
      auto use = q.Use();
      q.Bind(1, job_id);
      while (true) {
        auto row = q.Step();
        if (!row) return row.error();
        if (!*row) break;
        if (auto it = gpus->find(q.ColumnInt64(0)); it != gpus->end()) held.push_back(it->second);
      }
    }
    std::sort(held.begin(), held.end(), [](const HistoryGpu& a, const HistoryGpu& b) {
      return std::tie(a.index, a.uuid) < std::tie(b.index, b.uuid);
    });
    for (auto& g : held) span.gpu_uuids.push_back(std::move(g.uuid));
    if (auto done = tx->Commit(); !done) return done.error();
    return std::optional<SlurmJobSpan>(std::move(span));
  };
  return work();
}

// ---- Pure helpers

void SortShares(std::vector<model::HolderShare>& shares) {
  std::stable_sort(shares.begin(), shares.end(), [](const auto& a, const auto& b) {
    if (a.share != b.share) return a.share > b.share;
    return std::tie(a.kind, a.user) < std::tie(b.kind, b.user);
  });
}

std::vector<model::GpuSample> RebucketSamples(const std::vector<model::GpuSample>& samples,
                                              int64_t step_ms) {
  if (step_ms <= 0) return samples;
  struct Mean {
    double sum = 0;
    int n = 0;
    void Add(std::optional<double> v) {
      if (!v) return;
      sum += *v;
      ++n;
    }
    std::optional<double> Get() const { return n ? std::optional<double>(sum / n) : std::nullopt; }
  };
  struct Holder {
    double weight = 0;              // sum of its shares over the bucket's rows
    int64_t last_t = 0;             // newest row it held
    int last_main = 0;              // 1: it was that row's main holder
    std::optional<int64_t> job_id;  // of the newest row it was the main holder of
    int64_t job_t = 0;
  };
  struct Acc {
    model::GpuSample last;  // the bucket's newest row: index
    int rows = 0;
    Mean util, mem_util, temp, power, used, total;
    std::map<std::pair<model::HolderKind, std::string>, Holder> holders;
    // Slurm job -> (rows it tagged, newest such row, its user).
    std::map<std::string, std::tuple<int, int64_t, std::string>> slurm;
  };
  std::map<std::pair<int64_t, std::string>, Acc> buckets;  // (bucket start, uuid)
  for (const auto& s : samples) {
    auto [it, is_new] = buckets.try_emplace({FloorTo(s.t_unix_ms, step_ms), s.gpu_uuid});
    Acc& a = it->second;
    if (is_new || s.t_unix_ms >= a.last.t_unix_ms) a.last = s;
    ++a.rows;
    a.util.Add(s.utilization_percent);
    a.mem_util.Add(s.memory_utilization_percent);
    a.temp.Add(s.temperature_c);
    a.power.Add(s.power_w);
    if (s.memory_used_bytes) a.used.Add(static_cast<double>(*s.memory_used_bytes));
    if (s.memory_total_bytes) a.total.Add(static_cast<double>(*s.memory_total_bytes));
    if (!s.slurm_job_id.empty()) {
      auto& [rows, newest, user] = a.slurm[s.slurm_job_id];
      ++rows;
      if (rows == 1 || s.t_unix_ms >= newest) {
        newest = s.t_unix_ms;
        user = s.slurm_user;
      }
    }
    for (const auto& share : model::SharesOf(s)) {
      Holder& h = a.holders[{share.kind, share.user}];
      h.weight += share.share;
      const int main = share.kind == s.holder_kind && share.user == s.user;
      if (std::tie(s.t_unix_ms, main) >= std::tie(h.last_t, h.last_main)) {
        h.last_t = s.t_unix_ms;
        h.last_main = main;
      }
      if (main && s.t_unix_ms >= h.job_t) {
        h.job_t = s.t_unix_ms;
        h.job_id = s.job_id;
      }
    }
  }
  auto rounded = [](std::optional<double> v) -> std::optional<int64_t> {
    if (!v) return std::nullopt;
    return std::llround(*v);
  };
  std::vector<model::GpuSample> out;
  out.reserve(buckets.size());
  for (auto& [key, a] : buckets) {
    model::GpuSample s = std::move(a.last);
    s.t_unix_ms = key.first;
    s.utilization_percent = a.util.Get();
    s.memory_utilization_percent = a.mem_util.Get();
    s.temperature_c = a.temp.Get();
    s.power_w = a.power.Get();
    s.memory_used_bytes = rounded(a.used.Get());
    s.memory_total_bytes = rounded(a.total.Get());
    // The Slurm job that tagged most rows (ties to the newest); untagged rows do not compete.
    s.slurm_job_id.clear();
    s.slurm_user.clear();
    const std::tuple<int, int64_t, std::string>* best = nullptr;
    for (const auto& [job, tag] : a.slurm) {
      if (!best || std::tie(std::get<0>(tag), std::get<1>(tag)) > std::tie(std::get<0>(*best), std::get<1>(*best))) {
        best = &tag;
        s.slurm_job_id = job;
        s.slurm_user = std::get<2>(tag);
      }
    }
    // The main holder: the largest share (within float noise), then the one seen last.
    const std::pair<const std::pair<model::HolderKind, std::string>, Holder>* main = nullptr;
    for (const auto& entry : a.holders) {
      if (!main) {
        main = &entry;
        continue;
      }
      const Holder& h = entry.second;
      const Holder& m = main->second;
      const double diff = h.weight - m.weight;
      if (diff > 1e-9 || (diff > -1e-9 && std::tie(h.last_t, h.last_main) > std::tie(m.last_t, m.last_main))) {
        main = &entry;
      }
    }
    s.holders.clear();
    if (main) {
      s.holder_kind = main->first.first;
      s.user = main->first.second;
      s.job_id = main->second.job_id;
      if (a.holders.size() > 1) {
        for (const auto& [holder, h] : a.holders) {
          s.holders.push_back({holder.first, holder.second, h.weight / a.rows});
        }
        SortShares(s.holders);
      }
    }
    out.push_back(std::move(s));
  }
  std::stable_sort(out.begin(), out.end(), [](const model::GpuSample& a, const model::GpuSample& b) {
    return std::tie(a.t_unix_ms, a.gpu_index, a.gpu_uuid) <
           std::tie(b.t_unix_ms, b.gpu_index, b.gpu_uuid);
  });
  return out;
}

std::map<model::UsageKey, double> HeldMsByUser(const std::vector<model::GpuSample>& samples,
                                               std::optional<int64_t> until_unix_ms) {
  std::map<std::string, std::vector<const model::GpuSample*>> by_gpu;
  for (const auto& s : samples) by_gpu[s.gpu_uuid].push_back(&s);
  // The sampling period: the smallest gap between two rows of one GPU (1 s for fine rows,
  // the coarse step for roll-ups).
  int64_t period = 0;
  for (auto& [uuid, rows] : by_gpu) {
    std::stable_sort(rows.begin(), rows.end(), [](const auto* a, const auto* b) {
      return a->t_unix_ms < b->t_unix_ms;
    });
    for (size_t i = 1; i < rows.size(); ++i) {
      int64_t gap = rows[i]->t_unix_ms - rows[i - 1]->t_unix_ms;
      if (gap > 0 && (period == 0 || gap < period)) period = gap;
    }
  }
  if (period == 0) period = 1000;  // single samples: the daemon's 1 s period
  std::map<model::UsageKey, double> held;
  for (const auto& [uuid, rows] : by_gpu) {
    for (size_t i = 0; i < rows.size(); ++i) {
      int64_t covers = period;
      if (i + 1 < rows.size()) {
        int64_t gap = rows[i + 1]->t_unix_ms - rows[i]->t_unix_ms;
        if (gap <= 3 * period) covers = gap;  // a missed sample or two; longer: nobody looked
      }
      if (until_unix_ms) covers = std::min(covers, *until_unix_ms - rows[i]->t_unix_ms);
      if (covers <= 0) continue;
      // Split between the row's holders by their shares (a mixed minute counts to each).
      for (const auto& share : model::SharesOf(*rows[i])) {
        held[model::UsageKeyOf(share.kind, share.user)] += static_cast<double>(covers) * share.share;
      }
    }
  }
  return held;
}

}  // namespace gpuman::store
