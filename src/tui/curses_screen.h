// CursesScreen: the only code that talks to ncurses. It draws a Grid (styles mapped to
// colour pairs and attributes) and reads keys, translated to tui::key values. One per
// process, created and used on the UI thread; the destructor restores the terminal.
#pragma once

#include <memory>

#include "base/result.h"
#include "tui/grid.h"

namespace gpuman::tui {

class CursesScreen {
 public:
  /// Takes over the terminal on stdin/stdout. Errors: kUnavailable when the terminal
  /// cannot be initialised ($TERM unknown, no tty).
  static Result<std::unique_ptr<CursesScreen>> Open(bool use_color);
  ~CursesScreen();
  CursesScreen(const CursesScreen&) = delete;
  CursesScreen& operator=(const CursesScreen&) = delete;

  int width() const;
  int height() const;
  /// Replaces the screen with `grid` (ncurses sends only what changed).
  void Draw(const Grid& grid);
  /// The next key, or key::kNone when none is waiting (never blocks).
  int ReadKey();
  /// Leaves curses mode now (the destructor then does nothing).
  void Close();

 private:
  CursesScreen() = default;
  void* screen_ = nullptr;  // SCREEN*
  bool color_ = false;
  bool open_ = false;
};

}  // namespace gpuman::tui
