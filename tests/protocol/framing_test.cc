#include "protocol/framing.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "allocation_tracker.h"

namespace gpuman::protocol {
namespace {

std::string Header(uint32_t n) {
  return std::string{static_cast<char>(n >> 24), static_cast<char>((n >> 16) & 0xff),
                     static_cast<char>((n >> 8) & 0xff), static_cast<char>(n & 0xff)};
}

// Every payload the decoder yields for `chunks`, or the error message.
struct Decoded {
  std::vector<std::string> frames;
  std::optional<std::string> error;
};

Decoded DecodeChunks(const std::vector<std::string>& chunks) {
  Decoded out;
  FrameDecoder decoder;
  for (const auto& chunk : chunks) {
    (void)decoder.Feed(chunk);
    for (;;) {
      Result<std::optional<std::string>> next = decoder.Next();
      if (!next) {
        out.error = next.error().message;
        return out;
      }
      if (!next->has_value()) break;
      out.frames.push_back(**next);
    }
  }
  return out;
}

TEST(AllocationTrackerTest, SeesLargeAllocations) {
  testing_alloc::StartTracking();
  // Through std::allocator like the decoder's buffer (ASan replaces new[] on its own).
  std::vector<char> block(123456);
  const std::size_t largest = testing_alloc::StopTracking();
  block[0] = 1;
  EXPECT_GE(largest, 123456u);
}

TEST(EncodeFrameTest, BigEndianLengthThenPayload) {
  EXPECT_EQ(EncodeFrame("{}"), std::string("\0\0\0\x02{}", 6));
  const std::string payload(0x010203, 'x');
  const std::string frame = EncodeFrame(payload);
  ASSERT_EQ(frame.size(), payload.size() + 4);
  EXPECT_EQ(frame.substr(0, 4), std::string("\x00\x01\x02\x03", 4));
  EXPECT_EQ(frame.substr(4), payload);
}

TEST(FrameDecoderTest, RoundTripsWholeFrames) {
  const std::vector<std::string> payloads = {"{}", R"({"v":1,"id":1,"op":"hello"})", std::string(1000, 'a'),
                                             std::string(kMaxMessageBytes, 'b')};
  std::string stream;
  for (const auto& p : payloads) stream += EncodeFrame(p);
  Decoded d = DecodeChunks({stream});
  ASSERT_FALSE(d.error) << *d.error;
  EXPECT_EQ(d.frames, payloads);
}

TEST(FrameDecoderTest, ByteByByte) {
  const std::vector<std::string> payloads = {"{\"a\":1}", "[]", "x", std::string(300, 'z')};
  std::string stream;
  for (const auto& p : payloads) stream += EncodeFrame(p);
  std::vector<std::string> chunks;
  for (char c : stream) chunks.emplace_back(1, c);
  Decoded d = DecodeChunks(chunks);
  ASSERT_FALSE(d.error) << *d.error;
  EXPECT_EQ(d.frames, payloads);
}

TEST(FrameDecoderTest, RandomChunkSizes) {
  std::mt19937 rng(12345);
  std::vector<std::string> payloads;
  std::string stream;
  for (int i = 0; i < 200; ++i) {
    std::string p(1 + rng() % 5000, '\0');
    for (char& c : p) c = static_cast<char>(rng());
    stream += EncodeFrame(p);
    payloads.push_back(std::move(p));
  }
  for (int round = 0; round < 20; ++round) {
    std::vector<std::string> chunks;
    for (std::size_t pos = 0; pos < stream.size();) {
      const std::size_t n = std::min<std::size_t>(stream.size() - pos, 1 + rng() % 9000);
      chunks.push_back(stream.substr(pos, n));
      pos += n;
    }
    Decoded d = DecodeChunks(chunks);
    ASSERT_FALSE(d.error) << *d.error;
    ASSERT_EQ(d.frames, payloads) << "round " << round;
  }
}

TEST(FrameDecoderTest, NeedsMoreUntilComplete) {
  FrameDecoder decoder;
  EXPECT_TRUE(decoder.at_frame_boundary());
  const std::string frame = EncodeFrame("hello");
  ASSERT_TRUE(decoder.Feed(frame.substr(0, 3)));
  EXPECT_FALSE(decoder.at_frame_boundary());
  Result<std::optional<std::string>> next = decoder.Next();
  ASSERT_TRUE(next);
  EXPECT_FALSE(next->has_value());
  ASSERT_TRUE(decoder.Feed(frame.substr(3, 4)));
  EXPECT_FALSE(decoder.Next()->has_value());
  EXPECT_EQ(decoder.buffered_bytes(), 7u);
  ASSERT_TRUE(decoder.Feed(frame.substr(7)));
  next = decoder.Next();
  ASSERT_TRUE(next);
  EXPECT_EQ(**next, "hello");
  EXPECT_TRUE(decoder.at_frame_boundary());
  EXPECT_EQ(decoder.buffered_bytes(), 0u);
}

struct BadHeaderCase {
  const char* name;
  uint32_t length;
  WireCode code;
  const char* message;
};

class BadHeaderTest : public testing::TestWithParam<BadHeaderCase> {};

TEST_P(BadHeaderTest, StickyErrorWithoutAllocating) {
  const BadHeaderCase& c = GetParam();
  FrameDecoder decoder;
  testing_alloc::StartTracking();
  // The header arrives split, then with plenty of trailing bytes.
  Status fed = decoder.Feed(Header(c.length).substr(0, 2));
  const bool first_ok = fed.has_value();
  fed = decoder.Feed(Header(c.length).substr(2) + std::string(64, 'x'));
  const std::size_t largest_allocation = testing_alloc::StopTracking();
  EXPECT_TRUE(first_ok);
  ASSERT_FALSE(fed.has_value());
  EXPECT_EQ(fed.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(fed.error().message, c.message);
  EXPECT_EQ(decoder.error_code(), c.code);
  EXPECT_LT(largest_allocation, std::size_t{4096});
  EXPECT_EQ(decoder.buffered_bytes(), 0u);  // nothing after a bad header is kept
  EXPECT_FALSE(decoder.at_frame_boundary());
  // Sticky: even a good frame afterwards does not help.
  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(decoder.Feed(EncodeFrame("{}")).has_value());
    Result<std::optional<std::string>> next = decoder.Next();
    ASSERT_FALSE(next.has_value());
    EXPECT_EQ(next.error().message, c.message);
  }
}

INSTANTIATE_TEST_SUITE_P(Lengths, BadHeaderTest,
                         testing::Values(BadHeaderCase{"zero", 0, WireCode::kBadMessage, "frame: zero length"},
                                         BadHeaderCase{"one_over", static_cast<uint32_t>(kMaxMessageBytes + 1),
                                                       WireCode::kTooLarge,
                                                       "frame: length 1048577 exceeds the limit of 1048576 bytes"},
                                         BadHeaderCase{"max_u32", 0xffffffffu, WireCode::kTooLarge,
                                                       "frame: length 4294967295 exceeds the limit of 1048576 bytes"},
                                         BadHeaderCase{"ascii", 0x7b227622u /* {"v" */, WireCode::kTooLarge,
                                                       "frame: length 2065856034 exceeds the limit of 1048576 bytes"}),
                         [](const testing::TestParamInfo<BadHeaderCase>& p) { return std::string(p.param.name); });

TEST(FrameDecoderTest, GoodFrameBeforeBadHeaderIsStillDelivered) {
  FrameDecoder decoder;
  ASSERT_TRUE(decoder.Feed(EncodeFrame("{}") + Header(0)));  // only the first header is checked yet
  Result<std::optional<std::string>> next = decoder.Next();
  ASSERT_TRUE(next);
  EXPECT_EQ(**next, "{}");
  EXPECT_EQ(decoder.error_code(), WireCode::kBadMessage);  // the next header, checked eagerly
  EXPECT_FALSE(decoder.Next().has_value());
}

TEST(FrameDecoderTest, BadHeaderAfterCompleteFrameIsReportedAfterIt) {
  FrameDecoder decoder;
  ASSERT_TRUE(decoder.Feed(EncodeFrame("{}")));
  ASSERT_TRUE(decoder.Feed(Header(0xffffffffu).substr(0, 3)));  // header not yet complete
  Result<std::optional<std::string>> next = decoder.Next();
  ASSERT_TRUE(next);
  EXPECT_EQ(**next, "{}");
  EXPECT_FALSE(decoder.Feed(std::string(1, '\xff')).has_value());
  EXPECT_EQ(decoder.error_code(), WireCode::kTooLarge);
}

TEST(FrameDecoderTest, SmallerLimitForTests) {
  FrameDecoder decoder(8);
  ASSERT_TRUE(decoder.Feed(EncodeFrame("12345678")));
  EXPECT_EQ(**decoder.Next(), "12345678");
  EXPECT_FALSE(decoder.Feed(EncodeFrame("123456789")).has_value());
  EXPECT_EQ(decoder.error_code(), WireCode::kTooLarge);
}

TEST(FrameDecoderTest, BufferStaysBoundedWhenDrained) {
  FrameDecoder decoder;
  const std::string frame = EncodeFrame(std::string(100, 'q'));
  for (int i = 0; i < 10000; ++i) {
    ASSERT_TRUE(decoder.Feed(frame));
    ASSERT_EQ(**decoder.Next(), std::string(100, 'q'));
    ASSERT_EQ(decoder.buffered_bytes(), 0u);
  }
}

}  // namespace
}  // namespace gpuman::protocol
