#include "tui/layout.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "base/duration.h"
#include "tui/text.h"

namespace gpuman::tui {
namespace {

constexpr int kMinWidth = 40;
constexpr int kMinHeight = 10;

std::string Fixed(double v, int decimals) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string PadLeft(std::string s, int width) {
  int w = TextWidth(s);
  return w >= width ? s : std::string(static_cast<size_t>(width - w), ' ') + s;
}

std::string PadRight(std::string s, int width) {
  int w = TextWidth(s);
  return w >= width ? s : s + std::string(static_cast<size_t>(width - w), ' ');
}

// Cuts to `width` columns, ending with '~' (ASCII) or '…' when something was dropped.
std::string Cut(const std::string& s, int width, bool unicode) {
  if (width <= 0) return "";
  if (TextWidth(s) <= width) return s;
  std::string out;
  int used = 0;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t start = pos;
    char32_t cp = DecodeUtf8(s, pos);
    int w = CodePointWidth(cp);
    if (w < 0) w = 1;
    if (used + w > width - 1) break;
    out.append(s, start, pos - start);
    used += w;
  }
  return out + (unicode ? "…" : "~");
}

Style PercentStyle(double percent) {
  return percent >= 90 ? Style::kBad : percent >= 50 ? Style::kWarn : Style::kGood;
}

Style TempStyle(int c) { return c >= 85 ? Style::kBad : c >= 75 ? Style::kWarn : Style::kGood; }

std::string Clock(int64_t unix_ms, int utc_offset_s, bool with_seconds) {
  int64_t s = unix_ms / 1000 + utc_offset_s;
  int64_t day = ((s % 86400) + 86400) % 86400;
  char buf[16];
  if (with_seconds) {
    std::snprintf(buf, sizeof buf, "%02d:%02d:%02d", static_cast<int>(day / 3600), static_cast<int>(day / 60 % 60),
                  static_cast<int>(day % 60));
  } else {
    std::snprintf(buf, sizeof buf, "%02d:%02d", static_cast<int>(day / 3600), static_cast<int>(day / 60 % 60));
  }
  return buf;
}

// "14:02 3h 20m" (clock time, then how long ago).
std::string Since(int64_t since_ms, const LayoutOptions& o) {
  if (since_ms <= 0) return "-";
  return Clock(since_ms, o.utc_offset_s, false) + " " + FormatDurationMs(std::max<int64_t>(0, o.now_unix_ms - since_ms));
}

std::string GpuName(const model::DeviceSnapshot& g) {
  std::string name = g.name.value_or("GPU");
  if (name.rfind("NVIDIA ", 0) == 0) name = name.substr(7);
  return name;
}

class Painter {
 public:
  Painter(Grid& grid, int row, bool unicode) : grid_(grid), row_(row), unicode_(unicode) {}
  void Text(const std::string& s, Style style = Style::kNormal, int width = -1) {
    if (width < 0) {
      x_ += grid_.Put(row_, x_, s, style);
    } else {
      grid_.Put(row_, x_, Cut(s, width, unicode_), style, width);
      x_ += width;
    }
  }
  /// One-column glyphs (a sparkline), one per column, `width` columns.
  void Cells(const std::u32string& cells, Style style, int width) {
    for (int col = 0; col < width && col < static_cast<int>(cells.size()); ++col) {
      grid_.Set(row_, x_ + col, cells[static_cast<size_t>(col)], style);
    }
    x_ += width;
  }
  void Skip(int n) { x_ += n; }
  void Bar(std::optional<double> fraction, int width, Style style) {
    if (width <= 0) return;
    if (!fraction) {
      Text(PadRight(unicode_ ? "" : "[", width - (unicode_ ? 0 : 1)) + (unicode_ ? "" : "]"), Style::kDim, width);
      return;
    }
    // Filled glyphs in the metric's colour, the rest dim.
    const std::u32string bar = BarCells(*fraction, width, unicode_);
    for (size_t col = 0; col < bar.size(); ++col) {
      const char32_t cp = bar[col];
      const bool filled = cp == U'|' || (cp >= 0x2588 && cp <= 0x258F);
      grid_.Set(row_, x_ + static_cast<int>(col), cp, filled ? style : Style::kDim);
    }
    x_ += width;
  }
  int x() const { return x_; }
  void set_x(int x) { x_ = x; }

 private:
  Grid& grid_;
  int row_;
  bool unicode_;
  int x_ = 0;
};

struct Plan {
  int gpu_rows_each = 2;  // 2 = full (plus a MIG line where a GPU has one), 1 = compact
  int gpus_shown = 0;     // when < gpu count, the last GPU row says "+N more"
  int gpu_area = 0;
  int process_area = 0;   // header included
  int holder_area = 0;    // header included
};

// `mig_rows`: GPUs with a MIG line (MigSummary), which the full view shows as a third row.
Plan MakePlan(int height, int gpus, int mig_rows, int holders, bool interactive) {
  Plan p;
  const int avail = height - 1 - (interactive ? 1 : 0);  // title, key line
  p.holder_area = 1 + std::min(holders, height >= 30 ? 6 : 3);
  if (holders == 0) p.holder_area = 1;
  const int min_process = std::min(4, std::max(2, avail / 4));
  int gpu_budget = std::max(1, avail - p.holder_area - min_process);
  if (2 * gpus + mig_rows <= std::min(gpu_budget, std::max(2, avail / 2))) {
    p.gpu_rows_each = 2;
    p.gpus_shown = gpus;
    p.gpu_area = 2 * gpus + mig_rows;
  } else {
    p.gpu_rows_each = 1;
    p.gpus_shown = std::min(gpus, gpu_budget);
    p.gpu_area = p.gpus_shown;
  }
  if (gpus == 0) p.gpu_area = 1;  // "no GPUs"
  p.process_area = std::max(1, avail - p.gpu_area - p.holder_area);
  return p;
}

void DrawTitle(Grid& grid, const TopModel& model, const LayoutOptions& o) {
  grid.Fill(0, 0, grid.width(), " ", Style::kTitle);
  Painter p(grid, 0, o.unicode);
  p.Text("gpuman top", Style::kTitle);
  const model::MachineSnapshot* snap = model.snapshot();
  std::string info;
  if (snap) {
    info += "  " + std::to_string(snap->gpus.size()) + (snap->gpus.size() == 1 ? " GPU" : " GPUs");
    if (snap->system.driver_version) info += "  driver " + *snap->system.driver_version;
  }
  info += "  " + Clock(o.now_unix_ms, o.utc_offset_s, true);
  if (grid.width() >= 100) info += "  every " + Fixed(o.interval_s, o.interval_s < 1 ? 1 : 0) + "s";
  p.Text(info, Style::kTitle);
  // Right side: trouble first, then the note.
  std::string right;
  Style right_style = Style::kTitle;
  const Frame* f = model.frame();
  if (f) {
    const int64_t age_ms = o.now_unix_ms - f->taken_at_unix_ms;
    const int64_t stale_after = std::max<int64_t>(3000, static_cast<int64_t>(o.interval_s * 3000));
    if (!f->snapshot) {
      right = "NVML: " + f->snapshot_error;
      right_style = Style::kBad;
    } else if (age_ms > stale_after) {
      right = "data " + FormatDurationMs(age_ms) + " old (driver slow?)";
      right_style = Style::kWarn;
    }
  }
  if (right.empty()) {
    std::string inside = o.note;
    if (f && !f->source.empty()) inside += (inside.empty() ? "via " : ", via ") + f->source;
    if (!inside.empty()) right = "[" + inside + "]";
    if (!o.note.empty()) right_style = Style::kWarn;
  }
  const int room = grid.width() - p.x() - 2;
  if (!right.empty() && room > 8) {
    std::string cut = Cut(right, room, o.unicode);
    grid.Put(0, grid.width() - TextWidth(cut), cut, right_style);
  }
}

// "DRAINED: health: Xid 79 (by root)": what a drained GPU's line says in place of history.
std::string DrainText(const model::GpuDrain& d) {
  std::string by = d.by_user.empty() ? "uid " + std::to_string(d.by_uid) : d.by_user;
  return "DRAINED: " + (d.reason.empty() ? std::string("no reason given") : d.reason) + " (by " + by + ")";
}

// The full view: the drained mark ("DRAINED", kWarn) follows the name on the bar line, and
// the drain's reason takes the history's place on the second line.
void DrawGpuFull(Grid& grid, int row, const model::DeviceSnapshot& g, const GpuHistory* h, bool selected,
                 const model::GpuDrain* drain, const LayoutOptions& o) {
  const int w = grid.width();
  Painter a(grid, row, o.unicode);
  a.Text(selected ? ">" : " ", Style::kAccent);
  a.Text(PadLeft(std::to_string(g.index), 2), selected ? Style::kAccent : Style::kBold);
  a.Skip(1);
  const int mark_w = drain ? 8 : 0;  // "DRAINED "
  const int name_w = std::max(4, std::clamp(w / 5, 10, 28) - mark_w);
  a.Text(GpuName(g), selected ? Style::kAccent : Style::kBold, name_w);
  a.Skip(1);
  if (drain) a.Text("DRAINED ", Style::kWarn, mark_w);
  if (!g.is_healthy) {
    std::string why = g.health_problems.empty() ? "unhealthy" : g.health_problems.front();
    a.Text("UNHEALTHY: " + why, Style::kBad, w - a.x());
    if (drain) {
      Painter b(grid, row + 1, o.unicode);
      b.Skip(4);
      b.Text(DrainText(*drain), Style::kWarn, w - 4);
    }
    return;
  }
  // fixed = marker+index+space (4) + name (+ mark) + 1 + "UTIL " + " 97%" + "  MEM " + " " + mem text (11)
  const int fixed = 4 + name_w + mark_w + 1 + 5 + 4 + 6 + 1 + 11;
  const int bar = std::clamp((w - fixed) / 2, 4, 40);
  a.Text("UTIL ", Style::kDim);
  std::optional<double> util;
  if (g.gpu_utilization_percent) util = *g.gpu_utilization_percent / 100.0;
  a.Bar(util, bar, PercentStyle(g.gpu_utilization_percent.value_or(0)));
  a.Text(g.gpu_utilization_percent ? PadLeft(std::to_string(*g.gpu_utilization_percent) + "%", 4) : "   -",
         Style::kNormal, 4);
  a.Text("  MEM ", Style::kDim);
  std::optional<double> mem;
  if (g.memory_used_bytes && g.memory_total_bytes && *g.memory_total_bytes > 0) {
    mem = static_cast<double>(*g.memory_used_bytes) / static_cast<double>(*g.memory_total_bytes);
  }
  a.Bar(mem, bar, PercentStyle(mem.value_or(0) * 100));
  a.Skip(1);
  a.Text(ShortBytes(g.memory_used_bytes) + "/" + ShortBytes(g.memory_total_bytes), Style::kNormal, w - a.x());

  Painter b(grid, row + 1, o.unicode);
  b.Skip(4);
  b.Text("TEMP ", Style::kDim);
  const int small = std::clamp(bar / 2, 4, 20);
  std::optional<double> temp;
  if (g.temperature_c) temp = std::clamp(*g.temperature_c / 100.0, 0.0, 1.0);
  b.Bar(temp, small, TempStyle(g.temperature_c.value_or(0)));
  b.Text(g.temperature_c ? PadLeft(std::to_string(*g.temperature_c) + "C", 4) : "   -", Style::kNormal, 4);
  b.Text("  PWR ", Style::kDim);
  std::optional<double> power;
  if (g.power_usage_w && g.power_limit_w && *g.power_limit_w > 0) power = *g.power_usage_w / *g.power_limit_w;
  b.Bar(power, small, PercentStyle(power.value_or(0) * 100));
  std::string pw = g.power_usage_w ? Fixed(*g.power_usage_w, 0) : "-";
  if (g.power_limit_w) pw += "/" + Fixed(*g.power_limit_w, 0);
  b.Text(" " + PadRight(pw + "W", 9), Style::kNormal, 10);
  const int rest = w - b.x() - 2;
  if (drain && rest >= 10) {
    b.Skip(2);
    b.Text(DrainText(*drain), Style::kWarn, rest);
    return;
  }
  if (!h || rest < 10) return;
  b.Skip(2);
  if (w >= 120) {
    const int each = (rest - 10) / 2;
    b.Text("util ", Style::kDim);
    b.Cells(SparklineCells(h->utilization, each, 100, o.unicode), Style::kGood, each);
    b.Text(" mem ", Style::kDim);
    b.Cells(SparklineCells(h->memory_percent, rest - 10 - each, 100, o.unicode), Style::kAccent, rest - 10 - each);
  } else {
    b.Text("util ", Style::kDim);
    b.Cells(SparklineCells(h->utilization, rest - 5, 100, o.unicode), Style::kGood, rest - 5);
  }
}

// The compact view: one line, the drained mark (else a MIG GPU's MIG line) where the
// history would be.
void DrawGpuCompact(Grid& grid, int row, const model::DeviceSnapshot& g, const GpuHistory* h, bool selected,
                    const model::GpuDrain* drain, const std::string& mig, const LayoutOptions& o) {
  const int w = grid.width();
  Painter a(grid, row, o.unicode);
  a.Text(selected ? ">" : " ", Style::kAccent);
  a.Text(PadLeft(std::to_string(g.index), 2), selected ? Style::kAccent : Style::kBold);
  a.Skip(1);
  if (!g.is_healthy) {
    std::string text = GpuName(g) + " UNHEALTHY: " + (g.health_problems.empty() ? "" : g.health_problems.front());
    if (drain) text = GpuName(g) + " " + DrainText(*drain) + "; UNHEALTHY: " + (g.health_problems.empty() ? "" : g.health_problems.front());
    a.Text(text, Style::kBad, w - a.x());
    return;
  }
  const int bar = std::clamp(w / 7, 6, 30);
  std::optional<double> util;
  if (g.gpu_utilization_percent) util = *g.gpu_utilization_percent / 100.0;
  a.Bar(util, bar, PercentStyle(g.gpu_utilization_percent.value_or(0)));
  a.Text(g.gpu_utilization_percent ? PadLeft(std::to_string(*g.gpu_utilization_percent) + "%", 5) : "    -",
         Style::kNormal, 5);
  a.Skip(1);
  std::optional<double> mem;
  if (g.memory_used_bytes && g.memory_total_bytes && *g.memory_total_bytes > 0) {
    mem = static_cast<double>(*g.memory_used_bytes) / static_cast<double>(*g.memory_total_bytes);
  }
  a.Bar(mem, bar, PercentStyle(mem.value_or(0) * 100));
  a.Skip(1);
  a.Text(PadRight(ShortBytes(g.memory_used_bytes) + "/" + ShortBytes(g.memory_total_bytes), 11), Style::kNormal, 11);
  a.Text(g.temperature_c ? PadLeft(std::to_string(*g.temperature_c) + "C", 5) : "    -",
         TempStyle(g.temperature_c.value_or(0)), 5);
  a.Text(g.power_usage_w ? PadLeft(Fixed(*g.power_usage_w, 0) + "W", 6) : "     -", Style::kNormal, 6);
  const int rest = w - a.x() - 1;
  if (drain && rest >= 1) {
    a.Skip(1);
    a.Text(DrainText(*drain), Style::kWarn, rest);
  } else if (!mig.empty() && rest >= 4) {  // a GPU in MIG mode: its MIG devices instead of history
    a.Skip(1);
    a.Text(mig, Style::kAccent, rest);
  } else if (h && rest >= 4) {
    a.Skip(1);
    a.Cells(SparklineCells(h->utilization, rest, 100, o.unicode), Style::kGood, rest);
  }
}

struct Column {
  const char* title;
  int width;
  bool right;
};

void DrawProcesses(Grid& grid, int top, int area, const std::vector<ProcessRow>& rows, const UiState& ui,
                   const LayoutOptions& o, LayoutResult& result) {
  const int w = grid.width();
  const bool wide = w >= 120;
  std::vector<Column> cols = {{"PID", 7, true},     {"USER", wide ? 12 : 9, false}, {"GPU", 3, true},
                              {"GPU-MEM", 8, true}, {"SM%", 4, true},               {"HELD BY", 8, false}};
  if (wide) {
    cols.push_back({"TYPE", 4, false});
    cols.push_back({"AGE", 8, true});
  }
  const bool wider = w >= 140;  // host CPU % and RSS, as nvitop shows them
  if (wider) {
    cols.push_back({"CPU%", 5, true});
    cols.push_back({"RSS", 6, true});
  }
  int used = 0;
  for (const auto& c : cols) used += c.width + 1;
  cols.push_back({"COMMAND", std::max(0, w - used), false});

  grid.Fill(top, 0, w, " ", Style::kHeader);
  {
    Painter p(grid, top, o.unicode);
    for (const auto& c : cols) {
      std::string title = c.title;
      if (title == "GPU-MEM" && ui.sort == SortKey::kGpuMemory) title += ui.reverse ? "^" : "v";
      if (title == "SM%" && ui.sort == SortKey::kSmUtil) title = ui.reverse ? "^SM%" : "vSM%";
      if (title == "PID" && ui.sort == SortKey::kPid) title = std::string(ui.reverse ? "v" : "^") + "PID";
      if (title == "USER" && ui.sort == SortKey::kUser) title += ui.reverse ? "v" : "^";
      if (title == "GPU" && ui.sort == SortKey::kGpu) title = std::string(ui.reverse ? "v" : "^") + "GPU";
      p.Text(c.right ? PadLeft(title, c.width) : title, Style::kHeader, c.width);
      p.Skip(1);
    }
  }
  const int capacity = std::max(0, area - 1);
  result.process_rows = capacity;
  int scroll = std::clamp(ui.scroll, 0, std::max(0, static_cast<int>(rows.size()) - capacity));
  if (o.interactive && !rows.empty()) {
    if (ui.selected < scroll) scroll = ui.selected;
    if (ui.selected >= scroll + capacity) scroll = ui.selected - capacity + 1;
  }
  result.scroll = scroll;
  if (rows.empty()) {
    std::string empty = "no GPU processes";
    if (ui.only_mine) empty = "none of your processes use a GPU (u: show everyone's)";
    else if (ui.gpu_filter) empty = "no processes on GPU " + std::to_string(*ui.gpu_filter) + " (a: all GPUs)";
    if (capacity > 0) grid.Put(top + 1, 1, empty, Style::kDim);
    return;
  }
  for (int i = 0; i < capacity && scroll + i < static_cast<int>(rows.size()); ++i) {
    const int idx = scroll + i;
    const ProcessRow& r = rows[idx];
    const int row = top + 1 + i;
    const bool selected = o.interactive && idx == ui.selected;
    Style base = !r.is_visible ? Style::kDim : Style::kNormal;
    if (selected) {
      grid.Fill(row, 0, w, " ", Style::kSelected);
      base = Style::kSelected;
    }
    std::vector<std::string> cells = {
        std::to_string(r.pid),
        r.user.empty() ? "?" : r.user,
        std::to_string(r.gpu_index),
        ShortBytes(r.memory_bytes),
        r.sm_percent ? std::to_string(*r.sm_percent) + "%" : "-",
        r.held_by.empty() ? "-" : r.held_by,
    };
    if (wide) {
      cells.push_back(r.type == model::ProcessType::kCompute    ? "C"
                      : r.type == model::ProcessType::kGraphics ? "G"
                                                                : "C+G");
      cells.push_back(r.start_time_unix ? FormatDurationMs(std::max<int64_t>(0, o.now_unix_ms - *r.start_time_unix * 1000))
                                        : "-");
    }
    if (wider) {
      cells.push_back(r.cpu_percent ? Fixed(*r.cpu_percent, *r.cpu_percent < 100 ? 1 : 0) : "-");
      cells.push_back(ShortBytes(r.rss_bytes));
    }
    cells.push_back(r.is_visible ? (r.command.empty() ? "?" : r.command) : "(not in this PID namespace)");
    Painter p(grid, row, o.unicode);
    for (size_t c = 0; c < cols.size(); ++c) {
      Style s = base;
      if (!selected && c == 4 && r.sm_percent) s = PercentStyle(*r.sm_percent);
      if (!selected && c == 1 && r.uid && *r.uid == o.me.uid) s = Style::kAccent;
      p.Text(cols[c].right ? PadLeft(cells[c], cols[c].width) : cells[c], s, cols[c].width);
      p.Skip(1);
    }
  }
  const int hidden = static_cast<int>(rows.size()) - scroll - capacity;
  if (hidden > 0 && capacity > 0) {
    std::string more = " +" + std::to_string(hidden) + " more ";
    grid.Put(top + capacity, w - TextWidth(more), more, Style::kDim);
  }
}

void DrawHolders(Grid& grid, int top, int area, const TopModel& model, const LayoutOptions& o) {
  const int w = grid.width();
  const Frame* f = model.frame();
  std::vector<HolderRow> rows;
  if (f) rows = BuildHolderRows(f->leases, f->jobs, model.snapshot());
  // GPUS grows for what a short list does not fit ("0:2g.20gb", "3:20G MPS 25%"), up to 16.
  int gpus_w = 7;
  for (const auto& r : rows) gpus_w = std::max(gpus_w, std::min(16, TextWidth(r.gpus)));
  std::vector<Column> cols = {{"LEASE/JOB", 9, false}, {"STATE", 8, false}, {"USER", 9, false},
                              {"GPUS", gpus_w, false}, {"SINCE", 13, false}, {"IDLE", 7, false}};
  int used = 0;
  for (const auto& c : cols) used += c.width + 1;
  cols.push_back({"COMMAND / NAME", std::max(0, w - used), false});
  grid.Fill(top, 0, w, " ", Style::kHeader);
  if (rows.empty()) {
    std::string text = " LEASES & JOBS: none";
    if (f && !f->holders_error.empty()) text = " LEASES & JOBS: " + f->holders_error;
    else if (f && !f->has_daemon) text += " (no daemon: your own leases only)";
    grid.Put(top, 0, text, f && !f->holders_error.empty() ? Style::kBad : Style::kHeader);
    return;
  }
  Painter h(grid, top, o.unicode);
  for (const auto& c : cols) {
    h.Text(c.title, Style::kHeader, c.width);
    h.Skip(1);
  }
  // Rows from an earlier answer (the daemon is reconnecting): said in the header.
  if (f && !f->holders_error.empty() && w > used + 16) {
    grid.Put(top, used, "COMMAND / NAME  " + f->holders_error, Style::kBad, w - used);
  }
  const int capacity = area - 1;
  const int shown = static_cast<int>(rows.size()) > capacity ? capacity - 1 : static_cast<int>(rows.size());
  for (int i = 0; i < shown; ++i) {
    const HolderRow& r = rows[i];
    const std::string idle = IdleText(r.idle_since_unix_ms, o.now_unix_ms);
    std::vector<std::string> cells = {r.what, r.state, r.user, r.gpus, Since(r.since_unix_ms, o), idle, r.detail};
    Painter p(grid, top + 1 + i, o.unicode);
    for (size_t c = 0; c < cols.size(); ++c) {
      Style s = Style::kNormal;
      if (c == 5 && r.idle_since_unix_ms) s = Style::kWarn;
      if (c == 1 && r.state == "running") s = Style::kGood;
      if (c == 1 && r.state == "over") s = Style::kBad;  // over its memory slice
      p.Text(cells[c], s, cols[c].width);
      p.Skip(1);
    }
  }
  if (shown < static_cast<int>(rows.size()) && capacity > 0) {
    grid.Put(top + capacity, 1, "+" + std::to_string(rows.size() - shown) + " more (gpuman leases, gpuman queue)",
             Style::kDim);
  }
}

void DrawFooter(Grid& grid, const UiState& ui, const LayoutOptions& o) {
  const int row = grid.height() - 1;
  const int w = grid.width();
  if (ui.mode == Mode::kChooseSignal || ui.mode == Mode::kConfirmKill) {
    grid.Fill(row, 0, w, " ", Style::kPrompt);
    std::string text;
    const std::string who = "pid " + std::to_string(ui.target.pid) + " (" +
                            (ui.target.command.empty() ? "?" : ui.target.command) + ")";
    if (ui.mode == Mode::kChooseSignal) {
      text = "Signal " + who;
      text = Cut(text, std::max(10, w - 40), o.unicode) + ": Enter/t TERM  K KILL  i INT  Esc cancel";
    } else {
      text = ui.confirm_text + ". Send SIG" + SignalName(ui.signal) + " anyway? y/N";
    }
    grid.Put(row, 0, text, Style::kPrompt);
    return;
  }
  if (!ui.message.empty() && o.now_unix_ms < ui.message_until_ms) {
    grid.Put(row, 0, ui.message, ui.message_is_error ? Style::kBad : Style::kGood);
    return;
  }
  Painter p(grid, row, o.unicode);
  const std::pair<const char*, const char*> keys[] = {
      {"q", "quit"}, {"s", "sort"}, {"u", "mine"}, {"g", "gpu"}, {"K", "kill"}, {"h", "help"}};
  for (const auto& [k, what] : keys) {
    p.Text(k, Style::kAccent);
    p.Text(std::string(" ") + what + "  ", Style::kDim);
  }
  std::string state = "sort " + std::string(SortKeyName(ui.sort)) + (ui.reverse ? " (rev)" : "");
  if (ui.only_mine) state += " | mine";
  state += ui.gpu_filter ? " | gpu " + std::to_string(*ui.gpu_filter) : " | all gpus";
  const int room = w - p.x();
  if (room > 8) {
    std::string cut = Cut(state, room, o.unicode);
    grid.Put(row, w - TextWidth(cut), cut, Style::kBold);
  }
}

void DrawHelp(Grid& grid, const LayoutOptions& o) {
  const auto lines = HelpLines();
  int box_w = 0;
  for (const auto& l : lines) box_w = std::max(box_w, TextWidth(l));
  box_w = std::min(grid.width() - 2, box_w + 4);
  const int box_h = std::min(grid.height() - 2, static_cast<int>(lines.size()) + 2);
  const int left = (grid.width() - box_w) / 2;
  const int top = (grid.height() - box_h) / 2;
  for (int r = 0; r < box_h; ++r) grid.Fill(top + r, left, box_w, " ", Style::kNormal);
  grid.Fill(top, left, box_w, "-", Style::kAccent);
  grid.Fill(top + box_h - 1, left, box_w, "-", Style::kAccent);
  grid.Put(top, left + 2, " gpuman top: keys ", Style::kAccent);
  for (int i = 0; i < box_h - 2 && i < static_cast<int>(lines.size()); ++i) {
    grid.Put(top + 1 + i, left + 2, Cut(lines[i], box_w - 4, o.unicode), Style::kNormal, box_w - 4);
  }
}

}  // namespace

std::string ShortBytes(std::optional<int64_t> bytes) {
  if (!bytes) return "-";
  const double v = static_cast<double>(*bytes);
  constexpr double kMi = 1024.0 * 1024, kGi = kMi * 1024, kTi = kGi * 1024;
  auto trim = [](std::string s) {
    if (s.size() > 2 && s.ends_with(".0")) s.resize(s.size() - 2);
    return s;
  };
  if (v < kGi) return Fixed(std::round(v / kMi), 0) + "M";
  if (v < 100 * kGi) return trim(Fixed(v / kGi, 1)) + "G";
  if (v < kTi) return Fixed(v / kGi, 0) + "G";
  return trim(Fixed(v / kTi, 1)) + "T";
}

std::u32string BarCells(double fraction, int width, bool unicode) {
  if (width <= 0) return U"";
  if (std::isnan(fraction)) fraction = 0;
  fraction = std::clamp(fraction, 0.0, 1.0);
  const auto w = static_cast<size_t>(width);
  if (!unicode) {
    if (width < 3) return std::u32string(w, fraction >= 0.5 ? U'|' : U' ');
    const int inner = width - 2;
    const int filled = static_cast<int>(std::lround(fraction * inner));
    return U"[" + std::u32string(static_cast<size_t>(filled), U'|') +
           std::u32string(static_cast<size_t>(inner - filled), U' ') + U"]";
  }
  // Full blocks, then the eighth that is left (U+258F one eighth .. U+2589 seven), then dots.
  const int eighths = static_cast<int>(std::lround(fraction * width * 8));
  const int full = eighths / 8;
  std::u32string out(static_cast<size_t>(full), U'\u2588');
  if (full < width && eighths % 8) out += static_cast<char32_t>(0x2590 - eighths % 8);
  out.resize(w, U'\u00B7');
  return out;
}

std::string BarText(double fraction, int width, bool unicode) {
  return EncodeUtf8(BarCells(fraction, width, unicode));
}

std::vector<std::string> HelpLines() {
  return {
      "Up/Down, j/k, Ctrl-N/P move the selection",
      "PgUp/PgDn, Home/End    move by a page / to the ends",
      "s or F6                next sort: gpu-mem, sm, pid, user, gpu",
      "r                      reverse the sort",
      "u                      only my processes / everyone's",
      "g, Tab / G, Shift-Tab  next / previous GPU filter",
      "0-9                    only this GPU (again: all)",
      "a or Esc               all GPUs",
      "K or F9                signal the selected process",
      "                       (TERM, KILL or INT; your own, or",
      "                       anyone's as root after y/n)",
      "h, ? or F1             this help",
      "q                      quit",
      "",
      "Any key closes this help.",
  };
}

LayoutResult RenderTop(const TopModel& model, const UiState& ui, const std::vector<ProcessRow>& rows,
                       const LayoutOptions& o, int width, int height) {
  LayoutResult result{Grid(width, height)};
  Grid& grid = result.grid;
  if (width <= 0 || height <= 0) return result;
  if (width < kMinWidth || height < kMinHeight) {
    grid.Put(0, 0, "gpuman top: terminal too small (" + std::to_string(width) + "x" + std::to_string(height) +
                       "; needs " + std::to_string(kMinWidth) + "x" + std::to_string(kMinHeight) + ")",
             Style::kBad);
    if (height > 1) grid.Put(1, 0, "q quits", Style::kDim);
    return result;
  }
  DrawTitle(grid, model, o);
  const model::MachineSnapshot* snap = model.snapshot();
  const int gpu_count = snap ? static_cast<int>(snap->gpus.size()) : 0;
  const Frame* f = model.frame();
  int holder_count = 0;
  if (f) holder_count = static_cast<int>(BuildHolderRows(f->leases, f->jobs, snap).size());
  // A GPU in MIG mode: its MIG devices and who holds them (docs/top.md).
  std::vector<std::string> mig(static_cast<size_t>(gpu_count));
  int mig_rows = 0;
  for (int i = 0; i < gpu_count; ++i) {
    mig[static_cast<size_t>(i)] = f ? MigSummary(snap->gpus[i], f->leases, f->jobs) : MigSummary(snap->gpus[i], {}, {});
    if (!mig[static_cast<size_t>(i)].empty()) ++mig_rows;
  }
  const Plan plan = MakePlan(height, gpu_count, mig_rows, holder_count, o.interactive);

  int row = 1;
  if (gpu_count == 0) {
    grid.Put(row, 1, snap ? "no GPUs found" : "waiting for the first sample...", Style::kDim);
  }
  for (int i = 0, r = row; i < plan.gpus_shown; ++i) {
    const auto& g = snap->gpus[i];
    const std::string& mig_line = mig[static_cast<size_t>(i)];
    const bool selected = ui.gpu_filter && *ui.gpu_filter == g.index;
    if (i == plan.gpus_shown - 1 && plan.gpus_shown < gpu_count) {
      grid.Put(r, 1, "+" + std::to_string(gpu_count - i) + " more GPUs (make the window taller)", Style::kDim);
      break;
    }
    const model::GpuDrain* drain = DrainOf(f, g);
    if (plan.gpu_rows_each == 2) {
      DrawGpuFull(grid, r, g, model.HistoryFor(g), selected, drain, o);
      r += 2;
      if (!mig_line.empty()) {  // the MIG line under the GPU's two
        Painter m(grid, r++, o.unicode);
        m.Skip(4);
        m.Text(mig_line, Style::kAccent, grid.width() - 4);
      }
    } else {
      DrawGpuCompact(grid, r++, g, model.HistoryFor(g), selected, drain, mig_line, o);
    }
  }
  row += plan.gpu_area;
  DrawProcesses(grid, row, plan.process_area, rows, ui, o, result);
  row += plan.process_area;
  DrawHolders(grid, row, plan.holder_area, model, o);
  if (o.interactive) DrawFooter(grid, ui, o);
  if (o.interactive && ui.mode == Mode::kHelp) DrawHelp(grid, o);
  return result;
}

}  // namespace gpuman::tui
