// gres.conf generation and the slurmd -G check (see gres_conf_gen.h). The generated file
// lists GPUs in PCI order, which makes Slurm's indices the NVML indices and avoids the
// gres_order_not_pci trap described in docs/slurm.md.
#include "slurm/gres_conf_gen.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "base/strings.h"
#include "slurm/gres_conf.h"

namespace gpuman::slurm {

std::string GresType(std::string_view nvml_name) {
  std::string out;
  for (char c : Trim(nvml_name)) out += c == ' ' ? '_' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (out.starts_with("nvidia_")) out.erase(0, 7);
  return out;
}

GresConf GenerateGresConf(const model::MachineSnapshot& snap, std::string_view node_name) {
  GresConf conf;
  std::vector<std::pair<std::string, int>> types;  // type -> count, first-seen order
  const auto& topo = snap.topology;
  const bool has_nvlink = topo && topo->nvlinks.size() == snap.gpus.size() &&
                          std::any_of(topo->nvlinks.begin(), topo->nvlinks.end(), [](const std::vector<int>& row) {
                            return std::any_of(row.begin(), row.end(), [](int n) { return n > 0; });
                          });
  for (size_t i = 0; i < snap.gpus.size(); ++i) {
    const model::DeviceSnapshot& d = snap.gpus[i];
    if (!d.minor_number || !d.name) {
      conf.problems.push_back("GPU " + std::to_string(d.index) + " left out: NVML reports no " +
                              (!d.minor_number ? "minor number" : "name"));
      continue;
    }
    const std::string type = GresType(*d.name);
    std::string line = "NodeName=" + std::string(node_name) + " Name=gpu Type=" + type +
                       " File=/dev/nvidia" + std::to_string(*d.minor_number);
    if (!d.cpu_affinity.empty()) line += " Cores=" + model::FormatCpuList(d.cpu_affinity);
    if (has_nvlink) {
      std::string links;
      for (size_t j = 0; j < snap.gpus.size(); ++j) {
        links += (j == 0 ? "" : ",") + (i == j ? std::string("-1") : std::to_string(topo->nvlinks[i][j]));
      }
      line += " Links=" + links;
    }
    conf.lines.push_back(std::move(line));
    auto it = std::find_if(types.begin(), types.end(), [&](const auto& t) { return t.first == type; });
    if (it == types.end()) types.emplace_back(type, 1);
    else ++it->second;
  }
  for (const auto& [type, n] : types) {
    conf.node_gres += (conf.node_gres.empty() ? "gpu:" : ",gpu:") + type + ":" + std::to_string(n);
  }
  return conf;
}

std::vector<SlurmdGres> ParseSlurmdGres(std::string_view text) {
  std::vector<SlurmdGres> out;
  for (const std::string& line : Split(text, '\n')) {
    const size_t at = line.find("Gres Name=gpu ");
    if (at == std::string::npos) continue;
    SlurmdGres g;
    for (const std::string& token : Split(line.substr(at), ' ')) {
      const size_t eq = token.find('=');
      if (eq == std::string::npos) continue;
      const std::string key = token.substr(0, eq), value = token.substr(eq + 1);
      if (key == "Type" && value != "(null)") g.type = value;
      if (key == "Count") g.count = ParseInt(value).value_or(0);
      if (key == "File" && value != "(null)") {
        if (auto files = ExpandHostlist(value)) g.files = std::move(*files);
      }
    }
    out.push_back(std::move(g));
  }
  return out;
}

std::vector<std::string> CheckGres(const std::vector<SlurmdGres>& slurmd, const model::MachineSnapshot& snap,
                                   const std::function<std::optional<int>(const std::string&)>& minor_of) {
  std::vector<std::string> out;
  int64_t count = 0;
  std::map<int, std::string> file_of_minor;
  for (const SlurmdGres& g : slurmd) {
    count += g.count;
    if (static_cast<int64_t>(g.files.size()) != g.count) {
      out.push_back("slurmd declares Count=" + std::to_string(g.count) + " with " + std::to_string(g.files.size()) +
                    " device file(s)");
    }
    for (const std::string& f : g.files) {
      const auto minor = minor_of(f);
      if (!minor) {
        out.push_back(f + ": cannot tell its minor number");
        continue;
      }
      if (!file_of_minor.emplace(*minor, f).second) {
        out.push_back(f + " and " + file_of_minor[*minor] + " are the same device (minor " + std::to_string(*minor) + ")");
      }
    }
  }
  if (count != static_cast<int64_t>(snap.gpus.size())) {
    out.push_back("slurmd has " + std::to_string(count) + " GPU(s), NVML " + std::to_string(snap.gpus.size()));
  }
  std::set<int> nvml_minors;
  for (const model::DeviceSnapshot& d : snap.gpus) {
    if (!d.minor_number) {
      out.push_back("GPU " + std::to_string(d.index) + ": NVML reports no minor number");
      continue;
    }
    nvml_minors.insert(*d.minor_number);
    if (file_of_minor.count(*d.minor_number) == 0) {
      out.push_back("GPU " + std::to_string(d.index) + " (" + d.uuid.value_or("no UUID") + ", /dev/nvidia" +
                    std::to_string(*d.minor_number) + ") is not in slurmd's GRES");
    }
  }
  for (const auto& [minor, file] : file_of_minor) {
    if (nvml_minors.count(minor) == 0) out.push_back(file + " (minor " + std::to_string(minor) + ") is no GPU NVML shows");
  }
  return out;
}

}  // namespace gpuman::slurm
