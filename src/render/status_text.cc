// RenderStatusText: the human `gpuman status` view; RenderStatusCompact: its one line per
// GPU form (`status --compact`, at the end of this file), which shares the cells.
//
// Layout, top to bottom: a header line (simulated marker first so it can never be cut
// off, then driver, CUDA and snapshot time), a column-title line, and per GPU one
// table row followed by indented detail lines: the drain (a drained GPU's HEALTH cell
// says DRAINED instead of "ok"), the allocation mark (inside a Slurm job or another
// allocation, its GPUs), health problems, warnings, leases, processes.
//
// The GPU table is laid out from content widths. Mandatory columns always show; NAME
// shrinks (down to kNameMinWidth) and HEALTH, the last column, takes what is left and
// is cut with "…". Optional columns (fan, performance state, bars, PCI bus) are added
// in priority order only while the full names still fit, so an 80-column terminal gets
// the compact table and a wide one the rich table. Widths are computed on plain text, in
// display columns (a CJK user name takes two per character); colour escapes are wrapped
// around already-padded cells so they never shift columns.
//
// Output that is not a terminal (TerminalInfo::cut_to_width false: a pipe, a file) is laid
// out for the same width but nothing is cut: NAME, HEALTH and USER grow to their longest
// cell, and header, detail and process lines are written whole.
#include <algorithm>
#include <cctype>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "model/intruders.h"
#include "model/mps_mark.h"
#include "render/format.h"
#include "render/status_view.h"

#include "base/duration.h"
#include "base/strings.h"
#include "model/health_judge.h"

namespace gpuman::render {
namespace {

constexpr int kMinWidth = 80;
constexpr int kSeparator = 2;        // spaces between columns
constexpr int kNameMinWidth = 8;
constexpr int kNameMaxWidth = 24;    // longer names are cut so extra columns can show
constexpr int kHealthReserve = 9;    // "UNHEALTHY"
constexpr int kBarInnerWidth = 10;
constexpr int kUserMaxWidth = 12;
constexpr int kElapsedMinWidth = 100;  // terminal width from which processes show ELAPSED
constexpr std::string_view kIndent = "    ";
constexpr std::string_view kUnknown = "-";
constexpr int64_t kGiB = int64_t{1} << 30;
constexpr int64_t kMiB = int64_t{1} << 20;

struct Cell {
  std::string text;
  Color color = Color::kNone;
};

struct Column {
  std::string header;
  bool right_align = false;
  int priority = 0;  // 0: always shown; 1, 2, ...: optional, lower is added first
  int gap = kSeparator;  // spaces before this column (ignored for the first)
  std::vector<Cell> cells;
  int width = 0;
  bool visible = false;
};

// ---- Cell formatting -------------------------------------------------------------

std::string ShortName(const std::optional<std::string>& name) {
  if (!name) return std::string(kUnknown);
  std::string_view n = *name;
  if (n.starts_with("NVIDIA ")) n.remove_prefix(7);
  return std::string(n);
}

// "GPU-3f2a9c1d-…" -> "GPU-3f2a9c1d": enough to tell GPUs apart and to grep for.
std::string ShortUuid(const std::optional<std::string>& uuid) {
  if (!uuid) return std::string(kUnknown);
  const std::string& u = *uuid;
  if (u.starts_with("GPU-") || u.starts_with("MIG-")) {
    std::string out = u.substr(0, 4);
    for (size_t i = 4; i < u.size() && out.size() < 12; ++i) {
      if (u[i] != '-') out += u[i];
    }
    return out;
  }
  return u.substr(0, 12);
}

// "00000000:07:00.0" -> "0000:07:00.0", the form lspci prints.
std::string ShortBusId(const std::optional<std::string>& bus) {
  if (!bus) return std::string(kUnknown);
  if (bus->size() == 16 && bus->starts_with("0000")) return bus->substr(4);
  return *bus;
}

Cell PercentCell(const std::optional<int>& percent) {
  if (!percent) return {std::string(kUnknown)};
  return {fmt::format("{}%", *percent), PercentColor(*percent)};
}

Cell BarCell(std::optional<double> percent) {
  if (!percent) return {std::string(kUnknown)};
  const double clamped = std::clamp(*percent, 0.0, 100.0);
  const int filled = static_cast<int>(clamped * kBarInnerWidth / 100.0 + 0.5);
  std::string bar = "[";
  bar.append(static_cast<size_t>(filled), '|');
  bar.append(static_cast<size_t>(kBarInnerWidth - filled), ' ');
  bar += "]";
  return {bar, PercentColor(clamped)};
}

std::optional<double> MemoryPercent(const model::DeviceSnapshot& d) {
  if (!d.memory_used_bytes || !d.memory_total_bytes || *d.memory_total_bytes <= 0) {
    return std::nullopt;
  }
  return 100.0 * static_cast<double>(*d.memory_used_bytes) /
         static_cast<double>(*d.memory_total_bytes);
}

// "12.3/80.0 GiB"; the unit follows the total (or the used value when the total is
// unknown); with `in_mib` always whole MiB ("12595/81920 MiB"). A missing half prints as "-".
Cell MemoryCell(const model::DeviceSnapshot& d, bool in_mib) {
  const auto& used = d.memory_used_bytes;
  const auto& total = d.memory_total_bytes;
  if (!used && !total) return {std::string(kUnknown)};
  const int64_t reference = total ? *total : *used;
  const bool gib = !in_mib && reference >= kGiB;
  const double unit = static_cast<double>(gib ? kGiB : kMiB);
  auto part = [&](const std::optional<int64_t>& v) {
    if (!v) return std::string(kUnknown);
    if (in_mib) return std::to_string(*v / kMiB);  // whole MiB, rounded down as nvidia-smi does
    return gib ? fmt::format("{:.1f}", static_cast<double>(*v) / unit)
               : fmt::format("{:.0f}", static_cast<double>(*v) / unit);
  };
  Cell cell{fmt::format("{}/{} {}", part(used), part(total), gib ? "GiB" : "MiB")};
  if (auto percent = MemoryPercent(d)) cell.color = PercentColor(*percent);
  return cell;
}

Cell PowerCell(const model::DeviceSnapshot& d) {
  if (!d.power_usage_w && !d.power_limit_w) return {std::string(kUnknown)};
  auto part = [](const std::optional<double>& w) {
    return w ? fmt::format("{:.0f}", *w) : std::string(kUnknown);
  };
  return {fmt::format("{}/{} W", part(d.power_usage_w), part(d.power_limit_w))};
}

const model::GpuDrain* DrainOf(const model::DeviceSnapshot& d, const std::vector<model::GpuDrain>& drains) {
  if (!d.uuid) return nullptr;
  for (const model::GpuDrain& drain : drains) {
    if (drain.uuid == *d.uuid) return &drain;
  }
  return nullptr;
}

// "drained: health: Xid 79 (by root since 2026-12-01T09:00:00Z)", the detail line under the row.
std::string DrainText(const model::GpuDrain& drain) {
  std::string by = drain.by_user.empty() ? "uid " + std::to_string(drain.by_uid) : drain.by_user;
  return "drained: " + (drain.reason.empty() ? std::string("no reason given") : drain.reason) + " (by " + by +
         " since " + FormatIsoUtcSeconds(drain.since_unix_ms / 1000) + ")";
}

// A drained GPU that is otherwise healthy says so in place of "ok": it gets no new work.
Cell HealthCell(const model::DeviceSnapshot& d, bool is_drained) {
  if (d.is_healthy && is_drained) return {"DRAINED", Color::kYellow};
  if (d.is_healthy) return {"ok", Color::kGreen};
  if (model::JudgeGpuHealth(d).is_lost) return {"LOST", Color::kRed};
  if (d.health_problems.empty()) return {"UNHEALTHY", Color::kRed};
  return {"UNHEALTHY: " + d.health_problems.front(), Color::kRed};
}

// "45s", "12m05s", "3h04m", "2d03h"; "-" when unknown or in the future.
std::string FormatElapsed(const model::GpuProcess& p, int64_t now_unix_s) {
  if (!p.start_time_unix || *p.start_time_unix > now_unix_s) return std::string(kUnknown);
  const int64_t s = now_unix_s - *p.start_time_unix;
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  if (s < 86400) return fmt::format("{}h{:02}m", s / 3600, s / 60 % 60);
  return fmt::format("{}d{:02}h", s / 86400, s / 3600 % 24);
}

const char* ShortProcessType(model::ProcessType type) {
  // nvidia-smi's letters, to leave the width to the command line.
  switch (type) {
    case model::ProcessType::kCompute: return "C";
    case model::ProcessType::kGraphics: return "G";
    case model::ProcessType::kComputeAndGraphics: return "C+G";
  }
  return "C";
}

std::string ProcessUser(const model::GpuProcess& p) {
  if (p.user) return EscapeControl(*p.user);
  if (p.uid) return "uid " + std::to_string(*p.uid);
  return "?";
}

// ---- Layout ----------------------------------------------------------------------

std::vector<Column> BuildColumns(const model::MachineSnapshot& snap, const StatusOptions& opts) {
  // A one-space gap where the neighbours cannot run together: after the index, and
  // before UTIL, whose title is wider than its cells.
  auto col = [](const char* header, bool right_align, int priority, int gap = kSeparator) {
    Column c;
    c.header = header;
    c.right_align = right_align;
    c.priority = priority;
    c.gap = gap;
    return c;
  };
  std::vector<Column> cols = {
      col("GPU", true, 0, 0), col("NAME", false, 0, 1), col("BUS", false, 3),
      col("UUID", false, 0),  col("UTIL", true, 0, 1),  col("", false, 4),
      col("MEMORY", true, 0), col("", false, 5),        col("TEMP", true, 0),
      col("FAN", true, 1),    col("PERF", true, 2),     col("POWER", true, 0),
      col("HEALTH", false, 0),
  };
  for (const model::DeviceSnapshot& d : snap.gpus) {
    std::optional<double> util;
    if (d.gpu_utilization_percent) util = *d.gpu_utilization_percent;
    const Cell cells[] = {
        {std::to_string(d.index)},
        {ShortName(d.name)},
        {ShortBusId(d.pci_bus_id)},
        {ShortUuid(d.uuid)},
        PercentCell(d.gpu_utilization_percent),
        BarCell(util),
        MemoryCell(d, opts.memory_in_mib),
        BarCell(MemoryPercent(d)),
        {d.temperature_c ? fmt::format("{}C", *d.temperature_c) : std::string(kUnknown)},
        {d.fan_percent ? fmt::format("{}%", *d.fan_percent) : std::string(kUnknown)},
        {d.performance_state ? fmt::format("P{}", *d.performance_state)
                             : std::string(kUnknown)},
        PowerCell(d),
        HealthCell(d, DrainOf(d, opts.drains) != nullptr),
    };
    for (size_t i = 0; i < cols.size(); ++i) cols[i].cells.push_back(cells[i]);
  }
  for (Column& c : cols) {
    c.width = DisplayWidth(c.header);
    for (const Cell& cell : c.cells) c.width = std::max(c.width, DisplayWidth(cell.text));
  }
  return cols;
}

// Decides which columns show and how wide NAME and HEALTH are (see the file comment);
// with `cut` false NAME and HEALTH keep their natural widths.
void LayoutColumns(std::vector<Column>& cols, int avail, bool cut) {
  Column& name = cols[1];
  Column& health = cols.back();
  const int name_full = name.width;
  const int health_full = health.width;
  const int name_natural = std::min(name.width, kNameMaxWidth);
  const int health_reserve = std::min(health.width, kHealthReserve);

  // Width of the visible columns other than NAME and HEALTH, gaps included.
  auto fixed_width = [&]() {
    int w = 0;
    bool first = true;
    for (const Column& c : cols) {
      if (!c.visible) continue;
      if (!first) w += c.gap;
      first = false;
      if (&c != &name && &c != &health) w += c.width;
    }
    return w;
  };
  for (Column& c : cols) c.visible = c.priority == 0;

  std::vector<Column*> optional;
  for (Column& c : cols) {
    if (c.priority > 0) optional.push_back(&c);
  }
  std::sort(optional.begin(), optional.end(),
            [](const Column* a, const Column* b) { return a->priority < b->priority; });
  for (Column* c : optional) {
    if (fixed_width() + c->gap + c->width + name_natural + health_reserve <= avail) {
      c->visible = true;
    }
  }
  if (!cut) {
    name.width = name_full;
    health.width = health_full;
    return;
  }
  const int room = avail - fixed_width() - health_reserve;
  name.width = std::clamp(room, kNameMinWidth, name_natural);
  health.width = std::max(1, avail - fixed_width() - name.width);

  // "UNHEALTHY: <problem>" that does not fit becomes "UNHEALTHY"; the problem is then
  // printed beneath the row instead.
  for (Cell& cell : health.cells) {
    if (cell.text.starts_with("UNHEALTHY: ") && DisplayWidth(cell.text) > health.width) {
      cell.text = "UNHEALTHY";
    }
  }
}

std::string RenderCell(const Column& col, const Cell& cell, bool last, bool color) {
  const std::string text = TruncateToWidth(cell.text, col.width);
  const std::string colored = Colorize(text, cell.color, color);
  // Padding stays outside the escapes so only the value itself is coloured.
  const std::string pad(last ? 0 : static_cast<size_t>(col.width - DisplayWidth(text)), ' ');
  return col.right_align ? pad + colored : colored + pad;
}

std::string RenderRow(const std::vector<Column>& cols, std::optional<size_t> row, bool color) {
  std::string line;
  size_t first_visible = cols.size();
  size_t last_visible = 0;
  for (size_t i = 0; i < cols.size(); ++i) {
    if (!cols[i].visible) continue;
    first_visible = std::min(first_visible, i);
    last_visible = i;
  }
  for (size_t i = 0; i < cols.size(); ++i) {
    const Column& c = cols[i];
    if (!c.visible) continue;
    if (i != first_visible) line.append(static_cast<size_t>(c.gap), ' ');
    const Cell cell = row ? c.cells[*row] : Cell{c.header, Color::kNone};
    line += RenderCell(c, cell, i == last_visible, color);
  }
  // Column titles and empty trailing cells could leave trailing blanks.
  while (!line.empty() && line.back() == ' ') line.pop_back();
  return line;
}

// ---- Sections --------------------------------------------------------------------

std::string HeaderLine(const model::MachineSnapshot& snap, const StatusOptions& opts,
                       const TerminalInfo& term, int limit) {
  std::string marker;
  int marker_width = 0;
  if (opts.simulated) {
    std::string plain = opts.scenario.empty()
                            ? std::string("[SIMULATED]")
                            : "[SIMULATED: " + TruncateToWidth(opts.scenario, limit / 2) + "]";
    marker_width = DisplayWidth(plain) + kSeparator;
    marker = Colorize(plain, Color::kYellowInverse, term.use_color) + "  ";
  }
  const auto& sys = snap.system;
  std::string rest = fmt::format(
      "driver {}  CUDA {}  {}", sys.driver_version.value_or(std::string(kUnknown)),
      sys.cuda_driver_version.value_or(std::string(kUnknown)),
      FormatIsoUtcSeconds(snap.taken_at_unix_ms / 1000 -
                          (snap.taken_at_unix_ms % 1000 < 0 ? 1 : 0)));
  return marker + TruncateToWidth(rest, limit - marker_width);
}

void AppendDetailLine(std::vector<std::string>& lines, std::string_view prefix,
                      const std::string& text, Color color, bool use_color, int limit) {
  const std::string plain =
      TruncateToWidth(std::string(kIndent) + std::string(prefix) + text, limit);
  lines.push_back(Colorize(plain, color, use_color));
}

struct ProcessWidths {
  int user = 1;
  int pid = 1;
  int memory = 1;
  int type = 1;
  int elapsed = 0;  // 0: column hidden
};

// A process's GPU memory: "40.3 GiB", or whole MiB with `in_mib` ("41260 MiB").
std::string ProcessMemory(const model::GpuProcess& p, bool in_mib) {
  if (!p.used_memory_bytes) return std::string(kUnknown);
  if (in_mib) return std::to_string(*p.used_memory_bytes / kMiB) + " MiB";
  return FormatBytes(*p.used_memory_bytes);
}

// `avail` chooses the columns, `user_max` caps USER (no cap when nothing is cut).
ProcessWidths MeasureProcesses(const model::MachineSnapshot& snap, int avail, int user_max, bool in_mib) {
  ProcessWidths w;
  const int64_t now = snap.taken_at_unix_ms / 1000;
  for (const model::DeviceSnapshot& d : snap.gpus) {
    for (const model::GpuProcess& p : d.processes) {
      w.user = std::max(w.user, std::min(user_max, DisplayWidth(ProcessUser(p))));
      w.pid = std::max(w.pid, DisplayWidth(std::to_string(p.pid)));
      w.memory = std::max(w.memory, DisplayWidth(ProcessMemory(p, in_mib)));
      w.type = std::max(w.type, DisplayWidth(ShortProcessType(p.type)));
      if (avail >= kElapsedMinWidth) {
        w.elapsed = std::max(w.elapsed, DisplayWidth(FormatElapsed(p, now)));
      }
    }
  }
  return w;
}

std::string ProcessLine(const model::GpuProcess& p, const ProcessWidths& w, int64_t now, bool in_mib,
                        bool use_color, int limit, const model::Lease* intruded) {
  const std::string sep(kSeparator, ' ');
  std::string line(kIndent);
  line += PadRight(TruncateToWidth(ProcessUser(p), w.user), w.user) + sep;
  line += PadLeft(std::to_string(p.pid), w.pid) + sep;
  line += PadLeft(ProcessMemory(p, in_mib), w.memory) + sep;
  line += PadRight(ShortProcessType(p.type), w.type) + sep;
  if (w.elapsed > 0) line += PadLeft(FormatElapsed(p, now), w.elapsed) + sep;
  // On a GPU leased to someone else (model/intruders.h): said before the command.
  if (intruded) {
    const std::string mark = "INTRUDER on lease " + std::to_string(intruded->id) + " (" + EscapeControl(intruded->user) + "): ";
    line += Colorize(TruncateToWidth(mark, std::max(0, limit - DisplayWidth(line))), Color::kRed, use_color);
  }
  const int room = limit - DisplayWidth(line);
  if (!p.is_visible) {
    return line + Colorize(TruncateToWidth("(not in this PID namespace)", room), Color::kDim,
                           use_color);
  }
  // A process's command line is whatever it set: shown, never sent to the terminal.
  return line + TruncateToWidth(EscapeControl(p.command.value_or(std::string(kUnknown))), room);
}

// ---- The compact view --------------------------------------------------------------

// A process's memory as gpustat writes it: "9.8G", "3G", "512M"; whole MiB with `in_mib`.
std::string CompactMemory(int64_t bytes, bool in_mib) {
  if (in_mib || bytes < kGiB) return std::to_string(bytes / kMiB) + "M";
  std::string number = fmt::format("{:.1f}", static_cast<double>(bytes) / static_cast<double>(kGiB));
  if (number.ends_with(".0")) number.resize(number.size() - 2);
  return number + "G";
}

// "alice(9.8G) bob(3G)": each user of the GPU's processes once, with their memory in all,
// most first (ties by name). A user whose processes report no memory gets "(-)".
std::string CompactUsers(const model::DeviceSnapshot& d, bool in_mib) {
  struct Use {
    std::string user;
    std::optional<int64_t> bytes;
  };
  std::vector<Use> uses;
  for (const model::GpuProcess& p : d.processes) {
    std::string user = p.user ? EscapeControl(*p.user) : p.uid ? "uid:" + std::to_string(*p.uid) : "?";
    auto it = std::find_if(uses.begin(), uses.end(), [&](const Use& u) { return u.user == user; });
    if (it == uses.end()) it = uses.insert(uses.end(), Use{std::move(user), std::nullopt});
    if (p.used_memory_bytes) it->bytes = it->bytes.value_or(0) + *p.used_memory_bytes;
  }
  std::stable_sort(uses.begin(), uses.end(), [](const Use& a, const Use& b) {
    if (a.bytes.value_or(-1) != b.bytes.value_or(-1)) return a.bytes.value_or(-1) > b.bytes.value_or(-1);
    return a.user < b.user;
  });
  std::string out;
  for (const Use& u : uses) {
    if (!out.empty()) out += ' ';
    out += u.user + "(" + (u.bytes ? CompactMemory(*u.bytes, in_mib) : std::string(kUnknown)) + ")";
  }
  return out;
}

// "[lease 7 alice]", "[job 12 bob]", "[lease 7 alice, IDLE 2h]": the leases of the GPU; a
// slice adds its size and an MPS lease its mark ("[lease 8 alice 20 GiB MPS 25%]").
std::string CompactLeases(const model::DeviceSnapshot& d, const StatusOptions& opts, int64_t now_ms, bool color) {
  if (!opts.leases || !d.uuid) return "";
  std::string out;
  const std::vector<model::SliceOverrun> overruns = model::SliceOverruns(d, *opts.leases);
  for (const model::Lease& l : *opts.leases) {
    if (std::find(l.gpu_uuids.begin(), l.gpu_uuids.end(), *d.uuid) == l.gpu_uuids.end()) continue;
    const auto job = opts.lease_jobs.find(l.id);
    std::string text = job != opts.lease_jobs.end() ? "[job " + model::FormatJobRef(job->second)
                                                    : "[lease " + std::to_string(l.id);
    text += " " + EscapeControl(l.user);
    if (l.gpu_memory_bytes) text += " " + FormatBytes(*l.gpu_memory_bytes);
    if (l.mps) text += " " + model::MpsMark(l);
    const bool over = l.gpu_memory_bytes && std::any_of(overruns.begin(), overruns.end(), [&](const model::SliceOverrun& o) { return o.lease_id == l.id; });
    if (over) text += " OVER";
    if (l.idle_since_unix_ms) text += ", IDLE " + FormatDurationMs(now_ms - *l.idle_since_unix_ms);
    text += "]";
    if (!out.empty()) out += ' ';
    out += Colorize(text, over ? Color::kRed : l.idle_since_unix_ms ? Color::kYellow : Color::kNone, color);
  }
  return out;
}

}  // namespace

std::string RenderStatusCompact(const model::MachineSnapshot& snap, const StatusOptions& opts,
                                const TerminalInfo& term) {
  const int limit = LineLimit(term);
  const bool color = term.use_color;
  std::string out = HeaderLine(snap, opts, term, limit) + "\n";
  if (snap.gpus.empty()) return out + "no GPUs found\n";

  // The cells of every GPU first, so that each column is as wide as its widest cell.
  struct Row {
    std::string index, name, temp;
    Cell mark, util_cell, memory_cell;
  };
  std::vector<Row> rows;
  size_t index_w = 0, name_w = 0, temp_w = 0, util_w = 0, memory_w = 0;
  for (const model::DeviceSnapshot& d : snap.gpus) {
    Row r;
    r.index = "[" + std::to_string(d.index) + "]";
    r.name = EscapeControl(ShortName(d.name));
    if (term.cut_to_width) r.name = TruncateToWidth(r.name, kNameMaxWidth);  // as the table's NAME
    const Cell health = HealthCell(d, DrainOf(d, opts.drains) != nullptr);
    if (health.text != "ok") {
      r.mark = {health.text.starts_with("UNHEALTHY") ? std::string("UNHEALTHY") : health.text, health.color};
    }
    r.temp = d.temperature_c ? fmt::format("{}C", *d.temperature_c) : std::string(kUnknown);
    r.util_cell = PercentCell(d.gpu_utilization_percent);
    r.memory_cell = MemoryCell(d, opts.memory_in_mib);
    const int name_cols = DisplayWidth(r.name) + (r.mark.text.empty() ? 0 : 1 + DisplayWidth(r.mark.text));
    index_w = std::max(index_w, r.index.size());
    name_w = std::max(name_w, static_cast<size_t>(name_cols));
    temp_w = std::max(temp_w, r.temp.size());
    util_w = std::max(util_w, r.util_cell.text.size());
    memory_w = std::max(memory_w, r.memory_cell.text.size());
    rows.push_back(std::move(r));
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    const model::DeviceSnapshot& d = snap.gpus[i];
    const Row& r = rows[i];
    // Padding is measured on plain text and stays outside the colour escapes.
    const auto pad = [](const std::string& text, size_t width) {
      return std::string(width - std::min(width, static_cast<size_t>(DisplayWidth(text))), ' ');
    };
    const std::string name = r.name + (r.mark.text.empty() ? "" : " " + r.mark.text);
    const std::string index = PadLeft(r.index, static_cast<int>(index_w)) + " ";
    const std::string figures = " | " + PadLeft(r.temp, static_cast<int>(temp_w)) + " " + pad(r.util_cell.text, util_w);
    const std::string memory = " | " + pad(r.memory_cell.text, memory_w);
    const std::string plain = index + name + pad(name, name_w) + figures + r.util_cell.text + memory +
                              r.memory_cell.text + " |";
    const int fixed_width = DisplayWidth(plain);
    // Then the leases and the users, which a terminal may cut (uncoloured, then).
    std::string tail = CompactLeases(d, opts, snap.taken_at_unix_ms, false);
    const std::string users = opts.show_processes ? CompactUsers(d, opts.memory_in_mib) : "";
    if (!users.empty()) tail += (tail.empty() ? "" : " ") + users;
    if (fixed_width + (tail.empty() ? 0 : 2) > limit) {  // not even the figures fit: cut it all
      out += TruncateToWidth(plain + (tail.empty() ? "" : " " + tail), limit) + "\n";
      continue;
    }
    std::string line = index + r.name;
    if (!r.mark.text.empty()) line += " " + Colorize(r.mark.text, r.mark.color, color);
    line += pad(name, name_w) + figures + Colorize(r.util_cell.text, r.util_cell.color, color) + memory +
            Colorize(r.memory_cell.text, r.memory_cell.color, color) + " |";
    if (!tail.empty()) {
      if (fixed_width + 1 + DisplayWidth(tail) > limit) {
        line += " " + TruncateToWidth(tail, std::max(1, limit - fixed_width - 1));
      } else {
        std::string colored = CompactLeases(d, opts, snap.taken_at_unix_ms, color);
        if (!users.empty()) colored += (colored.empty() ? "" : " ") + users;
        line += " " + colored;
      }
    }
    out += line + "\n";
  }
  return out;
}

std::string RenderStatusText(const model::MachineSnapshot& snap, const StatusOptions& opts,
                             const TerminalInfo& term) {
  const int avail = std::max(term.width, kMinWidth);  // what the layout is for
  const int limit = LineLimit(term);                   // where lines are cut (a terminal's edge, or never)
  const bool color = term.use_color;
  std::vector<std::string> lines;
  lines.push_back(HeaderLine(snap, opts, term, limit));

  if (snap.gpus.empty()) {
    lines.push_back("no GPUs found");
  } else {
    std::vector<Column> cols = BuildColumns(snap, opts);
    LayoutColumns(cols, avail, term.cut_to_width);
    lines.push_back(Colorize(RenderRow(cols, std::nullopt, false), Color::kBold, color));

    const ProcessWidths pw =
        MeasureProcesses(snap, avail, term.cut_to_width ? kUserMaxWidth : limit, opts.memory_in_mib);
    const int64_t now = snap.taken_at_unix_ms / 1000;
    for (size_t row = 0; row < snap.gpus.size(); ++row) {
      const model::DeviceSnapshot& d = snap.gpus[row];
      lines.push_back(RenderRow(cols, row, color));

      if (const model::GpuDrain* drain = DrainOf(d, opts.drains)) {
        AppendDetailLine(lines, "", DrainText(*drain), Color::kYellow, color, limit);
      }
      if (opts.allocation && d.uuid &&
          std::find(opts.allocation->uuids.begin(), opts.allocation->uuids.end(), *d.uuid) !=
              opts.allocation->uuids.end()) {
        AppendDetailLine(lines, "in this allocation: ", opts.allocation->source, Color::kGreen, color, limit);
      }
      // Problem text the row could not show in full goes beneath it.
      const Column& health = cols.back();
      const bool first_shown = health.cells[row].text.starts_with("UNHEALTHY: ") &&
                               DisplayWidth(health.cells[row].text) <= health.width;
      if (!d.is_healthy) {
        for (size_t i = first_shown ? 1 : 0; i < d.health_problems.size(); ++i) {
          AppendDetailLine(lines, "problem: ", d.health_problems[i], Color::kRed, color,
                           limit);
        }
      }
      for (const std::string& warning : d.warnings) {
        AppendDetailLine(lines, "warning: ", warning, Color::kYellow, color, limit);
      }
      if (opts.leases && d.uuid) {
        const std::vector<model::SliceOverrun> overruns = model::SliceOverruns(d, *opts.leases);
        for (const model::Lease& l : *opts.leases) {
          if (std::find(l.gpu_uuids.begin(), l.gpu_uuids.end(), *d.uuid) == l.gpu_uuids.end()) continue;
          const auto over = std::find_if(overruns.begin(), overruns.end(),
                                         [&](const model::SliceOverrun& o) { return o.lease_id == l.id; });
          std::string text = "lease " + std::to_string(l.id) + " " + EscapeControl(l.user) + " (" + EscapeControl(l.kind) +
                             (l.gpu_memory_bytes ? ", " + FormatBytes(*l.gpu_memory_bytes) + " slice" : "") +
                             (l.mps ? ", " + model::MpsMark(l) : "") + ") since " +
                             FormatIsoUtcSeconds(l.created_unix_ms / 1000);
          if (l.idle_since_unix_ms) {
            text += ", IDLE for " + FormatDurationMs(snap.taken_at_unix_ms - *l.idle_since_unix_ms);
          }
          if (over != overruns.end()) {
            text += ", OVER its slice: " + EscapeControl(l.user) + "'s processes use " + FormatBytes(over->used_bytes) +
                    " of " + FormatBytes(over->declared_bytes) + " declared";
          }
          text += ": " + EscapeControl(l.command);  // a job's name, a user's command line
          AppendDetailLine(lines, "", text,
                           over != overruns.end() ? Color::kRed : l.idle_since_unix_ms ? Color::kYellow : Color::kDim, color, limit);
        }
      }
      // One line per MIG device: its profile, UUID, memory and lease (docs/share.md, "MIG").
      for (const model::MigDevice& m : d.mig_devices) {
        std::string text = "MIG " + std::to_string(m.index) + " " + m.profile.value_or("?") + " " +
                           EscapeControl(m.uuid.value_or("(no UUID)"));
        if (m.memory_total_bytes) {
          text += ": " + FormatBytes(m.memory_used_bytes.value_or(0)) + " / " + FormatBytes(*m.memory_total_bytes) + " used";
        }
        bool leased = false;
        if (opts.leases && m.uuid) {
          for (const model::Lease& l : *opts.leases) {
            if (std::find(l.gpu_uuids.begin(), l.gpu_uuids.end(), *m.uuid) == l.gpu_uuids.end()) continue;
            text += ", lease " + std::to_string(l.id) + " " + EscapeControl(l.user) + " (" + EscapeControl(l.kind) +
                    (l.mps ? ", " + model::MpsMark(l) : "") + ")";
            leased = true;
          }
        }
        if (!m.processes.empty()) text += ", " + std::to_string(m.processes.size()) + " process" + (m.processes.size() == 1 ? "" : "es");
        AppendDetailLine(lines, "", text, leased ? Color::kDim : Color::kGreen, color, limit);
      }
      if (opts.show_processes) {
        for (const model::GpuProcess& p : d.processes) {
          lines.push_back(ProcessLine(p, pw, now, opts.memory_in_mib, color, limit,
                                      opts.leases ? model::IntrudedLease(d, p, *opts.leases) : nullptr));
        }
      }
    }
  }

  std::string out;
  for (const std::string& line : lines) {
    out += line;
    out += '\n';
  }
  return out;
}

}  // namespace gpuman::render
