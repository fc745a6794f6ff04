#include "render/job_view.h"

#include <algorithm>
#include <map>
#include <sstream>
#include <utility>

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
  if (r.gpu_memory_bytes) parts.push_back("--gpu-memory " + FormatBytes(*r.gpu_memory_bytes));
  if (r.mig_profile) parts.push_back("--mig " + *r.mig_profile);
  return Join(parts, " ");
}

namespace {

// "  notify:    PROGRAM ARGS (sent 2026-...: exited with status 0)", or nothing.
std::string NotifyLine(const model::Job& j) {
  if (!j.notify) return "";
  std::string what;
  if (j.notify->mail) {
    what = "mail to " + EscapeControl(j.user);
  } else if (j.notify->argv.empty()) {
    what = "a program of its owner's";  // the command is a private field
  } else {
    std::vector<std::string> argv;
    for (const auto& a : j.notify->argv) argv.push_back(EscapeControl(a));
    what = Join(argv, " ");
  }
  std::string when;
  if (j.notified_unix_ms) {
    when = "sent " + FormatIsoUtcMillis(*j.notified_unix_ms) + (j.notify_outcome.empty() ? "" : ": " + EscapeControl(j.notify_outcome));
  } else if (model::IsFinal(j.state)) {
    when = "not sent yet";
  } else {
    when = "when the " + std::string(j.array_id ? "array" : "job") + " ends";
  }
  return "  notify:    " + what + " (" + when + ")\n";
}

}  // namespace

std::string JobDetailText(const model::Job& j) {
  std::ostringstream out;
  // Names, commands and reasons are other users' text: control characters and terminal
  // escapes are shown, never sent (EscapeControl). JSON escapes them by itself.
  std::vector<std::string> argv;
  for (const auto& a : j.argv) argv.push_back(EscapeControl(a));
  const std::string failure = j.failure == model::JobFailure::kNone ? "" : std::string(" [") + model::JobFailureName(j.failure) + "]";
  out << "job " << model::JobName(j) << " (" << EscapeControl(j.name) << ")\n"
      << "  state:     " << model::JobStateName(j.state) << (j.reason.empty() ? "" : " — " + EscapeControl(j.reason)) << failure << "\n"
      << "  user:      " << EscapeControl(j.user) << "\n"
      << "  gpus:      " << (j.gpu_uuids.empty() ? "-" : EscapeControl(Join(j.gpu_uuids, ","))) << " (wants " << j.request.count << ")\n"
      << "  asks for:  " << EscapeControl(DescribeRequest(j.request)) << "\n"
      << "  priority:  " << j.priority << "\n";
  if (j.array_id && j.array_task && !model::IsArrayHead(j)) {
    out << "  array:     task " << *j.array_task << " of array " << *j.array_id << " (job " << j.id << ")\n";
  } else if (j.array_id) {
    out << "  array:     task " << j.array_task.value_or(0) << " of array " << *j.array_id << " (`gpuman show " << *j.array_id
        << "` shows the whole array)\n";
  }
  out << "  submitted: " << FormatIsoUtcMillis(j.submitted_unix_ms) << "\n";
  if (j.started_unix_ms) out << "  started:   " << FormatIsoUtcMillis(*j.started_unix_ms) << "\n";
  if (j.ended_unix_ms) out << "  ended:     " << FormatIsoUtcMillis(*j.ended_unix_ms) << "\n";
  if (j.exit_code) out << "  exit code: " << *j.exit_code << "\n";
  if (j.idle_since_unix_ms) {
    out << "  idle:      since " << FormatIsoUtcMillis(*j.idle_since_unix_ms) << " (its GPUs stay below the idle threshold)\n";
  }
  if (!j.argv.empty()) out << "  command:   " << Join(argv, " ") << "\n  cwd:       " << EscapeControl(j.cwd) << "\n";
  if (!j.output_path.empty()) out << "  output:    " << EscapeControl(j.output_path) << "\n";
  out << NotifyLine(j);
  return out.str();
}

std::string ArrayDetailText(const model::Job& first, int64_t tasks, std::optional<int> limit,
                            const std::map<std::string, std::string>& by_state) {
  std::ostringstream out;
  out << "array " << first.array_id.value_or(first.id) << " (" << EscapeControl(first.name) << "): " << tasks
      << (tasks == 1 ? " task" : " tasks");
  if (limit) out << ", at most " << *limit << " at once";
  out << "\n";
  // In the order of a job's life, not of the names.
  for (const char* state : {"running", "starting", "queued", "held", "succeeded", "failed", "cancelled", "timed_out"}) {
    auto it = by_state.find(state);
    if (it != by_state.end()) out << "  " << PadRight(std::string(state) + ":", 11) << it->second << "\n";
  }
  out << "  user:      " << EscapeControl(first.user) << "\n"
      << "  asks for:  " << EscapeControl(DescribeRequest(first.request)) << " (each task)\n"
      << "  priority:  " << first.priority << "\n"
      << "  submitted: " << FormatIsoUtcMillis(first.submitted_unix_ms) << "\n";
  if (!first.argv.empty()) {
    std::vector<std::string> argv;
    for (const auto& a : first.argv) argv.push_back(EscapeControl(a));
    out << "  command:   " << Join(argv, " ") << "\n  cwd:       " << EscapeControl(first.cwd) << "\n";
  }
  out << NotifyLine(first);
  out << "  tasks:     gpuman show " << first.array_id.value_or(first.id) << "_N shows task N\n";
  return out.str();
}

std::string QueueTable(const std::vector<model::Job>& jobs, int64_t now_unix_ms, int width, bool cut, bool expand_arrays) {
  const int64_t now = now_unix_ms;
  if (jobs.empty()) return "no jobs\n";
  // Without expand_arrays, the tasks of an array that wait in one state share one row, as
  // squeue shows them: 12_[5-99%8]. Running and finished tasks keep a row each.
  auto pending = [](const model::Job& j) {
    return j.array_id && (j.state == model::JobState::kQueued || j.state == model::JobState::kHeld);
  };
  std::map<std::pair<int64_t, model::JobState>, std::vector<int64_t>> waiting_tasks;
  if (!expand_arrays) {
    for (const auto& j : jobs) {
      if (pending(j)) waiting_tasks[{*j.array_id, j.state}].push_back(j.array_task.value_or(0));
    }
  }
  struct Row {
    const model::Job* job;
    std::string id;
  };
  std::vector<Row> rows;
  rows.reserve(jobs.size());
  size_t id_width = 6;
  for (const auto& j : jobs) {
    std::string id = model::JobName(j);
    if (!expand_arrays && pending(j)) {
      auto it = waiting_tasks.find({*j.array_id, j.state});
      if (it == waiting_tasks.end()) continue;  // its row is already out
      if (it->second.size() > 1 || j.array_limit) {
        id = std::to_string(*j.array_id) + "_[" + model::FormatTaskRanges(it->second) +
             (j.array_limit ? "%" + std::to_string(*j.array_limit) : std::string()) + "]";
      }
      waiting_tasks.erase(it);
    }
    id_width = std::max(id_width, id.size());
    rows.push_back({&j, std::move(id)});
  }
  const int idw = static_cast<int>(id_width);
  int user_width = 10;
  int name_width = 16;
  if (!cut) {
    for (const auto& [job, id] : rows) {
      user_width = std::max(user_width, DisplayWidth(EscapeControl(job->user)));
      name_width = std::max(name_width, DisplayWidth(EscapeControl(job->name)));
    }
  }
  // A cell cut to its column (a no-op when nothing is cut: the column fits its longest).
  const auto cell = [](const std::string& text, int w) { return PadRight(TruncateToWidth(text, w), w); };
  std::string out = PadLeft("ID", idw) + "  " + PadRight("STATE", 10) + "  " + PadRight("USER", user_width) +
                    "  " + PadRight("GPUS", 5) + "  " + PadRight("NAME", name_width) + "  WHY / WHEN\n";
  for (const auto& [job, id] : rows) {
    const model::Job& j = *job;
    std::string when = EscapeControl(j.reason);
    if (j.state == model::JobState::kRunning && j.started_unix_ms) when = "running " + FormatDurationMs(now - *j.started_unix_ms);
    if (j.state == model::JobState::kRunning && j.idle_since_unix_ms) {
      when += ", IDLE " + FormatDurationMs(now - *j.idle_since_unix_ms);
    }
    if (when.empty() && model::IsFinal(j.state) && j.ended_unix_ms) {
      when = "ended " + FormatDurationMs(now - *j.ended_unix_ms) + " ago";
    }
    if (when.empty()) when = "queued " + FormatDurationMs(now - j.submitted_unix_ms) + " ago";
    std::string line = PadLeft(id, idw) + "  " + PadRight(model::JobStateName(j.state), 10) +
                       "  " + cell(EscapeControl(j.user), user_width) + "  " +
                       PadRight(std::to_string(j.request.count), 5) + "  " +
                       cell(EscapeControl(j.name), name_width) + "  " + when;
    out += (cut ? TruncateToWidth(line, width) : line) + "\n";
  }
  return out;
}

}  // namespace gpuman::render
