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
//  - A binary refuses a file whose version is newer than it knows (kInvalidArgument): an
//    older gpuman must not guess at a newer schema. Downgrading means restoring a backup or
//    moving the file aside (leases are short-lived state; nothing else is kept there yet).
//  - Describe the change in docs/state.md.
#include "store/migrations.h"

#include <string>

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
    {3, "the host of each lease: only that host reclaims it",
     R"sql(
-- gethostname() of the gpuman that took the lease; '' for leases older than this column
-- (then taken to be this host's). Another host's lease is never reclaimed as stale.
ALTER TABLE leases ADD COLUMN host TEXT NOT NULL DEFAULT '';
)sql"},
};

}  // namespace

std::span<const Migration> AllMigrations() { return kMigrations; }

Result<int> Migrate(Database& db, std::span<const Migration> migrations) {
  const int latest = migrations.empty() ? 0 : migrations.back().version;
  auto read = db.Prepare("read schema version", "PRAGMA user_version");
  if (!read) return read.error();
  auto read_version = [&]() -> Result<int> {
    auto use = read->Use();
    auto row = read->Step();
    if (!row) return row.error();
    return *row ? static_cast<int>(read->ColumnInt64(0)) : 0;
  };
  auto too_new = [&](int found) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "state db " + db.path() + " has schema version " + std::to_string(found) +
                         "; this gpuman knows up to " + std::to_string(latest));
  };

  // The common case, an up-to-date file, needs no write lock.
  auto seen = read_version();
  if (!seen) return seen.error();
  if (*seen > latest) return too_new(*seen);
  if (*seen == latest) return *seen;

  auto tx = Transaction::BeginWrite(db);
  if (!tx) return tx.error();
  auto found = read_version();  // again, under the lock: another process may have migrated
  if (!found) return found.error();
  if (*found > latest) return too_new(*found);
  for (const Migration& m : migrations) {
    if (m.version <= *found) continue;
    if (auto s = db.ExecScript("migrate to schema version " + std::to_string(m.version), m.sql);
        !s) {
      return s.error();
    }
  }
  // PRAGMA arguments cannot be bound; `latest` is our own integer.
  if (auto s = db.ExecScript("set schema version",
                             "PRAGMA user_version = " + std::to_string(latest));
      !s) {
    return s.error();
  }
  if (auto s = tx->Commit(); !s) return s.error();
  return *found;
}

}  // namespace gpuman::store
