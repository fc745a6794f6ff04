// Grid: a width x height screen of cells (one glyph and one style each) that the layout
// fills and the ncurses adapter draws. Keeping the screen as data lets tests check what an
// 80x24 terminal would show without a terminal. A value type; one thread at a time.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gpuman::tui {

/// What a cell means; the adapter maps it to colours and attributes.
enum class Style : uint8_t {
  kNormal,
  kDim,       // unknown values, other namespaces, empty bar parts
  kBold,
  kTitle,     // the top line
  kHeader,    // column titles (reverse video)
  kSelected,  // the selected process row (reverse video)
  kGood,      // green
  kWarn,      // yellow
  kBad,       // red
  kAccent,    // cyan: the selected GPU, key names
  kPrompt,    // a question waiting for a key (yellow, reverse)
};

/// One code point of one or two columns, as a value: no allocation per cell, and a row is
/// compared with the last one drawn by comparing its cells (docs/top.md, "What runs where").
struct Cell {
  char32_t cp = U' ';  // one code point; 0 = the right half of the wide glyph to its left
  Style style = Style::kNormal;
  bool operator==(const Cell&) const = default;
  /// The glyph as UTF-8 ("" for the right half of a wide glyph).
  std::string Glyph() const;
};

class Grid {
 public:
  Grid(int width, int height);

  int width() const { return width_; }
  int height() const { return height_; }

  /// Writes `text` from (row, col), at most `max_cols` columns (-1: to the right edge).
  /// Control characters show as '?'; zero-width code points are dropped; a wide glyph that
  /// would not fit entirely is replaced by a space. Writing outside the grid is a no-op.
  /// Returns the columns written.
  int Put(int row, int col, std::string_view text, Style style = Style::kNormal, int max_cols = -1);
  /// One code point in the one column (row, col), as Put(row, col, its UTF-8, style, 1) writes it.
  void Set(int row, int col, char32_t cp, Style style = Style::kNormal);
  /// `cols` copies of a one-column glyph.
  void Fill(int row, int col, int cols, std::string_view glyph, Style style = Style::kNormal);
  /// Restyles cells without changing their glyphs.
  void SetStyle(int row, int col, int cols, Style style);

  const Cell& At(int row, int col) const { return cells_[static_cast<size_t>(row) * width_ + col]; }
  /// One row as UTF-8 (trailing spaces removed).
  std::string RowText(int row) const;
  /// Every row, '\n'-terminated.
  std::string Text() const;

 private:
  Cell& Mut(int row, int col) { return cells_[static_cast<size_t>(row) * width_ + col]; }
  void SetCell(int row, int col, char32_t cp, Style style, bool wide);

  int width_;
  int height_;
  std::vector<Cell> cells_;
};

}  // namespace gpuman::tui
