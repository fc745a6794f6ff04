#include "slurm/node_control.h"

#include <vector>

#include "base/strings.h"
#include "slurm/capture.h"

namespace gpuman::slurm {
namespace {

// The last non-empty line of a tool's output, for an error message.
std::string LastLine(std::string_view output) {
  std::string_view text = Trim(output);
  if (const size_t nl = text.rfind('\n'); nl != std::string_view::npos) text = text.substr(nl + 1);
  return EscapeControl(Trim(text));
}

Result<Captured> Scontrol(const std::vector<std::string>& args, int64_t timeout_ms) {
  std::vector<std::string> argv = {"scontrol"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto captured = RunCapture(argv, timeout_ms);
  if (!captured) return captured.error();
  if (captured->exit_code != 0) {
    return MakeError(ErrorCode::kIo, "scontrol " + args.front() + " exited " + std::to_string(captured->exit_code) +
                                         ": " + LastLine(captured->output));
  }
  return captured;
}

}  // namespace

Result<NodeState> ParseScontrolNode(std::string_view text) {
  text = Trim(text);
  if (text.substr(0, 9) != "NodeName=") {
    return MakeError(ErrorCode::kNotFound, text.empty() ? "scontrol printed nothing" : LastLine(text));
  }
  if (const size_t nl = text.find('\n'); nl != std::string_view::npos) text = text.substr(0, nl);
  NodeState node;
  const size_t state = text.find(" State=");
  if (state == std::string_view::npos) return MakeError(ErrorCode::kInternal, "scontrol show node: no State=");
  std::string_view value = text.substr(state + 7);
  value = value.substr(0, value.find(' '));
  node.state = std::string(value);
  for (const std::string& flag : Split(value, '+')) {
    if (flag == "DRAIN" || flag == "DRAINING" || flag == "DRAINED") node.drained = true;
  }
  if (const size_t reason = text.find(" Reason="); reason != std::string_view::npos) {
    std::string_view r = Trim(text.substr(reason + 8));
    // Slurm appends " [user@YYYY-MM-DDTHH:MM:SS]".
    if (!r.empty() && r.back() == ']') {
      const size_t open = r.rfind(" [");
      if (open != std::string_view::npos && r.substr(open).find('@') != std::string_view::npos) r = r.substr(0, open);
    }
    if (r != "(null)") node.reason = std::string(Trim(r));
  }
  return node;
}

Result<NodeState> ScontrolNodeControl::Get(const std::string& node) {
  auto captured = Scontrol({"show", "node", "-o", node}, timeout_ms_);
  if (!captured) return captured.error();
  return ParseScontrolNode(captured->output);
}

Status ScontrolNodeControl::Drain(const std::string& node, const std::string& reason) {
  auto captured = Scontrol({"update", "nodename=" + node, "state=drain", "reason=" + reason}, timeout_ms_);
  if (!captured) return captured.error();
  return {};
}

Status ScontrolNodeControl::Resume(const std::string& node) {
  auto captured = Scontrol({"update", "nodename=" + node, "state=resume"}, timeout_ms_);
  if (!captured) return captured.error();
  return {};
}

}  // namespace gpuman::slurm
