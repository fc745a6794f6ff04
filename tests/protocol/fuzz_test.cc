// A small deterministic fuzzer (fixed seeds): random bytes and mutated messages through the
// frame decoder and both parsers. It asserts that nothing crashes or throws and that
// random input only ever produces errors. Run under GPUMAN_SANITIZE=address,undefined for
// more value.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <variant>
#include <vector>

#include "protocol/envelope.h"
#include "protocol/framing.h"
#include "protocol/json_io.h"
#include "protocol_samples.h"

namespace gpuman::protocol {
namespace {

std::string RandomBytes(std::mt19937_64& rng, std::size_t max_len) {
  std::string s(rng() % (max_len + 1), '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

TEST(FuzzTest, RandomBytesThroughDecoderAndParsers) {
  std::mt19937_64 rng(20240501);
  int frames = 0;
  int decoder_errors = 0;
  for (int i = 0; i < 10000; ++i) {
    const std::string input = RandomBytes(rng, 512);
    // 1. As a stream, in random chunks.
    FrameDecoder decoder(4096);
    for (std::size_t pos = 0; pos < input.size() && !decoder.error_code();) {
      const std::size_t n = std::min<std::size_t>(input.size() - pos, 1 + rng() % 64);
      (void)decoder.Feed(std::string_view(input).substr(pos, n));
      pos += n;
      for (;;) {
        Result<std::optional<std::string>> next = decoder.Next();
        if (!next) {
          ++decoder_errors;
          break;
        }
        if (!next->has_value()) break;
        ++frames;
        std::variant<Request, RequestError> parsed = ParseRequest(**next);
        ASSERT_TRUE(std::holds_alternative<RequestError>(parsed)) << i;
        ASSERT_FALSE(ParseReply(**next).has_value()) << i;
      }
    }
    // 2. As one payload, with a frame built around it.
    std::variant<Request, RequestError> parsed = ParseRequest(input);
    ASSERT_TRUE(std::holds_alternative<RequestError>(parsed)) << i;
    ASSERT_FALSE(ParseReply(input).has_value()) << i;
    if (!input.empty() && input.size() <= kMaxMessageBytes) {
      FrameDecoder whole;
      ASSERT_TRUE(whole.Feed(EncodeFrame(input)));
      Result<std::optional<std::string>> next = whole.Next();
      ASSERT_TRUE(next && next->has_value());
      ASSERT_EQ(**next, input);
    }
  }
  // The generator must reach both outcomes for the test to mean anything.
  EXPECT_GT(decoder_errors, 0);
  EXPECT_GE(frames + decoder_errors, 1);
}

// Single-byte edits of valid messages: anything may come out, but only as a value.
TEST(FuzzTest, MutatedValidRequests) {
  std::mt19937_64 rng(7);
  std::vector<std::string> seeds;
  for (const Request& r : testing_samples::OneRequestPerOp()) seeds.push_back(DumpJson(ToJson(r)));
  const char kInteresting[] = {'[', ']', '{', '}', '"', '\\', ',', ':', '0', '-', 'e', '\0', '\xff', '\x80', ' '};
  int accepted = 0;
  for (int i = 0; i < 10000; ++i) {
    std::string s = seeds[rng() % seeds.size()];
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < edits && !s.empty(); ++k) {
      const std::size_t pos = rng() % s.size();
      switch (rng() % 3) {
        case 0:
          s[pos] = kInteresting[rng() % sizeof(kInteresting)];
          break;
        case 1:
          s.erase(pos, 1 + rng() % 8);
          break;
        default:
          s.insert(pos, 1, kInteresting[rng() % sizeof(kInteresting)]);
          break;
      }
    }
    std::variant<Request, RequestError> parsed = ParseRequest(s);
    if (const auto* request = std::get_if<Request>(&parsed)) {
      ++accepted;
      // Whatever was accepted encodes again and parses to the same thing.
      Result<std::string> frame = EncodeRequestFrame(*request);
      ASSERT_TRUE(frame);
      std::variant<Request, RequestError> again = ParseRequest(frame->substr(kFrameHeaderBytes));
      ASSERT_TRUE(std::holds_alternative<Request>(again));
      ASSERT_EQ(ToJson(std::get<Request>(again)), ToJson(*request));
    } else {
      // An error reply can always be sent.
      const std::string reply = EncodeReplyFrame(MakeErrorReply(std::get<RequestError>(parsed)));
      ASSERT_TRUE(ParseReply(reply.substr(kFrameHeaderBytes)).has_value());
    }
    (void)ParseReply(s);
  }
  EXPECT_GT(accepted, 0);
}

}  // namespace
}  // namespace gpuman::protocol
