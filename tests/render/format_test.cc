#include "render/format.h"

#include <limits>

#include <gtest/gtest.h>

namespace gpuman::render {
namespace {

TEST(FormatBytesTest, Table) {
  struct Case {
    int64_t bytes;
    const char* want;
  } cases[] = {
      {0, "0 B"},
      {1, "1 B"},
      {1023, "1023 B"},
      {1024, "1 KiB"},
      {1536, "1.5 KiB"},
      {512LL << 20, "512 MiB"},
      {(1LL << 30) + (1LL << 29), "1.5 GiB"},
      {80LL << 30, "80 GiB"},
      {static_cast<int64_t>(12.34 * (1LL << 30)), "12.3 GiB"},
      {(1LL << 30) - 1, "1 GiB"},  // rounding carries into the next unit
      {141LL << 30, "141 GiB"},
      {2LL << 40, "2 TiB"},
      {-(512LL << 20), "-512 MiB"},
      {std::numeric_limits<int64_t>::min(), "-8 EiB"},
      {std::numeric_limits<int64_t>::max(), "8 EiB"},
  };
  for (const Case& c : cases) EXPECT_EQ(FormatBytes(c.bytes), c.want) << c.bytes;
}

TEST(FormatTimeTest, IsoUtc) {
  EXPECT_EQ(FormatIsoUtcMillis(0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(FormatIsoUtcMillis(1714564800250), "2024-05-01T12:00:00.250Z");
  EXPECT_EQ(FormatIsoUtcMillis(-1), "1969-12-31T23:59:59.999Z");
  EXPECT_EQ(FormatIsoUtcSeconds(1709251199), "2024-02-29T23:59:59Z");
  EXPECT_EQ(FormatIsoUtcSeconds(951782400), "2000-02-29T00:00:00Z");
}

TEST(DisplayWidthTest, CountsTerminalColumns) {
  EXPECT_EQ(DisplayWidth(""), 0);
  EXPECT_EQ(DisplayWidth("abc"), 3);
  EXPECT_EQ(DisplayWidth("ab\xE2\x80\xA6"), 3);
  EXPECT_EQ(DisplayWidth("\xC3\xA9t\xC3\xA9"), 3);                 // été: one column each
  EXPECT_EQ(DisplayWidth("\xE7\x8E\x8B\xE8\x8A\xB3"), 4);         // 王芳: two columns each
  EXPECT_EQ(DisplayWidth("\xEA\xB9\x80"), 2);                     // 김 (Hangul)
  EXPECT_EQ(DisplayWidth("\xF0\x9F\x9A\x80x"), 3);                // 🚀 and x
  EXPECT_EQ(DisplayWidth("e\xCC\x81"), 1);                         // e and a combining acute
}

TEST(DisplayWidthTest, PaddingAlignsWideCharacters) {
  // A column of user names stays aligned whatever script they are written in.
  const std::string cjk = PadRight("\xE7\x8E\x8B\xE8\x8A\xB3", 8) + "|";
  const std::string ascii = PadRight("bob", 8) + "|";
  EXPECT_EQ(DisplayWidth(cjk), DisplayWidth(ascii));
  EXPECT_EQ(cjk, "\xE7\x8E\x8B\xE8\x8A\xB3    |");
  EXPECT_EQ(PadLeft("\xF0\x9F\x9A\x80", 4), "  \xF0\x9F\x9A\x80");
}

TEST(TruncateToWidthTest, Table) {
  EXPECT_EQ(TruncateToWidth("hello", 5), "hello");
  EXPECT_EQ(TruncateToWidth("hello", 4), "hel\xE2\x80\xA6");
  EXPECT_EQ(TruncateToWidth("hello", 1), "\xE2\x80\xA6");
  EXPECT_EQ(TruncateToWidth("hello", 0), "");
  EXPECT_EQ(TruncateToWidth("hello", -3), "");
  // Never splits a multi-byte sequence.
  EXPECT_EQ(TruncateToWidth("a\xE2\x80\xA6" "bcd", 3), "a\xE2\x80\xA6\xE2\x80\xA6");
  EXPECT_EQ(DisplayWidth(TruncateToWidth("a\xE2\x80\xA6" "bcd", 3)), 3);
  // Counts columns, not code points, and never halves a wide character.
  const std::string cjk = "\xE7\x8E\x8B\xE8\x8A\xB3\xE7\x8E\x8B";  // 王芳王: 6 columns
  EXPECT_EQ(TruncateToWidth(cjk, 6), cjk);
  EXPECT_EQ(TruncateToWidth(cjk, 5), "\xE7\x8E\x8B\xE8\x8A\xB3\xE2\x80\xA6");  // 王芳…
  EXPECT_EQ(TruncateToWidth(cjk, 4), "\xE7\x8E\x8B\xE2\x80\xA6");              // 王… (3 columns)
  EXPECT_LE(DisplayWidth(TruncateToWidth(cjk, 4)), 4);
}

TEST(LineLimitTest, OnlyATerminalCutsLines) {
  EXPECT_EQ(LineLimit(TerminalInfo{120, false}), 120);
  EXPECT_EQ(LineLimit(TerminalInfo{40, false}), 80);
  EXPECT_EQ(LineLimit(TerminalInfo{120, false, /*cut_to_width=*/false}), std::numeric_limits<int>::max());
}

TEST(PadTest, LeftAndRight) {
  EXPECT_EQ(PadRight("ab", 4), "ab  ");
  EXPECT_EQ(PadLeft("ab", 4), "  ab");
  EXPECT_EQ(PadLeft("abcdef", 4), "abcdef");
}

TEST(ColorTest, OnlyWhenEnabled) {
  EXPECT_EQ(Colorize("x", Color::kRed, false), "x");
  EXPECT_EQ(Colorize("x", Color::kNone, true), "x");
  EXPECT_EQ(Colorize("x", Color::kRed, true), "\x1b[31mx\x1b[0m");
  EXPECT_EQ(PercentColor(49.9), Color::kGreen);
  EXPECT_EQ(PercentColor(50), Color::kYellow);
  EXPECT_EQ(PercentColor(89), Color::kYellow);
  EXPECT_EQ(PercentColor(90), Color::kRed);
}

}  // namespace
}  // namespace gpuman::render
