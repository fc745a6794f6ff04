#include "tui/curses_screen.h"

#include <ncurses.h>

#include <cstdio>

#include "tui/ui_state.h"

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

}  // namespace

Result<std::unique_ptr<CursesScreen>> CursesScreen::Open(bool use_color) {
  std::unique_ptr<CursesScreen> s(new CursesScreen());
  SCREEN* screen = newterm(nullptr, stdout, stdin);
  if (!screen) return MakeError(ErrorCode::kUnavailable, "cannot initialise the terminal (is $TERM set?)");
  s->screen_ = screen;
  s->open_ = true;
  set_term(screen);
  cbreak();
  noecho();
  nonl();
  keypad(stdscr, TRUE);
  nodelay(stdscr, TRUE);
  set_escdelay(25);
  curs_set(0);
  if (use_color && has_colors()) {
    start_color();
    use_default_colors();
    s->color_ = true;
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

CursesScreen::~CursesScreen() { Close(); }

void CursesScreen::Close() {
  if (!open_) return;
  open_ = false;
  endwin();
  delscreen(static_cast<SCREEN*>(screen_));
  screen_ = nullptr;
}

int CursesScreen::width() const { return COLS; }
int CursesScreen::height() const { return LINES; }

void CursesScreen::Draw(const Grid& grid) {
  erase();
  const int rows = std::min(grid.height(), LINES);
  const int cols = std::min(grid.width(), COLS);
  for (int r = 0; r < rows; ++r) {
    int c = 0;
    while (c < cols) {
      // One run of cells with the same style per addstr.
      const Style style = grid.At(r, c).style;
      std::string run;
      const int start = c;
      while (c < cols && grid.At(r, c).style == style) {
        run += grid.At(r, c).glyph;  // "" for the right half of a wide glyph
        ++c;
      }
      attrset(Attr(style, color_));
      // Writing the bottom-right cell "fails" (the cursor cannot move past it); the
      // character is still drawn, so the result is ignored.
      mvaddstr(r, start, run.c_str());
    }
  }
  attrset(A_NORMAL);
  refresh();
}

int CursesScreen::ReadKey() {
  const int ch = getch();
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

}  // namespace gpuman::tui
