// Notifier: the daemon's end-of-job notifications (`submit --notify`; docs/scheduling.md,
// "End-of-job notifications"). Each tick it reaps the notifications that ended, marks them
// in the state db and logs those that failed; at most once a second, when the state db
// changed (or some waited for a free slot), it reads the notifications due and starts them
// through a HookRunner: as the job's owner, never through a shell, bounded in time, without
// blocking the loop. A job is marked notified only once its notification ended, so one cut
// short by a daemon that stopped runs again at its next start (at least once, never lost).
// Owned by the daemon's event-loop thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "base/clock.h"
#include "base/result.h"
#include "monitor/hook_runner.h"
#include "store/job_store.h"

namespace gpuman::daemon {

struct NotifierOptions {
  /// `[notify] mail`: the sendmail-compatible program of `--notify mail`; unset: no mail hook.
  std::optional<std::string> mail_program;
  int64_t timeout_ms = 60000;    // then SIGTERM to its process group,
  int64_t kill_grace_ms = 5000;  // then SIGKILL
  int max_running = 16;          // notifications at once, everyone's
  int max_running_per_user = 4;  // one user's
};

/// Whether `--notify mail` can be taken: the mail program is set and executable.
/// Errors: kInvalidArgument, one line saying why and what the admin sets.
Status CheckMailHook(const NotifierOptions& options);

class Notifier {
 public:
  Notifier(NotifierOptions options, store::JobStore& jobs, const Clock& clock);
  /// Reaps, marks and logs what ended; starts what is due (see above).
  void Tick(int64_t now_unix_ms);
  int running() const { return runner_.running(); }

 private:
  void Start(const model::Job& due, int64_t now);
  void Mark(int64_t id, const std::string& program, const std::string& outcome, bool ok, int64_t now);

  NotifierOptions options_;
  store::JobStore& jobs_;
  monitor::HookRunner runner_;
  std::map<int64_t, uint32_t> running_;  // job id -> its owner's uid
  std::optional<store::JobStore::Version> scanned_;  // the state db at the last look
  bool waiting_for_slot_ = false;                   // due ones were left for a free slot
  int64_t next_scan_ms_ = 0;
};

}  // namespace gpuman::daemon
