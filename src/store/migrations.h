// The ordered list of schema migrations for the state db, and the function that applies
// them. Used by LeaseStore::Open (and later JobStore); see migrations.cc for the policy.
#pragma once

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

/// Brings the database to the last version of `migrations` in one write transaction.
/// Returns the version found before migrating (0 for a new file).
/// Errors: kInvalidArgument when the file's version is newer than the last migration
/// ("state db X has schema version N; this gpuman knows up to M"); kBusy, kIo.
Result<int> Migrate(Database& db, std::span<const Migration> migrations = AllMigrations());

}  // namespace gpuman::store
