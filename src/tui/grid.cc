#include "tui/grid.h"

#include <algorithm>

#include "tui/text.h"

namespace gpuman::tui {

Grid::Grid(int width, int height)
    : width_(std::max(0, width)), height_(std::max(0, height)),
      cells_(static_cast<size_t>(width_) * height_) {}

// Places one glyph, first repairing any wide glyph it would cut in half.
void Grid::SetCell(int row, int col, std::string glyph, Style style, bool wide) {
  const auto blank = [&](int c) { Mut(row, c).glyph = " "; };
  // Overwriting the right half of a wide glyph: its left half becomes a space.
  if (Mut(row, col).glyph.empty() && col > 0) blank(col - 1);
  const int last = col + (wide ? 1 : 0);
  // Overwriting the left half of a wide glyph: its right half becomes a space.
  if (last + 1 < width_ && Mut(row, last + 1).glyph.empty()) blank(last + 1);
  Cell& cell = Mut(row, col);
  cell.glyph = std::move(glyph);
  cell.style = style;
  if (wide) {
    Cell& right = Mut(row, col + 1);
    right.glyph.clear();
    right.style = style;
  }
}

int Grid::Put(int row, int col, std::string_view text, Style style, int max_cols) {
  if (row < 0 || row >= height_ || col >= width_) return 0;
  int limit = width_ - std::max(col, 0);
  if (max_cols >= 0) limit = std::min(limit, max_cols);
  int written = 0;
  size_t pos = 0;
  while (pos < text.size() && written < limit) {
    const size_t start = pos;
    const char32_t cp = DecodeUtf8(text, pos);
    int w = CodePointWidth(cp);
    std::string glyph;
    if (w < 0) {
      glyph = "?";
      w = 1;
    } else if (w == 0) {
      continue;
    } else if (cp == 0xFFFD && pos - start == 1) {
      glyph = EncodeUtf8(cp);
    } else {
      glyph = std::string(text.substr(start, pos - start));
    }
    const int at = col + written;
    if (w == 2 && written + 2 > limit) {
      if (at >= 0) SetCell(row, at, " ", style, false);
      ++written;
      break;
    }
    if (at >= 0) SetCell(row, at, std::move(glyph), style, w == 2);
    written += w;
  }
  return written;
}

void Grid::Fill(int row, int col, int cols, std::string_view glyph, Style style) {
  for (int i = 0; i < cols; ++i) Put(row, col + i, glyph, style, 1);
}

void Grid::SetStyle(int row, int col, int cols, Style style) {
  if (row < 0 || row >= height_) return;
  for (int c = std::max(col, 0); c < std::min(width_, col + cols); ++c) Mut(row, c).style = style;
}

std::string Grid::RowText(int row) const {
  std::string out;
  for (int c = 0; c < width_; ++c) out += At(row, c).glyph;
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

std::string Grid::Text() const {
  std::string out;
  for (int r = 0; r < height_; ++r) out += RowText(r) + "\n";
  return out;
}

}  // namespace gpuman::tui
