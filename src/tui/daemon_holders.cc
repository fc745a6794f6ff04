#include "tui/daemon_holders.h"

#include <algorithm>

#include "base/duration.h"

namespace gpuman::tui {

DaemonHolders::DaemonHolders(int64_t reconnect_timeout_ms, std::string timeout_text)
    : timeout_ms_(std::max<int64_t>(reconnect_timeout_ms, 0)), timeout_text_(std::move(timeout_text)) {}

void DaemonHolders::Answered(const Frame& answer, int64_t now_ms) {
  lost_since_ms_ = -1;
  answered_ms_ = now_ms;
  leases_ = answer.leases;
  jobs_ = answer.jobs;
  drains_ = answer.drains;
}

bool DaemonHolders::gone(int64_t now_ms) const {
  return lost() && now_ms - lost_since_ms_ >= timeout_ms_;
}

void DaemonHolders::Unanswered(Frame& f, int64_t now_ms, const std::string& refusal) {
  if (!lost()) lost_since_ms_ = now_ms;
  f.has_daemon = true;
  f.leases = leases_;
  f.jobs = jobs_;
  f.drains = drains_;
  const int64_t away_ms = std::max<int64_t>(0, now_ms - lost_since_ms_);
  if (!refusal.empty()) {
    f.holders_error = refusal + "; still trying";
  } else if (gone(now_ms)) {
    f.holders_error = "daemon gone for over " + timeout_text_ + "; still trying";
  } else {
    // Whole seconds: "for 0s" right after the loss, then 1s, 2s, ... up to the timeout.
    f.holders_error = "daemon reconnecting for " + FormatDurationMs(away_ms / 1000 * 1000) + " (up to " +
                      timeout_text_ + "; showing its last answer)";
    return;
  }
  if (answered_ms_ >= 0) {
    f.holders_error += " (showing its answer of " + FormatDurationMs((now_ms - answered_ms_) / 1000 * 1000) + " ago)";
  }
}

}  // namespace gpuman::tui
