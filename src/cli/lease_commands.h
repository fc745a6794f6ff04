// `gpuman select`, `gpuman leases`, `gpuman release`: picking GPUs, and the lease table.
// Registered with CLI11 by cli_options.cc; run on the main thread.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cli/context.h"
#include "cli/selection_options.h"

namespace gpuman::cli {

struct SelectArgs {
  SelectionArgs selection;
  std::string format = "uuid";  // index | uuid | env | docker | json
  bool lease = false;
  std::optional<std::string> wait;  // with --lease: like run --wait
};
int RunSelect(const SelectArgs& args, Context& ctx);

struct LeasesArgs {
  bool json = false;
};
int RunLeases(const LeasesArgs& args, Context& ctx);

struct ReleaseArgs {
  std::vector<int64_t> ids;
  bool force = false;  // root and the admin group: end what still runs on it first
};
int RunRelease(const ReleaseArgs& args, Context& ctx);

/// Parses --wait's value: absent = no wait, "" or "forever" = forever, else a duration.
Result<std::optional<int64_t>> ParseWait(const std::optional<std::string>& wait);

}  // namespace gpuman::cli
