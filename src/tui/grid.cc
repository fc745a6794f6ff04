#include "tui/grid.h"

#include <algorithm>

#include "tui/text.h"

namespace gpuman::tui {

Grid::Grid(int width, int height)
    : width_(std::max(0, width)), height_(std::max(0, height)),
      cells_(static_cast<size_t>(width_) * height_) {}

std::string Cell::Glyph() const {
  if (cp == 0) return "";
  if (cp < 0x80) return std::string(1, static_cast<char>(cp));
  return EncodeUtf8(cp);
}

// Places one glyph, first repairing any wide glyph it would cut in half.
void Grid::SetCell(int row, int col, char32_t cp, Style style, bool wide) {
  // Overwriting the right half of a wide glyph: its left half becomes a space.
  if (Mut(row, col).cp == 0 && col > 0) Mut(row, col - 1).cp = U' ';
  const int last = col + (wide ? 1 : 0);
  // Overwriting the left half of a wide glyph: its right half becomes a space.
  if (last + 1 < width_ && Mut(row, last + 1).cp == 0) Mut(row, last + 1).cp = U' ';
  Cell& cell = Mut(row, col);
  cell.cp = cp;
  cell.style = style;
  if (wide) {
    Cell& right = Mut(row, col + 1);
    right.cp = 0;
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
    const auto byte = static_cast<unsigned char>(text[pos]);
    char32_t cp;
    int w;
    if (byte >= 0x20 && byte < 0x7F) {  // printable ASCII: most of what a screen holds
      cp = byte;
      w = 1;
      ++pos;
    } else {
      cp = DecodeUtf8(text, pos);  // a malformed byte is U+FFFD
      w = CodePointWidth(cp);
      if (w < 0) {
        cp = U'?';
        w = 1;
      } else if (w == 0) {
        continue;
      }
    }
    const int at = col + written;
    if (w == 2 && written + 2 > limit) {
      if (at >= 0) SetCell(row, at, U' ', style, false);
      ++written;
      break;
    }
    if (at >= 0) SetCell(row, at, cp, style, w == 2);
    written += w;
  }
  return written;
}

void Grid::Set(int row, int col, char32_t cp, Style style) {
  if (row < 0 || row >= height_ || col < 0 || col >= width_) return;
  if (CodePointWidth(cp) == 1) {
    SetCell(row, col, cp, style, false);
  } else {
    Put(row, col, EncodeUtf8(cp), style, 1);  // control, zero-width and wide code points
  }
}

void Grid::Fill(int row, int col, int cols, std::string_view glyph, Style style) {
  if (glyph.empty()) return;
  size_t pos = 0;
  const char32_t cp = DecodeUtf8(glyph, pos);
  if (row < 0 || row >= height_ || pos != glyph.size() || CodePointWidth(cp) != 1) {
    for (int i = 0; i < cols; ++i) Put(row, col + i, glyph, style, 1);  // the general case
    return;
  }
  for (int c = std::max(col, 0); c < std::min(width_, col + cols); ++c) SetCell(row, c, cp, style, false);
}

void Grid::SetStyle(int row, int col, int cols, Style style) {
  if (row < 0 || row >= height_) return;
  for (int c = std::max(col, 0); c < std::min(width_, col + cols); ++c) Mut(row, c).style = style;
}

std::string Grid::RowText(int row) const {
  std::string out;
  for (int c = 0; c < width_; ++c) {
    const char32_t cp = At(row, c).cp;
    if (cp == 0) continue;
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else {
      out += EncodeUtf8(cp);
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

std::string Grid::Text() const {
  std::string out;
  for (int r = 0; r < height_; ++r) out += RowText(r) + "\n";
  return out;
}

}  // namespace gpuman::tui
