#include "protocol/framing.h"

#include <utility>

namespace gpuman::protocol {

namespace {

uint32_t ReadBigEndian32(const char* p) {
  const auto* b = reinterpret_cast<const unsigned char*>(p);
  return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | uint32_t{b[3]};
}

}  // namespace

std::string EncodeFrame(std::string_view json) {
  GPUMAN_CHECK(json.size() <= kMaxMessageBytes);
  const auto n = static_cast<uint32_t>(json.size());
  std::string out;
  out.reserve(kFrameHeaderBytes + json.size());
  out.push_back(static_cast<char>((n >> 24) & 0xff));
  out.push_back(static_cast<char>((n >> 16) & 0xff));
  out.push_back(static_cast<char>((n >> 8) & 0xff));
  out.push_back(static_cast<char>(n & 0xff));
  out.append(json);
  return out;
}

FrameDecoder::FrameDecoder(std::size_t max_message_bytes) : max_message_bytes_(max_message_bytes) {}

void FrameDecoder::CheckHeader() {
  if (error_code_ || buffer_.size() - start_ < kFrameHeaderBytes) return;
  const uint32_t length = ReadBigEndian32(buffer_.data() + start_);
  if (length == 0) {
    error_code_ = WireCode::kBadMessage;
    error_ = MakeError(ErrorCode::kInvalidArgument, "frame: zero length");
  } else if (length > max_message_bytes_) {
    error_code_ = WireCode::kTooLarge;
    error_ =
        MakeError(ErrorCode::kInvalidArgument, "frame: length " + std::to_string(length) + " exceeds the limit of " +
                                                   std::to_string(max_message_bytes_) + " bytes");
  }
  if (error_code_) {
    // Nothing after a bad header can be trusted; drop it.
    buffer_.clear();
    buffer_.shrink_to_fit();
    start_ = 0;
  }
}

Status FrameDecoder::Feed(std::string_view bytes) {
  if (error_code_) return error_;
  // Compact before growing, so the buffer holds at most one partial frame plus `bytes`
  // when the caller drains Next() after every Feed().
  if (start_ > 0 && (start_ == buffer_.size() || start_ >= buffer_.size() / 2)) {
    buffer_.erase(0, start_);
    start_ = 0;
  }
  buffer_.append(bytes);
  CheckHeader();
  if (error_code_) return error_;
  return {};
}

Result<std::optional<std::string>> FrameDecoder::Next() {
  CheckHeader();
  if (error_code_) return error_;
  if (buffer_.size() - start_ < kFrameHeaderBytes) return std::optional<std::string>();
  const uint32_t length = ReadBigEndian32(buffer_.data() + start_);
  if (buffer_.size() - start_ - kFrameHeaderBytes < length) return std::optional<std::string>();
  std::string payload = buffer_.substr(start_ + kFrameHeaderBytes, length);
  start_ += kFrameHeaderBytes + length;
  if (start_ == buffer_.size()) {
    buffer_.clear();
    start_ = 0;
  }
  CheckHeader();  // report a bad next header early; it does not affect this payload
  return std::optional<std::string>(std::move(payload));
}

}  // namespace gpuman::protocol
