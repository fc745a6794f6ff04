#include "render/topo_view.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/peak.h"
#include "render/format.h"

namespace gpuman::render {
namespace {

using json = nlohmann::ordered_json;

std::string Cell(const model::MachineSnapshot& snap, size_t i, size_t j) {
  if (!snap.topology || i >= snap.topology->size() || j >= snap.topology->size()) return "?";
  return snap.topology->CellName(i, j);
}

// A GPU's MIG devices by profile, in NVML's order: "3g.40gb, 2g.20gb x2"; "none" for a GPU
// in MIG mode without any; "-" for a GPU not in MIG mode.
std::string MigProfiles(const model::DeviceSnapshot& g) {
  if (!model::InMigMode(g)) return "-";
  if (g.mig_devices.empty()) return "none";
  std::vector<std::pair<std::string, int>> counts;
  for (const model::MigDevice& m : g.mig_devices) {
    const std::string profile = m.profile.value_or("?");
    auto at = std::find_if(counts.begin(), counts.end(), [&](const auto& c) { return c.first == profile; });
    if (at == counts.end()) counts.emplace_back(profile, 1);
    else ++at->second;
  }
  std::string out;
  for (const auto& [profile, n] : counts) {
    out += (out.empty() ? "" : ", ") + profile + (n > 1 ? " x" + std::to_string(n) : "");
  }
  return out;
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
    // MIG (docs/share.md "MIG"): the mode, and the MIG devices a GPU in it is split into.
    json& entry = gpus.back();
    entry["mig_mode"] = g.mig_mode_current ? json(*g.mig_mode_current) : json(nullptr);
    json mig = json::array();
    for (const model::MigDevice& m : g.mig_devices) {
      mig.push_back({{"index", m.index},
                     {"uuid", m.uuid ? json(*m.uuid) : json(nullptr)},
                     {"profile", m.profile ? json(*m.profile) : json(nullptr)},
                     {"gpu_instance_id", m.gpu_instance_id ? json(*m.gpu_instance_id) : json(nullptr)},
                     {"compute_instance_id", m.compute_instance_id ? json(*m.compute_instance_id) : json(nullptr)}});
    }
    entry["mig_devices"] = mig;
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
  // A machine with a GPU in MIG mode gets a MIG column: each GPU's MIG devices by profile.
  const bool any_mig = std::any_of(snap.gpus.begin(), snap.gpus.end(), [](const model::DeviceSnapshot& g) { return model::InMigMode(g); });
  out += any_mig ? "CPU Affinity     NUMA  MIG\n" : "CPU Affinity     NUMA\n";
  for (size_t i = 0; i < n; ++i) {
    const auto& g = snap.gpus[i];
    out += Colorize(PadRight("GPU" + std::to_string(g.index), 7), Color::kBold, term.use_color);
    for (size_t j = 0; j < n; ++j) {
      std::string c = Cell(snap, i, j);
      Color color = c.rfind("NV", 0) == 0 ? Color::kGreen : (c == "SYS" ? Color::kYellow : Color::kNone);
      out += Colorize(c, color, term.use_color) + std::string(cell - DisplayWidth(c), ' ');
    }
    std::string cpus = g.cpu_affinity.empty() ? "-" : model::FormatCpuList(g.cpu_affinity);
    const std::string numa = g.numa_node ? std::to_string(*g.numa_node) : "-";
    if (!any_mig) {
      out += PadRight(cpus, 17) + numa + "\n";
      continue;
    }
    const std::string mig = MigProfiles(g);
    out += PadRight(cpus, 17) + PadRight(numa, 6) + Colorize(mig, mig == "-" ? Color::kNone : Color::kGreen, term.use_color) + "\n";
  }
  out += "\nLegend:\n"
         "  X    = self\n"
         "  NV#  = connected by # NVLinks\n"
         "  PIX  = at most one PCIe switch between them\n"
         "  PXB  = several PCIe switches, no host bridge\n"
         "  PHB  = through a PCIe host bridge (CPU)\n"
         "  NODE = across host bridges within one NUMA node\n"
         "  SYS  = across NUMA nodes (CPU interconnect)\n";
  if (any_mig) {
    out += "  MIG  = the GPU is in MIG mode: its MIG devices by profile (gpuman status lists them)\n";
  }
  return out;
}

std::string RenderPeakTable(const model::MachineSnapshot& snap, const std::map<std::string, double>& measured_fp32) {
  auto fixed = [](std::optional<double> v) {
    if (!v) return std::string("-");
    char text[32];
    std::snprintf(text, sizeof text, "%.1f", *v);
    return std::string(text);
  };
  bool any_measured = false;
  for (const auto& g : snap.gpus) any_measured = any_measured || (g.uuid && measured_fp32.count(*g.uuid));
  int name_width = 4;
  for (const auto& g : snap.gpus) name_width = std::max(name_width, DisplayWidth(g.name.value_or("-")));
  std::string out = "\nPeak throughput, computed from NVML (docs/selection.md, \"The fastest GPU\"):\n";
  out += PadRight("GPU", 5) + PadRight("NAME", name_width + 2) + PadRight("SMS", 6) +
         PadRight("FP32 TFLOPS", 13) + PadRight("TENSOR TFLOPS", 15) + (any_measured ? PadRight("MEMORY GB/s", 13) + "MEASURED FP32\n" : "MEMORY GB/s\n");
  for (const auto& g : snap.gpus) {
    const model::PeakFigures peak = model::PeakOf(g);
    std::string row = PadRight(std::to_string(g.index), 5) + PadRight(g.name.value_or("-"), name_width + 2) +
                      PadRight(peak.sms ? std::to_string(*peak.sms) : "-", 6) + PadRight(fixed(peak.fp32_tflops), 13) +
                      PadRight(fixed(peak.tensor_tflops), 15);
    if (any_measured) {
      auto m = g.uuid ? measured_fp32.find(*g.uuid) : measured_fp32.end();
      row += PadRight(fixed(peak.memory_gbps), 13) + (m == measured_fp32.end() ? "-" : fixed(m->second) + " (gpuman bench)");
    } else {
      row += fixed(peak.memory_gbps);
    }
    out += row + "\n";
  }
  out += "TENSOR = dense FP16/BF16. Peaks are what the silicon can do; `gpuman bench` measures.\n";
  return out;
}

}  // namespace gpuman::render
