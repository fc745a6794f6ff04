// The interactive loop of `gpuman top`: waits on the keyboard and the Sampler's wake pipe
// (never on the driver), feeds new frames into the TopModel, lays out and draws, and
// carries out key commands (quit, signal a process). Runs on the thread that called it
// (the UI thread); the Sampler must already be started.
#pragma once

#include <cstdint>
#include <string>

#include "base/installed_layout.h"
#include "tui/kill.h"
#include "tui/sampler.h"

namespace gpuman::tui {

struct TopAppOptions {
  Identity me;
  bool use_color = true;
  bool unicode = false;
  double interval_s = 1.0;
  std::string note;  // right side of the title, e.g. "simulated: a100-4"
  InstalledLayout layout;  // where the terminal module (gpuman-tui-curses.so) is
};

/// Runs until q, SIGINT or SIGTERM. Returns 0, or the error when the terminal cannot be
/// set up (kUnavailable). Signals to processes are checked against /proc on this thread
/// (a few file reads, never NVML).
Status RunTopApp(Sampler& sampler, const TopAppOptions& options);

/// The local time zone's offset from UTC at `unix_ms`, in seconds.
int LocalUtcOffsetSeconds(int64_t unix_ms);

/// How long the loop sleeps (ms) when no key, frame or signal comes. The header clock
/// shows seconds, so the screen is drawn at least once a second: when the next frame is
/// due (`last_frame_ms` + `interval_ms`, as the loop saw them) within a second, its arrival
/// draws the screen and moves the clock, and the sleep only runs until a quarter second
/// after it is due (a late frame); otherwise until the clock's next second. So at a 1 s
/// interval the screen is laid out once a second (it was up to three times: each frame and
/// every half second), at 5 s once a second and once a frame. `last_frame_ms` 0: no frame
/// yet.
int IdleWaitMs(int64_t now_ms, int64_t last_frame_ms, int64_t interval_ms);

}  // namespace gpuman::tui
