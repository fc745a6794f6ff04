// Schema migrations for the state db.
//
// The schema version lives in the file itself, in PRAGMA user_version (0 for a file that
// SQLite has just created). Migration N takes a version N-1 database to version N.
// Migrate() first reads the version without a lock; an up-to-date file (the usual case)
// costs nothing more. Otherwise it takes the write lock (BEGIN IMMEDIATE), reads the
// version again, applies every migration above it in order, writes the new user_version
// and commits. Because the version is re-read under the write lock, two processes opening
// a fresh file at the same time cannot both migrate it: the second one waits (busy
// timeout) and then finds nothing to do. DDL is transactional in SQLite, so a migration
// that fails half-way leaves the file at the old version.
//
// Rules for adding a migration:
//  - Append; never edit or reorder a migration that has been released. A mistake is fixed
//    by a new migration.
//  - Each migration is plain SQL over the previous schema (no C++ callbacks), so it can be
//    read and replayed with the sqlite3 shell.
//  - Add a fixture test: a database built with the migrations up to N-1 and some rows,
//    opened by the current code.
//  - A binary refuses a file whose version is newer than it knows (kIo): an
//    older gpuman must not guess at a newer schema. Downgrading means restoring a backup or
//    moving the file aside (leases are short-lived state; nothing else is kept there yet).
//  - Describe the change in docs/state.md.
#include "store/migrations.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <set>
#include <string>

#include "base/unique_fd.h"

namespace gpuman::store {
namespace {

constexpr Migration kMigrations[] = {
    {1, "leases, the GPUs and processes of each lease, and an event log",
     R"sql(
CREATE TABLE leases (
  id              INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused, so ids increase
  uid             INTEGER NOT NULL,
  user            TEXT    NOT NULL,
  command         TEXT    NOT NULL,
  kind            TEXT    NOT NULL,                   -- 'run' or 'select'
  created_unix_ms INTEGER NOT NULL
);
-- The primary key on gpu_uuid is what makes double allocation impossible. WITHOUT ROWID
-- and no index on lease_id: the table holds one row per leased GPU (a page or two), so
-- the cascade's scan is cheaper than writing a second b-tree on every acquire.
CREATE TABLE lease_gpus (
  gpu_uuid TEXT    NOT NULL PRIMARY KEY,
  lease_id INTEGER NOT NULL REFERENCES leases(id) ON DELETE CASCADE,
  position INTEGER NOT NULL                           -- order the GPUs were given in
) WITHOUT ROWID;
CREATE TABLE lease_processes (
  lease_id         INTEGER NOT NULL REFERENCES leases(id) ON DELETE CASCADE,
  pid              INTEGER NOT NULL,
  start_time_ticks INTEGER NOT NULL,
  PRIMARY KEY (lease_id, pid)
) WITHOUT ROWID;
-- A bounded log of what happened to leases (the store keeps the newest 10000 rows).
CREATE TABLE events (
  id         INTEGER PRIMARY KEY,                     -- pruning keeps the newest, so ids grow
  at_unix_ms INTEGER NOT NULL,
  kind       TEXT    NOT NULL,                        -- 'acquired', 'released', 'reclaimed'
  lease_id   INTEGER NOT NULL,                        -- no foreign key: leases go away
  uid        INTEGER NOT NULL,
  gpu_uuids  TEXT    NOT NULL                         -- comma-separated, in lease order
);
)sql"},
    {2, "jobs of the queue, their event log, fair-share usage and drained GPUs",
     R"sql(
-- One row per submitted job, kept after it ends (history). Lists of strings (argv, env,
-- UUIDs) are length-prefixed: each element is "<byte length>:<bytes>", so any byte may
-- appear in an element ("4:echo11:hello world"); env alternates name and value. Integer
-- lists (after) are comma-separated. NULL means "not set" for the optional fields.
CREATE TABLE jobs (
  id                          INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused
  name                        TEXT    NOT NULL,
  uid                         INTEGER NOT NULL,
  gid                         INTEGER NOT NULL,
  user                        TEXT    NOT NULL,
  argv                        TEXT    NOT NULL,
  env                         TEXT    NOT NULL,
  cwd                         TEXT    NOT NULL,
  output_path                 TEXT    NOT NULL,
  req_count                   INTEGER NOT NULL,
  req_gpus                    TEXT,                   -- NULL: any GPU
  req_min_free_memory_bytes   INTEGER,
  req_max_utilization_percent INTEGER,
  req_model                   TEXT,
  req_min_compute_capability  TEXT,
  req_exclude                 TEXT    NOT NULL,
  req_allow_shared            INTEGER NOT NULL,
  priority                    INTEGER NOT NULL,
  time_limit_ms               INTEGER,
  requeue                     INTEGER NOT NULL,
  after                       TEXT    NOT NULL,
  state                       TEXT    NOT NULL CHECK (state IN ('queued', 'held', 'starting',
                                'running', 'succeeded', 'failed', 'cancelled', 'timed_out')),
  submitted_unix_ms           INTEGER NOT NULL,
  started_unix_ms             INTEGER,
  ended_unix_ms               INTEGER,
  exit_code                   INTEGER,
  gpu_uuids                   TEXT    NOT NULL,
  lease_id                    INTEGER,                -- no foreign key: leases go away
  supervisor_pid              INTEGER,
  supervisor_start_ticks      INTEGER,
  reason                      TEXT    NOT NULL
);
-- The scheduler reads the unfinished jobs on every pass; the finished ones pile up.
CREATE INDEX jobs_active ON jobs (id)
  WHERE state IN ('queued', 'held', 'starting', 'running');
CREATE INDEX jobs_uid ON jobs (uid, id);
-- What happened to jobs: 'submitted', then one row per state change.
CREATE TABLE job_events (
  id          INTEGER PRIMARY KEY,                    -- pruning keeps the newest
  at_unix_ms  INTEGER NOT NULL,                       -- SQLite's clock
  job_id      INTEGER NOT NULL,                       -- no foreign key, like events
  kind        TEXT    NOT NULL,                       -- 'submitted' or 'state'
  from_state  TEXT,                                   -- NULL for 'submitted'
  to_state    TEXT    NOT NULL,
  reason      TEXT    NOT NULL
);
-- Fair-share accounting: GPU-microseconds per user and time bucket (start of the bucket).
CREATE TABLE usage (
  uid            INTEGER NOT NULL,
  bucket_unix_ms INTEGER NOT NULL,
  gpu_us         INTEGER NOT NULL,
  PRIMARY KEY (uid, bucket_unix_ms)
) WITHOUT ROWID;
-- GPUs an admin took out of scheduling.
CREATE TABLE drained_gpus (
  gpu_uuid      TEXT    NOT NULL PRIMARY KEY,
  reason        TEXT    NOT NULL,
  by_uid        INTEGER NOT NULL,
  since_unix_ms INTEGER NOT NULL
) WITHOUT ROWID;
)sql"},
    {3, "why a failed job never ran its command",
     R"sql(
-- '' for a job whose command ran (or has not failed); else 'command_not_found',
-- 'cannot_execute' or 'cannot_start' (model::JobFailure). Older rows read as ''.
ALTER TABLE jobs ADD COLUMN failure TEXT NOT NULL DEFAULT '';
)sql"},
    {4, "the host of each lease: only that host reclaims it",
     R"sql(
-- gethostname() of the gpuman that took the lease; '' for leases older than this column
-- (then taken to be this host's). Another host's lease is never reclaimed as stale.
ALTER TABLE leases ADD COLUMN host TEXT NOT NULL DEFAULT '';
)sql"},
    {5, "each leased GPU's index, for display without asking the driver",
     R"sql(
-- The GPU's NVML index when the lease was taken (`gpuman leases` shows it without loading
-- NVML); NULL when not recorded (older rows, a caller without a snapshot).
ALTER TABLE lease_gpus ADD COLUMN gpu_index INTEGER;
-- Facts of the machine that do not change while the driver is loaded, kept so that a
-- command without the daemon need not ask the driver again (the NVLink/PCIe topology,
-- keyed by the GPUs it is of). Advisory: a wrong row only changes which free GPUs are
-- preferred, never who holds one.
CREATE TABLE machine_facts (
  key   TEXT NOT NULL PRIMARY KEY,
  value TEXT NOT NULL
) WITHOUT ROWID;
)sql"},
    {6, "a rendezvous port reserved for each lease",
     R"sql(
-- The MASTER_PORT its processes are given (docs/python.md, "Rendezvous"): no two live
-- leases of a table share one. NULL when none was free (or for older rows).
ALTER TABLE leases ADD COLUMN master_port INTEGER;
)sql"},
    {7, "job arrays: each task is a job row that names its array",
     R"sql(
-- A task of `submit --array`: array_id is the id of the array's first task (Slurm's
-- ArrayJobID), array_task its index, array_limit the %N of the submit (the most tasks of
-- the array running at once; NULL: no limit). All three NULL for a job that is no task.
ALTER TABLE jobs ADD COLUMN array_id INTEGER;
ALTER TABLE jobs ADD COLUMN array_task INTEGER;
ALTER TABLE jobs ADD COLUMN array_limit INTEGER;
-- With the state, so that how an array stands (`wait`) is read from the index alone.
CREATE INDEX jobs_array ON jobs (array_id, array_task, state) WHERE array_id IS NOT NULL;
)sql"},
    {8, "GPU memory slices: several leases may share a GPU, each declaring its memory",
     R"sql(
-- A slice lease (`--gpu-memory`, docs/share.md) declares this much memory on each of its
-- GPUs; NULL: the GPUs are the lease's alone (every lease before slices existed).
ALTER TABLE leases ADD COLUMN gpu_memory_bytes INTEGER;
-- A queued job's --gpu-memory (model::GpuRequest::gpu_memory_bytes); NULL: whole GPUs.
ALTER TABLE jobs ADD COLUMN req_gpu_memory_bytes INTEGER;
-- One row per (GPU, lease) now that slices share a GPU. Whole leases stay exclusive: the
-- trigger below refuses a row that would put a whole lease beside any other lease of the
-- same GPU, whatever the code above it chose.
CREATE TABLE lease_gpus_v8 (
  gpu_uuid  TEXT    NOT NULL,
  lease_id  INTEGER NOT NULL REFERENCES leases(id) ON DELETE CASCADE,
  position  INTEGER NOT NULL,
  gpu_index INTEGER,
  PRIMARY KEY (gpu_uuid, lease_id)
) WITHOUT ROWID;
INSERT INTO lease_gpus_v8 (gpu_uuid, lease_id, position, gpu_index)
  SELECT gpu_uuid, lease_id, position, gpu_index FROM lease_gpus;
DROP TABLE lease_gpus;
ALTER TABLE lease_gpus_v8 RENAME TO lease_gpus;
CREATE TRIGGER lease_gpus_whole BEFORE INSERT ON lease_gpus
WHEN EXISTS (SELECT 1 FROM lease_gpus g JOIN leases l ON l.id = g.lease_id
             WHERE g.gpu_uuid = NEW.gpu_uuid
               AND (l.gpu_memory_bytes IS NULL
                    OR (SELECT n.gpu_memory_bytes FROM leases n WHERE n.id = NEW.lease_id) IS NULL))
BEGIN
  SELECT RAISE(ABORT, 'the GPU is already leased whole, or sliced');
END;
)sql"},
    {9, "end-of-job notifications: what to run, and whether it ran",
     R"sql(
-- `submit --notify`: notify_kind '' (none), 'program' or 'mail'; notify_argv the program's
-- argv (length-prefixed, as argv; '' for mail). notified_unix_ms: when its notification
-- ended (ran, timed out, or could not start); NULL while it is due. notify_outcome says how
-- ("exited with status 0"). Every task of an array holds the same; the array is notified
-- once, through its first task, and all its tasks are marked.
ALTER TABLE jobs ADD COLUMN notify_kind TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN notify_argv TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN notified_unix_ms INTEGER;
ALTER TABLE jobs ADD COLUMN notify_outcome TEXT NOT NULL DEFAULT '';
-- The notifications still due (a job alone, or an array's first task): the daemon looks
-- here, not at every finished job.
CREATE INDEX jobs_notify_due ON jobs (id)
  WHERE notify_kind != '' AND notified_unix_ms IS NULL AND (array_id IS NULL OR array_id = id);
)sql"},
    {10, "MPS: leases and jobs that ask for MPS, and the MPS control daemons the daemon runs",
     R"sql(
-- `--mps` (docs/share.md, "MPS"): the lease's processes are MPS clients; gpu_share_percent
-- their CUDA_MPS_ACTIVE_THREAD_PERCENTAGE (--gpu-share; NULL: not set).
ALTER TABLE leases ADD COLUMN mps INTEGER NOT NULL DEFAULT 0;
ALTER TABLE leases ADD COLUMN gpu_share_percent INTEGER;
ALTER TABLE jobs ADD COLUMN req_mps INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN req_gpu_share_percent INTEGER;
-- One row per GPU whose MPS control daemon the gpuman daemon started and has not yet
-- stopped: for whom (its Unix user) and where (its pipe and log directories). A daemon
-- that restarts reads it to find the controls still wanted and to stop the others.
CREATE TABLE mps_controls (
  gpu_uuid        TEXT    NOT NULL PRIMARY KEY,
  uid             INTEGER NOT NULL,
  user            TEXT    NOT NULL,
  pipe_directory  TEXT    NOT NULL,
  log_directory   TEXT    NOT NULL,
  started_unix_ms INTEGER NOT NULL
) WITHOUT ROWID;
)sql"},
    {11, "MIG: jobs that ask for MIG devices of a profile",
     R"sql(
-- `submit --mig PROFILE` (docs/share.md, "MIG"): req_count MIG devices of this profile
-- ("1g.10gb") instead of whole GPUs; NULL for every other job. MIG UUIDs in --gpus need
-- no column: they are in req_gpus.
ALTER TABLE jobs ADD COLUMN req_mig_profile TEXT;
)sql"},
};

}  // namespace

std::span<const Migration> AllMigrations() { return kMigrations; }

FileSchema StateFileSchema(std::span<const Migration> migrations) {
  return FileSchema{"gpuman state database", kStateApplicationId, migrations};
}

namespace {

constexpr const char* kAside = "; move it aside, with its -wal and -shm files, to start a new one";

Result<int64_t> ReadInt(Database& db, const char* name, const char* sql) {
  auto stmt = db.Prepare(name, sql);
  if (!stmt) return stmt.error();
  auto use = stmt->Use();
  auto row = stmt->Step();
  if (!row) return row.error();
  return *row ? stmt->ColumnInt64(0) : 0;
}

struct Objects {
  std::set<std::string> tables;  // without SQLite's own (sqlite_sequence, sqlite_stat1, ...)
  int64_t count = 0;             // every schema object, tables or not
};

Result<Objects> ReadObjects(Database& db) {
  auto stmt = db.Prepare("read schema", "SELECT type, name FROM sqlite_master");
  if (!stmt) return stmt.error();
  auto use = stmt->Use();
  Objects out;
  while (true) {
    auto row = stmt->Step();
    if (!row) return row.error();
    if (!*row) break;
    ++out.count;
    std::string name = stmt->ColumnText(1);
    if (stmt->ColumnText(0) == "table" && name.rfind("sqlite_", 0) != 0) out.tables.insert(name);
  }
  return out;
}

// The tables migrations 1..version create, from running them on an in-memory database.
Result<std::set<std::string>> TablesAt(const FileSchema& schema, int version) {
  auto mem = Database::Open(":memory:");
  if (!mem) return mem.error();
  for (const Migration& m : schema.migrations) {
    if (m.version > version) break;
    if (auto s = (*mem)->ExecScript("replay migration", m.sql); !s) return s.error();
  }
  auto objects = ReadObjects(**mem);
  if (!objects) return objects.error();
  return objects->tables;
}

int Latest(const FileSchema& schema) {
  return schema.migrations.empty() ? 0 : schema.migrations.back().version;
}

Error TooNew(const Database& db, int found, int latest) {
  return MakeError(ErrorCode::kIo, db.display_path() + " was written by a newer gpuman (schema " +
                                       std::to_string(found) + "; this one knows up to " + std::to_string(latest) +
                                       "); upgrade gpuman, or move it aside, with its -wal and -shm files, "
                                       "to start a new one");
}

Error NotOurs(const Database& db, const FileSchema& schema, const std::string& why) {
  return MakeError(ErrorCode::kIo, db.display_path() + " is not a " + schema.description + " (" + why + ")" + kAside);
}

Error ForeignId(const Database& db, const FileSchema& schema, uint32_t app) {
  char hex[16];
  std::snprintf(hex, sizeof hex, "0x%08x", static_cast<unsigned>(app));
  return NotOurs(db, schema, std::string("its application id is ") + hex + ", another program's");
}

}  // namespace

Result<int> CheckFile(Database& db, const FileSchema& schema) {
  const int latest = Latest(schema);
  // Without a -wal file the header is the whole truth, and reading it ourselves spares a
  // file that is not ours the empty -wal and -shm files SQLite's first read would create.
  struct stat wal {};
  if (::stat((db.display_path() + "-wal").c_str(), &wal) != 0 && errno == ENOENT) {
    unsigned char h[100] = {};
    UniqueFd fd(::open(db.display_path().c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
    ssize_t got = fd ? ::pread(fd.get(), h, sizeof h, 0) : -1;
    fd.reset();
    if (got == static_cast<ssize_t>(sizeof h)) {
      auto be = [&](int at) {
        return (uint32_t{h[at]} << 24) | (uint32_t{h[at + 1]} << 16) | (uint32_t{h[at + 2]} << 8) | h[at + 3];
      };
      const uint32_t app = be(68);
      const int version = static_cast<int>(be(60));
      if (app == schema.application_id && version > latest) return TooNew(db, version, latest);
      if (app != 0 && app != schema.application_id) return ForeignId(db, schema, app);
    }
  }
  // One read snapshot for the id, the version and the tables: another process may be
  // creating the file right now, and a version read before its commit with tables read
  // after it would look like somebody else's file.
  auto snapshot = Transaction::BeginRead(db);
  if (!snapshot) return snapshot.error();
  auto app = ReadInt(db, "read application id", "PRAGMA application_id");
  if (!app) return app.error();
  auto version = ReadInt(db, "read schema version", "PRAGMA user_version");
  if (!version) return version.error();
  const int found = static_cast<int>(*version);
  if (static_cast<uint32_t>(*app) == schema.application_id) {
    if (found > latest) return TooNew(db, found, latest);
    return found;
  }
  if (*app != 0) return ForeignId(db, schema, static_cast<uint32_t>(*app));
  auto objects = ReadObjects(db);
  if (!objects) return objects.error();
  if (found == 0 && objects->count == 0) return 0;  // a new, empty database
  // No application id: ours only as an older gpuman left it, table for table.
  auto expected = TablesAt(schema, std::clamp(found, 0, latest));
  if (!expected) return expected.error();
  for (const std::string& t : objects->tables) {
    if (!expected->count(t)) return NotOurs(db, schema, "it has table '" + t + "'");
  }
  for (const std::string& t : *expected) {
    if (!objects->tables.count(t)) return NotOurs(db, schema, "it has no table '" + t + "'");
  }
  if (found > latest) return TooNew(db, found, latest);
  if (found == 0) return NotOurs(db, schema, "it has no schema version");
  return found;
}

void UseSchema(DatabaseOptions& options, const FileSchema& schema) {
  options.description = schema.description;
  options.check_before_write = [schema](Database& db) -> Status {
    auto checked = CheckFile(db, schema);
    if (!checked) return checked.error();
    return {};
  };
}

Result<int> Migrate(Database& db, std::span<const Migration> migrations) {
  return Migrate(db, StateFileSchema(migrations));
}

Result<int> Migrate(Database& db, const FileSchema& schema) {
  const int latest = Latest(schema);
  const std::string stamp = "PRAGMA application_id = " + std::to_string(static_cast<int32_t>(schema.application_id));
  auto read_version = [&]() -> Result<int> {
    auto v = ReadInt(db, "read schema version", "PRAGMA user_version");
    if (!v) return v.error();
    return static_cast<int>(*v);
  };

  // The common case, an up-to-date file, needs no write lock.
  auto seen = read_version();
  if (!seen) return seen.error();
  if (*seen > latest) return TooNew(db, *seen, latest);
  if (*seen == latest) {
    auto app = ReadInt(db, "read application id", "PRAGMA application_id");
    if (app && static_cast<uint32_t>(*app) != schema.application_id) {
      // A file of a gpuman older than application ids (CheckFile knew it by its tables):
      // stamp it, if it can be written now (a full disk or a reader's file waits).
      if (auto tx = Transaction::BeginWrite(db)) {
        if (db.ExecScript("set application id", stamp)) (void)tx->Commit();
      }
    }
    return *seen;
  }

  auto tx = Transaction::BeginWrite(db);
  if (!tx) return tx.error();
  auto found = read_version();  // again, under the lock: another process may have migrated
  if (!found) return found.error();
  if (*found > latest) return TooNew(db, *found, latest);
  for (const Migration& m : schema.migrations) {
    if (m.version <= *found) continue;
    if (auto s = db.ExecScript("migrate to schema version " + std::to_string(m.version), m.sql);
        !s) {
      return s.error();
    }
  }
  // PRAGMA arguments cannot be bound; `latest` and the id are our own integers.
  if (auto s = db.ExecScript("set schema version",
                             "PRAGMA user_version = " + std::to_string(latest) + "; " + stamp);
      !s) {
    return s.error();
  }
  if (auto s = tx->Commit(); !s) return s.error();
  return *found;
}

}  // namespace gpuman::store
