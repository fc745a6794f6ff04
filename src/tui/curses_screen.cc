#include "tui/curses_screen.h"

#include <dlfcn.h>

#include "base/module.h"

#include <string>
#include <vector>

namespace gpuman::tui {

// The module's entry points (src/tui/curses_module/curses_module.cc).
struct CursesScreen::Module {
  void* (*open)(int use_color) = nullptr;
  void (*close)(void*) = nullptr;
  int (*width)(void*) = nullptr;
  int (*height)(void*) = nullptr;
  void (*draw)(void*, const Grid*) = nullptr;
  int (*read_key)(void*) = nullptr;
};

namespace {

constexpr const char* kModuleName = "gpuman-tui-curses.so";
#ifndef GPUMAN_TUI_CURSES_PACKAGE
#define GPUMAN_TUI_CURSES_PACKAGE "libncursesw6"  // CMakeLists.txt names the Debian package
#endif

// Loaded once and kept (ncurses keeps process-wide state; unloading it is not worth it).
// Like the metrics module (src/metrics/server.cc): relative to the running binary only,
// in layout.module_dirs (<exe_dir>/../lib/gpuman/ when installed, beside it in the build tree).
Result<const CursesScreen::Module*> LoadModule(const InstalledLayout& layout) {
  static CursesScreen::Module module;
  static bool loaded = false;
  if (loaded) return &module;
  auto opened = OpenModule(layout.ModulePaths(kModuleName), {kModuleName, "top", GPUMAN_TUI_CURSES_PACKAGE});
  if (!opened) return opened.error();
  void* handle = *opened;
  auto sym = [&](const char* name) { return dlsym(handle, name); };
  module.open = reinterpret_cast<void* (*)(int)>(sym("gpuman_curses_open"));
  module.close = reinterpret_cast<void (*)(void*)>(sym("gpuman_curses_close"));
  module.width = reinterpret_cast<int (*)(void*)>(sym("gpuman_curses_width"));
  module.height = reinterpret_cast<int (*)(void*)>(sym("gpuman_curses_height"));
  module.draw = reinterpret_cast<void (*)(void*, const Grid*)>(sym("gpuman_curses_draw"));
  module.read_key = reinterpret_cast<int (*)(void*)>(sym("gpuman_curses_read_key"));
  if (!module.open || !module.close || !module.width || !module.height || !module.draw || !module.read_key) {
    return MakeError(ErrorCode::kUnavailable, std::string(kModuleName) + " lacks its entry points");
  }
  loaded = true;
  return &module;
}

}  // namespace

Result<std::unique_ptr<CursesScreen>> CursesScreen::Open(bool use_color, const InstalledLayout& layout) {
  auto module = LoadModule(layout);
  if (!module) return module.error();
  void* screen = (*module)->open(use_color ? 1 : 0);
  if (!screen) return MakeError(ErrorCode::kUnavailable, "cannot initialise the terminal (is $TERM set?)");
  std::unique_ptr<CursesScreen> s(new CursesScreen());
  s->module_ = *module;
  s->screen_ = screen;
  return s;
}

CursesScreen::~CursesScreen() { Close(); }

void CursesScreen::Close() {
  if (!screen_) return;
  module_->close(screen_);
  screen_ = nullptr;
}

int CursesScreen::width() const { return module_->width(screen_); }
int CursesScreen::height() const { return module_->height(screen_); }
void CursesScreen::Draw(const Grid& grid) { module_->draw(screen_, &grid); }
int CursesScreen::ReadKey() { return module_->read_key(screen_); }

}  // namespace gpuman::tui
