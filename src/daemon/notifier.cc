#include "daemon/notifier.h"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

#include "base/strings.h"
#include "model/job_notify.h"
#include "sched/supervisor.h"

namespace gpuman::daemon {
namespace {

constexpr int64_t kScanEveryMs = 1000;
constexpr int64_t kMaxDueRead = 256;
constexpr const char* kDefaultUserPath = "/usr/local/bin:/usr/bin:/bin";

bool IsDirectory(const std::string& path) {
  struct stat st {};
  return !path.empty() && stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

monitor::HookRunnerOptions RunnerOptions(const NotifierOptions& options, const Clock& clock) {
  monitor::HookRunnerOptions r;
  r.max_concurrent = options.max_running;
  r.timeout_ms = options.timeout_ms;
  r.kill_grace_ms = options.kill_grace_ms;
  r.clock = &clock;
  r.label = "notify";
  r.search_path = "";  // programs are absolute paths (resolved at submit)
  return r;
}

}  // namespace

Status CheckMailHook(const NotifierOptions& options) {
  if (!options.mail_program) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "--notify mail: this machine has no mail program (an admin sets [notify] mail in the machine's config)");
  }
  if (access(options.mail_program->c_str(), X_OK) != 0) {
    return MakeError(ErrorCode::kInvalidArgument, "--notify mail: the machine's mail program " + *options.mail_program +
                                                      " is not there or cannot be run");
  }
  return {};
}

Notifier::Notifier(NotifierOptions options, store::JobStore& jobs, const Clock& clock)
    : options_(std::move(options)), jobs_(jobs), runner_(RunnerOptions(options_, clock)) {}

void Notifier::Tick(int64_t now) {
  for (const monitor::HookOutcome& outcome : runner_.Reap()) {
    // "notify /x/tell: exited with status 3" -> "exited with status 3"
    const std::string prefix = "notify " + outcome.program + ": ";
    std::string what = outcome.message.rfind(prefix, 0) == 0 ? outcome.message.substr(prefix.size()) : outcome.message;
    Mark(outcome.tag, outcome.program, what, outcome.ok, now);
    waiting_for_slot_ = true;  // a slot is free
  }
  if (now < next_scan_ms_ && now >= next_scan_ms_ - kScanEveryMs) return;
  next_scan_ms_ = now + kScanEveryMs;
  auto version = jobs_.CurrentVersion();
  if (!version) return;
  if (scanned_ && *scanned_ == *version && !waiting_for_slot_) return;
  auto due = jobs_.DueNotifications(0, kMaxDueRead);
  if (!due) {
    std::fprintf(stderr, "gpuman daemon: notifications: %s\n", due.error().message.c_str());
    return;
  }
  waiting_for_slot_ = false;
  for (const model::Job& job : *due) {
    if (running_.count(job.id)) continue;
    int of_user = 0;
    for (const auto& [id, uid] : running_) of_user += uid == job.uid;
    if (runner_.running() >= options_.max_running || of_user >= options_.max_running_per_user) {
      waiting_for_slot_ = true;
      continue;
    }
    Start(job, now);
  }
  // The version read before the list: a job that ended since is seen at the next look
  // (marks written here change it too, which costs one more look).
  scanned_ = *version;
}

void Notifier::Start(const model::Job& due, int64_t now) {
  auto full = jobs_.Get(due.id);  // the job's PATH is in its environment
  if (!full || !*full) return;
  model::Job& job = **full;
  if (!job.notify) return;
  if (job.output_path.empty()) job.output_path = sched::DefaultLogPath(job);  // as the supervisor wrote it
  model::NotifyFacts facts = model::NotifyFactsOf(job);
  if (model::IsArrayHead(job)) {
    auto counts = jobs_.ArrayStateCounts(job.id);
    auto standing = jobs_.ArrayOutcome(job.id);
    if (!counts || !standing) return;  // the next look tries again
    std::optional<int> exit_code;
    if (*standing && (*standing)->state != model::JobState::kSucceeded) exit_code = (*standing)->exit_code;
    facts = model::ArrayNotifyFacts(job, *counts, exit_code);
  }
  std::string home = "/";
  if (passwd* pw = getpwuid(job.uid)) {
    home = pw->pw_dir;
    facts.user = pw->pw_name;
  }
  auto path = job.env.find("PATH");
  const std::string search = path != job.env.end() && !path->second.empty() ? path->second : kDefaultUserPath;

  monitor::HookCommand command;
  command.tag = job.id;
  if (job.notify->mail) {
    if (auto ok = CheckMailHook(options_); !ok) {
      Mark(job.id, "mail", "not sent: " + ok.error().message, false, now);
      return;
    }
    command.argv = model::MailArgv(*options_.mail_program, facts.user);
    command.payload = model::MailMessage(facts);
  } else {
    command.argv = model::ExpandNotifyArgv(job.notify->argv, facts);
  }
  command.env = model::NotifyEnv(facts, home, search);
  command.cwd = IsDirectory(job.cwd) ? job.cwd : IsDirectory(home) ? home : "/";
  command.output_file = facts.log;
  // Exactly the owner's identity: as the supervisor runs the job itself.
  if (geteuid() == 0 && job.uid != 0) {
    command.uid = job.uid;
    command.gid = job.gid;
    command.groups = sched::GroupsOfOwner(job);
  } else if (geteuid() != job.uid) {
    Mark(job.id, command.argv[0], "not run: this daemon runs as uid " + std::to_string(geteuid()) + ", the job's owner is uid " +
                                      std::to_string(job.uid),
         false, now);
    return;
  }
  if (auto started = runner_.Start(command); !started) {
    Mark(job.id, command.argv[0], "could not start: " + started.error().message, false, now);
    return;
  }
  running_[job.id] = job.uid;
}

void Notifier::Mark(int64_t id, const std::string& program, const std::string& outcome, bool ok, int64_t now) {
  running_.erase(id);
  if (!ok) {
    std::fprintf(stderr, "gpuman daemon: notify job %lld (%s): %s\n", static_cast<long long>(id),
                 EscapeControl(program).c_str(), EscapeControl(outcome).c_str());
  }
  // Not marked (busy, full): it runs again at a later look; at least once rather than lost.
  if (auto marked = jobs_.MarkNotified(id, now, outcome); !marked) {
    std::fprintf(stderr, "gpuman daemon: notify job %lld: %s\n", static_cast<long long>(id), marked.error().message.c_str());
  }
}

}  // namespace gpuman::daemon
