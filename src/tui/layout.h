// The `gpuman top` screen as a Grid: title line, per-GPU bars and history, the process
// table, the leases/jobs panel and the status/key line, laid out for any width x height
// (80x24 and up shows everything; smaller terminals get less). Pure: everything it needs,
// including "now", comes in as arguments. UI thread (or any thread with its own copies).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tui/grid.h"
#include "tui/kill.h"
#include "tui/top_model.h"
#include "tui/ui_state.h"

namespace gpuman::tui {

struct LayoutOptions {
  int64_t now_unix_ms = 0;
  int utc_offset_s = 0;      // local time = UTC + this, for clock times
  bool unicode = false;      // block glyphs for bars and sparklines (else ASCII)
  bool interactive = true;   // false (--once): no key line, no selection highlight
  double interval_s = 1.0;
  std::string note;          // shown at the right of the title, e.g. "simulated: a100-4"
  Identity me;
};

struct LayoutResult {
  Grid grid;
  int scroll = 0;        // first process row shown (store back into UiState::scroll)
  int process_rows = 0;  // process rows that fit (the page size for PgUp/PgDn)
};

/// Lays out one screen. `rows` are the visible process rows (VisibleRows), ui.selected
/// indexes them. The result never exceeds width x height; every row is cut at a code point
/// boundary.
LayoutResult RenderTop(const TopModel& model, const UiState& ui, const std::vector<ProcessRow>& rows,
                       const LayoutOptions& opts, int width, int height);

/// The text of the help overlay, one entry per line.
std::vector<std::string> HelpLines();

/// Bytes as a short size: "512M", "71.1G", "80G", "1.5T"; "-" for nullopt.
std::string ShortBytes(std::optional<int64_t> bytes);

/// Filled part of a bar `width` cells wide for `fraction` in [0, 1]: whole blocks plus one
/// eighth-block glyph (unicode), or '|' cells (ASCII); padded with `empty` to `width`.
std::string BarText(double fraction, int width, bool unicode);
/// The same glyphs as code points, one per column.
std::u32string BarCells(double fraction, int width, bool unicode);

}  // namespace gpuman::tui
