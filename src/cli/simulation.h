// `--simulate SCENARIO`: finding a shipped scenario and the stand-in NVML library, and
// reading the scenario's stand-in process table. The loader itself is not told anything:
// main points nvml_library at the stand-in and exports the scenario path for it.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/installed_layout.h"
#include "base/result.h"
#include "cli/config.h"
#include "devices/process_inspector.h"

namespace gpuman::cli {

struct Simulation {
  std::string scenario_name;  // "a100-4"
  std::string scenario_path;  // absolute path of the JSON file
  std::string library_path;   // the stand-in libnvidia-ml.so.1
};

/// Directories searched for scenario names, in order: $GPUMAN_SCENARIO_DIR, then
/// layout.scenario_dirs (installed, then the build tree's; a missing directory is skipped).
std::vector<std::string> ScenarioDirs(const Environment& env, const InstalledLayout& layout);

/// Resolves `scenario` (a name such as "a100-4", or a path to a .json file) and the
/// stand-in library ($GPUMAN_SIM_LIBRARY, then layout.sim_libraries: installed, then the
/// build tree's).
/// The file is not read here: the stand-in parses and checks it when NVML is loaded, and a
/// scenario it cannot load is the load's error ("scenario PATH: reason", kInvalidArgument).
/// Errors: kInvalidArgument for an unknown scenario (listing the known ones) or a missing
/// file; kUnavailable when the stand-in library is missing.
Result<Simulation> ResolveSimulation(const std::string& scenario, const Environment& env,
                                     const InstalledLayout& layout);

/// The scenario's stand-in process table ({"PID": {"user", "uid", "command",
/// "start_time"}}), so simulated processes have owners. `table_json` is the
/// "host_processes" member's text, as the loaded stand-in hands it over
/// (NvmlLibrary::SimulatedHostProcesses). An entry that is not an object, a PID that is no
/// number and a field of another type are skipped; text that is not JSON is no table.
std::map<uint32_t, devices::ProcessDetails> ParseHostProcesses(std::string_view table_json);

/// The same table read from the scenario file itself, for when no stand-in has been
/// loaded (one SAX pass over the file, building only that table). A file that cannot be
/// read or is not a JSON object is no table: the stand-in reports it when it loads.
std::map<uint32_t, devices::ProcessDetails> ReadHostProcesses(const std::string& scenario_path);

/// Names of the scenarios in the search directories, sorted.
std::vector<std::string> ListScenarios(const Environment& env, const InstalledLayout& layout);

}  // namespace gpuman::cli
