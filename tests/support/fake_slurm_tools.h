// A scripted stand-in for Slurm's client commands (slurm::SlurmTools): answers by the
// longest matching argv prefix, records every call with its stdin. Tests only.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "slurm/slurm_tools.h"

namespace gpuman::testing {

class FakeSlurmTools final : public slurm::SlurmTools {
 public:
  struct Call {
    std::vector<std::string> argv;
    std::string input;
  };

  /// Every call whose argv starts with `prefix` answers `output` (later answers for the
  /// same prefix are queued: each is used once, the last one stays).
  void Answer(std::vector<std::string> prefix, slurm::ToolOutput output) { answers_[prefix].push_back(std::move(output)); }
  void Answer(std::vector<std::string> prefix, int exit_code, std::string out, std::string err = "") {
    Answer(std::move(prefix), slurm::ToolOutput{exit_code, std::move(out), std::move(err)});
  }

  Result<slurm::ToolOutput> Run(const std::vector<std::string>& argv, const std::string& input = "") override {
    calls.push_back({argv, input});
    const std::vector<std::string>* best = nullptr;
    for (auto& [prefix, outs] : answers_) {
      if (prefix.size() <= argv.size() && std::equal(prefix.begin(), prefix.end(), argv.begin()) &&
          (!best || prefix.size() > best->size())) {
        best = &prefix;
      }
    }
    if (!best) return MakeError(ErrorCode::kNotFound, argv.at(0) + ": not found");
    auto& outs = answers_[*best];
    slurm::ToolOutput o = outs.front();
    if (outs.size() > 1) outs.erase(outs.begin());
    return o;
  }

  /// The calls whose argv[0] is `program`.
  std::vector<Call> CallsOf(const std::string& program) const {
    std::vector<Call> out;
    for (const auto& c : calls) {
      if (!c.argv.empty() && c.argv[0] == program) out.push_back(c);
    }
    return out;
  }

  std::vector<Call> calls;

 private:
  std::map<std::vector<std::string>, std::vector<slurm::ToolOutput>> answers_;
};

}  // namespace gpuman::testing
