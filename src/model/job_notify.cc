#include "model/job_notify.h"

#include "base/strings.h"

namespace gpuman::model {
namespace {

std::string HeaderSafe(std::string_view text) {
  std::string out;
  for (char c : text) out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
  return out;
}

}  // namespace

NotifyFacts NotifyFactsOf(const Job& job) {
  NotifyFacts f;
  f.id = JobName(job);
  f.name = job.name;
  f.user = job.user.empty() ? std::to_string(job.uid) : job.user;
  f.state = JobStateName(job.state);
  f.exit_code = job.exit_code;
  f.reason = job.reason;
  f.log = job.output_path;
  return f;
}

NotifyFacts ArrayNotifyFacts(const Job& head, const std::map<JobState, int64_t>& by_state,
                             std::optional<int> exit_code) {
  NotifyFacts f = NotifyFactsOf(head);
  f.id = std::to_string(head.array_id.value_or(head.id));
  f.reason.clear();
  f.exit_code = exit_code;
  NotifyFacts::Tasks t;
  auto count = [&](JobState s) {
    auto it = by_state.find(s);
    return it == by_state.end() ? int64_t{0} : it->second;
  };
  for (const auto& [state, n] : by_state) t.total += n;
  t.succeeded = count(JobState::kSucceeded);
  t.failed = count(JobState::kFailed);
  t.cancelled = count(JobState::kCancelled);
  t.timed_out = count(JobState::kTimedOut);
  if (t.succeeded == t.total) {
    f.state = JobStateName(JobState::kSucceeded);
    f.exit_code = 0;
  } else if (t.cancelled == t.total) {
    f.state = JobStateName(JobState::kCancelled);
  } else {
    f.state = JobStateName(JobState::kFailed);
  }
  f.array = t;
  return f;
}

std::vector<std::string> ExpandNotifyArgv(const std::vector<std::string>& argv, const NotifyFacts& facts) {
  std::vector<std::string> out;
  out.reserve(argv.size());
  for (size_t i = 0; i < argv.size(); ++i) {
    if (i == 0) {
      out.push_back(argv[0]);
      continue;
    }
    out.push_back(ExpandPercentPatterns(argv[i], [&](char c) -> std::optional<std::string> {
      switch (c) {
        case 'j': return facts.id;
        case 'x': return facts.name;
        case 'u': return facts.user;
        case 's': return facts.state;
        case 'e': return facts.exit_code ? std::to_string(*facts.exit_code) : std::string();
        default: return std::nullopt;
      }
    }));
  }
  return out;
}

std::vector<std::string> NotifyEnv(const NotifyFacts& facts, const std::string& home, const std::string& path) {
  std::vector<std::string> env = {
      "HOME=" + home,
      "USER=" + facts.user,
      "LOGNAME=" + facts.user,
      "PATH=" + path,
      "GPUMAN_JOB_ID=" + facts.id,
      "GPUMAN_JOB_NAME=" + facts.name,
      "GPUMAN_JOB_STATE=" + facts.state,
      "GPUMAN_JOB_EXIT_CODE=" + (facts.exit_code ? std::to_string(*facts.exit_code) : std::string()),
      "GPUMAN_JOB_LOG=" + facts.log,
  };
  if (!facts.reason.empty()) env.push_back("GPUMAN_JOB_REASON=" + facts.reason);
  if (facts.array) {
    env.push_back("GPUMAN_ARRAY_TASKS=" + std::to_string(facts.array->total));
    env.push_back("GPUMAN_ARRAY_TASKS_SUCCEEDED=" + std::to_string(facts.array->succeeded));
    env.push_back("GPUMAN_ARRAY_TASKS_FAILED=" + std::to_string(facts.array->failed));
    env.push_back("GPUMAN_ARRAY_TASKS_CANCELLED=" + std::to_string(facts.array->cancelled));
    env.push_back("GPUMAN_ARRAY_TASKS_TIMED_OUT=" + std::to_string(facts.array->timed_out));
  }
  return env;
}

std::string NotifySubject(const NotifyFacts& facts) {
  std::string line = "gpuman " + std::string(facts.array ? "array " : "job ") + facts.id + " (" + HeaderSafe(facts.name) +
                     ") " + facts.state;
  if (facts.exit_code) line += ", exit " + std::to_string(*facts.exit_code);
  return line;
}

std::vector<std::string> MailArgv(const std::string& program, const std::string& user) {
  return {program, "-oi", user};
}

std::string MailMessage(const NotifyFacts& facts) {
  std::string m = "To: " + HeaderSafe(facts.user) + "\n";
  m += "Subject: " + NotifySubject(facts) + "\n";
  m += "Content-Type: text/plain; charset=utf-8\n\n";
  m += NotifySubject(facts) + ".\n\n";
  m += "state:     " + facts.state + "\n";
  if (facts.exit_code) m += "exit code: " + std::to_string(*facts.exit_code) + "\n";
  if (!facts.reason.empty()) m += "reason:    " + EscapeControl(facts.reason) + "\n";
  if (facts.array) {
    const auto& t = *facts.array;
    m += "tasks:     " + std::to_string(t.total) + " (" + std::to_string(t.succeeded) + " succeeded, " +
         std::to_string(t.failed) + " failed, " + std::to_string(t.cancelled) + " cancelled, " +
         std::to_string(t.timed_out) + " timed out)\n";
  }
  if (!facts.log.empty()) m += "log:       " + EscapeControl(facts.log) + "\n";
  return m;
}

std::optional<std::string> CheckNotify(const JobNotify& notify) {
  if (notify.mail) {
    if (!notify.argv.empty()) return "--notify: mail takes no arguments";
    return std::nullopt;
  }
  if (notify.argv.empty() || notify.argv[0].empty()) return "--notify: no program given";
  if (notify.argv[0][0] != '/') return "--notify: the program must be an absolute path (" + EscapeControl(notify.argv[0]) + ")";
  if (notify.argv.size() > kMaxNotifyArgs) {
    return "--notify: " + std::to_string(notify.argv.size()) + " arguments; the limit is " + std::to_string(kMaxNotifyArgs);
  }
  size_t total = 0;
  for (const auto& a : notify.argv) {
    if (a.find('\0') != std::string::npos) return "--notify: an argument holds a NUL byte, which exec cannot pass";
    total += a.size() + 1;
  }
  if (total > kMaxNotifyArgvBytes) {
    return "--notify: " + std::to_string(total) + " bytes; the limit is " + std::to_string(kMaxNotifyArgvBytes) + " bytes";
  }
  return std::nullopt;
}

}  // namespace gpuman::model
