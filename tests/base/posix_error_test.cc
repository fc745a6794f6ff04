#include "base/posix_error.h"

#include <errno.h>

#include <gtest/gtest.h>

namespace gpuman {
namespace {

TEST(PosixErrorTest, MapsErrnoToKindOnce) {
  struct Case {
    int err;
    ErrorCode code;
  };
  const Case cases[] = {
      {ENOENT, ErrorCode::kNotFound},          {ESRCH, ErrorCode::kNotFound},
      {ENOTDIR, ErrorCode::kNotFound},         {EACCES, ErrorCode::kPermissionDenied},
      {EPERM, ErrorCode::kPermissionDenied},   {EROFS, ErrorCode::kPermissionDenied},
      {EEXIST, ErrorCode::kConflict},          {ENOTEMPTY, ErrorCode::kConflict},
      {EAGAIN, ErrorCode::kBusy},              {EWOULDBLOCK, ErrorCode::kBusy},
      {EBUSY, ErrorCode::kBusy},               {ETXTBSY, ErrorCode::kBusy},
      {EINTR, ErrorCode::kBusy},               {ECONNREFUSED, ErrorCode::kUnavailable},
      {ECONNRESET, ErrorCode::kUnavailable},   {ETIMEDOUT, ErrorCode::kUnavailable},
      {EHOSTUNREACH, ErrorCode::kUnavailable}, {EPIPE, ErrorCode::kUnavailable},
      {EINVAL, ErrorCode::kInvalidArgument},   {ENAMETOOLONG, ErrorCode::kInvalidArgument},
      {EBADF, ErrorCode::kInvalidArgument},    {EIO, ErrorCode::kIo},
      {ENOSPC, ErrorCode::kIo},                {EMFILE, ErrorCode::kIo},
      {0, ErrorCode::kIo},                     {99999, ErrorCode::kIo},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(ErrorCodeForErrno(c.err), c.code) << "errno " << c.err << " (" << ErrnoDescription(c.err) << ")";
  }
}

TEST(PosixErrorTest, MessageIsContextThenReasonInLowerCase) {
  Error e = PosixError("open /var/lib/gpuman/state.db", EACCES);
  EXPECT_EQ(e.code, ErrorCode::kPermissionDenied);
  EXPECT_EQ(e.message, "open /var/lib/gpuman/state.db: permission denied");
  EXPECT_EQ(PosixError("chdir /x", ENOENT).message, "chdir /x: no such file or directory");
  EXPECT_EQ(PosixError("x", ENOENT).code, ErrorCode::kNotFound);
}

TEST(PosixErrorTest, CallerMayKnowTheKindBetter) {
  Error e = PosixError(ErrorCode::kIo, "state db", ENOENT);
  EXPECT_EQ(e.code, ErrorCode::kIo);
  EXPECT_EQ(e.message, "state db: no such file or directory");
}

TEST(PosixErrorTest, TextAndDescription) {
  EXPECT_EQ(PosixErrorText(ECONNREFUSED), "connection refused");
  EXPECT_EQ(PosixErrorText(99999), "unknown error 99999");
  EXPECT_STREQ(ErrnoDescription(ENOENT), "No such file or directory");  // the words as they are
  EXPECT_STREQ(ErrnoDescription(99999), "Unknown error");
}

}  // namespace
}  // namespace gpuman
