#include "base/strings.h"

#include <gtest/gtest.h>

#include "base/result.h"

namespace gpuman {
namespace {

TEST(SplitTest, KeepsEmptyFields) {
  EXPECT_EQ(Split("a,,b", ','), (std::vector<std::string>{"a", "", "b"}));
  EXPECT_EQ(Split("", ','), (std::vector<std::string>{""}));
  EXPECT_EQ(Split("x", ','), (std::vector<std::string>{"x"}));
}

TEST(JoinTest, KeepsEmptyItems) {
  EXPECT_EQ(Join({}, ","), "");
  EXPECT_EQ(Join({"a"}, ","), "a");
  EXPECT_EQ(Join({"", "a"}, " "), " a");
  EXPECT_EQ(Join({"a", "", "b"}, ","), "a,,b");
  EXPECT_EQ(Join(Split("x,,y", ','), ","), "x,,y");
}

TEST(ParseIntTest, RejectsJunk) {
  struct Case {
    const char* text;
    std::optional<int64_t> want;
  } cases[] = {
      {"0", 0}, {"42", 42}, {"-3", -3}, {"", std::nullopt}, {"4x", std::nullopt},
      {" 4", std::nullopt}, {"99999999999999999999", std::nullopt}, {"0x10", std::nullopt},
  };
  for (const auto& c : cases) EXPECT_EQ(ParseInt(c.text), c.want) << c.text;
}

TEST(ParseFiniteDoubleTest, AcceptsOnlyWholeFiniteNumbers) {
  EXPECT_EQ(ParseFiniteDouble("0.5"), 0.5);
  EXPECT_EQ(ParseFiniteDouble("-3"), -3.0);
  EXPECT_EQ(ParseFiniteDouble("1e3"), 1000.0);
  for (const char* bad : {"", "nan", "NaN", "inf", "-inf", "infinity", "1e999", " 1", "1 ", "+1", "1s", "0x10", "abc"}) {
    EXPECT_EQ(ParseFiniteDouble(bad), std::nullopt) << bad;
  }
}

TEST(EscapeControlTest, MakesControlCharactersVisible) {
  EXPECT_EQ(EscapeControl("GPU-1,0"), "GPU-1,0");
  EXPECT_EQ(EscapeControl("0\x1b[2J\n1"), "0\\x1b[2J\\n1");
  EXPECT_EQ(EscapeControl(std::string("a\0b\tc\rd\x7f", 8)), "a\\x00b\\tc\\rd\\x7f");
  EXPECT_EQ(EscapeControl("\xc2\x9b" "31m"), "\\u009b31m");  // C1 CSI, UTF-8 encoded
  EXPECT_EQ(EscapeControl("caf\xc3\xa9 \\x1b"), "caf\xc3\xa9 \\x1b");  // UTF-8 and backslashes kept
}

TEST(TrimTest, StripsBothEnds) {
  EXPECT_EQ(Trim("  a b \n"), "a b");
  EXPECT_EQ(Trim("   "), "");
}

TEST(ShellWordTest, QuotesOnlyWhatTheShellWouldRead) {
  struct Case {
    std::string_view text, want;
  } cases[] = {
      {"GPU-b7e6d5c4-3b2a,GPU-0a1b", "GPU-b7e6d5c4-3b2a,GPU-0a1b"},
      {"PCI_BUS_ID", "PCI_BUS_ID"},
      {"/opt/gpuman/share/a100-4.json", "/opt/gpuman/share/a100-4.json"},
      {"", "''"},
      {"/my scenarios/x.json", "'/my scenarios/x.json'"},
      {"$(rm -rf ~)", "'$(rm -rf ~)'"},
      {"it's", "'it'\\''s'"},
      {"a;b", "'a;b'"},
      {"*", "'*'"},
  };
  for (const Case& c : cases) EXPECT_EQ(ShellWord(c.text), c.want) << c.text;
}

TEST(SplitCommandLineTest, SplitsAsAShellSplitsWordsAndNothingMore) {
  using Words = std::vector<std::string>;
  struct Case {
    std::string_view text;
    Words want;
  } cases[] = {
      {"notify-send done", {"notify-send", "done"}},
      {"  a \t b\nc  ", {"a", "b", "c"}},
      {"", {}},
      {"   ", {}},
      {"prog 'two words' \"and more\"", {"prog", "two words", "and more"}},
      {"a'b'\"c\"d", {"abcd"}},
      {"x '' \"\"", {"x", "", ""}},
      {"'it\\'s", {"it\\s"}},  // no escapes inside '...'
      {"\"say \\\"hi\\\" \\\\ \\$HOME \\x\"", {"say \"hi\" \\ $HOME \\x"}},
      {"a\\ b \\'c", {"a b", "'c"}},
      {"$HOME ~ *.log ; rm", {"$HOME", "~", "*.log", ";", "rm"}},
      {"%j %x", {"%j", "%x"}},
  };
  for (const Case& c : cases) {
    auto got = SplitCommandLine(c.text);
    ASSERT_TRUE(got.has_value()) << c.text << ": " << got.error().message;
    EXPECT_EQ(*got, c.want) << c.text;
  }
}

TEST(SplitCommandLineTest, AnUnterminatedQuoteIsAnErrorNotAGuess) {
  struct Case {
    std::string_view text, message;
  } cases[] = {
      {"prog 'open", "unterminated ' quote"},
      {"prog \"open", "unterminated \" quote"},
      {"prog \"ends with \\\"", "unterminated \" quote"},
      {"prog \\", "a \\ at the end escapes nothing"},
  };
  for (const Case& c : cases) {
    auto got = SplitCommandLine(c.text);
    ASSERT_FALSE(got.has_value()) << c.text;
    EXPECT_EQ(got.error().code, ErrorCode::kInvalidArgument);
    EXPECT_EQ(got.error().message, c.message) << c.text;
  }
}

TEST(ExpandPercentPatternsTest, ReplacesKnownLettersAndKeepsTheRest) {
  auto value = [](char c) -> std::optional<std::string> {
    if (c == 'j') return "12";
    if (c == 'e') return "";
    return std::nullopt;
  };
  EXPECT_EQ(ExpandPercentPatterns("job-%j.log", value), "job-12.log");
  EXPECT_EQ(ExpandPercentPatterns("[%e]", value), "[]");
  EXPECT_EQ(ExpandPercentPatterns("100%% %q %", value), "100% %q %");
  EXPECT_EQ(ExpandPercentPatterns("%%j", value), "%j");
}

TEST(FormatIndexListTest, RunsBecomeRanges) {
  EXPECT_EQ(FormatIndexList({5, 0, 1, 2, 8, 7}), "0-2,5,7,8") << "a run of two stays a list";
  EXPECT_EQ(FormatIndexList({3}), "3");
  EXPECT_EQ(FormatIndexList({}), "");
  EXPECT_EQ(FormatIndexList({4, 4, 5, 6}), "4-6") << "duplicates count once";
}

TEST(EditDistanceTest, CountsEdits) {
  EXPECT_EQ(EditDistance("stauts", "status"), 2u);
  EXPECT_EQ(EditDistance("", "abc"), 3u);
  EXPECT_EQ(EditDistance("gpu", "gpus"), 1u);
}

TEST(FormatIsoUtcTest, FormatsEpochSeconds) {
  EXPECT_EQ(FormatIsoUtc(0), "1970-01-01T00:00:00Z");
  EXPECT_EQ(FormatIsoUtc(1764400000), "2025-11-29T07:06:40Z");
}

TEST(ResultTest, CarriesValueOrError) {
  Result<int> ok = 5;
  ASSERT_TRUE(ok.has_value());
  EXPECT_EQ(*ok, 5);
  Result<int> bad = MakeError(ErrorCode::kNotFound, "lease 7: not found");
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(bad.error().WithContext("release").message, "release: lease 7: not found");
  EXPECT_STREQ(ErrorCodeName(ErrorCode::kUnavailable), "unavailable");
  Status fine;
  EXPECT_TRUE(fine.has_value());
}

}  // namespace
}  // namespace gpuman
