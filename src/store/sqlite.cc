#include "store/sqlite.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>

#include "base/posix_error.h"
#include "base/unique_fd.h"
#include "store/sqlite_library.h"

namespace gpuman::store {
namespace {

std::string Lower(std::string s) {
  for (char& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

ErrorCode CodeForErrno(int err) {
  return (err == EACCES || err == EPERM) ? ErrorCode::kPermissionDenied : ErrorCode::kIo;
}

Error ErrnoError(std::string context, int err) {
  return PosixError(CodeForErrno(err), context, err);
}

// mkdir -p with mode 0700 for the directories it creates; existing ones are left alone.
Status MakeParentDirs(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos || slash == 0) return {};
  std::string dir = path.substr(0, slash);
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    std::string prefix = dir.substr(0, pos);
    if (::mkdir(prefix.c_str(), 0700) == 0) continue;
    int err = errno;
    if (err == EEXIST) {
      struct stat st {};
      if (::stat(prefix.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) continue;
      err = ENOTDIR;
    }
    return ErrnoError("create directory " + prefix, err);
  }
  return {};
}

bool IsSpecialPath(const std::string& path) {
  return path.empty() || path == ":memory:" || path.rfind("file:", 0) == 0;
}

// "no space left on device", the cause of a full file system (or quota) everywhere; what
// IsDiskFull recognises.
constexpr std::string_view kNoSpace = "no space left on device";
constexpr std::string_view kNoQuota = "disk quota exceeded";

// The one place that maps SQLite result codes to ErrorCodes and readable causes.
// `busy_timeout` is set when the busy handler waited that long and gave up; SQLite also
// reports BUSY at once where waiting could deadlock.
Error Translate(int rc, int sys_errno, const char* sqlite_msg, const std::string& path,
                const std::string& description, const std::string& prefix,
                std::optional<std::chrono::milliseconds> busy_timeout) {
  std::string cause = Lower(sqlite_msg ? sqlite_msg : Sqlite().sqlite3_errstr(rc));
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      if (!busy_timeout) {
        return MakeError(ErrorCode::kBusy, prefix + cause + " (by another process)");
      }
      return MakeError(ErrorCode::kBusy,
                       prefix + cause + " (another process held it for more than " +
                           std::to_string(busy_timeout->count()) + " ms)");
    case SQLITE_FULL:
      if (sys_errno == EDQUOT) return MakeError(ErrorCode::kIo, prefix + std::string(kNoQuota));
      return MakeError(ErrorCode::kIo, prefix + std::string(kNoSpace) + " (" + cause + ")");
    case SQLITE_IOERR:
      if (sys_errno == ENOSPC) return MakeError(ErrorCode::kIo, prefix + std::string(kNoSpace));
      if (sys_errno == EDQUOT) return MakeError(ErrorCode::kIo, prefix + std::string(kNoQuota));
      if (sys_errno != 0) cause += ": " + PosixErrorText(sys_errno);
      return MakeError(ErrorCode::kIo, prefix + cause);
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      // The operation hardly matters here; the file does.
      return MakeError(ErrorCode::kIo, path + " is corrupt or not a " + description + " (" + cause +
                                           "); move it aside, with its -wal and -shm files, to start a new one");
    case SQLITE_CANTOPEN:
      if (sys_errno != 0) {
        return MakeError(CodeForErrno(sys_errno),
                         prefix + PosixErrorText(sys_errno));
      }
      return MakeError(ErrorCode::kIo, prefix + cause);
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_AUTH:
      return MakeError(ErrorCode::kPermissionDenied, prefix + cause);
    case SQLITE_CONSTRAINT:
      return MakeError(ErrorCode::kConflict, prefix + cause);
    default:
      return MakeError(ErrorCode::kInternal, prefix + cause);
  }
}

uint32_t BigEndian(const unsigned char* p, int n) {
  uint32_t v = 0;
  for (int i = 0; i < n; ++i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

bool IsDiskFullMessage(std::string_view message) {
  return message.find(kNoSpace) != std::string_view::npos ||
         message.find(kNoQuota) != std::string_view::npos;
}

bool IsDiskFull(const Error& e) { return e.code == ErrorCode::kIo && IsDiskFullMessage(e.message); }

// The SQLite file format (https://www.sqlite.org/fileformat2.html#the_database_header):
// magic at 0, page size at 16 (1 means 65536), write/read versions at 18/19 (1 rollback
// journal, 2 WAL), 64/32/32 at 21..23, change counter at 24, size in pages at 28 (valid
// when the counter at 92 equals the one at 24).
Status CheckSqliteHeader(const std::string& path, const std::string& description) {
  static constexpr char kMagic[] = "SQLite format 3";  // and its NUL: 16 bytes
  const std::string aside = "; move it aside, with its -wal and -shm files, to start a new one";
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (!fd) {
    if (errno == ENOENT) return {};
    if (errno == ELOOP) {  // a symlink: let SQLite follow it (as before); check its target
      fd.reset(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
    }
    if (!fd) return {};  // SQLite reports the same failure, with its own words
  }
  struct stat st {};
  unsigned char h[100] = {};
  ssize_t got = -1;
  if (::fstat(fd.get(), &st) == 0 && S_ISREG(st.st_mode)) got = ::pread(fd.get(), h, sizeof h, 0);
  fd.reset();
  if (!S_ISREG(st.st_mode)) {
    return MakeError(ErrorCode::kIo, path + " is not a " + description + " (not a regular file)");
  }
  if (st.st_size == 0) return {};  // new: SQLite writes the header
  if (got < 0) return ErrnoError("read " + path, errno);
  const size_t n = static_cast<size_t>(got);
  if (std::memcmp(h, kMagic, std::min<size_t>(n, sizeof kMagic)) != 0) {
    return MakeError(ErrorCode::kIo, path + " is not a " + description + " (not an SQLite file)" + aside);
  }
  const std::string size = std::to_string(st.st_size) + " bytes";
  if (n < sizeof h) {
    return MakeError(ErrorCode::kIo, path + " is truncated (" + size + ", less than an SQLite header)" + aside);
  }
  uint32_t page = BigEndian(h + 16, 2);
  if (page == 1) page = 65536;
  if (page < 512 || (page & (page - 1)) != 0 || h[21] != 64 || h[22] != 32 || h[23] != 32 ||
      h[18] < 1 || h[18] > 2 || h[19] < 1 || h[19] > 2) {
    return MakeError(ErrorCode::kIo, path + " is corrupt (its SQLite header is damaged)" + aside);
  }
  if (st.st_size % page != 0) {
    return MakeError(ErrorCode::kIo, path + " is truncated or corrupt (" + size + " is not a whole number of " +
                                         std::to_string(page) + "-byte pages)" + aside);
  }
  // A checkpoint copies the WAL into the file page 1 first, so while a non-empty -wal
  // exists the header may briefly count pages that are not written yet: trust the count
  // only without one (SQLite reports a short file itself when it reads past its end).
  struct stat wal {};
  const bool wal_in_use = ::stat((path + "-wal").c_str(), &wal) == 0 && wal.st_size > 0;
  const uint32_t pages = BigEndian(h + 28, 4);
  if (!wal_in_use && pages != 0 && BigEndian(h + 24, 4) == BigEndian(h + 92, 4) &&
      static_cast<uint64_t>(st.st_size) < static_cast<uint64_t>(pages) * page) {
    return MakeError(ErrorCode::kIo, path + " is truncated (" + size + "; its header says " + std::to_string(pages) +
                                         " pages of " + std::to_string(page) + " bytes)" + aside);
  }
  if (h[18] == 1) {
    // A rollback-journal file (gpuman's are WAL) with a journal left by a crashed writer:
    // SQLite would replay that journal into the file on the first read.
    struct stat j {};
    if (::stat((path + "-journal").c_str(), &j) == 0 && j.st_size > 0) {
      return MakeError(ErrorCode::kIo, path + " is not a " + description + " (it has the unfinished transaction " +
                                           path + "-journal of another program)" + aside);
    }
  }
  return {};
}

// ---- Database

Result<std::unique_ptr<Database>> Database::Open(const std::string& path,
                                                 const DatabaseOptions& options) {
  const std::string shown = options.display_path.empty() ? path : options.display_path;
  const std::string context = "open " + options.label + " " + shown;
  const bool special = IsSpecialPath(path);
  const bool create = options.create && !options.read_only;
  if (auto loaded = LoadSqlite(); !loaded) return loaded.error().WithContext(context);
  // Before anything else touches an existing file: is it an intact SQLite file at all?
  if (!special || !options.display_path.empty()) {
    if (auto ok = CheckSqliteHeader(shown, options.description); !ok) return ok.error();
  }
  if (create && !special) {
    if (auto made = MakeParentDirs(path); !made) return made.error().WithContext(context);
    if (auto made = CreateWalFile(path, options); !made) return made.error().WithContext(context);
  }

  sqlite3* raw = nullptr;
  int flags = (options.read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE) | SQLITE_OPEN_NOMUTEX |
              (create ? SQLITE_OPEN_CREATE : 0) | (special ? SQLITE_OPEN_URI : 0);
  int rc = Sqlite().sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  if (rc != SQLITE_OK) {
    int sys = raw ? Sqlite().sqlite3_system_errno(raw) : 0;
    Error e = Translate(rc, sys, raw ? Sqlite().sqlite3_errmsg(raw) : nullptr, shown, options.description,
                        context + ": ", std::nullopt);
    Sqlite().sqlite3_close_v2(raw);
    return e;
  }
  // SQLite quietly falls back to read-only for a write-protected file; we need to write.
  if (!special && !options.read_only && Sqlite().sqlite3_db_readonly(raw, "main") == 1) {
    Sqlite().sqlite3_close_v2(raw);
    return MakeError(ErrorCode::kPermissionDenied,
                     context + ": permission denied (the file is read-only for this user)");
  }
  std::unique_ptr<Database> db(new Database(raw, path, options));
  Sqlite().sqlite3_extended_result_codes(raw, 1);
  // Every gpuman command is a short-lived process. By default the last connection to close
  // checkpoints and deletes the WAL, so the next command recreates it (with fsyncs): most of
  // a `gpuman run`'s database time. Keep the WAL; SQLite's auto-checkpoint (1000 pages)
  // still bounds it.
  Sqlite().sqlite3_db_config(raw, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr);
  Sqlite().sqlite3_busy_handler(raw, &Database::OnBusy, db.get());

  // Only reads so far (a WAL file's recovery writes its -shm file, never the database):
  // the caller decides whether the file is its own before anything writes to it.
  if (options.check_before_write) {
    if (auto ours = options.check_before_write(*db); !ours) return ours.error();
  }
  // The journal mode sticks to the file; the other two are per connection. Reading the
  // first page happens here at the latest, so a corrupt or foreign file is reported by Open.
  if (!special && !options.read_only) {
    auto wal = db->Prepare("set journal mode", "PRAGMA journal_mode=WAL");
    if (!wal) return wal.error();
    auto use = wal->Use();
    auto row = wal->Step();
    if (!row) return row.error();
    std::string mode = *row ? Lower(wal->ColumnText(0)) : "";
    if (mode != "wal") {
      return MakeError(ErrorCode::kIo, context + ": cannot use WAL mode (journal mode is \"" +
                                           mode + "\")");
    }
  }
  // A short-lived process that opens the db first rebuilds the WAL index by reading every
  // frame in the WAL: with the default auto-checkpoint (1000 pages) that grew to ~400 reads
  // and ~5 ms per `gpuman status`. Checkpointing every 64 pages keeps that under 0.5 ms.
  if (auto s = db->ExecScript("set pragmas",
                              "PRAGMA foreign_keys=ON; PRAGMA synchronous=NORMAL; PRAGMA wal_autocheckpoint=64;");
      !s) {
    return s.error();
  }
  return db;
}

Database::~Database() { Sqlite().sqlite3_close_v2(db_); }

// Switching a file to WAL needs an exclusive lock, and SQLite answers a second process
// that tries the same switch at the same moment with an immediate SQLITE_BUSY (waiting
// could deadlock), not with the busy handler. So a new database is prepared under a
// private name, already in WAL mode (the mode is stored in the file header), and linked
// into place: link() fails with EEXIST when another process was quicker, which is fine.
// Every process then finds a WAL file and never has to switch. A crash in between leaves
// a harmless "<path>.init-<pid>" behind.
Status Database::CreateWalFile(const std::string& path, const DatabaseOptions& options) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) return {};
  if (errno != ENOENT) return ErrnoError("stat " + path, errno);

  const std::string staging = path + ".init-" + std::to_string(::getpid());
  ::unlink(staging.c_str());  // left over by an earlier crash of a process with our pid
  // Creating it ourselves with 0600 keeps the database private whatever the umask; SQLite
  // gives the -wal and -shm files the database file's mode.
  UniqueFd fd(::open(staging.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, options.file_mode & 0666));
  if (!fd) return ErrnoError("create " + path, errno);
  (void)::fchmod(fd.get(), options.file_mode & 0666);  // the umask does not decide
  fd.reset();
  DatabaseOptions staging_options = options;
  staging_options.create = false;
  staging_options.display_path.clear();
  auto db = Open(staging, staging_options);
  if (!db) {
    ::unlink(staging.c_str());
    return db.error();
  }
  db->reset();  // the last connection closing removes the staging -wal and -shm files
  Status linked;
  if (::link(staging.c_str(), path.c_str()) != 0 && errno != EEXIST) {
    linked = ErrnoError("create " + path, errno);
  }
  ::unlink(staging.c_str());
  return linked;
}

// Like sqlite3_busy_timeout, with a finer schedule. SQLite's own handler sleeps 1, 2, 5,
// 10, ... 100 ms between attempts, while our write transactions hold the lock for well
// under a millisecond: with several clients most of the time went to sleeping on a lock
// that was already free. Here the sleeps start at 50 us and double up to 2 ms, which is
// still a sleeping wait (a few hundred lock attempts per second per waiter at most).
int Database::OnBusy(void* self, int attempt) {
  auto* db = static_cast<Database*>(self);
  auto now = std::chrono::steady_clock::now();
  if (attempt == 0) db->busy_since_ = now;
  auto deadline = db->busy_since_ + db->busy_timeout_;
  if (now >= deadline) {
    db->busy_gave_up_ = true;
    return 0;  // the caller sees SQLITE_BUSY
  }
  auto sleep = std::chrono::microseconds(50L << std::min(attempt, 5));
  sleep = std::min<std::chrono::microseconds>(
      sleep, std::chrono::duration_cast<std::chrono::microseconds>(deadline - now) +
                 std::chrono::microseconds(1));
  ::usleep(static_cast<useconds_t>(sleep.count()));
  return 1;
}

Result<Statement> Database::Prepare(std::string_view name, std::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  int rc = Sqlite().sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()),
                              SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
  if (rc != SQLITE_OK) return ErrorFrom(rc, "prepare " + std::string(name));
  return Statement(this, stmt, std::string(name));
}

Statement Database::PrepareLater(std::string_view name, const char* sql) {
  Statement s(this, nullptr, std::string(name));
  s.later_sql_ = sql;
  return s;
}

Status Database::ExecScript(std::string_view name, const std::string& sql) {
  busy_gave_up_ = false;
  int rc = Sqlite().sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) return ErrorFrom(rc, name);
  return {};
}

Error Database::ErrorFrom(int rc, std::string_view context) const {
  std::optional<std::chrono::milliseconds> waited;
  if (busy_gave_up_) waited = busy_timeout_;
  return Translate(rc, Sqlite().sqlite3_system_errno(db_), Sqlite().sqlite3_errmsg(db_), display_path_, description_,
                   label_ + " " + display_path_ + ": " + std::string(context) + ": ", waited);
}

int64_t Database::LastInsertRowId() const { return Sqlite().sqlite3_last_insert_rowid(db_); }
int64_t Database::Changes() const { return Sqlite().sqlite3_changes64(db_); }
int64_t Database::TotalChanges() const { return Sqlite().sqlite3_total_changes64(db_); }
bool Database::InTransaction() const { return Sqlite().sqlite3_get_autocommit(db_) == 0; }

// ---- Statement

Statement::Statement(Statement&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)),
      stmt_(std::exchange(other.stmt_, nullptr)),
      name_(std::move(other.name_)),
      bind_error_(other.bind_error_),
      later_sql_(std::exchange(other.later_sql_, nullptr)),
      prepare_error_(std::move(other.prepare_error_)) {}

Statement& Statement::operator=(Statement&& other) noexcept {
  if (this != &other) {
    if (stmt_ != nullptr) Sqlite().sqlite3_finalize(stmt_);
    db_ = std::exchange(other.db_, nullptr);
    stmt_ = std::exchange(other.stmt_, nullptr);
    name_ = std::move(other.name_);
    bind_error_ = other.bind_error_;
    later_sql_ = std::exchange(other.later_sql_, nullptr);
    prepare_error_ = std::move(other.prepare_error_);
  }
  return *this;
}

// A default or moved-from Statement holds nothing, and may outlive a failed load of SQLite.
Statement::~Statement() {
  if (stmt_ != nullptr) Sqlite().sqlite3_finalize(stmt_);
}

void Statement::PrepareNow() {
  auto prepared = db_->Prepare(name_, later_sql_);
  later_sql_ = nullptr;
  if (!prepared) {
    prepare_error_ = prepared.error();
    return;
  }
  stmt_ = std::exchange(prepared->stmt_, nullptr);
}

Statement::ResetGuard Statement::Use() {
  if (later_sql_ != nullptr) PrepareNow();
  Reset();
  return ResetGuard(this);
}

Statement& Statement::Bind(int index, int64_t value) {
  if (stmt_ == nullptr) return *this;  // not prepared: Step returns why
  int rc = Sqlite().sqlite3_bind_int64(stmt_, index, value);
  if (rc != SQLITE_OK && bind_error_ == 0) bind_error_ = rc;
  return *this;
}

Statement& Statement::Bind(int index, std::string_view text) {
  if (stmt_ == nullptr) return *this;
  int rc = Sqlite().sqlite3_bind_text64(stmt_, index, text.data(), text.size(), SQLITE_TRANSIENT,
                               SQLITE_UTF8);
  if (rc != SQLITE_OK && bind_error_ == 0) bind_error_ = rc;
  return *this;
}

Statement& Statement::BindNull(int index) {
  if (stmt_ == nullptr) return *this;
  int rc = Sqlite().sqlite3_bind_null(stmt_, index);
  if (rc != SQLITE_OK && bind_error_ == 0) bind_error_ = rc;
  return *this;
}

Result<bool> Statement::Step() {
  if (later_sql_ != nullptr) PrepareNow();  // stepped without Use()
  if (prepare_error_) return *prepare_error_;
  if (bind_error_ != 0) {
    return MakeError(ErrorCode::kInternal, db_->label() + " " + db_->display_path() + ": " + name_ +
                                               ": bind parameter: " +
                                               Sqlite().sqlite3_errstr(bind_error_));
  }
  db_->busy_gave_up_ = false;
  int rc = Sqlite().sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return db_->ErrorFrom(rc, name_);
}

Status Statement::Run() {
  while (true) {
    auto row = Step();
    if (!row) return row.error();
    if (!*row) return {};
  }
}

int64_t Statement::ColumnInt64(int column) const { return Sqlite().sqlite3_column_int64(stmt_, column); }

std::string Statement::ColumnText(int column) const {
  const unsigned char* text = Sqlite().sqlite3_column_text(stmt_, column);
  if (text == nullptr) return {};
  return std::string(reinterpret_cast<const char*>(text),
                     static_cast<size_t>(Sqlite().sqlite3_column_bytes(stmt_, column)));
}

bool Statement::ColumnIsNull(int column) const {
  return Sqlite().sqlite3_column_type(stmt_, column) == SQLITE_NULL;
}

void Statement::Reset() {
  if (stmt_ == nullptr) return;
  Sqlite().sqlite3_reset(stmt_);  // repeats the last step's error, which Step already returned
  Sqlite().sqlite3_clear_bindings(stmt_);
  bind_error_ = 0;
}

// ---- Transaction

// BEGIN/COMMIT/ROLLBACK/SAVEPOINT do not depend on the schema, so they go through
// sqlite3_exec instead of the prepare-at-open rule for queries.
Result<Transaction> Transaction::BeginWrite(Database& db) {
  if (auto s = db.ExecScript("begin write transaction", "BEGIN IMMEDIATE"); !s) {
    return s.error();
  }
  return Transaction(&db);
}

Result<Transaction> Transaction::BeginRead(Database& db) {
  if (auto s = db.ExecScript("begin read transaction", "BEGIN"); !s) return s.error();
  return Transaction(&db);
}

Transaction::~Transaction() {
  // A failed COMMIT may leave the transaction open; roll it back either way.
  if (db_ != nullptr && db_->InTransaction()) {
    Sqlite().sqlite3_exec(db_->handle(), "ROLLBACK", nullptr, nullptr, nullptr);
  }
}

Status Transaction::Commit() {
  GPUMAN_CHECK(db_ != nullptr);
  if (auto s = db_->ExecScript("commit", "COMMIT"); !s) return s;
  db_ = nullptr;
  return {};
}

// ---- Savepoint

Result<Savepoint> Savepoint::Begin(Database& db, std::string name) {
  if (auto s = db.ExecScript("savepoint " + name, "SAVEPOINT " + name); !s) return s.error();
  return Savepoint(&db, std::move(name));
}

Savepoint::~Savepoint() {
  if (db_ != nullptr && db_->InTransaction()) {
    std::string sql = "ROLLBACK TO " + name_ + "; RELEASE " + name_;
    Sqlite().sqlite3_exec(db_->handle(), sql.c_str(), nullptr, nullptr, nullptr);
  }
}

Status Savepoint::Release() {
  GPUMAN_CHECK(db_ != nullptr);
  if (auto s = db_->ExecScript("release " + name_, "RELEASE " + name_); !s) return s;
  db_ = nullptr;
  return {};
}

}  // namespace gpuman::store
