// Signalling a GPU process from `gpuman top`: who may (a pure decision) and the signal
// itself (kill(2) through a pidfd when the kernel has one, never a shell). Any thread.
#pragma once

#include <cstdint>
#include <string>

#include "base/result.h"
#include "devices/process_inspector.h"
#include "tui/top_model.h"

namespace gpuman::tui {

/// Who is asking.
struct Identity {
  uint32_t uid = 0;
  bool is_root = false;
};

enum class KillVerdict {
  kAllowed,  // one's own process
  kConfirm,  // root, someone else's process: ask y/n first
  kDenied,
};

struct KillDecision {
  KillVerdict verdict = KillVerdict::kDenied;
  std::string reason;  // why denied, or whose process it is (for the confirmation)
};

/// Own processes may be signalled; other users' only by root, after a confirmation.
/// Processes outside our PID namespace, or with an unknown owner (for non-root), are denied.
KillDecision DecideKill(const Identity& me, const ProcessRow& target);

/// "TERM", "KILL", or the number.
std::string SignalName(int signal);

/// Sends `signal` to target.pid if that pid is still the process the row shows: /proc (read
/// through `procfs`) must report the same uid and start time, so a recycled pid (or a
/// simulated one) is never signalled. Errors: kNotFound when the process is gone (ESRCH),
/// kConflict when the pid now belongs to another process, kPermissionDenied (EPERM),
/// kInternal for other errno values. Messages read "pid N: cause".
Status SignalProcess(const ProcessRow& target, int signal, devices::ProcessInspector& procfs);

}  // namespace gpuman::tui
