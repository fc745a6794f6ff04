// Length-prefixed framing of the gpuman protocol: a 4-byte big-endian payload length, then
// that many bytes of UTF-8 JSON. FrameDecoder turns the byte chunks read() returns into
// whole frames. Pure (no sockets); a FrameDecoder belongs to one connection, one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"
#include "protocol/error_codes.h"

namespace gpuman::protocol {

/// Largest payload (not counting the 4-byte header) either side sends or accepts.
inline constexpr std::size_t kMaxMessageBytes = std::size_t{1} << 20;  // 1 MiB
inline constexpr std::size_t kFrameHeaderBytes = 4;

/// Header + payload. Precondition (GPUMAN_CHECK): json.size() <= kMaxMessageBytes; callers
/// that cannot bound their payload use EncodeRequestFrame / EncodeReplyFrame (envelope.h).
std::string EncodeFrame(std::string_view json);

/// Incremental decoder. Feed it whatever read() returned, then call Next() until it yields
/// nullopt. Memory is bounded by what was fed and not yet taken: the length header is only
/// trusted after it has been checked against the limit, and nothing is reserved from it.
class FrameDecoder {
 public:
  explicit FrameDecoder(std::size_t max_message_bytes = kMaxMessageBytes);

  /// Appends bytes and checks the header of the frame now being received. Ignored after an
  /// error. Errors: the sticky error, as Next() would return it.
  Status Feed(std::string_view bytes);

  /// Takes the next complete payload; nullopt when more bytes are needed.
  /// Errors (sticky: every later call returns the same error, the stream cannot be
  /// resynchronised): kInvalidArgument for a zero length (error_code() bad_message) or a
  /// length over the limit (error_code() too_large).
  Result<std::optional<std::string>> Next();

  /// True when no partial frame is buffered: end-of-stream here is a clean close.
  bool at_frame_boundary() const { return error_code_ == std::nullopt && buffer_.size() == start_; }
  /// Bytes fed but not yet returned by Next().
  std::size_t buffered_bytes() const { return buffer_.size() - start_; }
  /// The wire code of the sticky error; nullopt while healthy.
  std::optional<WireCode> error_code() const { return error_code_; }

 private:
  // Checks the header at start_ once it is complete; sets the sticky error.
  void CheckHeader();

  std::size_t max_message_bytes_;
  std::string buffer_;
  std::size_t start_ = 0;  // first byte not yet returned
  std::optional<WireCode> error_code_;
  Error error_;
};

}  // namespace gpuman::protocol
