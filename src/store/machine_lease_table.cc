#include "store/machine_lease_table.h"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/posix_error.h"

namespace gpuman::store {
namespace {

std::string OwnerName(uid_t uid) {
  passwd* pw = getpwuid(uid);
  if (!pw) return "uid " + std::to_string(uid);
  return std::string(pw->pw_name) + " (uid " + std::to_string(uid) + ")";
}

Error Refuse(const std::string& what, const std::string& why) {
  return MakeError(ErrorCode::kPermissionDenied, "refusing the lease table " + what + ": " + why);
}

// mkdir -p: missing parents get `parent_mode`, the directory itself `mode`.
Status MakeDirs(const std::string& dir, mode_t parent_mode, mode_t mode) {
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    std::string prefix = dir.substr(0, pos);
    const mode_t m = pos == dir.size() ? mode : parent_mode;
    if (::mkdir(prefix.c_str(), m) == 0) {
      (void)::chmod(prefix.c_str(), m);  // not the umask's choice
      continue;
    }
    if (errno == EEXIST) continue;
    int err = errno;
    return MakeError(err == EACCES ? ErrorCode::kPermissionDenied : ErrorCode::kIo,
                     "create the lease table directory " + prefix + ": " + ErrnoDescription(err));
  }
  return {};
}

}  // namespace

Result<MachineLeaseTable> OpenMachineLeaseTable(const std::string& dir, uint32_t uid,
                                                const LeaseStoreOptions& options) {
  if (dir.empty() || dir[0] != '/') {
    return MakeError(ErrorCode::kInvalidArgument, "lease table directory '" + dir + "' must be an absolute path");
  }
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) {
    if (errno != ENOENT) {
      return MakeError(ErrorCode::kIo, "lease table " + dir + ": " + ErrnoDescription(errno));
    }
    if (uid == 0) {
      if (auto made = MakeDirs(dir, 0755, 0755); !made) return made.error();
    } else if (dir == kDefaultMachineLeaseDir) {
      return MakeError(ErrorCode::kUnavailable,
                       "the machine lease table " + dir +
                           " does not exist yet: run any gpuman command once as root (e.g. `sudo gpuman leases`), "
                           "or start the daemon");
    } else {
      if (auto made = MakeDirs(dir, 0700, 0700); !made) return made.error();
    }
    if (::lstat(dir.c_str(), &st) != 0) {
      return MakeError(ErrorCode::kIo, "lease table " + dir + ": " + ErrnoDescription(errno));
    }
  }
  if (S_ISLNK(st.st_mode)) return Refuse("in " + dir, "it is a symbolic link");
  if (!S_ISDIR(st.st_mode)) return Refuse("in " + dir, "it is not a directory");
  if (st.st_uid != 0 && st.st_uid != uid) {
    return Refuse("in " + dir, "it belongs to " + OwnerName(st.st_uid) + ", not to root or you");
  }
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    return Refuse("in " + dir, "others may write to the directory (mode " +
                                   std::to_string((st.st_mode >> 6) & 7) + std::to_string((st.st_mode >> 3) & 7) +
                                   std::to_string(st.st_mode & 7) + ")");
  }

  MachineLeaseTable out;
  out.dir = dir;
  out.shared = st.st_uid == 0;
  const std::string db = dir + "/leases.db";
  const char* suffixes[] = {"", "-wal", "-shm"};
  LeaseStoreOptions opts = options;
  if (out.shared) opts.file_mode = 0666;

  if (out.shared && uid != 0) {
    // Users only ever open root's files: check each one before SQLite does.
    for (const char* suffix : suffixes) {
      const std::string path = db + suffix;
      struct stat f {};
      if (::lstat(path.c_str(), &f) != 0) {
        const int err = errno;
        if (err == ENOENT && *suffix != '\0' && ::lstat(db.c_str(), &f) == 0) {
          // The table was set up, and its WAL files are gone: SQLite deletes them when the last
          // connection that does not keep them closes, such as the sqlite3 shell's without
          // -readonly (gpuman's keep them). Users cannot create files here; root can.
          return MakeError(ErrorCode::kUnavailable,
                           "the machine lease table " + dir + " lacks " + path +
                               ": another program removed it when it closed the table (the sqlite3 shell does, "
                               "unless run with -readonly); run any gpuman command once as root to recreate it "
                               "(e.g. `sudo gpuman leases`)");
        }
        if (err == ENOENT) {
          return MakeError(ErrorCode::kUnavailable,
                           "the machine lease table " + dir + " is not set up (" + path +
                               " is missing): run any gpuman command once as root (e.g. `sudo gpuman leases`)");
        }
        return MakeError(ErrorCode::kIo, "lease table " + path + ": " + ErrnoDescription(err));
      }
      if (!S_ISREG(f.st_mode)) return Refuse(path, "it is not a regular file");
      if (f.st_uid != 0) return Refuse(path, "it belongs to " + OwnerName(f.st_uid) + ", not to root");
    }
  }
  auto opened = LeaseStore::Open(db, opts);
  if (!opened) return opened.error();
  out.store = std::move(*opened);
  if (out.shared && uid == 0) {
    // The WAL files exist once the schema was read; they must stay (SQLite keeps them, see
    // Database::Open) and be writable by everyone, like the database.
    for (const char* suffix : suffixes) {
      const std::string path = db + suffix;
      struct stat f {};
      if (::lstat(path.c_str(), &f) == 0 && S_ISREG(f.st_mode)) {
        if (f.st_uid != 0) (void)::chown(path.c_str(), 0, 0);
        (void)::chmod(path.c_str(), 0666);
      }
    }
  }
  return out;
}

}  // namespace gpuman::store
