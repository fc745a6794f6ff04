// SQLite, dlopen()ed on first use like NVML (docs/design.md, "Start-up"): linking
// libsqlite3 cost every command 0.19 ms of relocations before main, and most commands
// never open a database (`status` through the daemon, `--version`, `explain`, help).
// Only store/sqlite.cc includes this. Any thread once loaded; loading is once per process.
#pragma once

#include <sqlite3.h>

#include "base/result.h"

namespace gpuman::store {

// Every SQLite function gpuman calls, with its declared type from <sqlite3.h>.
#define GPUMAN_SQLITE_FUNCTIONS(X) \
  X(sqlite3_bind_int64)            \
  X(sqlite3_bind_null)             \
  X(sqlite3_bind_text64)           \
  X(sqlite3_busy_handler)          \
  X(sqlite3_changes64)             \
  X(sqlite3_clear_bindings)        \
  X(sqlite3_close_v2)              \
  X(sqlite3_column_bytes)          \
  X(sqlite3_column_int64)          \
  X(sqlite3_column_text)           \
  X(sqlite3_column_type)           \
  X(sqlite3_db_config)             \
  X(sqlite3_db_readonly)           \
  X(sqlite3_errmsg)                \
  X(sqlite3_errstr)                \
  X(sqlite3_exec)                  \
  X(sqlite3_extended_result_codes) \
  X(sqlite3_finalize)              \
  X(sqlite3_get_autocommit)        \
  X(sqlite3_last_insert_rowid)     \
  X(sqlite3_libversion_number)     \
  X(sqlite3_open_v2)               \
  X(sqlite3_prepare_v3)            \
  X(sqlite3_reset)                 \
  X(sqlite3_step)                  \
  X(sqlite3_system_errno)          \
  X(sqlite3_total_changes64)

struct SqliteLibrary {
#define GPUMAN_SQLITE_POINTER(name) decltype(&::name) name = nullptr;
  GPUMAN_SQLITE_FUNCTIONS(GPUMAN_SQLITE_POINTER)
#undef GPUMAN_SQLITE_POINTER
};

/// The library, loaded on the first call (libsqlite3.so.0, or GPUMAN_SQLITE_LIBRARY when
/// set, for tests). Errors: kInternal (a broken install: exit 1) naming the file and dlerror(), or the first
/// function it lacks; the same error on every later call.
Result<const SqliteLibrary*> LoadSqlite();

/// The loaded library. Precondition: LoadSqlite() succeeded (every Database was opened
/// through it).
const SqliteLibrary& Sqlite();

}  // namespace gpuman::store
