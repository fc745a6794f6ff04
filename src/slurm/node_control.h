// The seam between gpuman's Slurm hooks (healthcheck, prolog, epilog) and slurmctld: read a
// node's state and drain reason, drain it, resume it. The real implementation execs
// `scontrol` as argv (never a shell) with a deadline per call; tests use a fake.
// One NodeControl per command; used from the command's thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"

namespace gpuman::slurm {

/// A node as `scontrol show node -o` describes it.
struct NodeState {
  std::string state;    // "IDLE+DRAIN", "MIXED", "DOWN+DRAIN+NOT_RESPONDING", ...
  bool drained = false;  // DRAIN is one of the state's flags (draining or drained)
  std::string reason;   // the drain/down reason without Slurm's " [user@time]" suffix; "" when none
};

class NodeControl {
 public:
  virtual ~NodeControl() = default;
  virtual Result<NodeState> Get(const std::string& node) = 0;
  /// `scontrol update nodename=NODE state=drain reason=REASON`.
  virtual Status Drain(const std::string& node, const std::string& reason) = 0;
  /// `scontrol update nodename=NODE state=resume`.
  virtual Status Resume(const std::string& node) = 0;
};

/// Parses `scontrol show node -o NODE` (one line; Reason= is the last field and may hold
/// spaces). Errors: kNotFound when the text names no node ("Node x not found").
Result<NodeState> ParseScontrolNode(std::string_view text);

/// The real one: runs `scontrol` (from PATH, else /usr/bin:/bin) with at most `timeout_ms`
/// per call. Errors carry scontrol's last output line; a call past its deadline is killed
/// and fails with kUnavailable.
class ScontrolNodeControl final : public NodeControl {
 public:
  explicit ScontrolNodeControl(int64_t timeout_ms = 10000) : timeout_ms_(timeout_ms) {}
  Result<NodeState> Get(const std::string& node) override;
  Status Drain(const std::string& node, const std::string& reason) override;
  Status Resume(const std::string& node) override;

 private:
  int64_t timeout_ms_;
};

}  // namespace gpuman::slurm
