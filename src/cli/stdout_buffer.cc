#include "cli/stdout_buffer.h"

#include <unistd.h>

#include <cerrno>
#include <string.h>  // memrchr

#include "base/posix_error.h"

namespace gpuman::cli {
namespace {

constexpr size_t kBufferBytes = 64 * 1024;

}  // namespace

StdoutBuffer::StdoutBuffer(int fd, bool line_buffered, int failed_errno)
    : fd_(fd), line_buffered_(line_buffered), pending_error_(failed_errno), buffer_(kBufferBytes) {
  setp(buffer_.data(), buffer_.data() + buffer_.size());
}

StdoutBuffer::~StdoutBuffer() { Drain(); }

bool StdoutBuffer::Drain() {
  if (error_ != 0) return false;
  const char* data = pbase();
  size_t left = static_cast<size_t>(pptr() - pbase());
  if (left > 0 && pending_error_ != 0) error_ = pending_error_;
  while (left > 0 && error_ == 0) {
    const ssize_t n = write(fd_, data, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      error_ = n < 0 ? errno : EIO;
      break;
    }
    data += n;
    left -= static_cast<size_t>(n);
  }
  if (error_ != 0) {
    setp(nullptr, nullptr);  // nothing more is taken: every further write fails
    return false;
  }
  setp(buffer_.data(), buffer_.data() + buffer_.size());
  return true;
}

StdoutBuffer::int_type StdoutBuffer::overflow(int_type ch) {
  if (!Drain()) return traits_type::eof();
  if (traits_type::eq_int_type(ch, traits_type::eof())) return traits_type::not_eof(ch);
  *pptr() = traits_type::to_char_type(ch);
  pbump(1);
  if (line_buffered_ && traits_type::to_char_type(ch) == '\n' && !Drain()) return traits_type::eof();
  return ch;
}

std::streamsize StdoutBuffer::xsputn(const char* s, std::streamsize n) {
  // Line buffered: up to the last newline goes out now, the rest waits for its line's end.
  const void* newline = line_buffered_ && n > 0 ? memrchr(s, '\n', static_cast<size_t>(n)) : nullptr;
  if (newline == nullptr) return std::streambuf::xsputn(s, n);
  const std::streamsize head = static_cast<const char*>(newline) - s + 1;
  if (std::streambuf::xsputn(s, head) != head || !Drain()) return 0;
  return head + std::streambuf::xsputn(s + head, n - head);
}

int StdoutBuffer::sync() { return Drain() ? 0 : -1; }

int FinishStdout(std::ostream& out, const StdoutBuffer& buffer, int rc, std::ostream& err, ExitPolicy policy) {
  out.flush();
  const int error = buffer.error();
  if (error == 0) return rc;
  if (error != EPIPE) {
    err << "gpuman: error: write standard output: " << PosixErrorText(error) << "\n";
  }
  return rc != kExitOk ? rc : ExitCodeFor(ErrorCode::kIo, policy);
}

}  // namespace gpuman::cli
