// A small RAII layer over the SQLite C API: Database (one connection), Statement (one
// prepared statement) and Transaction (a guard that rolls back unless committed), in the
// spirit of Nix's sqlite.hh. Every SQLite failure becomes an Error that names the state db
// and the operation. A Database and its statements belong to one thread at a time
// (connections are opened SQLITE_OPEN_NOMUTEX); other threads or processes open their own.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <memory>
#include <string>
#include <string_view>

#include "base/result.h"

struct sqlite3;
struct sqlite3_stmt;

namespace gpuman::store {

class Statement;

struct DatabaseOptions {
  /// Create the file (mode 0600) and missing parent directories (mode 0700).
  bool create = true;
  /// How long a statement waits for another connection's lock before failing with kBusy.
  /// The wait sleeps between attempts (see Database::OnBusy); it never spins.
  std::chrono::milliseconds busy_timeout{5000};
  /// Mode of a file Open creates (whatever the umask; SQLite gives the -wal and -shm files
  /// the same). 0666 only for the machine lease table (store/machine_lease_table.h).
  unsigned file_mode = 0600;
  /// Open without writing anything (SQLITE_OPEN_READONLY; no WAL switch, no pragmas that
  /// write). Implies !create.
  bool read_only = false;
  /// What errors call the file ("state db", "history db"): "LABEL PATH: CONTEXT: CAUSE".
  std::string label = "state db";
  /// What the file is, for refusals: "PATH is not a DESCRIPTION (...)".
  std::string description = "gpuman state database";
  /// The path errors show (a "file:...?mode=ro" URI opens `path`); empty: `path`.
  std::string display_path;
  /// Called on the fresh connection after the header check and before anything could
  /// write to the file (the switch to WAL, migrations): it decides whether the file is
  /// ours (store/migrations.h, CheckFile). An error closes the connection untouched.
  std::function<Status(class Database&)> check_before_write;
};

/// True for an error that says the file system (or quota) is full: SQLITE_FULL, or an
/// I/O error with ENOSPC/EDQUOT. Such errors read "...: no space left on device".
bool IsDiskFull(const Error& e);
bool IsDiskFullMessage(std::string_view message);

/// Checks the first 100 bytes of an existing file before SQLite opens it: an empty or
/// missing file is fine; otherwise it must be an SQLite 3 file whose size fits its header
/// (not truncated) and that has no hot rollback journal (SQLite would replay it, a write).
/// Errors (kIo): "PATH is not a DESCRIPTION (not an SQLite file); move it aside ...",
/// "PATH is truncated or corrupt (...)", ...
Status CheckSqliteHeader(const std::string& path, const std::string& description);

class Database {
 public:
  /// Opens `path` and sets WAL, busy_timeout, foreign_keys=ON and synchronous=NORMAL.
  /// ":memory:" opens a private in-memory database (no WAL). Before anything is written,
  /// the file's header is checked (CheckSqliteHeader) and then options.check_before_write
  /// runs: a file that is not ours is refused unchanged.
  /// Errors: kPermissionDenied (directory or file not accessible, read-only file), kIo
  /// (path unusable, disk full, corrupt, truncated or not an SQLite file, refused by the
  /// check), kBusy (another process held the lock for longer than the busy timeout while
  /// switching to WAL).
  static Result<std::unique_ptr<Database>> Open(const std::string& path,
                                                const DatabaseOptions& options = {});
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  /// Prepares one statement. `name` ("insert lease") is the context of its errors.
  /// Errors: kInternal (SQL does not match the schema), kIo (corrupt), kBusy.
  Result<Statement> Prepare(std::string_view name, std::string_view sql);
  /// A statement prepared at its first Use() (a store with many statements of which a
  /// command uses a few: each prepare parses SQL). `sql` must outlive the statement (a
  /// literal). A failed prepare is the error of the next Step or Run.
  Statement PrepareLater(std::string_view name, const char* sql);

  /// Runs one or more statements without results (migrations). Errors: as Statement::Run.
  Status ExecScript(std::string_view name, const std::string& sql);

  /// Converts the result code of the last failing call on this connection into an Error
  /// "LABEL PATH: CONTEXT: CAUSE" (see sqlite.cc for the mapping).
  Error ErrorFrom(int rc, std::string_view context) const;

  int64_t LastInsertRowId() const;
  int64_t Changes() const;
  /// Rows this connection has inserted, updated or deleted since it opened (with
  /// PRAGMA data_version, which counts other connections' commits: "did anything change").
  int64_t TotalChanges() const;
  bool InTransaction() const;
  const std::string& path() const { return path_; }
  /// The path as errors show it (DatabaseOptions::display_path).
  const std::string& display_path() const { return display_path_; }
  const std::string& label() const { return label_; }
  const std::string& description() const { return description_; }
  std::chrono::milliseconds busy_timeout() const { return busy_timeout_; }
  sqlite3* handle() { return db_; }

 private:
  friend class Statement;
  Database(sqlite3* db, std::string path, const DatabaseOptions& options)
      : db_(db),
        path_(std::move(path)),
        display_path_(options.display_path.empty() ? path_ : options.display_path),
        label_(options.label),
        description_(options.description),
        busy_timeout_(options.busy_timeout) {}
  static int OnBusy(void* self, int attempt);
  static Status CreateWalFile(const std::string& path, const DatabaseOptions& options);

  sqlite3* db_;
  std::string path_;
  std::string display_path_;
  std::string label_;
  std::string description_;
  std::chrono::milliseconds busy_timeout_;
  std::chrono::steady_clock::time_point busy_since_;  // first BUSY of the current wait
  bool busy_gave_up_ = false;  // the last step or exec failed after the full busy timeout
};

/// A prepared statement. Parameters are 1-based, columns 0-based (as in SQLite).
/// Typical use:  auto use = stmt.Use(); stmt.Bind(1, id); auto row = stmt.Step();
class Statement {
 public:
  Statement() = default;
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&& other) noexcept;
  ~Statement();

  /// Resets the statement when it goes out of scope, so that a half-read SELECT never
  /// keeps a read snapshot open.
  class [[nodiscard]] ResetGuard {
   public:
    explicit ResetGuard(Statement* s) : s_(s) {}
    ~ResetGuard() { s_->Reset(); }
    ResetGuard(const ResetGuard&) = delete;
    ResetGuard& operator=(const ResetGuard&) = delete;

   private:
    Statement* s_;
  };
  /// Starts a use: clears bindings now and resets again when the guard is destroyed.
  ResetGuard Use();

  /// Bind failures (too big, out of memory) are remembered and returned by the next Step.
  Statement& Bind(int index, int64_t value);
  Statement& Bind(int index, std::string_view text);
  Statement& BindNull(int index);

  /// true: a row is ready for the column getters; false: the statement is done.
  /// Errors: see Database::ErrorFrom.
  Result<bool> Step();
  /// Steps to completion, ignoring rows (INSERT, UPDATE, DELETE).
  Status Run();

  int64_t ColumnInt64(int column) const;
  std::string ColumnText(int column) const;
  bool ColumnIsNull(int column) const;

  /// Resets the statement and clears its bindings.
  void Reset();

  const std::string& name() const { return name_; }

 private:
  friend class Database;
  Statement(Database* db, sqlite3_stmt* stmt, std::string name)
      : db_(db), stmt_(stmt), name_(std::move(name)) {}

  void PrepareNow();

  Database* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
  std::string name_;
  int bind_error_ = 0;  // first failed sqlite3_bind_* result since the last Reset
  const char* later_sql_ = nullptr;     // PrepareLater: prepared by the first Use()
  std::optional<Error> prepare_error_;  // ... and why that failed (every Step returns it)
};

/// A transaction guard: begins on Begin*, rolls back in the destructor unless Commit()
/// succeeded. Keep it short: other processes wait (up to the busy timeout) while a write
/// transaction is open.
class Transaction {
 public:
  /// BEGIN IMMEDIATE: takes the write lock now, so the transaction cannot fail half-way
  /// with "database is locked" when it first writes. Errors: kBusy, kIo.
  static Result<Transaction> BeginWrite(Database& db);
  /// BEGIN (deferred): a consistent read snapshot; in WAL mode it does not block writers.
  static Result<Transaction> BeginRead(Database& db);

  Transaction(Transaction&& other) noexcept : db_(other.db_) { other.db_ = nullptr; }
  Transaction& operator=(Transaction&&) = delete;
  Transaction(const Transaction&) = delete;
  ~Transaction();

  /// Errors: kIo (disk full, I/O), kBusy. The destructor rolls back after a failure.
  Status Commit();

 private:
  explicit Transaction(Database* db) : db_(db) {}
  Database* db_;  // null once committed or moved from
};

/// A savepoint inside a transaction: rolled back (to its start) unless Release()d.
/// Lets a transaction keep its earlier work when a later step fails.
class Savepoint {
 public:
  /// Errors: as Statement::Run.
  static Result<Savepoint> Begin(Database& db, std::string name);
  Savepoint(Savepoint&& other) noexcept : db_(other.db_), name_(std::move(other.name_)) {
    other.db_ = nullptr;
  }
  Savepoint& operator=(Savepoint&&) = delete;
  Savepoint(const Savepoint&) = delete;
  ~Savepoint();

  Status Release();

 private:
  Savepoint(Database* db, std::string name) : db_(db), name_(std::move(name)) {}
  Database* db_;
  std::string name_;
};

}  // namespace gpuman::store
