#include "policy/byte_size.h"

#include <gtest/gtest.h>

namespace gpuman::policy {
namespace {

constexpr int64_t kKiB = int64_t{1} << 10;
constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kGiB = int64_t{1} << 30;
constexpr int64_t kTiB = int64_t{1} << 40;

struct ParseCase {
  const char* text;
  int64_t bytes;
};

TEST(ParseByteSizeTest, AcceptsBinaryUnitsAndBareBytes) {
  const ParseCase kCases[] = {
      {"20GiB", 20 * kGiB},        {"512MiB", 512 * kMiB},
      {"1.5 GiB", 3 * kGiB / 2},   {"20G", 20 * kGiB},
      {"20g", 20 * kGiB},          {"20GB", 20 * kGiB},  // GB is binary, like GPU sizes
      {"20 gib", 20 * kGiB},       {"1000000", 1000000},
      {"0", 0},                    {" 4 KiB ", 4 * kKiB},
      {"1K", kKiB},                {"1kb", kKiB},
      {"2T", 2 * kTiB},            {"7B", 7},
      {".5G", kGiB / 2},           {"0.1 GiB", 107374182},  // rounds down
      {"8589934591G", 8589934591 * kGiB},
  };
  for (const auto& c : kCases) {
    Result<int64_t> r = ParseByteSize(c.text);
    ASSERT_TRUE(r.has_value()) << c.text << ": " << r.error().message;
    EXPECT_EQ(*r, c.bytes) << c.text;
  }
}

TEST(ParseByteSizeTest, RejectsJunk) {
  const char* kCases[] = {"",     "  ",    "abc",  "-1",   "+1",   "1.5",
                          "1.5B", "20 PB", "20XiB", "5.",  "1e9",  "20 GiB x",
                          "9999999999999999999", "8589934592G", "1,5G", "G"};
  for (const char* text : kCases) {
    Result<int64_t> r = ParseByteSize(text);
    ASSERT_FALSE(r.has_value()) << '"' << text << "\" parsed as " << *r;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument) << text;
    EXPECT_NE(r.error().message.find("invalid size"), std::string::npos) << text;
  }
}

TEST(FormatByteSizeTest, BinaryUnitsOneDecimalRoundedDown) {
  EXPECT_EQ(FormatByteSize(0), "0 B");
  EXPECT_EQ(FormatByteSize(1023), "1023 B");
  EXPECT_EQ(FormatByteSize(512 * kMiB), "512 MiB");
  EXPECT_EQ(FormatByteSize(3 * kGiB / 2), "1.5 GiB");
  EXPECT_EQ(FormatByteSize(80 * kGiB), "80 GiB");
  EXPECT_EQ(FormatByteSize(20 * kGiB - 1), "19.9 GiB");  // never rounds up to the bound
  EXPECT_EQ(FormatByteSize(-2 * kKiB), "-2 KiB");
}

}  // namespace
}  // namespace gpuman::policy
