// `--simulate SCENARIO`: finding a shipped scenario and the stand-in NVML library, and
// reading the scenario's stand-in process table. The loader itself is not told anything:
// main points nvml_library at the stand-in and exports the scenario path for it.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "cli/config.h"
#include "devices/process_inspector.h"

namespace gpuman::cli {

struct Simulation {
  std::string scenario_name;  // "a100-4"
  std::string scenario_path;  // absolute path of the JSON file
  std::string library_path;   // the stand-in libnvidia-ml.so.1
  std::map<uint32_t, devices::ProcessDetails> host_processes;
};

/// Directories searched for scenario names, in order: $GPUMAN_SCENARIO_DIR,
/// <dir of the gpuman binary>/../share/gpuman/scenarios (installed), then the source
/// tree's scenarios/ (the build tree's fallback; a missing directory is skipped).
std::vector<std::string> ScenarioDirs(const Environment& env, const std::string& exe_dir);

/// Resolves `scenario` (a name such as "a100-4", or a path to a .json file) and the
/// stand-in library ($GPUMAN_SIM_LIBRARY, <exe_dir>/../lib/gpuman/sim/ (installed), or
/// <exe_dir>/sim/ (the build tree)).
/// Errors: kInvalidArgument for an unknown scenario (listing the known ones) or a
/// scenario that is not valid JSON; kUnavailable when the stand-in library is missing.
Result<Simulation> ResolveSimulation(const std::string& scenario, const Environment& env,
                                     const std::string& exe_dir);

/// Names of the scenarios in the search directories, sorted.
std::vector<std::string> ListScenarios(const Environment& env, const std::string& exe_dir);

}  // namespace gpuman::cli
