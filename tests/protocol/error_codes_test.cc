#include "protocol/error_codes.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace gpuman::protocol {
namespace {

constexpr WireCode kAllWireCodes[] = {
    WireCode::kInvalidArgument,
    WireCode::kNotFound,
    WireCode::kPermissionDenied,
    WireCode::kConflict,
    WireCode::kUnavailable,
    WireCode::kBusy,
    WireCode::kIo,
    WireCode::kInternal,
    WireCode::kUnknownOp,
    WireCode::kUnsupportedVersion,
    WireCode::kBadMessage,
    WireCode::kTooLarge,
    WireCode::kHelloRequired,
};

constexpr ErrorCode kAllErrorCodes[] = {
    ErrorCode::kInvalidArgument,
    ErrorCode::kNotFound,
    ErrorCode::kPermissionDenied,
    ErrorCode::kConflict,
    ErrorCode::kUnavailable,
    ErrorCode::kBusy,
    ErrorCode::kIo,
    ErrorCode::kInternal,
};

TEST(WireCodeTest, NamesAreDistinctAndRoundTrip) {
  std::set<std::string> names;
  for (WireCode code : kAllWireCodes) {
    const std::string name = WireCodeName(code);
    EXPECT_TRUE(names.insert(name).second) << name;
    EXPECT_EQ(ParseWireCode(name), code) << name;
  }
  EXPECT_EQ(names.size(), 13u);
  EXPECT_EQ(ParseWireCode("no_such_code"), std::nullopt);
  EXPECT_EQ(ParseWireCode(""), std::nullopt);
}

TEST(WireCodeTest, ExactWireNames) {
  const std::pair<WireCode, const char*> table[] = {
      {WireCode::kInvalidArgument, "invalid_argument"},
      {WireCode::kNotFound, "not_found"},
      {WireCode::kPermissionDenied, "permission_denied"},
      {WireCode::kConflict, "conflict"},
      {WireCode::kUnavailable, "unavailable"},
      {WireCode::kBusy, "busy"},
      {WireCode::kIo, "io"},
      {WireCode::kInternal, "internal"},
      {WireCode::kUnknownOp, "unknown_op"},
      {WireCode::kUnsupportedVersion, "unsupported_version"},
      {WireCode::kBadMessage, "bad_message"},
      {WireCode::kTooLarge, "too_large"},
      {WireCode::kHelloRequired, "hello_required"},
  };
  for (const auto& [code, name] : table) EXPECT_STREQ(WireCodeName(code), name);
}

TEST(WireCodeTest, EveryErrorCodeRoundTripsWithItsOwnName) {
  for (ErrorCode code : kAllErrorCodes) {
    const WireCode wire = ToWireCode(code);
    EXPECT_STREQ(WireCodeName(wire), ErrorCodeName(code));
    EXPECT_EQ(ToErrorCode(wire), code);
  }
}

TEST(WireCodeTest, ProtocolOnlyCodesMapToErrorCodes) {
  EXPECT_EQ(ToErrorCode(WireCode::kUnknownOp), ErrorCode::kInvalidArgument);
  EXPECT_EQ(ToErrorCode(WireCode::kBadMessage), ErrorCode::kInvalidArgument);
  EXPECT_EQ(ToErrorCode(WireCode::kTooLarge), ErrorCode::kInvalidArgument);
  EXPECT_EQ(ToErrorCode(WireCode::kHelloRequired), ErrorCode::kInvalidArgument);
  EXPECT_EQ(ToErrorCode(WireCode::kUnsupportedVersion), ErrorCode::kUnavailable);
}

TEST(WireCodeTest, ErrorConversionKeepsMessage) {
  const Error e = MakeError(ErrorCode::kNotFound, "job 7: not found");
  const WireError w = ToWireError(e);
  EXPECT_EQ(w.code, WireCode::kNotFound);
  EXPECT_EQ(w.message, "job 7: not found");
  const Error back = ToError(w);
  EXPECT_EQ(back.code, ErrorCode::kNotFound);
  EXPECT_EQ(back.message, e.message);
}

}  // namespace
}  // namespace gpuman::protocol
