// CursesScreen: the only code that talks to ncurses. It draws a Grid (styles mapped to
// colour pairs and attributes) and reads keys, translated to tui::key values. One per
// process, created and used on the UI thread; the destructor restores the terminal.
// ncurses itself is in the module gpuman-tui-curses.so (src/tui/curses_module/), which Open
// dlopen()s: commands other than `top` never load libncursesw.
#pragma once

#include <memory>

#include "base/installed_layout.h"
#include "base/result.h"
#include "tui/grid.h"

namespace gpuman::tui {

class CursesScreen {
 public:
  /// Loads the curses module and takes over the terminal on stdin/stdout. Errors:
  /// kUnavailable when the module cannot be loaded or the terminal cannot be initialised
  /// ($TERM unknown, no tty). The module is looked for in layout.module_dirs.
  static Result<std::unique_ptr<CursesScreen>> Open(bool use_color, const InstalledLayout& layout);
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

  struct Module;  // the module's entry points (defined in curses_screen.cc)

 private:
  CursesScreen() = default;
  const Module* module_ = nullptr;
  void* screen_ = nullptr;  // the module's handle
};

}  // namespace gpuman::tui
