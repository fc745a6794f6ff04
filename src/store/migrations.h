// The ordered list of schema migrations for the state db, and the function that applies
// them. Used by LeaseStore::Open (and later JobStore); see migrations.cc for the policy.
#pragma once

#include <cstdint>
#include <span>

#include "base/result.h"
#include "store/sqlite.h"

namespace gpuman::store {

struct Migration {
  int version;              // PRAGMA user_version after this migration; 1, 2, 3, ...
  const char* description;  // one line, for docs/state.md and error messages
  const char* sql;          // one or more statements
};

/// All migrations, in order; element i has version i + 1.
std::span<const Migration> AllMigrations();

/// PRAGMA application_id of gpuman's files ("GPUS": state.db and the machine lease
/// table's leases.db, which share one schema; "GPUH": history.db).
inline constexpr uint32_t kStateApplicationId = 0x47505553;
inline constexpr uint32_t kHistoryApplicationId = 0x47505548;

/// A kind of gpuman file: how it is recognised and migrated.
struct FileSchema {
  const char* description;  // "gpuman state database", for "PATH is not a ..."
  uint32_t application_id;
  std::span<const Migration> migrations;
};
/// state.db and leases.db.
FileSchema StateFileSchema(std::span<const Migration> migrations = AllMigrations());

/// Decides, reading only, whether the file behind `db` is one of `schema`'s and returns
/// its schema version. Ours: our application_id (any version up to the last migration);
/// or, for a file of a gpuman older than application ids, no application_id, a known
/// user_version and exactly the tables that the migrations up to that version create;
/// or an empty database (a new file). Errors (kIo, each "PATH ...; what to do"):
/// another program's application_id; tables that are not ours ("it has table 'foo'");
/// a newer schema ("was written by a newer gpuman (schema 7; this one knows up to 2)").
Result<int> CheckFile(Database& db, const FileSchema& schema);

/// Sets options.description and options.check_before_write (CheckFile) for `schema`.
void UseSchema(DatabaseOptions& options, const FileSchema& schema);

/// Brings the database to the last version of `schema.migrations` in one write
/// transaction and stamps our application_id on it (a file of an older gpuman that is
/// already up to date gets it too, when it can be written). Returns the version found
/// before migrating (0 for a new file). Call it on a file CheckFile accepted.
/// Errors: kIo when the file's version is newer than the last migration ("PATH was
/// written by a newer gpuman (schema N; this one knows up to M); ..."); kBusy, kIo.
Result<int> Migrate(Database& db, const FileSchema& schema);
/// The state schema with `migrations`.
Result<int> Migrate(Database& db, std::span<const Migration> migrations = AllMigrations());

}  // namespace gpuman::store
