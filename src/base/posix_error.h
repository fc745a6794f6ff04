// The one errno translator (leveldb's PosixError): an errno becomes an ErrorCode by one
// table, and a message "context: reason" in lower case (STYLE.md section 3). Pure functions,
// thread-safe; ErrnoDescription is async-signal-safe too (base/spawn.cc uses it between fork
// and exec). This is the only file that names the C library's errno-to-text function.
#pragma once

#include <string.h>

#include <string>

#include "base/result.h"

namespace gpuman {

/// The C library's English words for `err` as they are ("No such file or directory"),
/// whatever the locale; "Unknown error" for a number it does not know. A table lookup:
/// no allocation, async-signal-safe. For the few places that print the words verbatim
/// (header-only, so the shared objects that cannot link base, src/sim, can use it).
inline constexpr const char* kUnknownErrno = "Unknown error";
inline const char* ErrnoDescription(int err) {
  const char* text = strerrordesc_np(err);
  return text != nullptr ? text : kUnknownErrno;
}

/// The error kind of an errno: ENOENT, ESRCH, ENOTDIR -> kNotFound; EACCES, EPERM, EROFS ->
/// kPermissionDenied; EEXIST, ENOTEMPTY -> kConflict; EAGAIN/EWOULDBLOCK, EBUSY, ETXTBSY,
/// EINTR -> kBusy; ECONNREFUSED, ECONNRESET, ECONNABORTED, EHOSTUNREACH, ENETUNREACH,
/// ENETDOWN, ETIMEDOUT, EPIPE -> kUnavailable; EINVAL, ENAMETOOLONG, E2BIG, EBADF ->
/// kInvalidArgument; anything else -> kIo.
ErrorCode ErrorCodeForErrno(int err);

/// The words for `err` in lower case ("no such file or directory"; "unknown error 4242").
std::string PosixErrorText(int err);

/// Error{ErrorCodeForErrno(err), "context: reason"}: PosixError("open /x", ENOENT) is
/// kNotFound "open /x: no such file or directory".
Error PosixError(const std::string& context, int err);

/// The same words with a kind the caller knows better than the table (a database file
/// that is missing is an I/O problem of the store, not a "not found" of the request).
Error PosixError(ErrorCode code, const std::string& context, int err);

}  // namespace gpuman
