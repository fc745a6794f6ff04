#include "tui/grid.h"

#include <gtest/gtest.h>

#include "tui/text.h"

namespace gpuman::tui {
namespace {

TEST(TextTest, DecodesAndMeasures) {
  std::string s = "a\xC3\xA9\xE2\x96\x88\xE4\xB8\xAD";  // a é █ 中
  size_t pos = 0;
  EXPECT_EQ(DecodeUtf8(s, pos), U'a');
  EXPECT_EQ(DecodeUtf8(s, pos), U'\u00E9');
  EXPECT_EQ(DecodeUtf8(s, pos), U'\u2588');
  EXPECT_EQ(DecodeUtf8(s, pos), U'\u4E2D');
  EXPECT_EQ(pos, s.size());
  EXPECT_EQ(TextWidth(s), 5);  // 中 is two columns
  std::string broken = "\xE2\x96";  // truncated
  pos = 0;
  EXPECT_EQ(DecodeUtf8(broken, pos), U'\uFFFD');
  EXPECT_EQ(pos, 1u);
  EXPECT_EQ(EncodeUtf8(U'\u2588'), "\xE2\x96\x88");
  EXPECT_EQ(CodePointWidth(U'\t'), -1);
  EXPECT_EQ(CodePointWidth(U'\u0301'), 0);
}

TEST(GridTest, PutClipsAtTheEdgeWithoutSplittingCodePoints) {
  Grid g(6, 2);
  EXPECT_EQ(g.Put(0, 0, "abcdefgh"), 6);
  EXPECT_EQ(g.RowText(0), "abcdef");
  EXPECT_EQ(g.Put(1, 3, "\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9"), 3);
  EXPECT_EQ(g.RowText(1), "   \xC3\xA9\xC3\xA9\xC3\xA9");
  EXPECT_EQ(g.Put(5, 0, "x"), 0);  // outside
}

TEST(GridTest, WideGlyphThatDoesNotFitBecomesASpace) {
  Grid g(4, 1);
  g.Put(0, 0, "ab\xE4\xB8\xAD\xE4\xB8\xAD");  // ab中中
  EXPECT_EQ(g.RowText(0), "ab\xE4\xB8\xAD");
  EXPECT_EQ(g.At(0, 3).Glyph(), "");  // right half
  EXPECT_EQ(g.At(0, 3).cp, 0u);
  g.Put(0, 3, "x");                 // overwriting the right half blanks the left half
  EXPECT_EQ(g.RowText(0), "ab x");
  Grid h(3, 1);
  h.Put(0, 0, "a\xE4\xB8\xAD\xE4\xB8\xAD");
  EXPECT_EQ(h.RowText(0), "a\xE4\xB8\xAD");
  Grid k(2, 1);
  k.Put(0, 1, "\xE4\xB8\xAD");
  EXPECT_EQ(k.RowText(0), "");  // only one column left: a space
}

TEST(GridTest, ControlCharactersAreShownAsQuestionMarks) {
  Grid g(10, 1);
  g.Put(0, 0, "a\tb\x1b[31m");
  EXPECT_EQ(g.RowText(0), "a?b?[31m");
}

TEST(GridTest, StylesAndFill) {
  Grid g(5, 1);
  g.Fill(0, 0, 5, "-", Style::kDim);
  g.Put(0, 1, "ab", Style::kBad, 1);
  EXPECT_EQ(g.RowText(0), "-a---");
  EXPECT_EQ(g.At(0, 1).style, Style::kBad);
  EXPECT_EQ(g.At(0, 2).style, Style::kDim);
  g.SetStyle(0, 3, 10, Style::kSelected);
  EXPECT_EQ(g.At(0, 4).style, Style::kSelected);
  EXPECT_EQ(g.Text(), "-a---\n");
}

}  // namespace
TEST(GridTest, CellsAreCodePointsAndSetWritesOneColumnAsPutDoes) {
  Grid g(6, 1);
  g.Set(0, 0, U'\u2588', Style::kGood);  // a full block, one column
  g.Set(0, 1, U'a');
  g.Set(0, 2, U'\t');       // a control character shows as '?', as Put shows it
  g.Set(0, 3, U'\u4E2D');   // wide, in one column: a space, as Put(..., 1) writes it
  g.Set(0, 9, U'x');        // outside: nothing
  EXPECT_EQ(g.RowText(0), "\xE2\x96\x88" "a?");
  EXPECT_EQ(g.At(0, 0).cp, U'\u2588');
  EXPECT_EQ(g.At(0, 0).style, Style::kGood);
  EXPECT_EQ(g.At(0, 0).Glyph(), "\xE2\x96\x88");
  EXPECT_EQ(g.At(0, 3).cp, U' ');
  // A malformed byte is U+FFFD, one column.
  Grid h(3, 1);
  EXPECT_EQ(h.Put(0, 0, "\xFFz"), 2);
  EXPECT_EQ(h.At(0, 0).cp, 0xFFFDu);
  EXPECT_EQ(h.RowText(0), "\xEF\xBF\xBDz");
  // Fill with an empty glyph writes nothing; with a wide one, a space per column.
  Grid k(4, 1);
  k.Put(0, 0, "abcd");
  k.Fill(0, 0, 4, "");
  EXPECT_EQ(k.RowText(0), "abcd");
  k.Fill(0, 1, 2, "\xE4\xB8\xAD");
  EXPECT_EQ(k.RowText(0), "a  d");
}

}  // namespace gpuman::tui
