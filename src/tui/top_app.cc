#include "tui/top_app.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <ctime>
#include <set>

#include "devices/process_inspector.h"
#include "tui/curses_screen.h"
#include "tui/layout.h"
#include "tui/ui_state.h"

namespace gpuman::tui {
namespace {

volatile std::sig_atomic_t g_stop = 0;
void OnStop(int) { g_stop = 1; }

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Restores the previous handlers of SIGINT and SIGTERM when the loop ends.
class StopSignals {
 public:
  StopSignals() {
    g_stop = 0;
    struct sigaction sa {};
    sa.sa_handler = OnStop;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;  // no SA_RESTART: poll() returns at once
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  ~StopSignals() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};

}  // namespace

int LocalUtcOffsetSeconds(int64_t unix_ms) {
  const time_t t = static_cast<time_t>(unix_ms / 1000);
  struct tm local {};
  if (!localtime_r(&t, &local)) return 0;
  return static_cast<int>(local.tm_gmtoff);
}

int IdleWaitMs(int64_t now_ms, int64_t last_frame_ms, int64_t interval_ms) {
  constexpr int64_t kLateMs = 250;  // how long past its time a frame is waited for
  if (last_frame_ms > 0 && interval_ms > 0) {
    const int64_t frame_due = last_frame_ms + interval_ms;
    // The frame wakes the loop itself; the timeout only covers one that is late.
    if (frame_due > now_ms && frame_due <= now_ms + 1000) return static_cast<int>(frame_due + kLateMs - now_ms);
  }
  const int64_t next_second = (now_ms / 1000 + 1) * 1000;
  return static_cast<int>(std::clamp<int64_t>(next_second - now_ms, 1, 1000));
}

Status RunTopApp(Sampler& sampler, const TopAppOptions& options) {
  auto opened = CursesScreen::Open(options.use_color, options.layout);
  if (!opened) return opened.error();
  CursesScreen& screen = **opened;
  StopSignals stop_signals;
  devices::ProcfsInspector procfs("/proc");

  TopModel model;
  UiState ui;
  LayoutOptions lo;
  lo.unicode = options.unicode;
  lo.interval_s = options.interval_s;
  lo.note = options.note;
  lo.me = options.me;
  int page_rows = 10;
  uint64_t last_sequence = 0;
  int64_t last_frame_ms = 0;  // when this loop first saw the newest frame
  const auto interval_ms = static_cast<int64_t>(options.interval_s * 1000);

  while (!g_stop) {
    model.Ingest(sampler.Latest());
    lo.now_unix_ms = NowUnixMs();
    if (const Frame* f = model.frame(); f && f->sequence != last_sequence) {
      last_sequence = f->sequence;
      last_frame_ms = lo.now_unix_ms;
    }
    lo.utc_offset_s = LocalUtcOffsetSeconds(lo.now_unix_ms);
    auto rows = VisibleRows(model.rows(), ui, options.me);
    SyncSelection(ui, rows);
    LayoutResult laid = RenderTop(model, ui, rows, lo, screen.width(), screen.height());
    ui.scroll = laid.scroll;
    page_rows = std::max(1, laid.process_rows);
    screen.Draw(laid.grid);

    // Sleep until a key, a new frame, a signal (resize, stop), or the clock's next second
    // (the clock and "data is old" notes move even when nothing arrives): IdleWaitMs.
    pollfd fds[2] = {{STDIN_FILENO, POLLIN, 0}, {sampler.wake_fd(), POLLIN, 0}};
    poll(fds, 2, IdleWaitMs(NowUnixMs(), last_frame_ms, interval_ms));
    if (fds[1].revents & POLLIN) sampler.DrainWake();

    std::vector<int> gpu_indices;
    if (const auto* snap = model.snapshot()) {
      for (const auto& g : snap->gpus) gpu_indices.push_back(g.index);
    }
    bool quit = false;
    for (int key = screen.ReadKey(); key != key::kNone && !quit; key = screen.ReadKey()) {
      if (key == key::kResize) continue;  // the next layout reads the new size
      const int64_t now = NowUnixMs();
      KeyContext kc{rows, gpu_indices, options.me, page_rows, now};
      switch (HandleKey(ui, key, kc)) {
        case Command::kQuit:
          quit = true;
          break;
        case Command::kSignal: {
          Status sent = SignalProcess(ui.target, ui.signal, procfs);
          if (sent) {
            SetMessage(ui, "sent SIG" + SignalName(ui.signal) + " to pid " + std::to_string(ui.target.pid), false, now);
          } else {
            SetMessage(ui, sent.error().message, true, now);
          }
          break;
        }
        case Command::kNone:
          break;
      }
      // Keys after this one act on the rows as they now are (sort or filter may have changed).
      rows = VisibleRows(model.rows(), ui, options.me);
      SyncSelection(ui, rows);
    }
    if (quit) break;
  }
  screen.Close();
  return {};
}

}  // namespace gpuman::tui
