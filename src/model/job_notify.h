// End-of-job notifications (`submit --notify`), as plain values: the facts a notification
// tells (of a job, or of a whole array once its last task is final), the notify program's
// arguments with their %-patterns filled in, its environment, and the mail hook's command
// and message. Pure; any thread. Running them is the daemon's (daemon/notifier.h);
// docs/scheduling.md, "End-of-job notifications", says when and how.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "model/job.h"

namespace gpuman::model {

/// What a notification tells.
struct NotifyFacts {
  std::string id;    // "12", "12_7" for a lone task; an array's id for a whole array
  std::string name;
  std::string user;
  std::string state;  // a final JobStateName; for an array see ArrayNotifyFacts
  std::optional<int> exit_code;
  std::string reason;
  std::string log;  // the job's output path (an array: its first task's)
  /// A whole array: how many tasks it has and how many ended in each final state.
  struct Tasks {
    int64_t total = 0, succeeded = 0, failed = 0, cancelled = 0, timed_out = 0;
  };
  std::optional<Tasks> array;
};

/// The facts of one job (not a whole array): its final state, exit code, reason and log.
NotifyFacts NotifyFactsOf(const Job& job);

/// The facts of a whole array, from its first task (`head`: id, name, user, log), how many
/// of its tasks are in each state, and the exit code of its first task that did not
/// succeed (nullopt: none did not, or it has none). The state is "succeeded" when every
/// task succeeded, "cancelled" when every task was cancelled, else "failed".
NotifyFacts ArrayNotifyFacts(const Job& head, const std::map<JobState, int64_t>& by_state,
                             std::optional<int> exit_code);

/// `argv` with the patterns of its arguments filled in: %j the id, %x the name, %u the
/// user, %s the state, %e the exit code ("" when there is none), %% one '%'; any other '%'
/// is kept as written. argv[0], the program, is left as it is.
std::vector<std::string> ExpandNotifyArgv(const std::vector<std::string>& argv, const NotifyFacts& facts);

/// The notify program's whole environment ("NAME=VALUE"): HOME, USER, LOGNAME and PATH of
/// the owner; GPUMAN_JOB_ID, GPUMAN_JOB_NAME, GPUMAN_JOB_STATE, GPUMAN_JOB_EXIT_CODE ("" when
/// there is none), GPUMAN_JOB_LOG, GPUMAN_JOB_REASON (when there is a reason); for an array
/// also GPUMAN_ARRAY_TASKS and GPUMAN_ARRAY_TASKS_SUCCEEDED, _FAILED, _CANCELLED, _TIMED_OUT.
/// Nothing of the job's own environment.
std::vector<std::string> NotifyEnv(const NotifyFacts& facts, const std::string& home, const std::string& path);

/// One line that says how it ended: "gpuman job 12 (train) succeeded, exit 0",
/// "gpuman job 12 (sweep) failed, exit 3" ... Control characters of the name are written
/// as '?', so that the line can be a mail header.
std::string NotifySubject(const NotifyFacts& facts);

/// The mail hook's command: a sendmail-compatible `program` told to read the message from
/// stdin (-oi: a line with one dot does not end it) and send it to `user`.
std::vector<std::string> MailArgv(const std::string& program, const std::string& user);

/// The mail hook's message (RFC 5322 headers, a blank line, a plain-text body) for `facts`:
/// To: the user, Subject: NotifySubject, then the state, exit code, reason, task counts
/// and log path, one per line.
std::string MailMessage(const NotifyFacts& facts);

/// Why a --notify the daemon is given cannot be stored, as one line; nullopt when it can:
/// a program must be an absolute path, with at most kMaxNotifyArgs arguments and
/// kMaxNotifyArgvBytes bytes, and no NUL byte; mail takes no arguments.
std::optional<std::string> CheckNotify(const JobNotify& notify);

}  // namespace gpuman::model
