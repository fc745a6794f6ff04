// gres.conf and slurm.conf as gpuman reads them: the GPU lines that apply to one node, in
// the order slurmd numbers them (Slurm GPU index = position), and a few slurm.conf /
// cgroup.conf keys. Pure text parsing; thread-safe. The file reading is in node_facts.cc.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "visibility/slurm_gpus.h"

namespace gpuman::slurm {

/// Expands a Slurm hostlist-style expression: "node[01-03,7]" -> node01 node02 node03
/// node7, "/dev/nvidia[0-1],/dev/nvidia4" -> three paths. Several bracket groups multiply.
/// nullopt when a bracket is malformed or the expansion exceeds 65536 names.
std::optional<std::vector<std::string>> ExpandHostlist(std::string_view expr);

/// The GPU lines (Name=gpu, with File=) of gres.conf `text` that apply to node `node_name`
/// (lines without NodeName= apply to every node), expanded one device file per entry, in
/// file order. `minor` is left unset (node_facts.cc fills it from the device file).
/// Keys are case-insensitive, '#' starts a comment. Lines without File= are skipped, as
/// slurmd drops file-less GPUs.
std::vector<visibility::GresGpu> ParseGresConf(std::string_view text, std::string_view node_name);

/// Key=value pairs of a slurm.conf-style file, keys lower-cased; a later line overrides.
/// NodeName=/PartitionName= lines are skipped (their keys describe nodes, not the cluster).
std::map<std::string, std::string> ParseConfKeys(std::string_view text);

/// The node names slurm.conf `text` declares: NodeName= and NodeHostname= of its NodeName
/// lines, hostlists expanded ("node[01-02]" -> node01 node02); DEFAULT is left out.
std::vector<std::string> ConfNodeNames(std::string_view text);

/// The N of "/dev/nvidiaN" (basename "nvidia" followed by digits only); nullopt otherwise.
std::optional<int> MinorFromName(std::string_view path);

}  // namespace gpuman::slurm
