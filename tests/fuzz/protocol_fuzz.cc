// Fuzz target: the wire protocol (protocol/framing.h, envelope.h, messages.h), both ends.
// The first byte picks a mode; the rest is the input:
//   0: a byte stream through FrameDecoder, fed in chunks whose sizes come from the input,
//      every frame through ParseRequest and ParseReply;
//   1: a request payload: ParseRequest; an accepted request must encode and parse back
//      with the same op and id (what the daemon accepts, a client can send);
//   2: a reply payload: ParseReply, then the typed result a client reads for each op
//      (FromJson<...Result>); an accepted reply must encode and parse back.
// Properties: never crash, never throw, memory bounded by the frame limit.
#include "fuzz_util.h"
#include "protocol/envelope.h"
#include "protocol/framing.h"
#include "protocol/json_io.h"

namespace {

using namespace gpuman::protocol;

void ParseBoth(std::string_view payload) {
  auto request = ParseRequest(payload);
  if (auto* r = std::get_if<Request>(&request)) {
    auto frame = EncodeRequestFrame(*r);
    if (frame) {
      FrameDecoder decoder;
      FUZZ_CHECK(decoder.Feed(*frame).has_value());
      auto next = decoder.Next();
      FUZZ_CHECK(next.has_value() && next->has_value());
      auto again = ParseRequest(**next);
      auto* r2 = std::get_if<Request>(&again);
      if (!r2) std::fprintf(stderr, "re-encoded request refused: %s\n", std::get<RequestError>(again).error.message.c_str());
      FUZZ_CHECK(r2 != nullptr);
      FUZZ_CHECK(r2->id == r->id && r2->op() == r->op());
    }
  } else {
    // What the daemon sends back for it always fits a frame.
    FUZZ_CHECK(!EncodeReplyFrame(MakeErrorReply(std::get<RequestError>(request))).empty());
  }
}

template <typename T>
void Typed(const Reply& reply) {
  auto typed = ResultOf<T>(reply);
  if (typed) (void)DumpJson(ToJson(*typed));
}

void ParseReplyAndResults(std::string_view payload) {
  auto reply = ParseReply(payload);
  if (!reply) return;
  Typed<HelloResult>(*reply);
  Typed<SubmitResult>(*reply);
  Typed<QueueResult>(*reply);
  Typed<ShowResult>(*reply);
  Typed<IdsResult>(*reply);
  Typed<WaitResult>(*reply);
  Typed<LogsResult>(*reply);
  Typed<DrainResult>(*reply);
  Typed<LeasesResult>(*reply);
  Typed<AcquireResult>(*reply);
  Typed<EmptyResult>(*reply);
  Typed<StatusResult>(*reply);
  Typed<HealthResult>(*reply);
  Typed<DrainsResult>(*reply);
  std::string frame = EncodeReplyFrame(*reply);
  FUZZ_CHECK(frame.size() >= kFrameHeaderBytes);
  auto again = ParseReply(std::string_view(frame).substr(kFrameHeaderBytes));
  FUZZ_CHECK(again.has_value());
  // (A reply that outgrew the frame limit would come back as too_large; inputs are small.)
  if (payload.size() < kMaxMessageBytes / 8) FUZZ_CHECK(again->ok() == reply->ok());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view input = gpuman::fuzz::AsText(data + 1, size - 1);
  switch (data[0] % 3) {
    case 0: {
      // A small frame limit so that the length checks are reached with small inputs.
      FrameDecoder decoder(data[0] & 0x80 ? 64 : kMaxMessageBytes);
      size_t pos = 0, chunk = 1 + (data[0] >> 2) % 7;
      while (pos < input.size()) {
        size_t n = std::min(chunk, input.size() - pos);
        (void)decoder.Feed(input.substr(pos, n));
        pos += n;
        chunk = chunk * 3 % 11 + 1;
        while (true) {
          auto next = decoder.Next();
          if (!next) {
            FUZZ_CHECK(decoder.error_code().has_value());
            break;
          }
          if (!next->has_value()) break;
          FUZZ_CHECK(!(*next)->empty());
          ParseBoth(**next);
          ParseReplyAndResults(**next);
        }
        if (decoder.error_code()) {
          FUZZ_CHECK(!decoder.Next().has_value());  // sticky
          break;
        }
      }
      FUZZ_CHECK(decoder.buffered_bytes() <= input.size());
      break;
    }
    case 1:
      ParseBoth(input);
      break;
    case 2:
      ParseReplyAndResults(input);
      break;
  }
  return 0;
}
