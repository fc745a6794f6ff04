#include "cli/simulation.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "base/file.h"

namespace gpuman::cli {
namespace fs = std::filesystem;

std::vector<std::string> ScenarioDirs(const Environment& env, const InstalledLayout& layout) {
  std::vector<std::string> dirs;
  if (auto d = env.Get("GPUMAN_SCENARIO_DIR"); d && !d->empty()) dirs.push_back(*d);
  dirs.insert(dirs.end(), layout.scenario_dirs.begin(), layout.scenario_dirs.end());
  return dirs;
}

std::vector<std::string> ListScenarios(const Environment& env, const InstalledLayout& layout) {
  std::set<std::string> names;
  for (const auto& dir : ScenarioDirs(env, layout)) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      if (entry.path().extension() == ".json") names.insert(entry.path().stem().string());
    }
  }
  return {names.begin(), names.end()};
}

namespace {

// The "host_processes" table of a scenario document, from one SAX pass that builds
// nothing else (building the document to keep one key of it cost ~0.1 ms of every
// --simulate run on h100-8; docs/design.md, "Start-up").
class HostProcessesSax final : public nlohmann::json_sax<nlohmann::json> {
 public:
  explicit HostProcessesSax(std::map<uint32_t, devices::ProcessDetails>& out) : out_(out) {}
  bool top_is_object() const { return top_is_object_; }

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t v) override { return Number(v, static_cast<double>(v), true); }
  bool number_unsigned(number_unsigned_t v) override {
    return Number(static_cast<int64_t>(v), static_cast<double>(v), true);
  }
  bool number_float(number_float_t v, const string_t&) override { return Number(0, v, false); }
  bool string(string_t& v) override {
    if (InEntry() && key_ == "user") entry_.user = std::move(v);
    if (InEntry() && key_ == "command") entry_.command = std::move(v);
    return true;
  }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    ++depth_;
    if (depth_ == 1) top_is_object_ = true;
    if (depth_ == 2 && key_ == "host_processes") in_table_ = true;
    if (depth_ == 3 && in_table_) {
      in_entry_ = true;
      pid_text_ = key_;
      entry_ = devices::ProcessDetails{};
      entry_.user = "?";
    }
    return true;
  }
  bool key(string_t& k) override {
    key_ = std::move(k);
    return true;
  }
  bool end_object() override {
    if (depth_ == 3 && in_entry_) Commit();
    if (depth_ == 2) in_table_ = false;
    --depth_;
    return true;
  }
  bool start_array(std::size_t) override {
    ++depth_;
    return true;
  }
  bool end_array() override {
    --depth_;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }

 private:
  bool InEntry() const { return in_entry_ && depth_ == 3; }
  bool Number(int64_t whole, double any, bool integer) {
    if (InEntry() && key_ == "uid") entry_.uid = integer ? static_cast<uint32_t>(whole) : static_cast<uint32_t>(any);
    if (InEntry() && key_ == "start_time" && integer) entry_.start_time_unix = whole;
    return true;
  }
  void Commit() {
    in_entry_ = false;
    uint32_t pid = 0;
    try {
      pid = static_cast<uint32_t>(std::stoul(pid_text_));
    } catch (...) {
      return;
    }
    out_.insert_or_assign(pid, std::move(entry_));  // a repeated PID: the last one, as a document keeps
  }

  std::map<uint32_t, devices::ProcessDetails>& out_;
  int depth_ = 0;
  bool top_is_object_ = false;
  bool in_table_ = false;
  bool in_entry_ = false;
  std::string key_;
  std::string pid_text_;
  devices::ProcessDetails entry_;
};

}  // namespace

Result<Simulation> ResolveSimulation(const std::string& scenario, const Environment& env,
                                     const InstalledLayout& layout) {
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
    for (const auto& dir : ScenarioDirs(env, layout)) {
      fs::path candidate = fs::path(dir) / (scenario + ".json");
      if (fs::is_regular_file(candidate, ec)) {
        sim.scenario_path = fs::canonical(candidate, ec).string();
        break;
      }
    }
    if (sim.scenario_path.empty()) {
      std::string known;
      for (const auto& name : ListScenarios(env, layout)) known += (known.empty() ? "" : ", ") + name;
      return MakeError(ErrorCode::kInvalidArgument,
                       "unknown scenario '" + scenario + "' (known: " + (known.empty() ? "none found" : known) + ")");
    }
    sim.scenario_name = scenario;
  }

  std::vector<std::string> libs;
  if (auto l = env.Get("GPUMAN_SIM_LIBRARY"); l && !l->empty()) libs.push_back(*l);
  // Relative to the binary only (installed, then the build tree's sim/ beside build/gpuman):
  // no build-tree path is compiled in.
  libs.insert(libs.end(), layout.sim_libraries.begin(), layout.sim_libraries.end());
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

std::map<uint32_t, devices::ProcessDetails> ParseHostProcesses(std::string_view table_json) {
  std::string doc;
  doc.reserve(table_json.size() + 20);
  doc.append("{\"host_processes\":").append(table_json).append("}");
  std::map<uint32_t, devices::ProcessDetails> table;
  HostProcessesSax sax(table);
  if (!nlohmann::json::sax_parse(doc, &sax)) table.clear();
  return table;
}

std::map<uint32_t, devices::ProcessDetails> ReadHostProcesses(const std::string& scenario_path) {
  std::map<uint32_t, devices::ProcessDetails> table;
  std::optional<std::string> text = ReadWholeFile(scenario_path);
  if (!text) return table;
  HostProcessesSax sax(table);
  if (!nlohmann::json::sax_parse(*text, &sax) || !sax.top_is_object()) table.clear();
  return table;
}

}  // namespace gpuman::cli
