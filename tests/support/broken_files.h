// Broken state files for tests: a good gpuman file made self-contained (its WAL folded in,
// -wal and -shm removed) and then damaged in one of the ways a machine damages files:
// cut short, scribbled over, replaced by another program's database or by text, or left
// by a newer gpuman. Used by tests/store (the store refuses them) and tests/e2e (every
// command and the daemon refuse them), each checking the file is unchanged afterwards.
#pragma once

#include <sqlite3.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace gpuman::testing {

enum class Damage { kTruncated, kCorruptBytes, kForeignSqlite, kPlainText, kNewerSchema };

inline const char* DamageName(Damage d) {
  switch (d) {
    case Damage::kTruncated: return "truncated";
    case Damage::kCorruptBytes: return "corrupt_bytes";
    case Damage::kForeignSqlite: return "foreign_sqlite";
    case Damage::kPlainText: return "plain_text";
    case Damage::kNewerSchema: return "newer_schema";
  }
  return "?";
}

inline std::vector<Damage> AllDamages() {
  return {Damage::kTruncated, Damage::kCorruptBytes, Damage::kForeignSqlite, Damage::kPlainText,
          Damage::kNewerSchema};
}

/// Runs `sql` on `path` with the plain SQLite API. Returns "" or SQLite's message.
inline std::string RawSql(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  std::string error;
  if (rc == SQLITE_OK) {
    char* msg = nullptr;
    rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &msg);
    if (rc != SQLITE_OK) error = msg ? msg : sqlite3_errstr(rc);
    sqlite3_free(msg);
  } else {
    error = sqlite3_errstr(rc);
  }
  sqlite3_close(db);
  return error;
}

/// Folds the WAL of a closed database into the file and removes -wal and -shm, so that
/// the bytes of `path` alone are the database. Returns "" or the error.
inline std::string Consolidate(const std::string& path) {
  std::string error = RawSql(path, "PRAGMA wal_checkpoint(TRUNCATE)");
  if (!error.empty()) return error;
  ::unlink((path + "-wal").c_str());
  ::unlink((path + "-shm").c_str());
  return "";
}

inline std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

inline void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

/// Damages the good gpuman file at `path` in place. Returns "" or the error.
inline std::string DamageFile(const std::string& path, Damage d) {
  if (auto e = Consolidate(path); !e.empty()) return "consolidate: " + e;
  std::string bytes = ReadBytes(path);
  if (bytes.size() < 8192) return "file too small to damage: " + std::to_string(bytes.size());
  switch (d) {
    case Damage::kTruncated:  // cut at a byte that no page boundary explains
      bytes.resize(bytes.size() / 2 + 1000);
      WriteBytes(path, bytes);
      return "";
    case Damage::kCorruptBytes:  // the header and the first page after it
      for (size_t i = 16; i < 4096 && i < bytes.size(); ++i) bytes[i] = static_cast<char>(0xA5 ^ (i * 31));
      WriteBytes(path, bytes);
      return "";
    case Damage::kForeignSqlite: {
      // Another program's database, with a table gpuman also has (jobs) and one it has not.
      std::filesystem::remove(path);
      return RawSql(path,
                    "CREATE TABLE jobs (id INTEGER PRIMARY KEY, what TEXT);"
                    "CREATE TABLE foo (x);"
                    "INSERT INTO jobs (what) VALUES ('payroll');"
                    "INSERT INTO foo VALUES (42);");
    }
    case Damage::kPlainText:
      WriteBytes(path, "# not a database\nhello = world\n");
      return "";
    case Damage::kNewerSchema: {
      if (auto e = RawSql(path, "PRAGMA user_version = 999"); !e.empty()) return e;
      return Consolidate(path);
    }
  }
  return "unknown damage";
}

}  // namespace gpuman::testing
