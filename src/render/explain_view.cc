// ExplainToJson and RenderExplainText; see explain_view.h. The text view wraps long
// effects and warning messages with a hanging indent instead of cutting them: a warning
// is the point of `gpuman explain`, so it must be readable in full on 80 columns. Only
// table cells (names, UUIDs, variable values) are cut with "…".
#include "render/explain_view.h"

#include <algorithm>
#include <limits>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/strings.h"
#include "model/capabilities.h"
#include "render/format.h"

namespace gpuman::render {
namespace {

using visibility::EntryDiagnostic;
using visibility::EntryOutcome;
using visibility::VisibilityReport;
using visibility::VisibleDevice;
using visibility::Warning;
using visibility::WarningCode;

constexpr int kMinWidth = 80;
constexpr int kUuidFullWidth = 40;   // "GPU-" + 36
constexpr int kUuidShortWidth = 12;  // "GPU-3f2a9c1d"
constexpr int kNameMinWidth = 12;

nlohmann::ordered_json OptString(const std::optional<std::string>& s) {
  return s ? nlohmann::ordered_json(*s) : nlohmann::ordered_json(nullptr);
}

bool IsContinuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// Byte length of the first `columns` code points of `text`.
size_t PrefixBytes(std::string_view text, int columns) {
  size_t end = 0;
  int seen = 0;
  while (end < text.size()) {
    if (!IsContinuation(text[end])) {
      if (seen == columns) break;
      ++seen;
    }
    ++end;
  }
  return end;
}

// Greedy word wrap to `width` columns; words longer than a line are split.
std::vector<std::string> Wrap(std::string_view text, int width) {
  std::vector<std::string> lines;
  std::string line;
  size_t pos = 0;
  while (pos < text.size()) {
    while (pos < text.size() && text[pos] == ' ') ++pos;
    if (pos >= text.size()) break;
    size_t end = text.find(' ', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view word = text.substr(pos, end - pos);
    pos = end;
    const int needed = DisplayWidth(line) + (line.empty() ? 0 : 1) + DisplayWidth(word);
    if (needed <= width) {
      if (!line.empty()) line += ' ';
      line += word;
      continue;
    }
    if (!line.empty()) lines.push_back(std::move(line));
    line.clear();
    while (DisplayWidth(word) > width) {
      const size_t cut = PrefixBytes(word, width);
      lines.emplace_back(word.substr(0, cut));
      word.remove_prefix(cut);
    }
    line = std::string(word);
  }
  if (!line.empty() || lines.empty()) lines.push_back(std::move(line));
  return lines;
}

// Appends `text` wrapped to `width`: the first line after `first` (already counted in
// `indent`), continuation lines after `indent` spaces.
void AppendWrapped(std::string& out, const std::string& first, int indent, std::string_view text,
                   int width) {
  const std::vector<std::string> lines = Wrap(text, std::max(width - indent, 20));
  for (size_t i = 0; i < lines.size(); ++i) {
    out += i == 0 ? first : std::string(static_cast<size_t>(indent), ' ');
    out += lines[i];
    out += '\n';
  }
}

Color WarningColor(WarningCode code) {
  switch (code) {
    case WarningCode::kNoDriver:
    case WarningCode::kNothingVisible:
    case WarningCode::kUnhealthyGpu:
    case WarningCode::kDuplicateEntry:
      return Color::kRed;
    default:
      return Color::kYellow;
  }
}

std::string ShortUuid(const std::string& uuid) {
  std::string out = uuid.substr(0, 4);
  for (size_t i = 4; i < uuid.size() && out.size() < kUuidShortWidth; ++i) {
    if (uuid[i] != '-') out += uuid[i];
  }
  return out;
}

nlohmann::ordered_json CapabilitiesJson(const std::optional<std::string>& compute_capability) {
  auto caps = compute_capability ? model::CapabilitiesOf(*compute_capability) : std::nullopt;
  if (!caps) return nullptr;
  return {{"tf32", caps->tf32}, {"bf16", caps->bf16}, {"fp8", caps->fp8}, {"fp4", caps->fp4}};
}

std::string DeviceNotes(const VisibleDevice& v) {
  std::vector<std::string> notes;
  if (v.mig) notes.push_back("MIG: " + *v.mig);
  if (v.compute_capability) {
    // What the GPU computes in (model/capabilities.h): what a framework may ask of it.
    if (auto caps = model::CapabilitiesOf(*v.compute_capability)) {
      const std::string list = model::CapabilityList(*caps);
      notes.push_back("compute " + *v.compute_capability + (list.empty() ? "" : ": " + list));
    }
  }
  if (!v.is_healthy) notes.push_back("unhealthy");
  if (v.is_outside_allocation) notes.push_back("outside the allocation");
  for (uint32_t uid : v.leased_to_uids) notes.push_back("leased to uid " + std::to_string(uid));
  for (uint32_t uid : v.used_by_uids) notes.push_back("used by uid " + std::to_string(uid));
  for (uint32_t pid : v.intruder_pids) notes.push_back("INTRUDER pid " + std::to_string(pid));
  std::string out;
  for (const std::string& n : notes) out += (out.empty() ? "" : "; ") + n;
  return out;
}

// `cut`: a setting longer than the line is cut (a terminal); else it is written whole.
void RenderLayers(const VisibilityReport& report, int width, bool cut, bool color, std::string& out) {
  out += Colorize("Layers, outermost first:", Color::kBold, color) + "\n";
  int name_width = 0;
  for (const auto& layer : report.layers) name_width = std::max(name_width, DisplayWidth(layer.name));
  const int indent = 2 + name_width + 2;
  for (const auto& layer : report.layers) {
    const std::string setting =
        layer.value ? layer.variable + "=\"" + EscapeControl(*layer.value) + "\"" : layer.variable + " (unset)";
    out += "  " + PadRight(layer.name, name_width) + "  " +
           (cut ? TruncateToWidth(setting, width - indent) : setting) + "\n";
    AppendWrapped(out, std::string(static_cast<size_t>(indent), ' '), indent, EscapeControl(layer.effect), width);
  }
}

void RenderEntries(const VisibilityReport& report, int width, bool cut, std::string& out) {
  const bool interesting = std::any_of(
      report.entries.begin(), report.entries.end(),
      [](const EntryDiagnostic& e) { return e.outcome != EntryOutcome::kVisible; });
  if (!interesting) return;
  out += "\nCUDA_VISIBLE_DEVICES entries:\n";
  const int kTextMaxWidth = cut ? 24 : std::numeric_limits<int>::max();
  int text_width = 0;
  for (const EntryDiagnostic& e : report.entries) {
    text_width = std::max(text_width, std::min(DisplayWidth(EscapeControl(e.text)) + 2, kTextMaxWidth));
  }
  for (const EntryDiagnostic& e : report.entries) {
    const std::string head =
        "  " + PadLeft(std::to_string(e.position + 1), 2) + "  " +
        PadRight(TruncateToWidth("\"" + EscapeControl(e.text) + "\"", kTextMaxWidth), text_width) + "  ";
    std::string text = visibility::EntryOutcomeName(e.outcome);
    if (!e.reason.empty()) text += ": " + EscapeControl(e.reason);
    AppendWrapped(out, head, DisplayWidth(head), text, width);
  }
}

void RenderVisible(const VisibilityReport& report, int width, bool cut, bool color, std::string& out) {
  if (!report.has_driver) return;
  std::string title = "Visible to CUDA (" + std::string(visibility::DeviceOrderName(report.device_order));
  if (report.order_is_estimate) title += ", order estimated";
  title += "):";
  out += "\n" + Colorize(title, Color::kBold, color) + "\n";
  if (report.visible.empty()) {
    out += "  (no device)\n";
    return;
  }
  int cuda_width = 4;  // "CUDA"
  int gpu_width = 3;   // "GPU"
  for (const VisibleDevice& v : report.visible) {
    cuda_width = std::max(cuda_width, DisplayWidth("cuda:" + std::to_string(v.cuda_index.value)));
    if (v.index) gpu_width = std::max(gpu_width, DisplayWidth(std::to_string(v.index->value)));
  }
  const int fixed = 2 + cuda_width + 2 + gpu_width + 2;
  const bool full_uuid = width - fixed - kUuidFullWidth - 2 >= kNameMinWidth;
  const int uuid_width = full_uuid ? kUuidFullWidth : kUuidShortWidth;
  const int name_width = cut ? width - fixed - uuid_width - 2 : std::numeric_limits<int>::max();
  out += "  " + PadRight("CUDA", cuda_width) + "  " + PadRight("GPU", gpu_width) + "  " +
         PadRight("UUID", uuid_width) + "  NAME\n";
  for (const VisibleDevice& v : report.visible) {
    const std::string uuid = v.uuid ? (full_uuid ? *v.uuid : ShortUuid(*v.uuid)) : "-";
    const std::string name = TruncateToWidth(EscapeControl(v.name.value_or("-")), name_width);
    std::string row = "  " + PadRight("cuda:" + std::to_string(v.cuda_index.value), cuda_width) +
                      "  " + PadLeft(v.index ? std::to_string(v.index->value) : "-", gpu_width) +
                      "  " + PadRight(TruncateToWidth(uuid, uuid_width), uuid_width) + "  " + name;
    while (!row.empty() && row.back() == ' ') row.pop_back();
    out += row + "\n";
    const std::string notes = EscapeControl(DeviceNotes(v));
    if (!notes.empty()) {
      const Color c = (!v.is_healthy || v.is_outside_allocation) ? Color::kRed : Color::kDim;
      const std::vector<std::string> lines = Wrap(notes, width - fixed);
      for (const std::string& line : lines) {
        out += std::string(static_cast<size_t>(fixed), ' ') + Colorize(line, c, color) + "\n";
      }
    }
  }
}

void RenderWarnings(const VisibilityReport& report, int width, bool color, std::string& out) {
  if (report.warnings.empty()) return;
  out += "\n" + Colorize("Warnings:", Color::kBold, color) + "\n";
  for (const Warning& w : report.warnings) {
    const std::string code = visibility::WarningCodeName(w.code);
    // Wrap on plain text, colour the code afterwards so widths stay right.
    const std::vector<std::string> lines = Wrap(code + ": " + EscapeControl(w.message), width - 4);
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i == 0) {
        out += "  " + Colorize("!", WarningColor(w.code), color) + " " +
               Colorize(code, WarningColor(w.code), color) + lines[0].substr(code.size()) + "\n";
      } else {
        out += "    " + lines[i] + "\n";
      }
    }
  }
}

void RenderNotes(const VisibilityReport& report, int width, bool color, std::string& out) {
  if (report.notes.empty()) return;
  out += "\n" + Colorize("Notes:", Color::kBold, color) + "\n";
  for (const std::string& note : report.notes) AppendWrapped(out, "  - ", 4, EscapeControl(note), width);
}

}  // namespace

nlohmann::ordered_json ExplainToJson(const VisibilityReport& report) {
  nlohmann::ordered_json j;
  j["schema_version"] = 1;
  j["device_order"] = visibility::DeviceOrderName(report.device_order);
  j["order_is_estimate"] = report.order_is_estimate;
  j["gpu_count"] = report.has_driver ? nlohmann::ordered_json(report.gpu_count)
                                     : nlohmann::ordered_json(nullptr);
  j["driver_error"] = OptString(report.driver_error);

  nlohmann::ordered_json layers = nlohmann::ordered_json::array();
  for (const auto& layer : report.layers) {
    layers.push_back({{"name", layer.name},
                      {"variable", layer.variable},
                      {"value", OptString(layer.value)},
                      {"effect", layer.effect}});
  }
  j["layers"] = std::move(layers);

  nlohmann::ordered_json entries = nlohmann::ordered_json::array();
  for (const EntryDiagnostic& e : report.entries) {
    entries.push_back({{"entry", e.position + 1},
                       {"text", e.text},
                       {"outcome", visibility::EntryOutcomeName(e.outcome)},
                       {"reason", e.reason},
                       {"index", e.device ? nlohmann::ordered_json(e.device->value)
                                          : nlohmann::ordered_json(nullptr)}});
  }
  j["entries"] = std::move(entries);

  nlohmann::ordered_json visible = nlohmann::ordered_json::array();
  for (const VisibleDevice& v : report.visible) {
    visible.push_back({{"cuda_index", v.cuda_index.value},
                       {"index", v.index ? nlohmann::ordered_json(v.index->value)
                                         : nlohmann::ordered_json(nullptr)},
                       {"uuid", OptString(v.uuid)},
                       {"name", OptString(v.name)},
                       {"compute_capability", OptString(v.compute_capability)},
                       {"capabilities", CapabilitiesJson(v.compute_capability)},
                       {"mig", OptString(v.mig)},
                       {"healthy", v.is_healthy},
                       {"outside_allocation", v.is_outside_allocation},
                       {"leased_to_uids", v.leased_to_uids},
                       {"used_by_uids", v.used_by_uids},
                       {"intruder_pids", v.intruder_pids}});
  }
  j["visible"] = std::move(visible);
  j["allowed_uuids"] = report.allowed_uuids ? nlohmann::ordered_json(*report.allowed_uuids)
                                            : nlohmann::ordered_json(nullptr);

  // The Slurm layer's index mapping (docs/slurm.md); null outside a Slurm allocation.
  nlohmann::ordered_json slurm = nullptr;
  if (report.slurm) {
    const visibility::SlurmGpus& s = *report.slurm;
    nlohmann::ordered_json mapping = nlohmann::ordered_json::array();
    for (const visibility::SlurmGpuMapping& m : s.mapping) {
      mapping.push_back({{"slurm_index", m.slurm_index},
                         {"file", OptString(m.file)},
                         {"minor_number", m.minor ? nlohmann::ordered_json(*m.minor) : nlohmann::ordered_json(nullptr)},
                         {"index", m.index ? nlohmann::ordered_json(m.index->value) : nlohmann::ordered_json(nullptr)},
                         {"uuid", OptString(m.uuid)}});
    }
    slurm = {{"variable", s.variable},
             {"value", s.value},
             {"constrained", s.is_constrained},
             {"constrained_reason", s.constrained_reason},
             {"cuda_visible_devices_from_slurm", s.cvd_is_slurms},
             {"mapping_source", s.mapping_source},
             {"minor_is_slurm_index", s.minor_is_slurm_index},
             {"nvml_shows_only_job", s.nvml_shows_only_job},
             {"mapping", std::move(mapping)}};
  }
  j["slurm"] = std::move(slurm);

  nlohmann::ordered_json warnings = nlohmann::ordered_json::array();
  for (const Warning& w : report.warnings) {
    warnings.push_back({{"code", visibility::WarningCodeName(w.code)}, {"message", w.message}});
  }
  j["warnings"] = std::move(warnings);
  j["notes"] = report.notes;
  return j;
}

// Values from the environment (and text quoting them) go through EscapeControl, so that a
// hostile CUDA_VISIBLE_DEVICES cannot move the cursor or fake lines.
std::string RenderExplainText(const VisibilityReport& report, const TerminalInfo& term) {
  const int width = std::max(term.width, kMinWidth);
  std::string out;
  RenderLayers(report, width, term.cut_to_width, term.use_color, out);
  RenderEntries(report, width, term.cut_to_width, out);
  RenderVisible(report, width, term.cut_to_width, term.use_color, out);
  RenderWarnings(report, width, term.use_color, out);
  RenderNotes(report, width, term.use_color, out);
  return out;
}

}  // namespace gpuman::render
