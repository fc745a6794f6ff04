#include "cli/simulation.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>

namespace gpuman::cli {
namespace fs = std::filesystem;

#ifndef GPUMAN_DEFAULT_SCENARIO_DIR
#define GPUMAN_DEFAULT_SCENARIO_DIR ""
#endif

std::vector<std::string> ScenarioDirs(const Environment& env, const std::string& exe_dir) {
  std::vector<std::string> dirs;
  if (auto d = env.Get("GPUMAN_SCENARIO_DIR"); d && !d->empty()) dirs.push_back(*d);
  if (!exe_dir.empty()) dirs.push_back(exe_dir + "/../share/gpuman/scenarios");
  if (*GPUMAN_DEFAULT_SCENARIO_DIR) dirs.push_back(GPUMAN_DEFAULT_SCENARIO_DIR);
  return dirs;
}

std::vector<std::string> ListScenarios(const Environment& env, const std::string& exe_dir) {
  std::set<std::string> names;
  for (const auto& dir : ScenarioDirs(env, exe_dir)) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      if (entry.path().extension() == ".json") names.insert(entry.path().stem().string());
    }
  }
  return {names.begin(), names.end()};
}

Result<Simulation> ResolveSimulation(const std::string& scenario, const Environment& env,
                                     const std::string& exe_dir) {
  Simulation sim;
  std::error_code ec;
  bool looks_like_path = scenario.find('/') != std::string::npos ||
                         (scenario.size() > 5 && scenario.substr(scenario.size() - 5) == ".json");
  if (looks_like_path) {
    if (!fs::is_regular_file(scenario, ec)) {
      return MakeError(ErrorCode::kInvalidArgument, "scenario file " + scenario + " does not exist");
    }
    sim.scenario_path = fs::absolute(scenario, ec).string();
    sim.scenario_name = fs::path(scenario).stem().string();
  } else {
    for (const auto& dir : ScenarioDirs(env, exe_dir)) {
      fs::path candidate = fs::path(dir) / (scenario + ".json");
      if (fs::is_regular_file(candidate, ec)) {
        sim.scenario_path = fs::canonical(candidate, ec).string();
        break;
      }
    }
    if (sim.scenario_path.empty()) {
      std::string known;
      for (const auto& name : ListScenarios(env, exe_dir)) known += (known.empty() ? "" : ", ") + name;
      return MakeError(ErrorCode::kInvalidArgument,
                       "unknown scenario '" + scenario + "' (known: " + (known.empty() ? "none found" : known) + ")");
    }
    sim.scenario_name = scenario;
  }

  // The stand-in process table ("host_processes"), so simulated processes have owners.
  // Read whole (the stream adapter lexes a character at a time through the streambuf) and
  // keep only that key: the stand-in reads the GPUs itself.
  std::string text;
  {
    std::ifstream in(sim.scenario_path, std::ios::binary);
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  nlohmann::json::parser_callback_t only_host_processes = [](int depth, nlohmann::json::parse_event_t event,
                                                             nlohmann::json& parsed) {
    return !(depth == 1 && event == nlohmann::json::parse_event_t::key && parsed != "host_processes");
  };
  nlohmann::json doc = nlohmann::json::parse(text, only_host_processes, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return MakeError(ErrorCode::kInvalidArgument, "scenario " + sim.scenario_path + ": not a valid JSON object");
  }
  if (auto it = doc.find("host_processes"); it != doc.end() && it->is_object()) {
    for (const auto& [pid_text, info] : it->items()) {
      if (!info.is_object()) continue;
      devices::ProcessDetails d;
      uint32_t pid = 0;
      try {
        pid = static_cast<uint32_t>(std::stoul(pid_text));
      } catch (...) {
        continue;
      }
      d.user = info.value("user", std::string("?"));
      d.uid = info.value("uid", 0u);
      d.command = info.value("command", std::string());
      if (info.contains("start_time") && info["start_time"].is_number_integer()) {
        d.start_time_unix = info["start_time"].get<int64_t>();
      }
      sim.host_processes.emplace(pid, std::move(d));
    }
  }

  std::vector<std::string> libs;
  if (auto l = env.Get("GPUMAN_SIM_LIBRARY"); l && !l->empty()) libs.push_back(*l);
  // Relative to the binary only (installed, then the build tree's sim/ beside build/gpuman):
  // no build-tree path is compiled in.
  if (!exe_dir.empty()) {
    libs.push_back(exe_dir + "/../lib/gpuman/sim/libnvidia-ml.so.1");
    libs.push_back(exe_dir + "/sim/libnvidia-ml.so.1");
  }
  for (const auto& lib : libs) {
    if (fs::is_regular_file(lib, ec)) {
      sim.library_path = fs::absolute(lib, ec).string();
      break;
    }
  }
  if (sim.library_path.empty()) {
    return MakeError(ErrorCode::kUnavailable,
                     "the simulator library (libnvidia-ml.so.1 stand-in) was not found; "
                     "rebuild gpuman or set GPUMAN_SIM_LIBRARY");
  }
  return sim;
}

}  // namespace gpuman::cli
