#include "render/topo_view.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "render/format.h"

namespace gpuman::render {
namespace {

using json = nlohmann::ordered_json;

std::string Cell(const model::MachineSnapshot& snap, size_t i, size_t j) {
  if (!snap.topology || i >= snap.topology->size() || j >= snap.topology->size()) return "?";
  return snap.topology->CellName(i, j);
}

}  // namespace

json TopoToJson(const model::MachineSnapshot& snap, const StatusOptions& opts) {
  json out = {{"schema_version", 1}, {"simulated", opts.simulated}};
  if (opts.simulated) out["scenario"] = opts.scenario;
  json gpus = json::array(), matrix = json::array(), pairs = json::array();
  const size_t n = snap.gpus.size();
  for (size_t i = 0; i < n; ++i) {
    const auto& g = snap.gpus[i];
    gpus.push_back({{"index", g.index},
                    {"uuid", g.uuid ? json(*g.uuid) : json(nullptr)},
                    {"name", g.name ? json(*g.name) : json(nullptr)},
                    {"cpu_affinity", g.cpu_affinity.empty() ? json(nullptr) : json(model::FormatCpuList(g.cpu_affinity))},
                    {"numa_node", g.numa_node ? json(*g.numa_node) : json(nullptr)}});
    json row = json::array();
    for (size_t j = 0; j < n; ++j) row.push_back(Cell(snap, i, j));
    matrix.push_back(row);
    for (size_t j = i + 1; j < n && snap.topology; ++j) {
      pairs.push_back({{"a", snap.gpus[i].index},
                       {"b", snap.gpus[j].index},
                       {"nvlinks", snap.topology->nvlinks[i][j]},
                       {"pcie", model::PcieLevelName(snap.topology->pcie[i][j])},
                       {"connection", Cell(snap, i, j)}});
    }
  }
  out["gpus"] = gpus;
  out["matrix"] = matrix;
  out["pairs"] = pairs;
  return out;
}

std::string RenderTopoText(const model::MachineSnapshot& snap, const StatusOptions& opts,
                           const TerminalInfo& term) {
  std::string out;
  if (opts.simulated) {
    out += Colorize("[SIMULATED: " + opts.scenario + "]", Color::kYellowInverse, term.use_color) + "\n";
  }
  const size_t n = snap.gpus.size();
  int cell = 6;
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) cell = std::max(cell, DisplayWidth(Cell(snap, i, j)) + 2);
  }
  out += PadRight("", 7);
  for (size_t j = 0; j < n; ++j) out += PadRight("GPU" + std::to_string(snap.gpus[j].index), cell);
  out += "CPU Affinity     NUMA\n";
  for (size_t i = 0; i < n; ++i) {
    const auto& g = snap.gpus[i];
    out += Colorize(PadRight("GPU" + std::to_string(g.index), 7), Color::kBold, term.use_color);
    for (size_t j = 0; j < n; ++j) {
      std::string c = Cell(snap, i, j);
      Color color = c.rfind("NV", 0) == 0 ? Color::kGreen : (c == "SYS" ? Color::kYellow : Color::kNone);
      out += Colorize(c, color, term.use_color) + std::string(cell - DisplayWidth(c), ' ');
    }
    std::string cpus = g.cpu_affinity.empty() ? "-" : model::FormatCpuList(g.cpu_affinity);
    out += PadRight(cpus, 17) + (g.numa_node ? std::to_string(*g.numa_node) : "-") + "\n";
  }
  out += "\nLegend:\n"
         "  X    = self\n"
         "  NV#  = connected by # NVLinks\n"
         "  PIX  = at most one PCIe switch between them\n"
         "  PXB  = several PCIe switches, no host bridge\n"
         "  PHB  = through a PCIe host bridge (CPU)\n"
         "  NODE = across host bridges within one NUMA node\n"
         "  SYS  = across NUMA nodes (CPU interconnect)\n";
  return out;
}

}  // namespace gpuman::render
