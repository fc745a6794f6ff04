#pragma once
// The signals that end a waiting command: SIGINT (Ctrl-C), SIGTERM (timeout(1), kill) and
// SIGHUP (the terminal went away). A command that waits for GPUs keeps them blocked, polls
// TakePendingInterrupt() between attempts and ends with 128 + the signal, having taken no
// lease and started nothing (docs/cli.md, "Interrupting a wait").

#include <signal.h>

namespace gpuman {

/// Blocks SIGINT, SIGTERM and SIGHUP for its lifetime; the old mask comes back after.
/// One that arrives meanwhile stays pending until taken or until the mask comes back.
class BlockInterrupts {
 public:
  BlockInterrupts();
  ~BlockInterrupts();
  BlockInterrupts(const BlockInterrupts&) = delete;
  BlockInterrupts& operator=(const BlockInterrupts&) = delete;

 private:
  sigset_t old_{};
};

/// The first of SIGINT, SIGTERM, SIGHUP pending for this thread (blocked, so not yet
/// delivered), taken so that it is not delivered later; 0 when none is.
int TakePendingInterrupt();

/// "SIGINT", "SIGTERM", "SIGHUP", or "signal N".
const char* InterruptName(int signal);

}  // namespace gpuman
