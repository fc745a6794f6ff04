#include "render/health_view.h"

#include <algorithm>
#include <sstream>
#include <vector>

#include "base/strings.h"
#include "render/format.h"

namespace gpuman::render {
namespace {

// Greedy word wrap to `width` display columns; a word longer than a line is cut.
std::vector<std::string> Wrap(const std::string& text, int width) {
  std::vector<std::string> lines(1);
  for (const std::string& word : Split(text, ' ')) {
    if (word.empty()) continue;
    std::string& line = lines.back();
    if (line.empty()) {
      line = TruncateToWidth(word, width);
    } else if (DisplayWidth(line) + 1 + DisplayWidth(word) <= width) {
      line += " " + word;
    } else {
      lines.push_back(TruncateToWidth(word, width));
    }
  }
  return lines;
}

}  // namespace

std::string DrainNote(const HealthDrain& d) {
  std::string gpu = d.gpu_index ? "GPU " + std::to_string(*d.gpu_index) : "GPU " + d.drain.uuid;
  std::string by = d.drain.by_user.empty() ? "uid " + std::to_string(d.drain.by_uid) : d.drain.by_user;
  std::string reason = d.drain.reason.empty() ? "no reason given" : d.drain.reason;
  return gpu + " is drained: " + reason + " (by " + by + " since " +
         FormatIsoUtcSeconds(d.drain.since_unix_ms / 1000) + ")";
}

std::string RenderHealthText(const model::HealthReport& report, int gpu_count, const TerminalInfo& term,
                             const std::vector<HealthDrain>& drains) {
  std::ostringstream out;
  int fatal = 0, warnings = 0;
  for (const auto& f : report.findings) (f.severity == model::Severity::kFatal ? fatal : warnings)++;
  std::string sources = report.xid_sources.empty() ? "none" : Join(report.xid_sources, ", ");
  if (fatal == 0 && warnings == 0) {
    out << Colorize("healthy", Color::kGreen, term.use_color) << ": all " << gpu_count << " GPU"
        << (gpu_count == 1 ? "" : "s") << " passed (Xids from: " << sources << ")\n";
  } else {
    std::string head = fatal > 0 ? Colorize("UNHEALTHY", Color::kRed, term.use_color)
                                 : Colorize("warnings", Color::kYellow, term.use_color);
    out << head << ": " << fatal << " fatal, " << warnings << " warning" << (warnings == 1 ? "" : "s") << " on "
        << gpu_count << " GPU" << (gpu_count == 1 ? "" : "s") << " (Xids from: " << sources << ")\n";
    const int width = std::max(80, term.width);
    out << PadRight("SEVERITY", 8) << "  " << PadRight("GPU", 3) << "  " << PadRight("CODE", 24) << "  DETAILS\n";
    for (const auto& f : report.findings) {
      std::string sev = Colorize(PadRight(model::SeverityName(f.severity), 8),
                                 f.severity == model::Severity::kFatal ? Color::kRed : Color::kYellow, term.use_color);
      std::string gpu = f.gpu_index ? std::to_string(*f.gpu_index) : "-";
      std::string code = f.code == "xid" && f.xid ? "xid " + std::to_string(*f.xid) : f.code;
      std::string details = f.message;
      if (f.count > 1) details += " (x" + std::to_string(f.count) + ")";
      if (f.last_seen_unix_ms && f.code == "xid") details += ", last " + FormatIsoUtcMillis(*f.last_seen_unix_ms);
      // Details wrap at word boundaries under the DETAILS column: nothing is cut off.
      std::vector<std::string> lines = Wrap(details, width - 41);
      out << sev << "  " << PadRight(gpu, 3) << "  " << PadRight(code, 24) << "  " << lines[0] << "\n";
      for (size_t i = 1; i < lines.size(); ++i) out << std::string(41, ' ') << lines[i] << "\n";
    }
  }
  std::vector<std::string> uncovered;  // quarantined GPUs the drain notes do not name
  for (const auto& uuid : report.quarantined) {
    bool covered = std::any_of(drains.begin(), drains.end(), [&](const HealthDrain& d) { return d.drain.uuid == uuid; });
    if (!covered) uncovered.push_back(uuid);
  }
  if (!uncovered.empty()) {
    out << "drained by the health watch: " << Join(uncovered, ", ") << "\n";
  }
  for (const auto& d : drains) {
    out << Colorize("note:", Color::kYellow, term.use_color) << " " << DrainNote(d) << "\n";
  }
  for (const auto& note : report.notes) out << "note: " << note << "\n";
  return out.str();
}

}  // namespace gpuman::render
