#include "model/job.h"

#include <algorithm>
#include <utility>

#include "base/strings.h"

namespace gpuman::model {

namespace {
constexpr std::pair<JobState, const char*> kNames[] = {
    {JobState::kQueued, "queued"},       {JobState::kHeld, "held"},
    {JobState::kStarting, "starting"},   {JobState::kRunning, "running"},
    {JobState::kSucceeded, "succeeded"}, {JobState::kFailed, "failed"},
    {JobState::kCancelled, "cancelled"}, {JobState::kTimedOut, "timed_out"},
};
}  // namespace

const char* JobStateName(JobState state) {
  for (const auto& [s, name] : kNames) {
    if (s == state) return name;
  }
  return "queued";
}

std::optional<JobState> ParseJobState(const std::string& name) {
  for (const auto& [s, n] : kNames) {
    if (name == n) return s;
  }
  return std::nullopt;
}

bool IsFinal(JobState state) {
  return state == JobState::kSucceeded || state == JobState::kFailed || state == JobState::kCancelled ||
         state == JobState::kTimedOut;
}

namespace {
constexpr std::pair<JobFailure, const char*> kFailureNames[] = {
    {JobFailure::kNone, ""},
    {JobFailure::kCommandNotFound, "command_not_found"},
    {JobFailure::kCannotExecute, "cannot_execute"},
    {JobFailure::kCannotStart, "cannot_start"},
};

std::string Over(const std::string& field, size_t size, size_t limit) {
  return field + ": " + std::to_string(size) + " bytes; the limit is " + std::to_string(limit) + " bytes";
}
}  // namespace

const char* JobFailureName(JobFailure failure) {
  for (const auto& [f, name] : kFailureNames) {
    if (f == failure) return name;
  }
  return "";
}

std::optional<JobFailure> ParseJobFailure(const std::string& name) {
  for (const auto& [f, n] : kFailureNames) {
    if (name == n) return f;
  }
  return std::nullopt;
}

std::optional<std::string> CheckJobFields(const std::string& name, const std::vector<std::string>& argv,
                                          const std::map<std::string, std::string>& env, const std::string& cwd,
                                          const std::string& output_path) {
  if (name.size() > kMaxJobNameBytes) return Over("--name", name.size(), kMaxJobNameBytes);
  if (argv.size() > kMaxJobArgs) {
    return "command: " + std::to_string(argv.size()) + " arguments; the limit is " + std::to_string(kMaxJobArgs);
  }
  size_t total = 0;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string field = "command argument " + std::to_string(i);
    if (argv[i].size() > kMaxJobArgBytes) return Over(field, argv[i].size(), kMaxJobArgBytes);
    if (argv[i].find('\0') != std::string::npos) return field + ": holds a NUL byte, which exec cannot pass";
    total += argv[i].size() + 1;
  }
  if (total > kMaxJobArgvBytes) return Over("command", total, kMaxJobArgvBytes);
  size_t env_total = 0;
  for (const auto& [k, v] : env) {
    if (k.empty() || k.find('=') != std::string::npos || k.find('\0') != std::string::npos ||
        v.find('\0') != std::string::npos) {
      return "environment: a variable's name is empty or holds '=' or a NUL byte, or its value holds a NUL byte";
    }
    env_total += k.size() + v.size() + 2;
  }
  if (env_total > kMaxJobEnvBytes) return Over("environment", env_total, kMaxJobEnvBytes);
  if (cwd.size() > kMaxJobPathBytes) return Over("working directory", cwd.size(), kMaxJobPathBytes);
  if (output_path.size() > kMaxJobPathBytes) return Over("--output", output_path.size(), kMaxJobPathBytes);
  if (cwd.find('\0') != std::string::npos) return "working directory: holds a NUL byte";
  if (output_path.find('\0') != std::string::npos) return "--output: holds a NUL byte";
  return std::nullopt;
}

std::string ExpandOutputPattern(const std::string& pattern, const Job& job) {
  return ExpandPercentPatterns(pattern, [&](char c) -> std::optional<std::string> {
    switch (c) {
      case 'j': return std::to_string(job.id);
      case 'A': return std::to_string(job.array_id.value_or(job.id));
      case 'a': return std::to_string(job.array_task.value_or(0));
      case 'u': return job.user.empty() ? std::to_string(job.uid) : job.user;
      case 'x': {
        std::string name = job.name;
        std::replace(name.begin(), name.end(), '/', '_');
        return name;
      }
      default: return std::nullopt;
    }
  });
}

Result<JobRef> ParseJobRef(std::string_view text) {
  auto bad = [&] {
    return MakeError(ErrorCode::kInvalidArgument,
                     "'" + EscapeControl(std::string(text)) + "': not a job ID (12, or 12_7 for task 7 of array 12)");
  };
  JobRef ref;
  const size_t underscore = text.find('_');
  const std::optional<int64_t> id = ParseInt(text.substr(0, underscore));
  if (!id || *id < 1) return bad();
  ref.id = *id;
  if (underscore != std::string_view::npos) {
    const std::optional<int64_t> task = ParseInt(text.substr(underscore + 1));
    if (!task || *task < 0 || *task > kMaxArrayTaskIndex) return bad();
    ref.task = *task;
  }
  return ref;
}

std::string FormatJobRef(const JobRef& ref) {
  return ref.task ? std::to_string(ref.id) + "_" + std::to_string(*ref.task) : std::to_string(ref.id);
}

JobRef RefOf(const Job& job) {
  if (job.array_id && job.array_task) return JobRef{*job.array_id, *job.array_task};
  return JobRef{job.id, std::nullopt};
}

std::string JobName(const Job& job) { return FormatJobRef(RefOf(job)); }

bool RefNames(const JobRef& ref, const Job& job) {
  if (ref.task) return job.array_id == ref.id && job.array_task == ref.task;
  return job.id == ref.id || job.array_id == ref.id;
}

Result<ArraySpec> ParseArraySpec(std::string_view spec) {
  auto bad = [&](std::string_view item, const std::string& why) {
    return MakeError(ErrorCode::kInvalidArgument, "--array: '" + EscapeControl(std::string(item)) + "': " + why);
  };
  ArraySpec out;
  std::string_view list = spec;
  if (const size_t percent = spec.find('%'); percent != std::string_view::npos) {
    list = spec.substr(0, percent);
    const std::optional<int64_t> limit = ParseInt(spec.substr(percent + 1));
    if (!limit || *limit < 1 || *limit > static_cast<int64_t>(kMaxArrayTasks)) {
      return bad(spec.substr(percent), "the limit after % is a number of tasks from 1 to " + std::to_string(kMaxArrayTasks));
    }
    out.limit = static_cast<int>(*limit);
  }
  if (Trim(list).empty()) return bad(spec, "no tasks (give them as 0-99, 1,5,9 or 0-98:2, then %N to run at most N at once)");
  const std::string max_index = std::to_string(kMaxArrayTaskIndex);
  while (true) {
    const size_t comma = list.find(',');
    const std::string_view item = list.substr(0, comma);
    std::string_view range = item;
    int64_t step = 1;
    if (const size_t colon = item.find(':'); colon != std::string_view::npos) {
      range = item.substr(0, colon);
      const std::optional<int64_t> s = ParseInt(item.substr(colon + 1));
      if (!s || *s < 1) return bad(item, "the step after : is a number from 1");
      step = *s;
    }
    const size_t dash = range.find('-');
    const std::optional<int64_t> first = ParseInt(range.substr(0, dash));
    const std::optional<int64_t> last = dash == std::string_view::npos ? first : ParseInt(range.substr(dash + 1));
    if (!first || !last) return bad(item, "not a task index or range (0-" + max_index + ")");
    if (*first > kMaxArrayTaskIndex || *last > kMaxArrayTaskIndex) return bad(item, "task indices go up to " + max_index);
    if (*last < *first) return bad(item, "the range is backwards");
    if (dash == std::string_view::npos && step != 1) return bad(item, "a step needs a range (0-98:2)");
    for (int64_t t = *first; t <= *last; t += step) {
      out.tasks.push_back(t);
      if (out.tasks.size() > kMaxArrayTasks) {
        return bad(spec, "more than " + std::to_string(kMaxArrayTasks) + " tasks; submit the sweep in parts");
      }
    }
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  std::sort(out.tasks.begin(), out.tasks.end());
  out.tasks.erase(std::unique(out.tasks.begin(), out.tasks.end()), out.tasks.end());
  return out;
}

std::string FormatTaskRanges(const std::vector<int64_t>& tasks) {
  std::string out;
  for (size_t i = 0; i < tasks.size();) {
    size_t j = i;
    while (j + 1 < tasks.size() && tasks[j + 1] == tasks[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(tasks[i]);
    if (j > i) out += '-' + std::to_string(tasks[j]);
    i = j + 1;
  }
  return out;
}

bool IsMigRequest(const GpuRequest& request) {
  if (request.mig_profile) return true;
  return request.gpus && std::any_of(request.gpus->begin(), request.gpus->end(),
                                     [](const std::string& u) { return u.starts_with("MIG-"); });
}

std::optional<std::string> RefuseMigInQueue(const GpuRequest& request) {
  if (!IsMigRequest(request)) return std::nullopt;
  return "MIG devices are not for queued jobs yet: lease them with run --mig PROFILE or select --mig PROFILE --lease "
         "(docs/share.md, \"MIG\")";
}

GpuRequest WithAllowedAsExclusions(GpuRequest request, const std::vector<std::string>& machine_uuids) {
  if (request.allowed) {
    const std::vector<std::string>& allowed = *request.allowed;
    for (const auto& uuid : machine_uuids) {
      const bool is_allowed = std::find(allowed.begin(), allowed.end(), uuid) != allowed.end();
      const bool is_excluded =
          std::find(request.exclude.begin(), request.exclude.end(), uuid) != request.exclude.end();
      if (!is_allowed && !is_excluded) request.exclude.push_back(uuid);
    }
  }
  request.allowed.reset();
  request.drained.clear();
  return request;
}

}  // namespace gpuman::model
