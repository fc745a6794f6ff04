// `gpuman select`, `gpuman leases`, `gpuman release`: picking GPUs, and the lease table.
// Registered into the CLI11 app by app.cc; run on the main thread.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cli/context.h"
#include "cli/selection_options.h"

namespace CLI {
class App;
}

namespace gpuman::cli {

struct SelectArgs {
  SelectionArgs selection;
  std::string format = "uuid";  // index | uuid | env | docker | json
  bool lease = false;
  std::optional<std::string> wait;  // with --lease: like run --wait
};
CLI::App* AddSelectCommand(CLI::App& app, SelectArgs& args);
int RunSelect(const SelectArgs& args, Context& ctx);

struct LeasesArgs {
  bool json = false;
};
CLI::App* AddLeasesCommand(CLI::App& app, LeasesArgs& args);
int RunLeases(const LeasesArgs& args, Context& ctx);

struct ReleaseArgs {
  std::vector<int64_t> ids;
};
CLI::App* AddReleaseCommand(CLI::App& app, ReleaseArgs& args);
int RunRelease(const ReleaseArgs& args, Context& ctx);

/// Parses --wait's value: absent = no wait, "" or "forever" = forever, else a duration.
Result<std::optional<int64_t>> ParseWait(const std::optional<std::string>& wait);

}  // namespace gpuman::cli
