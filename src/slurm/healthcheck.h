// `gpuman slurm healthcheck` (a Slurm HealthCheckProgram): what to do with the node given
// gpuman's fatal health findings and the node's state in slurmctld. Drains on a fatal
// finding; resumes only a drain whose reason carries the healthcheck's own prefix, once no
// fatal finding is left. An admin's drain, and the prolog's and epilog's, are never lifted.
// Pure decision plus one orchestration over a NodeControl; used from the command's thread.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/health.h"
#include "slurm/node_control.h"

namespace gpuman::slurm {

/// The drain reason prefixes, one per cause (docs/slurm.md). Distinct: none is a prefix of
/// another's reason ("gpuman: " vs "gpuman-prolog: ").
inline constexpr std::string_view kHealthcheckPrefix = "gpuman: ";
inline constexpr std::string_view kPrologPrefix = "gpuman-prolog: ";
inline constexpr std::string_view kEpilogPrefix = "gpuman-epilog: ";

/// "gpuman: GPU 2 gpu_lost", "gpuman: GPU 0 xid 79, GPU 3 ecc_volatile_uncorrected",
/// "gpuman: driver: ..." from the fatal ones of `findings` (at most 3 named, then
/// "+N more"); nullopt when none is fatal.
std::optional<std::string> HealthcheckReason(const std::vector<model::Finding>& findings);

struct HealthcheckAction {
  enum Kind {
    kNone,          // healthy and not drained by us: nothing to do
    kDrain,         // fatal finding, node not drained: drain with `reason`
    kStillDrained,  // fatal finding, node already drained (by us or anyone): leave it
    kResume,        // healthy, and drained by an earlier healthcheck: resume
    kNotOurs,       // healthy, but drained for another reason (admin, prolog, epilog): leave it
  };
  Kind kind = kNone;
  std::string reason;  // kDrain: the reason to set
};

/// The decision. `reason` is HealthcheckReason(findings).
HealthcheckAction DecideHealthcheck(const std::optional<std::string>& reason, const NodeState& node);

struct HealthcheckResult {
  HealthcheckAction action;
  bool unhealthy = false;      // a fatal finding
  std::vector<std::string> lines;  // one stderr line per action or fact, "gpuman: slurm healthcheck: ..."
  /// scontrol failed (the node's state is unknown or unchanged); the message says what was
  /// found and what failed. `lines` then holds nothing for that step.
  std::optional<Error> error;
};

/// Reads the node, decides, acts (drain or resume) through `control`.
HealthcheckResult RunHealthcheck(const std::vector<model::Finding>& findings, const std::string& node,
                                 NodeControl& control);

}  // namespace gpuman::slurm
