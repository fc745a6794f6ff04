// Placement: which of the eligible GPUs a job gets.
//
// Two questions decide it, in this order.
//
// 1. How well do the chosen GPUs talk to each other? A multi-GPU job spends its life in
//    all-reduce and peer copies, and the slowest pair sets the pace. So a set is judged
//    by its *worst* pair:
//      a. every pair joined by NVLink beats any set with a PCIe-only pair; among those,
//         more links on the weakest pair wins (NV12 beats NV4);
//      b. then the worst pair's PCIe path, as `nvidia-smi topo -m` names it:
//         PIX (one switch) < PXB (several switches) < PHB (host bridge) < NODE (host
//         bridges of one NUMA node) < SYS (across NUMA nodes);
//      c. then the number of NUMA nodes the set spans. Without a topology matrix this is
//         the only connectivity we know (DeviceSnapshot::numa_node).
//    Connectivity comes first because it is what the job itself feels; everything
//    below only matters to jobs that come later. Slurm (gres.conf `Links`) and the
//    Kubernetes device plugin (go-gpuallocator's aligned sets) order things the same
//    way; task-spooler's random shuffle is the counter-example users complain about.
//
// 2. Among sets that connect equally well, which leaves the machine most useful? We
//    avoid GPUs shared with foreign processes (only eligible with allow_shared), then
//    minimise fragmentation. The machine is cut into connectivity *domains*: NVLink
//    groups (connected components of the NVLink graph), then PCIe domains at PIX, PXB,
//    PHB and NODE (components of "pair is at most this far apart"). A domain's value is
//    the square of its free GPUs, so one domain of 4 free GPUs (16) is worth more than
//    two of 2 (8): big connected blocks are what the next multi-GPU job needs. Taking
//    t of a domain's f free GPUs costs f^2 - (f-t)^2; the costs are compared NVLink
//    first, then PIX, ..., NODE. The effect is best fit: take GPUs from a group that is
//    already partly used, and keep whole groups whole. On 4 x A100 with NVLink pairs
//    0-1 and 2-3 and GPU 0 leased, one GPU goes to GPU 1 (cost 1) rather than GPU 2
//    (cost 3), and pair 2-3 stays whole for the next two-GPU job.
//    "Free" here is machine-wide (healthy, inside the enclosing allocation, not leased,
//    no foreign processes) and ignores this request's own filters: a GPU that this job
//    excluded is still valuable to the next one.
//
// 3. Ties go to the lowest indices, so the answer is deterministic.
//
// Single GPUs (count 1) use the fragmentation cost first, then the lowest utilization,
// then the most free memory, then the lowest index.
//
// Search. Up to kMaxExhaustiveSets candidate sets (C(16,8) = 12870) are enumerated and
// scored exactly. Bigger problems (the 512-GPU case) use a greedy search over the same
// domains: walk the domain levels from the tightest (NVLink group within one PCIe
// switch) to the loosest (the whole machine); at the first level where some domain
// holds `count` eligible GPUs, fill each such domain GPU by GPU with the cheapest
// fragmentation cost, score those candidates exactly and keep the best. This is
// O(levels * n^2) for the domains and O(count * n) for the fill, a few milliseconds at
// 512 GPUs. The greedy search treats an NVLink group as a level only when the group is
// fully connected (NVSwitch systems, NVLink pairs); it does not maximise the link count
// of the weakest pair. Both are exact on the small machines where they could differ.

#include "policy/placement.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <set>
#include <tuple>
#include <utility>

#include "base/result.h"

namespace gpuman::policy {
namespace {

using model::PcieLevel;

constexpr int64_t kMaxExhaustiveSets = 20000;
constexpr size_t kMaxDamageLevels = 5;  // NVLink, PIX, PXB, PHB, NODE

// Union-find over GPU positions, for domains.
class DisjointSets {
 public:
  explicit DisjointSets(int n) : parent_(n) {
    for (int i = 0; i < n; ++i) parent_[i] = i;
  }
  int Find(int x) {
    while (parent_[x] != x) {
      parent_[x] = parent_[parent_[x]];
      x = parent_[x];
    }
    return x;
  }
  void Union(int a, int b) { parent_[Find(a)] = Find(b); }
  // Dense labels 0..k-1 in order of first position.
  std::vector<int> Labels() {
    std::vector<int> label(parent_.size(), -1);
    std::vector<int> root_label(parent_.size(), -1);
    int next = 0;
    for (size_t i = 0; i < parent_.size(); ++i) {
      int root = Find(static_cast<int>(i));
      if (root_label[root] < 0) root_label[root] = next++;
      label[i] = root_label[root];
    }
    return label;
  }

 private:
  std::vector<int> parent_;
};

int CountDomains(const std::vector<int>& labels) {
  int n = 0;
  for (int l : labels) n = std::max(n, l + 1);
  return n;
}

// The machine's connectivity, computed once per Place() call.
class Machine {
 public:
  Machine(const model::MachineSnapshot& snap, const std::vector<PlacementGpu>& gpus)
      : snap_(snap), gpus_(gpus), n_(static_cast<int>(snap.gpus.size())) {
    has_topology_ = snap.topology && snap.topology->size() == snap.gpus.size();
    if (has_topology_) {
      topology_ = &*snap.topology;
      if (!IsWellFormed(*topology_)) {
        fixed_ = Normalize(*topology_);
        topology_ = &fixed_;
      }
      BuildTopologyDomains();
    } else {
      BuildNumaDomains();
    }
    free_count_.resize(damage_domains_.size());
    for (size_t l = 0; l < damage_domains_.size(); ++l) {
      free_count_[l].assign(CountDomains(damage_domains_[l]), 0);
      for (int p = 0; p < n_; ++p) {
        if (gpus_[p].is_free) ++free_count_[l][damage_domains_[l][p]];
      }
    }
  }

  int size() const { return n_; }
  bool has_topology() const { return has_topology_; }
  const model::MachineSnapshot& snap() const { return snap_; }
  const PlacementGpu& gpu(int p) const { return gpus_[p]; }

  int Links(int a, int b) const { return has_topology_ ? topology_->nvlinks[a][b] : 0; }
  PcieLevel Pcie(int a, int b) const {
    return has_topology_ ? topology_->pcie[a][b] : PcieLevel::kUnknown;
  }

  size_t damage_levels() const { return damage_domains_.size(); }
  int DamageDomain(size_t level, int p) const { return damage_domains_[level][p]; }
  int FreeCount(size_t level, int domain) const { return free_count_[level][domain]; }
  size_t DomainCount(size_t level) const { return free_count_[level].size(); }
  // Search levels, tightest first; -1 = the GPU belongs to no domain at this level.
  const std::vector<std::vector<int>>& search_levels() const { return search_levels_; }

 private:
  // Square, symmetric, no NVLink to itself, and no "X" between two different GPUs.
  bool IsWellFormed(const model::Topology& t) const {
    if (t.nvlinks.size() != static_cast<size_t>(n_)) return false;
    for (int a = 0; a < n_; ++a) {
      if (t.nvlinks[a].size() != static_cast<size_t>(n_) ||
          t.pcie[a].size() != static_cast<size_t>(n_)) {
        return false;
      }
    }
    for (int a = 0; a < n_; ++a) {
      if (t.nvlinks[a][a] != 0) return false;
      for (int b = a + 1; b < n_; ++b) {
        if (t.nvlinks[a][b] != t.nvlinks[b][a] || t.pcie[a][b] != t.pcie[b][a] ||
            t.pcie[a][b] == PcieLevel::kSelf) {
          return false;
        }
      }
    }
    return true;
  }

  // A well-formed copy of a ragged or one-sided matrix: the larger link count of both
  // directions, the farther PCIe level, missing cells as no link / unknown path, and a
  // bogus "X" between two different GPUs read as one switch.
  model::Topology Normalize(const model::Topology& t) const {
    auto links = [&](int a, int b) {
      return (a < static_cast<int>(t.nvlinks.size()) &&
              b < static_cast<int>(t.nvlinks[a].size()))
                 ? std::max(t.nvlinks[a][b], 0)
                 : 0;
    };
    auto pcie = [&](int a, int b) {
      if (b >= static_cast<int>(t.pcie[a].size())) return PcieLevel::kUnknown;
      PcieLevel level = t.pcie[a][b];
      return level == PcieLevel::kSelf ? PcieLevel::kSingleSwitch : level;
    };
    model::Topology out;
    out.nvlinks.assign(n_, std::vector<int>(n_, 0));
    out.pcie.assign(n_, std::vector<PcieLevel>(n_, PcieLevel::kSelf));
    for (int a = 0; a < n_; ++a) {
      for (int b = a + 1; b < n_; ++b) {
        out.nvlinks[a][b] = out.nvlinks[b][a] = std::max(links(a, b), links(b, a));
        out.pcie[a][b] = out.pcie[b][a] = std::max(pcie(a, b), pcie(b, a));
      }
    }
    return out;
  }

  void BuildTopologyDomains() {
    DisjointSets nvlink(n_);
    static constexpr std::array<PcieLevel, 4> kLevels = {
        PcieLevel::kSingleSwitch, PcieLevel::kMultipleSwitch, PcieLevel::kHostBridge,
        PcieLevel::kNumaNode};
    std::vector<DisjointSets> pcie(kLevels.size(), DisjointSets(n_));
    for (int a = 0; a < n_; ++a) {
      for (int b = a + 1; b < n_; ++b) {
        if (Links(a, b) > 0) nvlink.Union(a, b);
        PcieLevel level = Pcie(a, b);
        for (size_t l = 0; l < kLevels.size(); ++l) {
          if (level <= kLevels[l]) pcie[l].Union(a, b);
        }
      }
    }
    std::vector<int> nv = nvlink.Labels();
    damage_domains_.push_back(nv);
    for (auto& sets : pcie) damage_domains_.push_back(sets.Labels());

    // NVLink groups that are fully connected qualify as search domains.
    int groups = CountDomains(nv);
    std::vector<int64_t> members(groups, 0);
    std::vector<int64_t> linked_pairs(groups, 0);
    for (int a = 0; a < n_; ++a) {
      ++members[nv[a]];
      for (int b = a + 1; b < n_; ++b) {
        if (nv[a] == nv[b] && Links(a, b) > 0) ++linked_pairs[nv[a]];
      }
    }
    auto is_clique = [&](int p) {
      int g = nv[p];
      return linked_pairs[g] == members[g] * (members[g] - 1) / 2;
    };
    for (size_t l = 1; l < damage_domains_.size(); ++l) {  // NVLink group within PIX..NODE
      std::vector<int> level(n_, -1);
      for (int p = 0; p < n_; ++p) {
        if (is_clique(p)) level[p] = nv[p] * n_ + damage_domains_[l][p];
      }
      search_levels_.push_back(std::move(level));
    }
    std::vector<int> whole_group(n_, -1);
    for (int p = 0; p < n_; ++p) {
      if (is_clique(p)) whole_group[p] = nv[p];
    }
    search_levels_.push_back(std::move(whole_group));
    for (size_t l = 1; l < damage_domains_.size(); ++l) {
      search_levels_.push_back(damage_domains_[l]);
    }
    search_levels_.push_back(std::vector<int>(n_, 0));
  }

  void BuildNumaDomains() {
    // Unknown NUMA nodes are each their own domain: we cannot claim they are close.
    std::vector<int> numa(n_);
    int next_unknown = 0;
    for (int p = 0; p < n_; ++p) {
      if (snap_.gpus[p].numa_node && *snap_.gpus[p].numa_node >= 0) {
        numa[p] = *snap_.gpus[p].numa_node;
      } else {
        numa[p] = -1 - next_unknown++;
      }
    }
    // Dense labels, in order of first position.
    std::vector<std::pair<int, int>> seen;  // numa -> label
    std::vector<int> labels(n_);
    for (int p = 0; p < n_; ++p) {
      auto it = std::find_if(seen.begin(), seen.end(),
                             [&](const auto& s) { return s.first == numa[p]; });
      if (it == seen.end()) {
        seen.emplace_back(numa[p], static_cast<int>(seen.size()));
        labels[p] = static_cast<int>(seen.size()) - 1;
      } else {
        labels[p] = it->second;
      }
    }
    damage_domains_.push_back(labels);
    search_levels_.push_back(labels);
    search_levels_.push_back(std::vector<int>(n_, 0));
  }

  const model::MachineSnapshot& snap_;
  const std::vector<PlacementGpu>& gpus_;
  int n_;
  bool has_topology_ = false;
  const model::Topology* topology_ = nullptr;  // snap.topology, or fixed_ when malformed
  model::Topology fixed_;
  std::vector<std::vector<int>> damage_domains_;  // [level][position]
  std::vector<std::vector<int>> free_count_;      // [level][domain]
  std::vector<std::vector<int>> search_levels_;   // [level][position]
};

using Damage = std::array<int64_t, kMaxDamageLevels>;

struct Score {
  bool nvlink_full = false;
  int min_links = 0;
  int worst_pcie = 0;
  int numa_spread = 0;
  int shared = 0;
  Damage damage{};
};

// Negative when `a` is the better set, positive when `b` is, 0 on a tie; the damage
// is compared only when `with_damage`.
int Compare(const Score& a, const Score& b, bool with_damage = true) {
  if (a.nvlink_full != b.nvlink_full) return a.nvlink_full ? -1 : 1;
  if (a.min_links != b.min_links) return a.min_links > b.min_links ? -1 : 1;
  if (a.worst_pcie != b.worst_pcie) return a.worst_pcie < b.worst_pcie ? -1 : 1;
  if (a.numa_spread != b.numa_spread) return a.numa_spread < b.numa_spread ? -1 : 1;
  if (a.shared != b.shared) return a.shared < b.shared ? -1 : 1;
  if (with_damage && a.damage != b.damage) return a.damage < b.damage ? -1 : 1;
  return 0;
}

// Distinct NUMA nodes; every GPU with an unknown node counts as one more.
int NumaSpread(const Machine& m, const std::vector<int>& set) {
  std::vector<int> nodes;
  int unknown = 0;
  for (int p : set) {
    const auto& numa = m.snap().gpus[p].numa_node;
    if (numa && *numa >= 0) {
      nodes.push_back(*numa);
    } else {
      ++unknown;
    }
  }
  std::sort(nodes.begin(), nodes.end());
  return static_cast<int>(std::unique(nodes.begin(), nodes.end()) - nodes.begin()) + unknown;
}

// Everything but the damage: cheap, and enough to discard most candidate sets.
Score ScoreConnectivity(const Machine& m, const std::vector<int>& set) {
  Score s;
  if (m.has_topology() && set.size() > 1) {
    int min_links = std::numeric_limits<int>::max();
    int worst = 0;
    for (size_t i = 0; i < set.size(); ++i) {
      for (size_t j = i + 1; j < set.size(); ++j) {
        min_links = std::min(min_links, m.Links(set[i], set[j]));
        worst = std::max(worst, static_cast<int>(m.Pcie(set[i], set[j])));
      }
    }
    s.nvlink_full = min_links > 0;
    s.min_links = s.nvlink_full ? min_links : 0;
    s.worst_pcie = worst;
  }
  s.numa_spread = NumaSpread(m, set);
  for (int p : set) s.shared += m.gpu(p).is_shared ? 1 : 0;
  return s;
}

void AddDamage(const Machine& m, const std::vector<int>& set, Score& s) {
  std::vector<int> domains;
  for (size_t l = 0; l < m.damage_levels(); ++l) {
    domains.clear();
    for (int p : set) {
      if (m.gpu(p).is_free) domains.push_back(m.DamageDomain(l, p));
    }
    std::sort(domains.begin(), domains.end());
    for (size_t i = 0; i < domains.size();) {
      size_t j = i;
      while (j < domains.size() && domains[j] == domains[i]) ++j;
      int64_t taken = static_cast<int64_t>(j - i);
      int64_t free = m.FreeCount(l, domains[i]);
      s.damage[l] += taken * (2 * free - taken);
      i = j;
    }
  }
}

Score ScoreSet(const Machine& m, const std::vector<int>& set) {
  Score s = ScoreConnectivity(m, set);
  AddDamage(m, set, s);
  return s;
}

std::vector<int> SortedIndices(const Machine& m, const std::vector<int>& set) {
  std::vector<int> indices;
  indices.reserve(set.size());
  for (int p : set) indices.push_back(m.snap().gpus[p].index);
  std::sort(indices.begin(), indices.end());
  return indices;
}

// Keeps the best set seen so far; ties go to the lowest indices.
class Best {
 public:
  explicit Best(const Machine& m) : m_(m) {}
  void Offer(const std::vector<int>& set) {
    Score score = ScoreConnectivity(m_, set);
    if (has_ && Compare(score, score_, /*with_damage=*/false) > 0) return;
    AddDamage(m_, set, score);
    int c = has_ ? Compare(score, score_) : -1;
    if (c == 0) {
      std::vector<int> indices = SortedIndices(m_, set);
      if (indices < indices_) c = -1;
    }
    if (c < 0) {
      has_ = true;
      set_ = set;
      score_ = score;
      indices_ = SortedIndices(m_, set);
    }
  }
  const std::vector<int>& set() const { return set_; }

 private:
  const Machine& m_;
  bool has_ = false;
  std::vector<int> set_;
  Score score_;
  std::vector<int> indices_;
};

// Fragmentation cost of taking free GPU p when `taken[l][d]` are already taken.
Damage MarginalDamage(const Machine& m, int p, const std::vector<std::vector<int>>& taken) {
  Damage d{};
  if (!m.gpu(p).is_free) return d;
  for (size_t l = 0; l < m.damage_levels(); ++l) {
    int domain = m.DamageDomain(l, p);
    int64_t remaining = m.FreeCount(l, domain) - taken[l][domain];
    d[l] = 2 * remaining - 1;
  }
  return d;
}

// count == 1: fragmentation cost, then utilization, then free memory, then index.
std::vector<int> PlaceOne(const Machine& m) {
  std::vector<std::vector<int>> none(m.damage_levels());
  for (size_t l = 0; l < m.damage_levels(); ++l) none[l].assign(m.DomainCount(l), 0);
  int best = -1;
  auto key = [&](int p) {
    const auto& gpu = m.snap().gpus[p];
    int util = gpu.gpu_utilization_percent.value_or(std::numeric_limits<int>::max());
    int64_t free_memory = gpu.memory_free_bytes.value_or(-1);
    return std::make_tuple(m.gpu(p).is_shared, MarginalDamage(m, p, none), util,
                           -free_memory, gpu.index);
  };
  for (int p = 0; p < m.size(); ++p) {
    if (!m.gpu(p).is_eligible) continue;
    if (best < 0 || key(p) < key(best)) best = p;
  }
  return {best};
}

// n choose k, saturating at `limit` + 1.
int64_t Combinations(int64_t n, int64_t k, int64_t limit) {
  if (k < 0 || k > n) return 0;
  k = std::min(k, n - k);
  int64_t result = 1;
  for (int64_t i = 1; i <= k; ++i) {
    result = result * (n - k + i) / i;  // exact: a product of i consecutive numbers
    if (result > limit) return limit + 1;
  }
  return result;
}

std::vector<int> PlaceExhaustive(const Machine& m, const std::vector<int>& eligible,
                                 int count) {
  Best best(m);
  std::vector<int> pick(count);
  for (int i = 0; i < count; ++i) pick[i] = i;
  std::vector<int> set(count);
  const int n = static_cast<int>(eligible.size());
  while (true) {
    for (int i = 0; i < count; ++i) set[i] = eligible[pick[i]];
    best.Offer(set);
    int i = count - 1;
    while (i >= 0 && pick[i] == n - count + i) --i;
    if (i < 0) break;
    ++pick[i];
    for (int j = i + 1; j < count; ++j) pick[j] = pick[j - 1] + 1;
  }
  return best.set();
}

// Fills `count` GPUs out of `members`, cheapest fragmentation first.
std::vector<int> FillDomain(const Machine& m, const std::vector<int>& members, int count) {
  std::vector<std::vector<int>> taken(m.damage_levels());
  for (size_t l = 0; l < m.damage_levels(); ++l) taken[l].assign(m.DomainCount(l), 0);
  std::vector<bool> used(members.size(), false);
  std::vector<int> set;
  for (int n = 0; n < count; ++n) {
    int best = -1;
    std::tuple<bool, Damage, int> best_key;
    for (size_t i = 0; i < members.size(); ++i) {
      if (used[i]) continue;
      int p = members[i];
      auto key = std::make_tuple(m.gpu(p).is_shared, MarginalDamage(m, p, taken),
                                 m.snap().gpus[p].index);
      if (best < 0 || key < best_key) {
        best = static_cast<int>(i);
        best_key = key;
      }
    }
    used[best] = true;
    int p = members[best];
    set.push_back(p);
    if (m.gpu(p).is_free) {
      for (size_t l = 0; l < m.damage_levels(); ++l) ++taken[l][m.DamageDomain(l, p)];
    }
  }
  std::sort(set.begin(), set.end());
  return set;
}

std::vector<int> PlaceGreedy(const Machine& m, const std::vector<int>& eligible, int count) {
  for (const std::vector<int>& level : m.search_levels()) {
    std::vector<std::pair<int, int>> by_domain;  // (domain, position)
    for (int p : eligible) {
      if (level[p] >= 0) by_domain.emplace_back(level[p], p);
    }
    std::sort(by_domain.begin(), by_domain.end());
    Best best(m);
    bool found = false;
    for (size_t i = 0; i < by_domain.size();) {
      size_t j = i;
      std::vector<int> members;
      while (j < by_domain.size() && by_domain[j].first == by_domain[i].first) {
        members.push_back(by_domain[j++].second);
      }
      if (static_cast<int>(members.size()) >= count) {
        best.Offer(FillDomain(m, members, count));
        found = true;
      }
      i = j;
    }
    if (found) return best.set();
  }
  GPUMAN_CHECK(false);  // the last level is the whole machine
  return {};
}

std::string Describe(const Machine& m, const std::vector<int>& set) {
  if (set.empty()) return "none";
  if (set.size() == 1) return "single GPU";
  if (m.has_topology()) {
    Score s = ScoreSet(m, set);
    if (s.nvlink_full) return "NVLink (NV" + std::to_string(s.min_links) + ")";
    switch (static_cast<PcieLevel>(s.worst_pcie)) {
      case PcieLevel::kSelf:
      case PcieLevel::kSingleSwitch: return "same PCIe switch (PIX)";
      case PcieLevel::kMultipleSwitch: return "same PCIe switch tree (PXB)";
      case PcieLevel::kHostBridge: return "same PCIe host bridge (PHB)";
      case PcieLevel::kNumaNode: return "same NUMA node (NODE)";
      case PcieLevel::kSystem: return "across NUMA nodes (SYS)";
      case PcieLevel::kUnknown: break;
    }
    return "unknown interconnect";
  }
  std::set<int> nodes;
  for (int p : set) {
    const auto& numa = m.snap().gpus[p].numa_node;
    if (!numa || *numa < 0) return "NUMA node unknown";
    nodes.insert(*numa);
  }
  return nodes.size() == 1 ? "same NUMA node" : "across NUMA nodes";
}

}  // namespace

Placement Place(const model::MachineSnapshot& snap, const std::vector<PlacementGpu>& gpus,
                int count) {
  GPUMAN_CHECK(gpus.size() == snap.gpus.size());
  GPUMAN_CHECK(count >= 1);
  std::vector<int> eligible;
  for (size_t p = 0; p < gpus.size(); ++p) {
    if (gpus[p].is_eligible) eligible.push_back(static_cast<int>(p));
  }
  GPUMAN_CHECK(static_cast<int>(eligible.size()) >= count);

  Machine machine(snap, gpus);
  std::vector<int> set;
  if (count == 1) {
    set = PlaceOne(machine);
  } else if (Combinations(static_cast<int64_t>(eligible.size()), count, kMaxExhaustiveSets) <=
             kMaxExhaustiveSets) {
    set = PlaceExhaustive(machine, eligible, count);
  } else {
    set = PlaceGreedy(machine, eligible, count);
  }
  return Placement{set, Describe(machine, set)};
}

std::string DescribePlacement(const model::MachineSnapshot& snap,
                              const std::vector<int>& positions) {
  std::vector<PlacementGpu> gpus(snap.gpus.size());
  Machine machine(snap, gpus);
  return Describe(machine, positions);
}

}  // namespace gpuman::policy
