// What `gpuman top` shows of the daemon's part of a frame (leases, jobs, drains) across a
// daemon restart: the last good answer stays on screen, with a note that says how long the
// daemon has been away, and only after the reconnect time that it is gone (issue 26). Pure:
// time is passed in. Owned by top's sampler thread (cli/top_command.cc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tui/top_model.h"

namespace gpuman::tui {

class DaemonHolders {
 public:
  /// `timeout_text` names `reconnect_timeout_ms` in the notes ("60s").
  DaemonHolders(int64_t reconnect_timeout_ms, std::string timeout_text);

  /// The daemon answered at `now_ms` (in `answer`: leases, jobs, drains, holders_error):
  /// remembered as the last good answer; any outage is over.
  void Answered(const Frame& answer, int64_t now_ms);

  /// The daemon did not answer at `now_ms`: the first such call starts an outage. Fills
  /// `f` with the last good answer and a holders_error note: "daemon reconnecting for 3s
  /// (up to 60s; showing its last answer)", and once the reconnect time has passed since
  /// the outage began (or `refusal` is given: a daemon that refuses us is not coming back)
  /// "daemon gone for over 60s; still trying (showing its answer of 1m 5s ago)".
  void Unanswered(Frame& f, int64_t now_ms, const std::string& refusal = "");

  /// Whether an outage is under way.
  bool lost() const { return lost_since_ms_ >= 0; }
  /// Whether the reconnect time has passed in the outage under way.
  bool gone(int64_t now_ms) const;

 private:
  int64_t timeout_ms_;
  std::string timeout_text_;
  int64_t lost_since_ms_ = -1;
  int64_t answered_ms_ = -1;  // when the last good answer came; -1: never
  std::vector<model::Lease> leases_;
  std::vector<model::Job> jobs_;
  std::vector<model::GpuDrain> drains_;
};

}  // namespace gpuman::tui
