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
namespace {

// "0-31,64-95" -> its CPUs; nullopt when malformed.
std::optional<std::set<int>> ParseCpuList(std::string_view text) {
  std::set<int> out;
  for (const std::string& part : Split(text, ',')) {
    const std::string_view p = Trim(part);
    const size_t dash = p.find('-');
    const auto lo = ParseInt(dash == std::string_view::npos ? p : p.substr(0, dash));
    const auto hi = dash == std::string_view::npos ? lo : ParseInt(p.substr(dash + 1));
    if (!lo || !hi || *lo < 0 || *hi < *lo || *hi > 65535) return std::nullopt;
    for (int64_t c = *lo; c <= *hi; ++c) out.insert(static_cast<int>(c));
  }
  return out;
}

}  // namespace

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
  // The GPUs that get a line: Links= entry j is the j-th of them (Slurm's GPU j).
  std::vector<size_t> listed;
  std::vector<std::pair<std::string, int>> mig_types;  // profile -> count, first-seen order
  for (size_t i = 0; i < snap.gpus.size(); ++i) {
    const model::DeviceSnapshot& d = snap.gpus[i];
    if (model::InMigMode(d)) {
      // Never File=/dev/nvidiaN: Slurm would hand the whole GPU out. Its MIG devices need
      // each instance's /dev/nvidia-caps files, which only the driver knows: AutoDetect=nvml.
      std::string head = "# GPU " + std::to_string(d.index);
      if (d.minor_number) head += " (/dev/nvidia" + std::to_string(*d.minor_number) + ")";
      head += " is in MIG mode: no whole-GPU line; let slurmd find its " + std::to_string(d.mig_devices.size()) +
              " MIG device(s) with AutoDetect=nvml";
      conf.mig_comments.push_back(std::move(head));
      for (const model::MigDevice& m : d.mig_devices) {
        const std::string profile = m.profile.value_or("unknown");
        conf.mig_comments.push_back("#   MIG " + std::to_string(m.index) + " Type=" + profile + " " + m.uuid.value_or("(no uuid)"));
        auto it = std::find_if(mig_types.begin(), mig_types.end(), [&](const auto& t) { return t.first == profile; });
        if (it == mig_types.end()) mig_types.emplace_back(profile, 1);
        else ++it->second;
      }
      const bool before_listed = std::any_of(snap.gpus.begin() + static_cast<std::ptrdiff_t>(i) + 1, snap.gpus.end(),
                                             [](const model::DeviceSnapshot& g) { return !model::InMigMode(g); });
      std::string why = "GPU " + std::to_string(d.index) + " is in MIG mode: left out of the File= lines";
      if (before_listed) why += "; the GPUs after it get Slurm indices lower than their NVML ones unless the node uses AutoDetect=nvml";
      conf.problems.push_back(std::move(why));
      continue;
    }
    if (d.minor_number && d.name) {
      listed.push_back(i);
      continue;
    }
    std::string why = "GPU " + std::to_string(d.index) + " left out: NVML reports no " +
                      (!d.minor_number ? "minor number" : "name");
    std::vector<std::string> about;  // which GPU, and what NVML said of it
    if (d.uuid) about.push_back(*d.uuid);
    if (!d.is_healthy) about.insert(about.end(), d.health_problems.begin(), d.health_problems.end());
    if (!about.empty()) why += " (" + Join(about, "; ") + ")";
    conf.problems.push_back(std::move(why));
    conf.missing.push_back(d.index);
  }
  for (size_t i : listed) {
    const model::DeviceSnapshot& d = snap.gpus[i];
    const std::string type = GresType(*d.name);
    std::string line = "NodeName=" + std::string(node_name) + " Name=gpu Type=" + type +
                       " File=/dev/nvidia" + std::to_string(*d.minor_number);
    if (!d.cpu_affinity.empty()) line += " Cores=" + model::FormatCpuList(d.cpu_affinity);
    if (has_nvlink) {
      std::string links;
      for (size_t j : listed) {
        links += (links.empty() ? "" : ",") + (i == j ? std::string("-1") : std::to_string(topo->nvlinks[i][j]));
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
  for (const auto& [type, n] : mig_types) {
    conf.mig_node_gres += (conf.mig_node_gres.empty() ? "gpu:" : ",gpu:") + type + ":" + std::to_string(n);
  }
  if (!conf.mig_comments.empty()) {
    conf.mig_comments.push_back("# For MIG (Slurm's gres.conf \"MIG Support\"), with a Slurm built with NVML: AutoDetect=nvml");
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
      if (key == "Cores" && value != "(null)") g.cores = value;
      if (key == "Links" && value != "(null)") g.links = value;
    }
    out.push_back(std::move(g));
  }
  return out;
}

GresCheck CheckGres(const std::vector<SlurmdGres>& slurmd, const model::MachineSnapshot& snap,
                    const std::function<std::optional<int>(const std::string&)>& minor_of) {
  GresCheck check;
  std::vector<std::string>& out = check.mismatches;
  int64_t count = 0;
  std::map<int, std::string> file_of_minor;
  // slurmd's GPUs in its order (Slurm index = position), with their record and minor.
  struct SlurmGpu {
    const SlurmdGres* record;
    std::string file;
    std::optional<int> minor;
  };
  std::vector<SlurmGpu> gpus;
  for (const SlurmdGres& g : slurmd) {
    count += g.count;
    if (static_cast<int64_t>(g.files.size()) != g.count) {
      out.push_back("slurmd declares Count=" + std::to_string(g.count) + " with " + std::to_string(g.files.size()) +
                    " device file(s)");
    }
    for (const std::string& f : g.files) {
      const auto minor = minor_of(f);
      gpus.push_back(SlurmGpu{&g, f, minor});
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
  std::map<int, size_t> nvml_of_minor;  // minor -> position in snap.gpus
  for (size_t i = 0; i < snap.gpus.size(); ++i) {
    const model::DeviceSnapshot& d = snap.gpus[i];
    if (!d.minor_number) {
      out.push_back("GPU " + std::to_string(d.index) + ": NVML reports no minor number");
      continue;
    }
    nvml_minors.insert(*d.minor_number);
    nvml_of_minor.emplace(*d.minor_number, i);
    if (file_of_minor.count(*d.minor_number) == 0) {
      out.push_back("GPU " + std::to_string(d.index) + " (" + d.uuid.value_or("no UUID") + ", /dev/nvidia" +
                    std::to_string(*d.minor_number) + ") is not in slurmd's GRES");
    }
  }
  for (const auto& [minor, file] : file_of_minor) {
    if (nvml_minors.count(minor) == 0) out.push_back(file + " (minor " + std::to_string(minor) + ") is no GPU NVML shows");
  }

  // Cores= and Links= of each slurmd GPU that is an NVML GPU.
  const auto nvml_at = [&](const SlurmGpu& g) -> std::optional<size_t> {
    if (!g.minor) return std::nullopt;
    const auto it = nvml_of_minor.find(*g.minor);
    return it == nvml_of_minor.end() ? std::nullopt : std::optional<size_t>(it->second);
  };
  const auto& topo = snap.topology;
  const bool topo_known = topo && topo->nvlinks.size() == snap.gpus.size();
  int no_cores = 0, no_links = 0;
  for (size_t k = 0; k < gpus.size(); ++k) {
    const auto a = nvml_at(gpus[k]);
    if (!a) continue;
    const model::DeviceSnapshot& d = snap.gpus[*a];
    const std::string who = "Slurm GPU " + std::to_string(k) + " (" + gpus[k].file + ", NVML GPU " +
                            std::to_string(d.index) + ")";
    if (!d.cpu_affinity.empty()) {
      const std::string nvml_cores = model::FormatCpuList(d.cpu_affinity);
      if (!gpus[k].record->cores) {
        ++no_cores;
      } else if (const auto cpus = ParseCpuList(*gpus[k].record->cores); !cpus) {
        out.push_back(who + ": cannot read Cores=" + *gpus[k].record->cores);
      } else if (*cpus != std::set<int>(d.cpu_affinity.begin(), d.cpu_affinity.end())) {
        out.push_back(who + ": Cores=" + *gpus[k].record->cores + ", NVML's CPU affinity is " + nvml_cores);
      }
    }
    if (!topo_known) continue;
    const bool nvml_linked = std::any_of(topo->nvlinks[*a].begin(), topo->nvlinks[*a].end(), [](int n) { return n > 0; });
    if (!gpus[k].record->links) {
      if (nvml_linked) ++no_links;
      continue;
    }
    std::vector<int64_t> links;
    bool readable = true;
    for (const std::string& v : Split(*gpus[k].record->links, ',')) {
      const auto n = ParseInt(Trim(v));
      if (!n) readable = false;
      links.push_back(n.value_or(0));
    }
    if (!readable) {
      out.push_back(who + ": cannot read Links=" + *gpus[k].record->links);
      continue;
    }
    if (links.size() != gpus.size()) {
      out.push_back(who + ": Links=" + *gpus[k].record->links + " has " + std::to_string(links.size()) +
                    " entries for slurmd's " + std::to_string(gpus.size()) + " GPU(s)");
      continue;
    }
    for (size_t j = 0; j < gpus.size(); ++j) {
      const auto b = nvml_at(gpus[j]);
      if (!b) continue;
      const int64_t want = j == k ? -1 : topo->nvlinks[*a][*b];
      if (links[j] == want) continue;
      out.push_back(who + ": Links= entry " + std::to_string(j) + " (to Slurm GPU " + std::to_string(j) + ", NVML GPU " +
                    std::to_string(snap.gpus[*b].index) + ") is " + std::to_string(links[j]) + ", NVML " +
                    (j == k ? std::string("expects -1 for the GPU itself") : "sees " + std::to_string(want) + " NVLink(s)"));
    }
  }
  if (no_cores > 0) {
    check.notes.push_back("slurmd declares no Cores= for " + std::to_string(no_cores) +
                          " GPU(s) whose CPU affinity NVML knows: Slurm does not bind their jobs near them");
  }
  if (no_links > 0) {
    check.notes.push_back("slurmd declares no Links= for " + std::to_string(no_links) +
                          " NVLinked GPU(s): Slurm's --gpus cannot prefer linked GPUs");
  }
  return check;
}

}  // namespace gpuman::slurm
