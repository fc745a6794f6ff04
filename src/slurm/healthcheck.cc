#include "slurm/healthcheck.h"

#include "base/strings.h"

namespace gpuman::slurm {
namespace {

constexpr size_t kMaxNamed = 3;
constexpr size_t kMaxMessage = 80;

std::string Describe(const model::Finding& f) {
  std::string what = f.code == "xid" && f.xid ? "xid " + std::to_string(*f.xid) : f.code;
  if (f.gpu_index) return "GPU " + std::to_string(*f.gpu_index) + " " + what;
  if (!f.gpu_uuid.empty()) return f.gpu_uuid + " " + what;
  // Driver-wide: the message says what (NVML could not be loaded, ...).
  std::string message = EscapeControl(f.message);
  if (message.size() > kMaxMessage) message = message.substr(0, kMaxMessage - 3) + "...";
  return message.empty() ? what : what + ": " + message;
}

bool StartsWith(std::string_view text, std::string_view prefix) { return text.substr(0, prefix.size()) == prefix; }

}  // namespace

std::optional<std::string> HealthcheckReason(const std::vector<model::Finding>& findings) {
  std::vector<std::string> named;
  size_t fatal = 0;
  for (const model::Finding& f : findings) {
    if (f.severity != model::Severity::kFatal) continue;
    ++fatal;
    if (named.size() < kMaxNamed) named.push_back(Describe(f));
  }
  if (fatal == 0) return std::nullopt;
  std::string reason(kHealthcheckPrefix);
  for (size_t i = 0; i < named.size(); ++i) reason += (i ? ", " : "") + named[i];
  if (fatal > named.size()) reason += " +" + std::to_string(fatal - named.size()) + " more";
  return reason;
}

HealthcheckAction DecideHealthcheck(const std::optional<std::string>& reason, const NodeState& node) {
  HealthcheckAction action;
  const bool ours = node.drained && StartsWith(node.reason, kHealthcheckPrefix);
  if (reason) {
    action.kind = node.drained ? HealthcheckAction::kStillDrained : HealthcheckAction::kDrain;
    if (!node.drained) action.reason = *reason;
  } else if (ours) {
    action.kind = HealthcheckAction::kResume;
  } else {
    action.kind = node.drained ? HealthcheckAction::kNotOurs : HealthcheckAction::kNone;
  }
  return action;
}

HealthcheckResult RunHealthcheck(const std::vector<model::Finding>& findings, const std::string& node,
                                 NodeControl& control) {
  HealthcheckResult result;
  const std::optional<std::string> reason = HealthcheckReason(findings);
  result.unhealthy = reason.has_value();
  const std::string head = "gpuman: slurm healthcheck: node " + node;
  auto state = control.Get(node);
  if (!state) {
    result.error = state.error().WithContext(reason ? "node " + node + " is unhealthy (" + *reason + "); reading its state"
                                                    : "reading node " + node);
    return result;
  }
  result.action = DecideHealthcheck(reason, *state);
  switch (result.action.kind) {
    case HealthcheckAction::kNone:
      break;
    case HealthcheckAction::kDrain:
      if (auto done = control.Drain(node, result.action.reason); !done) {
        result.error = done.error().WithContext("node " + node + " is unhealthy (" + result.action.reason + "); draining it");
      } else {
        result.lines.push_back(head + " drained: " + result.action.reason);
      }
      break;
    case HealthcheckAction::kStillDrained:
      result.lines.push_back(head + " stays drained (" + EscapeControl(state->reason) + "): " + *reason);
      break;
    case HealthcheckAction::kResume:
      if (auto done = control.Resume(node); !done) {
        result.error = done.error().WithContext("node " + node + " is healthy again; resuming it");
      } else {
        result.lines.push_back(head + " resumed: healthy again (was drained: " + EscapeControl(state->reason) + ")");
      }
      break;
    case HealthcheckAction::kNotOurs:
      result.lines.push_back(head + " is healthy; its drain is not the healthcheck's and stays (" +
                             EscapeControl(state->reason) + ")");
      break;
  }
  return result;
}

}  // namespace gpuman::slurm
