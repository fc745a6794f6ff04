#include "base/posix_error.h"

#include <errno.h>

#include <cstring>

namespace gpuman {

ErrorCode ErrorCodeForErrno(int err) {
  switch (err) {
    case ENOENT:
    case ESRCH:
    case ENOTDIR:
      return ErrorCode::kNotFound;
    case EACCES:
    case EPERM:
    case EROFS:
      return ErrorCode::kPermissionDenied;
    case EEXIST:
    case ENOTEMPTY:
      return ErrorCode::kConflict;
    case EAGAIN:
#if EWOULDBLOCK != EAGAIN
    case EWOULDBLOCK:
#endif
    case EBUSY:
    case ETXTBSY:
    case EINTR:
      return ErrorCode::kBusy;
    case ECONNREFUSED:
    case ECONNRESET:
    case ECONNABORTED:
    case EHOSTUNREACH:
    case ENETUNREACH:
    case ENETDOWN:
    case ETIMEDOUT:
    case EPIPE:
      return ErrorCode::kUnavailable;
    case EINVAL:
    case ENAMETOOLONG:
    case E2BIG:
    case EBADF:
      return ErrorCode::kInvalidArgument;
    default:
      return ErrorCode::kIo;
  }
}

std::string PosixErrorText(int err) {
  const char* words = ErrnoDescription(err);
  std::string text = std::strcmp(words, kUnknownErrno) == 0 ? "unknown error " + std::to_string(err) : words;
  for (char& c : text) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return text;
}

Error PosixError(const std::string& context, int err) {
  return PosixError(ErrorCodeForErrno(err), context, err);
}

Error PosixError(ErrorCode code, const std::string& context, int err) {
  return Error{code, context + ": " + PosixErrorText(err)};
}

}  // namespace gpuman
