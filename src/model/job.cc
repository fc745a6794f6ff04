#include "model/job.h"

#include <algorithm>
#include <utility>

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
  std::string out;
  out.reserve(pattern.size());
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c != '%' || i + 1 == pattern.size()) {
      out += c;
      continue;
    }
    switch (pattern[i + 1]) {
      case 'j': out += std::to_string(job.id); break;
      case 'u': out += job.user.empty() ? std::to_string(job.uid) : job.user; break;
      case 'x':
        for (char n : job.name) out += n == '/' ? '_' : n;
        break;
      case '%': out += '%'; break;
      default: out += c; continue;  // kept as written: the next character is copied next
    }
    ++i;
  }
  return out;
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
