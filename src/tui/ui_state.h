// What the user has chosen in `gpuman top` (sort, filters, selection, open dialogs) and
// the key handling that changes it. Pure: keys arrive as plain ints (the ncurses adapter
// maps its codes to the Key values below), and the one side effect, sending a signal, is
// returned as a Command for the caller to carry out. UI thread only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tui/kill.h"
#include "tui/top_model.h"

namespace gpuman::tui {

/// Keys beyond plain characters (which arrive as their ASCII value).
namespace key {
inline constexpr int kNone = -1;
inline constexpr int kUp = 0x10001;
inline constexpr int kDown = 0x10002;
inline constexpr int kPageUp = 0x10003;
inline constexpr int kPageDown = 0x10004;
inline constexpr int kHome = 0x10005;
inline constexpr int kEnd = 0x10006;
inline constexpr int kF6 = 0x10007;
inline constexpr int kResize = 0x10008;
inline constexpr int kBackTab = 0x10009;
inline constexpr int kF1 = 0x1000A;
inline constexpr int kF9 = 0x1000B;
inline constexpr int kTab = '\t';
inline constexpr int kEnter = '\n';
inline constexpr int kEscape = 27;
}  // namespace key

enum class Mode {
  kNormal,
  kHelp,          // the help overlay; any key closes it
  kChooseSignal,  // "which signal?" for the selected process
  kConfirmKill,   // root acting on another user's process: y/n
};

struct UiState {
  SortKey sort = SortKey::kGpuMemory;
  bool reverse = false;
  bool only_mine = false;
  std::optional<int> gpu_filter;  // a GPU index
  int selected = 0;               // index into the visible rows
  std::optional<std::pair<int, uint32_t>> selected_key;  // (gpu, pid) of the selected row
  int scroll = 0;                 // first visible process row
  Mode mode = Mode::kNormal;
  ProcessRow target;              // the process a kill dialog is about
  int signal = 15;                // SIGTERM
  std::string confirm_text;       // "pid 12 belongs to alice"
  std::string message;            // status line; cleared after message_until_ms
  bool message_is_error = false;
  int64_t message_until_ms = 0;
};

/// The rows the table shows for `ui` (filtered and sorted).
std::vector<ProcessRow> VisibleRows(const std::vector<ProcessRow>& all, const UiState& ui, const Identity& me);

/// After the rows changed: keeps the selection on the same (gpu, pid) when it is still
/// listed, else clamps the index; records the selected key.
void SyncSelection(UiState& ui, const std::vector<ProcessRow>& rows);

enum class Command {
  kNone,
  kQuit,
  kSignal,  // send ui.signal to ui.target (permission already decided)
};

struct KeyContext {
  const std::vector<ProcessRow>& rows;  // as VisibleRows
  const std::vector<int>& gpu_indices;  // GPUs present, for the GPU filter
  Identity me;
  int page_rows = 10;                   // process rows on screen, for PgUp/PgDn
  int64_t now_unix_ms = 0;
};

/// Applies one key. Keys: q quit; Up/Down, j/k move; K or F9 kill; ... see docs/top.md.
/// Returns what the caller must do next.
Command HandleKey(UiState& ui, int key, const KeyContext& kc);

/// Sets the status-line message for a few seconds.
void SetMessage(UiState& ui, std::string text, bool is_error, int64_t now_unix_ms);

}  // namespace gpuman::tui
