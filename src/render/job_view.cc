#include "render/job_view.h"

#include <algorithm>
#include <sstream>

#include "base/duration.h"
#include "base/strings.h"
#include "render/format.h"

namespace gpuman::render {

std::string DescribeRequest(const model::GpuRequest& r) {
  std::vector<std::string> parts{"-n " + std::to_string(r.count)};
  if (r.gpus) parts.push_back("--gpus " + (r.gpus->empty() ? std::string("none") : Join(*r.gpus, ",")));
  if (!r.exclude.empty()) parts.push_back("--exclude " + Join(r.exclude, ","));
  if (r.model) parts.push_back("--model " + *r.model);
  if (r.min_free_memory_bytes) parts.push_back("--min-free-memory " + FormatBytes(*r.min_free_memory_bytes));
  if (r.max_utilization_percent) parts.push_back("--max-utilization " + std::to_string(*r.max_utilization_percent));
  if (r.min_compute_capability) parts.push_back("--min-compute-capability " + *r.min_compute_capability);
  if (r.allow_shared) parts.push_back("--allow-shared");
  return Join(parts, " ");
}

std::string JobDetailText(const model::Job& j) {
  std::ostringstream out;
  // Names, commands and reasons are other users' text: control characters and terminal
  // escapes are shown, never sent (EscapeControl). JSON escapes them by itself.
  std::vector<std::string> argv;
  for (const auto& a : j.argv) argv.push_back(EscapeControl(a));
  const std::string failure = j.failure == model::JobFailure::kNone ? "" : std::string(" [") + model::JobFailureName(j.failure) + "]";
  out << "job " << j.id << " (" << EscapeControl(j.name) << ")\n"
      << "  state:     " << model::JobStateName(j.state) << (j.reason.empty() ? "" : " — " + EscapeControl(j.reason)) << failure << "\n"
      << "  user:      " << EscapeControl(j.user) << "\n"
      << "  gpus:      " << (j.gpu_uuids.empty() ? "-" : EscapeControl(Join(j.gpu_uuids, ","))) << " (wants " << j.request.count << ")\n"
      << "  asks for:  " << EscapeControl(DescribeRequest(j.request)) << "\n"
      << "  priority:  " << j.priority << "\n"
      << "  submitted: " << FormatIsoUtcMillis(j.submitted_unix_ms) << "\n";
  if (j.started_unix_ms) out << "  started:   " << FormatIsoUtcMillis(*j.started_unix_ms) << "\n";
  if (j.ended_unix_ms) out << "  ended:     " << FormatIsoUtcMillis(*j.ended_unix_ms) << "\n";
  if (j.exit_code) out << "  exit code: " << *j.exit_code << "\n";
  if (j.idle_since_unix_ms) {
    out << "  idle:      since " << FormatIsoUtcMillis(*j.idle_since_unix_ms) << " (its GPUs stay below the idle threshold)\n";
  }
  if (!j.argv.empty()) out << "  command:   " << Join(argv, " ") << "\n  cwd:       " << EscapeControl(j.cwd) << "\n";
  if (!j.output_path.empty()) out << "  output:    " << EscapeControl(j.output_path) << "\n";
  return out.str();
}

std::string QueueTable(const std::vector<model::Job>& jobs, int64_t now_unix_ms, int width, bool cut) {
  const int64_t now = now_unix_ms;
  if (jobs.empty()) return "no jobs\n";
  int user_width = 10;
  int name_width = 16;
  if (!cut) {
    for (const auto& j : jobs) {
      user_width = std::max(user_width, DisplayWidth(EscapeControl(j.user)));
      name_width = std::max(name_width, DisplayWidth(EscapeControl(j.name)));
    }
  }
  // A cell cut to its column (a no-op when nothing is cut: the column fits its longest).
  const auto cell = [](const std::string& text, int w) { return PadRight(TruncateToWidth(text, w), w); };
  std::string out = PadLeft("ID", 6) + "  " + PadRight("STATE", 10) + "  " + PadRight("USER", user_width) +
                    "  " + PadRight("GPUS", 5) + "  " + PadRight("NAME", name_width) + "  WHY / WHEN\n";
  for (const auto& j : jobs) {
    std::string when = EscapeControl(j.reason);
    if (j.state == model::JobState::kRunning && j.started_unix_ms) when = "running " + FormatDurationMs(now - *j.started_unix_ms);
    if (j.state == model::JobState::kRunning && j.idle_since_unix_ms) {
      when += ", IDLE " + FormatDurationMs(now - *j.idle_since_unix_ms);
    }
    if (when.empty() && model::IsFinal(j.state) && j.ended_unix_ms) {
      when = "ended " + FormatDurationMs(now - *j.ended_unix_ms) + " ago";
    }
    if (when.empty()) when = "queued " + FormatDurationMs(now - j.submitted_unix_ms) + " ago";
    std::string line = PadLeft(std::to_string(j.id), 6) + "  " + PadRight(model::JobStateName(j.state), 10) +
                       "  " + cell(EscapeControl(j.user), user_width) + "  " +
                       PadRight(std::to_string(j.request.count), 5) + "  " +
                       cell(EscapeControl(j.name), name_width) + "  " + when;
    out += (cut ? TruncateToWidth(line, width) : line) + "\n";
  }
  return out;
}

}  // namespace gpuman::render
