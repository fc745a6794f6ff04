#include "base/interrupts.h"

#include <time.h>

#include <initializer_list>

namespace gpuman {
namespace {

sigset_t Interrupts() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, sig);
  return set;
}

}  // namespace

BlockInterrupts::BlockInterrupts() {
  sigset_t set = Interrupts();
  pthread_sigmask(SIG_BLOCK, &set, &old_);
}

BlockInterrupts::~BlockInterrupts() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }

int TakePendingInterrupt() {
  sigset_t pending;
  if (sigpending(&pending) != 0) return 0;
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    if (sigismember(&pending, sig) != 1) continue;
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    timespec now{0, 0};
    // Pending means blocked here: sigtimedwait takes it without waiting.
    if (sigtimedwait(&one, nullptr, &now) == sig) return sig;
  }
  return 0;
}

const char* InterruptName(int signal) {
  switch (signal) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    case SIGHUP:
      return "SIGHUP";
    default:
      return "a signal";
  }
}

}  // namespace gpuman
