#include "store/sqlite_library.h"

#include <dlfcn.h>

#include <cstdlib>
#include <optional>
#include <string>

namespace gpuman::store {
namespace {

struct Loaded {
  SqliteLibrary library;
  std::optional<Error> error;
};

Loaded Load() {
  Loaded out;
  const char* env = std::getenv("GPUMAN_SQLITE_LIBRARY");
  const std::string file = env != nullptr && *env != '\0' ? env : "libsqlite3.so.0";
  // Never closed: statements and connections may outlive any one owner until exit.
  void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    out.error = MakeError(ErrorCode::kInternal, "cannot load SQLite (" + file + "): " +
                                                       (why != nullptr ? why : "unknown error") +
                                                       " (install libsqlite3-0)");
    return out;
  }
#define GPUMAN_SQLITE_RESOLVE(name)                                                                     \
  out.library.name = reinterpret_cast<decltype(&::name)>(dlsym(handle, #name));                         \
  if (out.library.name == nullptr) {                                                                    \
    out.error = MakeError(ErrorCode::kInternal, "cannot load SQLite (" + file + "): it has no " #name \
                                                   " (SQLite " SQLITE_VERSION " or newer is needed)");  \
    return out;                                                                                         \
  }
  GPUMAN_SQLITE_FUNCTIONS(GPUMAN_SQLITE_RESOLVE)
#undef GPUMAN_SQLITE_RESOLVE
  // Built against <sqlite3.h> of this version: an older library may lack behaviour the
  // header promises (flags, config verbs) although every function is there.
  if (out.library.sqlite3_libversion_number() < SQLITE_VERSION_NUMBER) {
    out.error = MakeError(ErrorCode::kInternal, "cannot use SQLite (" + file + "): version " +
                                                       std::to_string(out.library.sqlite3_libversion_number()) +
                                                       ", older than the " SQLITE_VERSION " gpuman was built with");
  }
  return out;
}

const Loaded& TheLibrary() {
  static const Loaded loaded = Load();  // once per process; thread-safe initialisation
  return loaded;
}

}  // namespace

Result<const SqliteLibrary*> LoadSqlite() {
  const Loaded& l = TheLibrary();
  if (l.error) return *l.error;
  return &l.library;
}

const SqliteLibrary& Sqlite() { return TheLibrary().library; }

}  // namespace gpuman::store
