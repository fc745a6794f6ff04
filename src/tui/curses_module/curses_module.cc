// The ncurses half of tui::CursesScreen, built as the module gpuman-tui-curses.so: only
// `gpuman top` dlopen()s it, so no other command loads libncursesw and libtinfo
// (docs/design.md, "Start-up"). Plain C entry points; the Grid is passed by pointer (same
// compiler, same build: its accessors are inline).
#ifndef NCURSES_WIDECHAR
#define NCURSES_WIDECHAR 1  // cchar_t and the *_wchnstr functions of ncursesw
#endif
#include <ncurses.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "tui/grid.h"
#include "tui/ui_state.h"

#define GPUMAN_CURSES_EXPORT extern "C" __attribute__((visibility("default")))

namespace gpuman::tui {
namespace {
// Colour pair numbers, one per coloured style.
enum Pair : short { kPairGood = 1, kPairWarn, kPairBad, kPairAccent, kPairTitle, kPairPrompt, kPairSelected };

attr_t Attr(Style style, bool color) {
  switch (style) {
    case Style::kNormal: return A_NORMAL;
    case Style::kDim: return A_DIM;
    case Style::kBold: return A_BOLD;
    case Style::kTitle: return color ? COLOR_PAIR(kPairTitle) | A_BOLD : A_BOLD | A_REVERSE;
    case Style::kHeader: return A_REVERSE;
    case Style::kSelected: return color ? COLOR_PAIR(kPairSelected) | A_BOLD : A_REVERSE | A_BOLD;
    case Style::kGood: return color ? COLOR_PAIR(kPairGood) : A_NORMAL;
    case Style::kWarn: return color ? COLOR_PAIR(kPairWarn) : A_BOLD;
    case Style::kBad: return color ? COLOR_PAIR(kPairBad) | A_BOLD : A_BOLD;
    case Style::kAccent: return color ? COLOR_PAIR(kPairAccent) : A_BOLD;
    case Style::kPrompt: return color ? COLOR_PAIR(kPairPrompt) | A_BOLD : A_REVERSE | A_BOLD;
  }
  return A_NORMAL;
}

struct Screen {
  SCREEN* screen = nullptr;
  bool color = false;
  // What each row held at the last draw, and the size then: a row that is the same again
  // is not written to curses at all (gpuman_curses_draw).
  std::vector<std::vector<Cell>> rows;
  std::vector<cchar_t> run;  // reused: the cells of one style run
  int lines = -1;
  int cols = -1;
};

int TranslateKey(int ch) {
  switch (ch) {
    case ERR: return key::kNone;
    case KEY_UP: return key::kUp;
    case KEY_DOWN: return key::kDown;
    case KEY_PPAGE: return key::kPageUp;
    case KEY_NPAGE: return key::kPageDown;
    case KEY_HOME: return key::kHome;
    case KEY_END: return key::kEnd;
    case KEY_F(1): return key::kF1;
    case KEY_F(6): return key::kF6;
    case KEY_F(9): return key::kF9;
    case KEY_RESIZE: return key::kResize;
    case KEY_BTAB: return key::kBackTab;
    case KEY_ENTER:
    case '\r':
    case '\n': return key::kEnter;
    default: return ch;
  }
}

// Writes cells [from, to) of row r as runs of one style, each copied into the window as
// cells (mvadd_wchnstr).
void WriteCells(Screen& s, int r, const Cell* cells, int from, int to) {
  int c = from;
  while (c < to) {
    const Style style = cells[c].style;
    const attr_t attr = Attr(style, s.color);
    const int start = c;
    s.run.clear();
    for (; c < to && cells[c].style == style; ++c) {
      const char32_t cp = cells[c].cp;
      if (cp == 0) continue;  // the right half of a wide glyph: curses keeps it with its left
      const wchar_t text[2] = {static_cast<wchar_t>(cp), L'\0'};
      cchar_t cell;
      setcchar(&cell, text, attr & ~A_COLOR, static_cast<short>(PAIR_NUMBER(attr)), nullptr);
      s.run.push_back(cell);
    }
    if (!s.run.empty()) mvadd_wchnstr(r, start, s.run.data(), static_cast<int>(s.run.size()));
  }
}

}  // namespace
}  // namespace gpuman::tui

using gpuman::tui::Screen;

// Takes over the terminal on stdin/stdout; nullptr when it cannot be initialised.
GPUMAN_CURSES_EXPORT void* gpuman_curses_open(int use_color) {
  using namespace gpuman::tui;
  SCREEN* screen = newterm(nullptr, stdout, stdin);
  if (!screen) return nullptr;
  auto* s = new Screen;
  s->screen = screen;
  set_term(screen);
  cbreak();
  noecho();
  nonl();
  keypad(stdscr, TRUE);
  nodelay(stdscr, TRUE);
  set_escdelay(25);
  // No check for typed-ahead keys while the screen is written: ncurses would flush its
  // output before each check, a write(2) per changed stretch (about twenty a second on
  // 8 GPUs); without it an update is one write. Keys are read right after every draw.
  typeahead(-1);
  curs_set(0);
  if (use_color && has_colors()) {
    start_color();
    use_default_colors();
    s->color = true;
    init_pair(kPairGood, COLOR_GREEN, -1);
    init_pair(kPairWarn, COLOR_YELLOW, -1);
    init_pair(kPairBad, COLOR_RED, -1);
    init_pair(kPairAccent, COLOR_CYAN, -1);
    init_pair(kPairTitle, COLOR_BLACK, COLOR_CYAN);
    init_pair(kPairPrompt, COLOR_BLACK, COLOR_YELLOW);
    init_pair(kPairSelected, COLOR_BLACK, COLOR_WHITE);
  }
  return s;
}

GPUMAN_CURSES_EXPORT void gpuman_curses_close(void* handle) {
  auto* s = static_cast<Screen*>(handle);
  endwin();
  delscreen(s->screen);
  delete s;
}

GPUMAN_CURSES_EXPORT int gpuman_curses_width(void*) { return COLS; }
GPUMAN_CURSES_EXPORT int gpuman_curses_height(void*) { return LINES; }

// Replaces the screen with the grid (ncurses sends only what changed).
GPUMAN_CURSES_EXPORT void gpuman_curses_draw(void* handle, const gpuman::tui::Grid* grid_ptr) {
  using namespace gpuman::tui;
  auto* s = static_cast<Screen*>(handle);
  const Grid& grid = *grid_ptr;
  const int rows = std::min(grid.height(), LINES);
  const int cols = std::min(grid.width(), COLS);
  // Only the cells that changed since the last draw are written (on 8 GPUs at 1 s: the
  // clock and the new end of each history); the rest is left as curses has it. Cells are
  // copied into the window as they are (mvadd_wchnstr): no UTF-8 to decode and no glyph to
  // measure again, which waddstr did for every character (most of top's CPU, docs/top.md).
  // A new terminal size starts from an empty screen.
  if (s->lines != LINES || s->cols != COLS || static_cast<int>(s->rows.size()) != rows) {
    erase();
    s->rows.assign(static_cast<size_t>(rows), std::vector<Cell>());
    s->lines = LINES;
    s->cols = COLS;
  }
  for (int r = 0; r < rows; ++r) {
    const Cell* cells = &grid.At(r, 0);
    std::vector<Cell>& last = s->rows[static_cast<size_t>(r)];
    if (static_cast<int>(last.size()) != cols) {  // not drawn before at this size: all of it
      move(r, 0);
      clrtoeol();
      WriteCells(*s, r, cells, 0, cols);
      last.assign(cells, cells + cols);
      continue;
    }
    // The stretches that changed; two less than kGap cells apart are written as one, as a
    // cursor movement costs curses more than a few cells.
    constexpr int kGap = 16;
    const auto same = [&](int c) { return cells[c] == last[static_cast<size_t>(c)]; };
    int c = 0;
    while (c < cols) {
      while (c < cols && same(c)) ++c;
      if (c == cols) break;
      int from = c;
      int to = c + 1;  // [from, to) changed so far
      for (int probe = to; probe < cols && probe < to + kGap; ++probe) {
        if (!same(probe)) to = probe + 1;
      }
      if (cells[from].cp == 0 && from > 0) --from;   // start at a wide glyph's left half
      if (to < cols && cells[to].cp == 0) ++to;       // end after its right half
      WriteCells(*s, r, cells, from, to);
      c = to;
    }
    last.assign(cells, cells + cols);
  }
  attrset(A_NORMAL);
  refresh();
}

// The next key as a tui::key value, or key::kNone when none is waiting (never blocks).
GPUMAN_CURSES_EXPORT int gpuman_curses_read_key(void*) { return gpuman::tui::TranslateKey(getch()); }
