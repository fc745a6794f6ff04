#include "tui/ui_state.h"

#include <signal.h>

#include <algorithm>

namespace gpuman::tui {

std::vector<ProcessRow> VisibleRows(const std::vector<ProcessRow>& all, const UiState& ui, const Identity& me) {
  RowFilter filter;
  if (ui.only_mine) filter.only_uid = me.uid;
  filter.gpu_index = ui.gpu_filter;
  auto rows = FilterRows(all, filter);
  SortRows(rows, ui.sort, ui.reverse);
  return rows;
}

void SyncSelection(UiState& ui, const std::vector<ProcessRow>& rows) {
  if (ui.selected_key) {
    for (size_t i = 0; i < rows.size(); ++i) {
      if (rows[i].gpu_index == ui.selected_key->first && rows[i].pid == ui.selected_key->second) {
        ui.selected = static_cast<int>(i);
        return;
      }
    }
  }
  ui.selected = rows.empty() ? 0 : std::clamp(ui.selected, 0, static_cast<int>(rows.size()) - 1);
  if (rows.empty()) {
    ui.selected_key.reset();
  } else {
    ui.selected_key = {rows[ui.selected].gpu_index, rows[ui.selected].pid};
  }
}

void SetMessage(UiState& ui, std::string text, bool is_error, int64_t now_unix_ms) {
  ui.message = std::move(text);
  ui.message_is_error = is_error;
  ui.message_until_ms = now_unix_ms + 5000;
}

namespace {

void Move(UiState& ui, const KeyContext& kc, int delta) {
  if (kc.rows.empty()) return;
  const int last = static_cast<int>(kc.rows.size()) - 1;
  ui.selected = std::clamp(ui.selected + delta, 0, last);
  ui.selected_key = {kc.rows[ui.selected].gpu_index, kc.rows[ui.selected].pid};
}

// The GPU filter after `step` through [all, first GPU, ..., last GPU].
std::optional<int> CycleGpu(const std::optional<int>& current, const std::vector<int>& gpus, int step) {
  if (gpus.empty()) return std::nullopt;
  const int n = static_cast<int>(gpus.size()) + 1;  // position 0 = all
  int pos = 0;
  if (current) {
    auto it = std::find(gpus.begin(), gpus.end(), *current);
    pos = it == gpus.end() ? 0 : static_cast<int>(it - gpus.begin()) + 1;
  }
  pos = ((pos + step) % n + n) % n;
  if (pos == 0) return std::nullopt;
  return gpus[pos - 1];
}

Command StartKill(UiState& ui, const KeyContext& kc) {
  if (kc.rows.empty()) {
    SetMessage(ui, "no process selected", true, kc.now_unix_ms);
    return Command::kNone;
  }
  const ProcessRow& row = kc.rows[std::clamp(ui.selected, 0, static_cast<int>(kc.rows.size()) - 1)];
  KillDecision d = DecideKill(kc.me, row);
  if (d.verdict == KillVerdict::kDenied) {
    SetMessage(ui, d.reason, true, kc.now_unix_ms);
    return Command::kNone;
  }
  ui.target = row;
  ui.signal = SIGTERM;
  ui.confirm_text = d.verdict == KillVerdict::kConfirm ? d.reason : "";
  ui.mode = Mode::kChooseSignal;
  return Command::kNone;
}

Command ChooseSignal(UiState& ui, int key) {
  int sig = 0;
  if (key == 't' || key == 'T' || key == key::kEnter || key == '\r' || key == '1' || key == '5') sig = SIGTERM;
  if (key == 'K' || key == '9') sig = SIGKILL;
  if (key == 'i' || key == 'I' || key == '2') sig = SIGINT;
  if (sig == 0) {
    ui.mode = Mode::kNormal;  // Esc, n, q or anything else: cancel
    return Command::kNone;
  }
  ui.signal = sig;
  if (!ui.confirm_text.empty()) {
    ui.mode = Mode::kConfirmKill;
    return Command::kNone;
  }
  ui.mode = Mode::kNormal;
  return Command::kSignal;
}

}  // namespace

Command HandleKey(UiState& ui, int key, const KeyContext& kc) {
  switch (ui.mode) {
    case Mode::kHelp:
      ui.mode = Mode::kNormal;
      return key == 'q' ? Command::kQuit : Command::kNone;
    case Mode::kChooseSignal:
      return ChooseSignal(ui, key);
    case Mode::kConfirmKill:
      ui.mode = Mode::kNormal;
      if (key == 'y' || key == 'Y') return Command::kSignal;
      SetMessage(ui, "not signalled", false, kc.now_unix_ms);
      return Command::kNone;
    case Mode::kNormal:
      break;
  }
  switch (key) {
    case 'q':
    case 'Q':
      return Command::kQuit;
    case key::kDown:
    case 'j':
    case 14:  // Ctrl-N
      Move(ui, kc, 1);
      break;
    case key::kUp:
    case 'k':  // as in vim and htop: `k` never kills (issue 26)
    case 16:   // Ctrl-P
      Move(ui, kc, -1);
      break;
    case key::kPageDown:
    case ' ':
      Move(ui, kc, std::max(1, kc.page_rows));
      break;
    case key::kPageUp:
      Move(ui, kc, -std::max(1, kc.page_rows));
      break;
    case key::kHome:
      Move(ui, kc, -static_cast<int>(kc.rows.size()));
      break;
    case key::kEnd:
      Move(ui, kc, static_cast<int>(kc.rows.size()));
      break;
    case 's':
    case key::kF6:
      ui.sort = NextSortKey(ui.sort);
      break;
    case 'r':
      ui.reverse = !ui.reverse;
      break;
    case 'u':
      ui.only_mine = !ui.only_mine;
      break;
    case 'g':
    case key::kTab:
      ui.gpu_filter = CycleGpu(ui.gpu_filter, kc.gpu_indices, 1);
      break;
    case key::kBackTab:
    case 'G':
      ui.gpu_filter = CycleGpu(ui.gpu_filter, kc.gpu_indices, -1);
      break;
    case 'a':
    case key::kEscape:
      ui.gpu_filter.reset();
      break;
    case 'K':  // kill, as htop's F9 and k; lower-case `k` moves up
    case key::kF9:
      return StartKill(ui, kc);
    case 'h':
    case '?':
    case key::kF1:
      ui.mode = Mode::kHelp;
      break;
    default:
      if (key >= '0' && key <= '9') {
        const int index = key - '0';
        if (std::find(kc.gpu_indices.begin(), kc.gpu_indices.end(), index) == kc.gpu_indices.end()) {
          SetMessage(ui, "no GPU " + std::to_string(index), true, kc.now_unix_ms);
        } else if (ui.gpu_filter == index) {
          ui.gpu_filter.reset();
        } else {
          ui.gpu_filter = index;
        }
      }
      break;
  }
  return Command::kNone;
}

}  // namespace gpuman::tui
