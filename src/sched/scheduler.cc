// The scheduler: one pure pass from (snapshot, leases, jobs, now) to decisions.
//
// Order. Queued and held jobs are walked by priority (higher first); within one
// priority by fair share: the user with the lower decayed GPU-seconds goes first, and
// between users with equal usage the one holding fewer GPUs right now (counted anew as
// this pass starts jobs, so two fresh users alternate); then submit time, then id.
// Slurm's multifactor priority mixes these into one number with weights; we keep them
// lexicographic because one admin-set priority should beat any amount of history.
//
// Walk. Every job is judged in that order: held, waiting for an `after` job, asking
// for more GPUs than exist or than are not drained, over its user's cap, or it fits
// now and starts. The first job that does not fit becomes the *head*: we estimate when
// enough GPUs free up (running jobs end at start + time limit; interactive leases and
// foreign processes have no end we know of, so they count as never) and which GPUs it
// will get then, and reserve them. Later jobs may still start now, but only on GPUs
// outside the reservation, or on reserved GPUs when they end (now + their time limit)
// before the head's reserved start. That is EASY backfill (Lifka 1995, Slurm's
// sched/backfill with one reservation): the head can never be pushed back by jobs behind
// it, so a 4-GPU job is not starved by a stream of 1-GPU jobs, and short jobs still fill
// the holes. A head without an estimate (the GPUs it needs are held without a time
// limit) reserves nothing and the next job that does not fit may become the head.
//
// Placement is policy::Select's, never our own. Select looks at the whole snapshot and
// builds its connectivity domains in O(n^2), a few milliseconds at 512 GPUs, too slow
// to call once per started job. So we cut the machine into *islands*: connected
// components of "joined by NVLink or at most NODE apart on PCIe" (NUMA nodes when there
// is no topology matrix). Every domain placement.cc scores lies inside one island, so
// Select run on a few whole islands (with the GPUs this pass cannot hand out shown as
// leased) answers exactly as it would on the whole machine, except for one decision
// that we make ourselves, like Slurm picks nodes before binding GPUs: a job that fits
// into one island goes to the island with the fewest available GPUs that still holds
// it (best fit; lowest index on ties), and Select picks the GPUs inside it. Jobs that
// fit into no single island get Select over every island with an available GPU.
//
// Speed. Counting comes first: a job that asks for more GPUs than are available is
// answered in O(1) without calling Select, and a request without momentary filters
// (memory, utilization, model, compute capability) that fits by count is known to
// succeed. A filtered request that failed is remembered until the next start changes
// the free set. A pass over 10,000 queued jobs is then dominated by sorting them.

#include "sched/scheduler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "base/duration.h"
#include "base/strings.h"
#include "policy/byte_size.h"
#include "policy/selection.h"

namespace gpuman::sched {
namespace {

using model::Job;
using model::JobState;
using model::PcieLevel;

constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

std::string Gpus(int64_t n) { return std::to_string(n) + (n == 1 ? " GPU" : " GPUs"); }

std::string UserName(const Job& job) {
  return job.user.empty() ? "uid " + std::to_string(job.uid) : job.user;
}

std::string In(int64_t delta_ms) {
  if (delta_ms <= 0) return "soon";
  if (delta_ms >= 60'000) delta_ms = (delta_ms + 30'000) / 60'000 * 60'000;
  return "in ~" + FormatDurationMs(delta_ms);
}

bool HasMomentaryOrStaticFilters(const model::GpuRequest& r) {
  return r.min_free_memory_bytes || r.max_utilization_percent || r.model ||
         r.min_compute_capability;
}

// Which GPUs one placement attempt may use. `blocked` GPUs are shown to Select as
// leased; `countable` GPUs are the ones that count towards the request's size.
struct Attempt {
  std::vector<char> blocked;
  std::vector<char> countable;
  std::vector<char> clear_processes;  // future view: the processes there will be gone
  bool for_estimate = false;          // drop momentary filters (memory, utilization)
};

// What the walk needs of a job, copied out in one sequential sweep: the Job structs are
// large, and visiting 10,000 of them in queue order costs a cache miss each.
struct Item {
  const Job* job = nullptr;
  int64_t id = 0;
  uint32_t uid = 0;
  int64_t count = 0;
  int64_t time_limit_ms = 0;
  bool is_held = false;
  bool has_after = false;
  bool is_plain = false;  // no --gpus, --exclude or filters: counting decides everything
  bool allow_shared = false;
  bool has_filters = false;
  int64_t array_id = 0;     // a task of an array with a %N limit: the array's id
  int array_limit = 0;      // that N
};

// How a job that others run `after` stands, with a whole array (named by its id) as one:
// waiting while any task is unfinished, else failed when any task did not succeed.
JobState CombineDependency(JobState a, JobState b) {
  auto rank = [](JobState s) { return !model::IsFinal(s) ? 2 : s != JobState::kSucceeded ? 1 : 0; };
  return rank(b) > rank(a) ? b : a;
}

// The state of every job id in `named` that `jobs` holds: its own, or for an array's id
// its tasks' taken together (CombineDependency).
std::unordered_map<int64_t, JobState> DependencyStates(const std::vector<Job>& jobs,
                                                       const std::unordered_set<int64_t>& named) {
  std::unordered_map<int64_t, JobState> out;
  for (const Job& job : jobs) {
    if (job.array_id && named.contains(*job.array_id)) {
      auto [it, inserted] = out.emplace(*job.array_id, job.state);
      if (!inserted) it->second = CombineDependency(it->second, job.state);
    } else if (named.contains(job.id)) {
      out[job.id] = job.state;
    }
  }
  return out;
}

// What a placement of `r` depends on, as a memo key: sweeps repeat one request many times.
std::string RequestKey(const model::GpuRequest& r) {
  std::string key = std::to_string(r.count) + '|' + (r.allow_shared ? 's' : '-') + '|' + r.model.value_or("") + '|' +
                    r.min_compute_capability.value_or("") + '|' + std::to_string(r.min_free_memory_bytes.value_or(-1)) +
                    '|' + std::to_string(r.max_utilization_percent.value_or(-1)) + '|' +
                    std::to_string(r.gpu_memory_bytes.value_or(-1)) + '|';
  // MPS: where it fits depends on whose request it is (one user per GPU).
  if (r.mps) key += "mps" + std::to_string(r.uid.value_or(~0u)) + '|';
  if (r.mig_profile) key += "mig:" + *r.mig_profile + '|';
  if (r.gpus) {
    for (const auto& u : *r.gpus) key += u + ',';
  }
  key += '|';
  for (const auto& u : r.exclude) key += u + ',';
  return key;
}

class Pass {
 public:
  explicit Pass(const SchedulerInput& in)
      : in_(in), jobs_(in.jobs_view ? *in.jobs_view : in.jobs), n_(static_cast<int>(in.snapshot.gpus.size())) {}

  SchedulerOutput Run();

 private:
  enum class Mode { kAll, kAvoidReserved };

  void ReadMachine();
  void BuildIslands();
  void ReadJobs();
  void Visit(const Item& item);

  int64_t TimeLimit(const Job& job) const {
    return std::max<int64_t>(0, job.time_limit_ms.value_or(in_.config.default_time_limit_ms));
  }
  std::optional<int> Cap(uint32_t uid) const {
    auto it = in_.config.max_gpus_per_user.find(uid);
    if (it != in_.config.max_gpus_per_user.end()) return it->second;
    return in_.config.default_max_gpus_per_user;
  }
  bool IsOpen(int p) const { return usable_[p] && !occupied_[p] && !given_[p]; }
  int64_t AvailableCount(const Item& item, Mode mode) const;
  std::optional<std::vector<std::string>> TryPlace(const Item& item, Mode mode);
  std::optional<std::vector<std::string>> PlaceByIslands(const model::GpuRequest& request,
                                                         const Attempt& attempt);
  std::optional<std::vector<std::string>> SelectOn(const std::vector<int>& islands,
                                                   const model::GpuRequest& request,
                                                   const Attempt& attempt);
  bool Reserve(const Job& job);
  void Start(const Item& item, std::vector<std::string> uuids, bool backfilled);
  void Wait(const Item& item, std::string reason, std::optional<int64_t> estimate = {});
  std::string NotEnough(const Item& item, int64_t available);
  struct FilterWhy {
    std::optional<std::string> text;  // nullopt: Select would grant it
    bool never = false;               // no GPU of this machine can ever pass the filters
  };
  const FilterWhy& FilterReason(const Item& item);
  void VisitSlice(const Item& item);
  void VisitMig(const Item& item);
  std::string MigWhy(const model::GpuRequest& r, const Error& refusal);
  const std::vector<model::Lease>& SliceLeases();
  std::string SliceWhy(const model::GpuRequest& r, const Error& refusal);
  std::vector<int> DrainedFor(const Item& item) const;
  std::string DrainedNames(const std::vector<int>& positions) const;

  const SchedulerInput& in_;
  const std::vector<Job>& jobs_;  // in_.jobs_view or in_.jobs
  const int n_;
  int64_t now_ = 0;
  SchedulerOutput out_;

  // Per GPU position in snapshot.gpus.
  std::unordered_map<std::string, int> position_;
  std::vector<char> usable_;    // has a UUID, healthy, not drained
  std::vector<char> drained_;
  std::vector<char> occupied_;  // leased, or held by a starting/running job
  std::vector<char> foreign_;   // unleased, with processes (busy unless allow_shared)
  std::vector<char> given_;     // handed out by this pass
  std::vector<char> reserved_;  // reserved for the head
  std::vector<int64_t> free_at_;  // when it is expected free; kNever when unknown
  std::vector<int> island_;
  std::vector<std::vector<int>> islands_;  // positions, ascending
  int machine_gpus_ = 0;                   // GPUs with a UUID, not in MIG mode
  std::vector<int> mig_mode_indices_;      // NVML indices of the GPUs in MIG mode
  int not_drained_gpus_ = 0;
  std::vector<int> drained_positions_;     // ascending
  // policy::Select's reason for a request with filters, per request: sweeps repeat one.
  std::unordered_map<std::string, FilterWhy> filter_reasons_;

  // Open GPUs: usable, not occupied, not given; split by foreign processes and
  // by whether the head's reservation holds them.
  int64_t open_clean_ = 0, open_foreign_ = 0, open_clean_reserved_ = 0,
          open_foreign_reserved_ = 0;

  std::unordered_map<int64_t, JobState> state_of_;
  std::unordered_map<int64_t, int> array_running_;  // array id -> its tasks starting or running (limited arrays)
  std::unordered_map<uint32_t, int64_t> held_by_user_;
  std::unordered_map<uint32_t, double> usage_;

  std::optional<int64_t> head_;
  int64_t head_start_ms_ = 0;
  int position_counter_ = 0;
  uint64_t version_ = 0;  // bumped on every start; keys the failure memo
  std::unordered_map<std::string, uint64_t> failed_at_version_;

  // Memory slices (docs/share.md). A pass only ever takes room away (starts, the head's
  // reservation), so a slice request that did not fit stays unfit for the rest of it.
  std::vector<int64_t> given_memory_;           // declared by slices this pass started
  std::vector<int64_t> given_mps_memory_;       // of which MPS slices (--mps) declare
  std::vector<const model::Job*> given_mps_to_; // whose MPS slices those are (one user)
  std::vector<model::Lease> slice_leases_;      // in_.leases plus this pass's starts and reservation
  bool slice_leases_stale_ = true;
  std::unordered_map<std::string, std::string> slice_refused_;  // request key -> wait reason

  // MIG jobs (docs/share.md, "MIG"): placed by policy::Select on the MIG devices, against
  // the live leases plus the MIG devices this pass gave away (one lease of the scheduler).
  std::vector<model::Lease> mig_leases_;
  bool mig_leases_ready_ = false;
  std::unordered_map<std::string, std::string> mig_refused_;  // request key -> wait reason
};

void Pass::ReadMachine() {
  const auto& gpus = in_.snapshot.gpus;
  usable_.assign(n_, 0);
  drained_.assign(n_, 0);
  occupied_.assign(n_, 0);
  foreign_.assign(n_, 0);
  given_.assign(n_, 0);
  given_memory_.assign(n_, 0);
  given_mps_memory_.assign(n_, 0);
  given_mps_to_.assign(n_, nullptr);
  reserved_.assign(n_, 0);
  free_at_.assign(n_, now_);
  for (int p = 0; p < n_; ++p) {
    if (!gpus[p].uuid) continue;
    // A GPU in MIG mode is never given whole (its MIG devices are, VisitMig): not one of
    // the GPUs whole-GPU jobs count or may have.
    if (model::InMigMode(gpus[p])) {
      mig_mode_indices_.push_back(gpus[p].index);
      continue;
    }
    position_.emplace(*gpus[p].uuid, p);
    ++machine_gpus_;
    drained_[p] = in_.drained.contains(*gpus[p].uuid);
    if (!drained_[p]) ++not_drained_gpus_;
    if (drained_[p]) drained_positions_.push_back(p);
    usable_[p] = !drained_[p] && gpus[p].is_healthy;
  }

  // Running and starting jobs end at start + time limit (now, when already overdue).
  std::unordered_map<int64_t, int64_t> end_by_lease;
  std::unordered_map<std::string, int64_t> end_by_uuid;
  std::unordered_map<uint32_t, std::unordered_set<std::string>> held;
  for (const Job& job : jobs_) {
    if (job.state != JobState::kRunning && job.state != JobState::kStarting) continue;
    int64_t end = std::max(now_, job.started_unix_ms.value_or(now_) + TimeLimit(job));
    if (job.lease_id) end_by_lease[*job.lease_id] = end;
    for (const auto& uuid : job.gpu_uuids) {
      end_by_uuid[uuid] = std::max(end_by_uuid[uuid], end);
      held[job.uid].insert(uuid);
      auto it = position_.find(uuid);
      if (it == position_.end()) continue;
      occupied_[it->second] = 1;
      free_at_[it->second] = std::max(free_at_[it->second], end);
    }
  }
  for (const auto& lease : in_.leases) {
    // A job's lease ends with the job; any other lease (gpuman run, select --lease)
    // has no end we know of.
    int64_t end = kNever;
    if (auto it = end_by_lease.find(lease.id); it != end_by_lease.end()) {
      end = it->second;
    } else if (!lease.gpu_uuids.empty() &&
               std::all_of(lease.gpu_uuids.begin(), lease.gpu_uuids.end(),
                           [&](const std::string& u) { return end_by_uuid.contains(u); })) {
      end = 0;
      for (const auto& uuid : lease.gpu_uuids) end = std::max(end, end_by_uuid[uuid]);
    }
    for (const auto& uuid : lease.gpu_uuids) {
      held[lease.uid].insert(uuid);
      auto it = position_.find(uuid);
      if (it == position_.end()) continue;
      occupied_[it->second] = 1;
      free_at_[it->second] = std::max(free_at_[it->second], end);
    }
  }
  for (auto& [uid, uuids] : held) held_by_user_[uid] = static_cast<int64_t>(uuids.size());

  for (int p = 0; p < n_; ++p) {
    if (!usable_[p]) {
      free_at_[p] = kNever;
      continue;
    }
    if (occupied_[p]) continue;
    // An unleased GPU with processes is somebody else's, for as long as they like.
    foreign_[p] = !gpus[p].processes.empty();
    if (foreign_[p]) {
      ++open_foreign_;
    } else {
      ++open_clean_;
    }
  }
}

void Pass::BuildIslands() {
  std::vector<int> parent(n_);
  for (int p = 0; p < n_; ++p) parent[p] = p;
  auto find = [&](int x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  };
  auto unite = [&](int a, int b) { parent[find(a)] = find(b); };
  const auto& topo = in_.snapshot.topology;
  if (topo && topo->size() == static_cast<size_t>(n_)) {
    // Both directions of a ragged or one-sided matrix join (rows are scanned whole, so
    // (a, b) and (b, a) are both seen): a union of Select's domains is all exactness
    // needs, so erring towards larger islands is safe.
    for (int a = 0; a < n_; ++a) {
      const int* links = static_cast<size_t>(a) < topo->nvlinks.size() ? topo->nvlinks[a].data() : nullptr;
      const int links_n = links ? static_cast<int>(topo->nvlinks[a].size()) : 0;
      const PcieLevel* pcie = topo->pcie[a].data();
      const int pcie_n = static_cast<int>(topo->pcie[a].size());
      for (int b = 0; b < n_; ++b) {
        bool close = (b < links_n && links[b] > 0) || (b < pcie_n && pcie[b] <= PcieLevel::kNumaNode);
        if (close && b != a) unite(a, b);
      }
    }
  } else {
    std::unordered_map<int, int> first_on_node;
    for (int p = 0; p < n_; ++p) {
      const auto& numa = in_.snapshot.gpus[p].numa_node;
      if (!numa || *numa < 0) continue;  // unknown: an island of its own
      auto [it, inserted] = first_on_node.emplace(*numa, p);
      if (!inserted) unite(p, it->second);
    }
  }
  island_.assign(n_, -1);
  std::vector<int> label(n_, -1);
  for (int p = 0; p < n_; ++p) {
    int root = find(p);
    if (label[root] < 0) {
      label[root] = static_cast<int>(islands_.size());
      islands_.emplace_back();
    }
    island_[p] = label[root];
    islands_[label[root]].push_back(p);
  }
}

void Pass::ReadJobs() {
  // Only the states that some `after` names: a map of all 10,000 ids costs more than
  // the rest of the walk.
  std::unordered_set<int64_t> named;
  for (const Job& job : jobs_) named.insert(job.after.begin(), job.after.end());
  if (!named.empty()) state_of_ = DependencyStates(jobs_, named);
  for (const Job& job : jobs_) {
    if (job.array_limit && job.array_id && (job.state == JobState::kRunning || job.state == JobState::kStarting)) {
      ++array_running_[*job.array_id];
    }
  }
  for (const auto& u : in_.usage) usage_[u.uid] = u.decayed_gpu_seconds;
}

// Priority, then fair share (usage, then GPUs held now, re-read as jobs start), then
// submit time, then id. A heap of users per priority level keeps this O(n log users).
SchedulerOutput Pass::Run() {
  now_ = in_.now_unix_ms;
  ReadMachine();
  BuildIslands();
  ReadJobs();

  struct Entry {
    int64_t neg_priority;
    uint32_t uid;
    int64_t submitted;
    int64_t id;
    Item item;
  };
  std::vector<Entry> queue;
  queue.reserve(jobs_.size());
  for (const Job& job : jobs_) {
    if (job.state != JobState::kQueued && job.state != JobState::kHeld) continue;
    const model::GpuRequest& r = job.request;
    Item item;
    item.job = &job;
    item.id = job.id;
    item.uid = job.uid;
    item.count = r.count;
    item.time_limit_ms = TimeLimit(job);
    item.is_held = job.state == JobState::kHeld;
    item.has_after = !job.after.empty();
    item.allow_shared = r.allow_shared;
    item.has_filters = HasMomentaryOrStaticFilters(r);
    item.is_plain = !r.gpus && r.exclude.empty() && !item.has_filters;
    if (job.array_limit && job.array_id) {
      item.array_id = *job.array_id;
      item.array_limit = *job.array_limit;
    }
    queue.push_back({-static_cast<int64_t>(job.priority), job.uid, job.submitted_unix_ms,
                     job.id, item});
  }
  std::sort(queue.begin(), queue.end(), [](const Entry& a, const Entry& b) {
    return std::tie(a.neg_priority, a.uid, a.submitted, a.id) <
           std::tie(b.neg_priority, b.uid, b.submitted, b.id);
  });
  out_.waiting.reserve(queue.size());

  struct UserRun {
    size_t next;
    size_t end;
    double usage;
    const int64_t* held;  // into held_by_user_ (unordered_map elements never move)
  };
  for (size_t i = 0; i < queue.size();) {
    size_t level_end = i;
    while (level_end < queue.size() && queue[level_end].neg_priority == queue[i].neg_priority) {
      ++level_end;
    }
    // Only the popped user's key changes (when its job starts), and it is pushed back
    // afterwards, so the heap's order stays valid.
    auto later = [&](const UserRun& a, const UserRun& b) {
      const Entry& x = queue[a.next];
      const Entry& y = queue[b.next];
      return std::tie(b.usage, *b.held, y.submitted, y.id) <
             std::tie(a.usage, *a.held, x.submitted, x.id);
    };
    std::vector<UserRun> users;
    for (size_t j = i; j < level_end;) {
      size_t k = j;
      uint32_t uid = queue[j].uid;
      while (k < level_end && queue[k].uid == uid) ++k;
      auto u = usage_.find(uid);
      users.push_back({j, k, u == usage_.end() ? 0.0 : u->second, &held_by_user_[uid]});
      j = k;
    }
    std::make_heap(users.begin(), users.end(), later);
    while (!users.empty()) {
      std::pop_heap(users.begin(), users.end(), later);
      UserRun& r = users.back();
      Visit(queue[r.next].item);
      if (++r.next < r.end) {
        std::push_heap(users.begin(), users.end(), later);
      } else {
        users.pop_back();
      }
    }
    i = level_end;
  }
  return std::move(out_);
}

void Pass::Visit(const Item& item) {
  if (item.is_held) return Wait(item, "held");
  const Job& job = *item.job;  // touched only off the common path below

  if (item.has_after) {
    std::vector<int64_t> pending;
    for (int64_t dep : job.after) {
      auto it = state_of_.find(dep);
      if (it == state_of_.end() || it->second == JobState::kSucceeded) continue;
      if (model::IsFinal(it->second)) {
        return Wait(item, "dependency " + std::to_string(dep) + " failed");
      }
      pending.push_back(dep);
    }
    if (!pending.empty()) {
      std::string reason = pending.size() == 1 ? "after job " : "after jobs ";
      for (size_t i = 0; i < pending.size(); ++i) {
        reason += (i > 0 ? ", " : "") + std::to_string(pending[i]);
      }
      return Wait(item, reason);
    }
  }
  if (item.array_limit > 0) {
    const int running = array_running_[item.array_id];
    if (running >= item.array_limit) {
      return Wait(item, "array " + std::to_string(item.array_id) + ": " + std::to_string(running) +
                            (running == 1 ? " task runs" : " tasks run") + " (at most " +
                            std::to_string(item.array_limit) + " at once)");
    }
  }

  // MIG devices are counted and placed apart from whole GPUs.
  if (model::IsMigRequest(job.request)) return VisitMig(item);

  const int64_t count = item.count;
  if (count < 0) return Wait(item, "invalid request: " + Gpus(count));
  if (count > machine_gpus_) {
    std::string why = "needs " + Gpus(count) + "; the machine has " + std::to_string(machine_gpus_);
    if (!mig_mode_indices_.empty()) {
      why += " besides GPU " + FormatIndexList(mig_mode_indices_) + " in MIG mode (never leased whole)";
    }
    return Wait(item, why);
  }
  if (count > not_drained_gpus_) {
    const int64_t drained = machine_gpus_ - not_drained_gpus_;
    return Wait(item, "needs " + Gpus(count) + "; " + std::to_string(drained) + " of " +
                         std::to_string(machine_gpus_) + (drained == 1 ? " is" : " are") + " drained (" +
                         DrainedNames(drained_positions_) + ")");
  }
  if (!item.is_plain && job.request.gpus) {
    int64_t known = 0;
    std::vector<int> drained;
    for (const auto& uuid : *job.request.gpus) {
      auto it = position_.find(uuid);
      if (it == position_.end()) continue;
      if (drained_[it->second]) {
        drained.push_back(it->second);
      } else {
        ++known;
      }
    }
    if (known < count) {
      if (!drained.empty()) {
        return Wait(item, "waiting: " + std::to_string(drained.size()) + " of its --gpus " +
                             (drained.size() == 1 ? "is" : "are") + " drained (" + DrainedNames(drained) + ")");
      }
      return Wait(item, "needs " + Gpus(count) + " of its --gpus list; " + std::to_string(known) +
                           " are on this machine");
    }
  }

  if (std::optional<int> cap = Cap(item.uid)) {
    int64_t held = held_by_user_[item.uid];
    if (count > *cap) {
      return Wait(item, "user cap: job needs " + Gpus(count) + ", " + UserName(job) +
                           " may hold at most " + std::to_string(*cap));
    }
    if (held + count > *cap) {
      return Wait(item, "user cap: " + UserName(job) + " holds " + std::to_string(held) + " of " +
                           std::to_string(*cap) + " GPUs");
    }
  }

  if (count == 0) return Start(item, {}, head_.has_value());
  if (job.request.gpu_memory_bytes) return VisitSlice(item);

  if (!head_) {
    if (auto uuids = TryPlace(item, Mode::kAll)) return Start(item, std::move(*uuids), false);
    // A job no GPU here can ever serve (the machine changed since its submit) is not the
    // head: reserving for it would hold GPUs for nothing.
    if (item.has_filters && FilterReason(item).never) return Wait(item, NotEnough(item, 0));
    if (Reserve(job)) {
      return Wait(item,
                  NotEnough(item, AvailableCount(item, Mode::kAll)) + "; next to start, " +
                      In(head_start_ms_ - now_),
                  head_start_ms_);
    }
    return Wait(item, NotEnough(item, AvailableCount(item, Mode::kAll)) +
                         "; no estimate (the GPUs it needs are held without a time limit)");
  }

  if (auto uuids = TryPlace(item, Mode::kAvoidReserved)) return Start(item, std::move(*uuids), true);
  bool ends_in_time = now_ + item.time_limit_ms <= head_start_ms_;
  if (ends_in_time) {
    if (auto uuids = TryPlace(item, Mode::kAll)) return Start(item, std::move(*uuids), true);
  }
  int64_t available = AvailableCount(item, Mode::kAll);
  if (available >= count && !ends_in_time) {
    return Wait(item, "reserved for job " + std::to_string(*head_) + " (starts " +
                         In(head_start_ms_ - now_) + ")");
  }
  Wait(item, NotEnough(item, available));
}

std::string Pass::NotEnough(const Item& item, int64_t available) {
  std::string what = Gpus(item.count);
  if (item.has_filters) what += " matching its filters";
  // With filters, "N free" is not why: say what `run` would say of the same request.
  if (item.has_filters) {
    if (const FilterWhy& why = FilterReason(item); why.text) return "waiting for " + what + "; " + *why.text;
  }
  std::string text = "waiting for " + what + "; " + std::to_string(available) + " free";
  // Drains are part of why: say so, so nobody waits on a GPU that an admin must undrain.
  std::vector<int> drained = DrainedFor(item);
  if (!drained.empty()) text += ", " + std::to_string(drained.size()) + " drained (" + DrainedNames(drained) + ")";
  return text;
}

// policy::Select's refusal of the job's request on the whole machine, its live leases and
// its drains: "only 1 of 8 can ever be eligible: GPU 0-6 not model \"A100\"" (the machine
// changed since the submit check) or "1 eligible: GPU 2-7 free memory below 40 GiB".
// Nullopt when Select would grant it (what blocks it is this pass's own starts).
const Pass::FilterWhy& Pass::FilterReason(const Item& item) {
  const model::GpuRequest& r = item.job->request;
  auto [it, fresh] = filter_reasons_.try_emplace(RequestKey(r));
  if (!fresh) return it->second;
  model::GpuRequest req = r;
  for (const auto& uuid : in_.drained) req.drained.emplace(uuid, "");
  Result<policy::Selection> selection = policy::Select(in_.snapshot, in_.leases, req);
  if (selection) return it->second;
  it->second.never = selection.error().code == ErrorCode::kNotFound;
  std::string why = selection.error().message;
  // "need 2 GPUs, 1 eligible: ...": the need is already said.
  if (why.rfind("need ", 0) == 0) {
    if (size_t comma = why.find(", "); comma != std::string::npos) why.erase(0, comma + 2);
  }
  it->second.text = why;
  return it->second;
}

// "GPU-3f2a9c1d, GPU-8e0b7a42, GPU-c0ffee00, ...": UUID prefixes, enough to tell GPUs apart.
// "GPU 1,4-6": indices, as users name GPUs (`drain 4`, `-i 4-6`), not UUID prefixes.
std::string Pass::DrainedNames(const std::vector<int>& positions) const {
  std::vector<int> indices;
  for (int p : positions) indices.push_back(in_.snapshot.gpus[p].index);
  return "GPU " + FormatIndexList(std::move(indices));
}

// The drained GPUs this job could otherwise have: those of its --gpus list, else every
// drained GPU it does not --exclude. Ascending positions.
std::vector<int> Pass::DrainedFor(const Item& item) const {
  if (drained_positions_.empty() || item.is_plain) return drained_positions_;
  const model::GpuRequest& r = item.job->request;
  std::vector<int> out;
  if (r.gpus) {
    for (const auto& uuid : *r.gpus) {
      auto it = position_.find(uuid);
      if (it != position_.end() && drained_[it->second]) out.push_back(it->second);
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }
  for (int p : drained_positions_) {
    if (std::find(r.exclude.begin(), r.exclude.end(), *in_.snapshot.gpus[p].uuid) == r.exclude.end()) out.push_back(p);
  }
  return out;
}

// GPUs this job could count towards its size, before its filters.
int64_t Pass::AvailableCount(const Item& item, Mode mode) const {
  bool avoid = mode == Mode::kAvoidReserved;
  int64_t n = open_clean_ - (avoid ? open_clean_reserved_ : 0);
  if (item.allow_shared) n += open_foreign_ - (avoid ? open_foreign_reserved_ : 0);
  if (item.is_plain) return n;
  const model::GpuRequest& r = item.job->request;
  auto countable = [&](int p) {
    return IsOpen(p) && (!foreign_[p] || r.allow_shared) && !(avoid && reserved_[p]);
  };
  if (r.gpus) {
    int64_t listed = 0;
    std::unordered_set<int> seen;
    for (const auto& uuid : *r.gpus) {
      auto it = position_.find(uuid);
      if (it != position_.end() && countable(it->second) && seen.insert(it->second).second) {
        ++listed;
      }
    }
    return listed;  // --exclude is subtracted by Select itself; a rare combination
  }
  std::unordered_set<int> excluded;
  for (const auto& uuid : r.exclude) {
    auto it = position_.find(uuid);
    if (it != position_.end() && countable(it->second) && excluded.insert(it->second).second) --n;
  }
  return n;
}

std::optional<std::vector<std::string>> Pass::TryPlace(const Item& item, Mode mode) {
  if (AvailableCount(item, mode) < item.count) return std::nullopt;
  const model::GpuRequest& r = item.job->request;

  std::string memo_key;
  if (HasMomentaryOrStaticFilters(r)) {
    memo_key = (mode == Mode::kAll ? "a|" : "r|") + RequestKey(r);
    auto it = failed_at_version_.find(memo_key);
    if (it != failed_at_version_.end() && it->second == version_) return std::nullopt;
  }

  Attempt attempt;
  attempt.blocked.assign(n_, 0);
  attempt.countable.assign(n_, 0);
  attempt.clear_processes.assign(n_, 0);
  for (int p = 0; p < n_; ++p) {
    bool taken = occupied_[p] || given_[p] || drained_[p] ||
                 (mode == Mode::kAvoidReserved && reserved_[p]);
    attempt.blocked[p] = taken;
    attempt.countable[p] = !taken && usable_[p] && (!foreign_[p] || r.allow_shared);
  }
  auto uuids = PlaceByIslands(r, attempt);
  if (!uuids && !memo_key.empty()) failed_at_version_[memo_key] = version_;
  return uuids;
}

std::optional<std::vector<std::string>> Pass::PlaceByIslands(const model::GpuRequest& r,
                                                             const Attempt& attempt) {
  std::optional<std::unordered_set<int>> wanted;
  if (r.gpus) {
    wanted.emplace();
    for (const auto& uuid : *r.gpus) {
      if (auto it = position_.find(uuid); it != position_.end()) wanted->insert(it->second);
    }
  }
  std::vector<int> per_island(islands_.size(), 0);
  for (int p = 0; p < n_; ++p) {
    if (attempt.countable[p] && (!wanted || wanted->contains(p))) ++per_island[island_[p]];
  }
  std::vector<int> fitting;
  std::vector<int> any;
  for (size_t i = 0; i < islands_.size(); ++i) {
    if (per_island[i] >= r.count) fitting.push_back(static_cast<int>(i));
    if (per_island[i] > 0) any.push_back(static_cast<int>(i));
  }
  // Best fit: the fullest island that still holds the job keeps big islands whole.
  std::stable_sort(fitting.begin(), fitting.end(),
                   [&](int a, int b) { return per_island[a] < per_island[b]; });
  constexpr size_t kIslandTries = 4;  // filters may reject an island; don't try them all
  for (size_t t = 0; t < fitting.size() && t < kIslandTries; ++t) {
    if (auto uuids = SelectOn({fitting[t]}, r, attempt)) return uuids;
  }
  // No single island holds it (or filters rejected the ones tried): let Select look
  // across every island with a GPU to offer.
  if (any.size() > 1) return SelectOn(any, r, attempt);
  return std::nullopt;
}

// policy::Select on whole islands, with blocked GPUs shown as leased.
std::optional<std::vector<std::string>> Pass::SelectOn(const std::vector<int>& islands,
                                                       const model::GpuRequest& r,
                                                       const Attempt& attempt) {
  std::vector<int> positions;
  for (int i : islands) positions.insert(positions.end(), islands_[i].begin(), islands_[i].end());
  std::sort(positions.begin(), positions.end());

  const model::MachineSnapshot& snap = in_.snapshot;
  model::MachineSnapshot sub;
  sub.system = snap.system;
  sub.taken_at_unix_ms = snap.taken_at_unix_ms;
  sub.gpus.reserve(positions.size());
  std::vector<model::Lease> leases;
  std::unordered_set<std::string> present;
  for (int p : positions) {
    sub.gpus.push_back(snap.gpus[p]);
    if (attempt.clear_processes[p]) sub.gpus.back().processes.clear();
    if (!snap.gpus[p].uuid) continue;
    present.insert(*snap.gpus[p].uuid);
    if (attempt.blocked[p]) {
      model::Lease lease;
      lease.id = -1;
      lease.user = "the scheduler";
      lease.gpu_uuids = {*snap.gpus[p].uuid};
      leases.push_back(std::move(lease));
    }
  }
  const auto& topo = snap.topology;
  if (topo && topo->size() == static_cast<size_t>(n_)) {
    const size_t m = positions.size();
    model::Topology t;
    t.nvlinks.resize(m);
    t.pcie.resize(m);
    for (size_t i = 0; i < m; ++i) {
      const size_t a = static_cast<size_t>(positions[i]);
      const std::vector<int>* links = a < topo->nvlinks.size() ? &topo->nvlinks[a] : nullptr;
      const std::vector<PcieLevel>& pcie = topo->pcie[a];
      t.nvlinks[i].assign(m, 0);
      t.pcie[i].assign(m, PcieLevel::kUnknown);
      for (size_t j = 0; j < m; ++j) {
        const size_t b = static_cast<size_t>(positions[j]);
        if (links && b < links->size()) t.nvlinks[i][j] = (*links)[b];
        if (b < pcie.size()) t.pcie[i][j] = pcie[b];
      }
    }
    sub.topology = std::move(t);
  }

  model::GpuRequest req;
  req.count = r.count;
  if (r.gpus) {
    req.gpus.emplace();
    for (const auto& uuid : *r.gpus) {
      if (present.contains(uuid)) req.gpus->push_back(uuid);
    }
    if (static_cast<int64_t>(req.gpus->size()) < r.count) return std::nullopt;
  }
  for (const auto& uuid : r.exclude) {
    if (present.contains(uuid)) req.exclude.push_back(uuid);
  }
  req.model = r.model;
  req.min_compute_capability = r.min_compute_capability;
  req.allow_shared = r.allow_shared;
  if (!attempt.for_estimate) {
    req.min_free_memory_bytes = r.min_free_memory_bytes;
    req.max_utilization_percent = r.max_utilization_percent;
  }
  Result<policy::Selection> selection = policy::Select(sub, leases, req);
  if (!selection) return std::nullopt;
  return std::move(selection->uuids);
}

// Makes `job` the head when we can say when and where it will start.
bool Pass::Reserve(const Job& job) {
  const model::GpuRequest& r = job.request;
  // When each GPU this job could ever use is expected free. Given GPUs end with the job
  // this pass started on them; open GPUs are free now.
  std::vector<int64_t> when(n_, kNever);
  std::vector<int64_t> times;
  std::optional<std::unordered_set<int>> wanted;
  if (r.gpus) {
    wanted.emplace();
    for (const auto& uuid : *r.gpus) {
      if (auto it = position_.find(uuid); it != position_.end()) wanted->insert(it->second);
    }
  }
  std::unordered_set<std::string> excluded(r.exclude.begin(), r.exclude.end());
  for (int p = 0; p < n_; ++p) {
    if (!usable_[p] || (wanted && !wanted->contains(p)) ||
        excluded.contains(*in_.snapshot.gpus[p].uuid)) {
      continue;
    }
    if (IsOpen(p)) {
      when[p] = foreign_[p] && !r.allow_shared ? kNever : now_;
    } else {
      when[p] = free_at_[p];
    }
    if (when[p] != kNever) times.push_back(when[p]);
  }
  if (static_cast<int64_t>(times.size()) < r.count) return false;
  std::nth_element(times.begin(), times.begin() + (r.count - 1), times.end());
  const int64_t start = times[r.count - 1];

  Attempt attempt;
  attempt.for_estimate = true;
  attempt.blocked.assign(n_, 0);
  attempt.countable.assign(n_, 0);
  attempt.clear_processes.assign(n_, 0);
  for (int p = 0; p < n_; ++p) {
    bool free_by_start = usable_[p] && when[p] <= start;
    // GPUs outside this job's --gpus/--exclude stay as they are: Select filters them,
    // and a free one still counts as free for fragmentation.
    bool outside = usable_[p] && when[p] == kNever && IsOpen(p);
    attempt.blocked[p] = !free_by_start && !outside;
    attempt.countable[p] = free_by_start;
    attempt.clear_processes[p] = free_by_start && !IsOpen(p);
  }
  auto uuids = PlaceByIslands(r, attempt);
  if (!uuids) return false;

  int64_t reserved_start = now_;
  bool waits_for_something = false;
  std::vector<int> chosen;
  for (const auto& uuid : *uuids) {
    int p = position_.at(uuid);
    chosen.push_back(p);
    reserved_start = std::max(reserved_start, when[p]);
    if (!IsOpen(p)) waits_for_something = true;
  }
  // Everything it would get is free now, yet it did not fit: its filters (memory,
  // utilization) wait for something we cannot predict, so don't block anyone for it.
  if (!waits_for_something) return false;

  head_ = job.id;
  head_start_ms_ = reserved_start;
  out_.reserved_job = job.id;
  out_.reserved_gpus = *uuids;
  for (int p : chosen) {
    reserved_[p] = 1;
    if (IsOpen(p)) ++(foreign_[p] ? open_foreign_reserved_ : open_clean_reserved_);
  }
  slice_leases_stale_ = true;
  return true;
}

void Pass::Start(const Item& item, std::vector<std::string> uuids, bool backfilled) {
  for (const auto& uuid : uuids) {
    int p = position_.at(uuid);
    GPUMAN_CHECK(IsOpen(p));
    given_[p] = 1;
    free_at_[p] = now_ + item.time_limit_ms;
    --(foreign_[p] ? open_foreign_ : open_clean_);
    if (reserved_[p]) --(foreign_[p] ? open_foreign_reserved_ : open_clean_reserved_);
  }
  held_by_user_[item.uid] += static_cast<int64_t>(uuids.size());
  if (item.array_limit > 0) ++array_running_[item.array_id];
  ++version_;
  slice_leases_stale_ = true;
  out_.start.push_back({item.id, std::move(uuids), backfilled});
}

// A slice job (--gpu-memory): placed by policy::Select on the whole machine, against the
// live leases plus what this pass gave away and reserved, exactly as `run --gpu-memory`
// would be. Slice jobs start where they fit now and never become the head: they hold
// no reservation and take no reserved GPU (docs/scheduling.md, "Memory slices").
void Pass::VisitSlice(const Item& item) {
  model::GpuRequest r = item.job->request;
  r.uid = item.uid;  // MPS's one user per GPU
  const std::string key = RequestKey(r);
  if (auto it = slice_refused_.find(key); it != slice_refused_.end()) return Wait(item, it->second);
  model::GpuRequest req = r;
  for (const auto& uuid : in_.drained) req.drained.emplace(uuid, "");
  req.not_sliceable = in_.not_sliceable;
  auto chosen = policy::Select(in_.snapshot, SliceLeases(), req);
  if (!chosen) {
    std::string why = SliceWhy(req, chosen.error());
    slice_refused_.emplace(key, why);
    return Wait(item, std::move(why));
  }
  const int64_t bytes = *r.gpu_memory_bytes;
  for (const auto& uuid : chosen->uuids) {
    const int p = position_.at(uuid);
    if (IsOpen(p)) {
      // No longer open to whole-GPU jobs.
      --(foreign_[p] ? open_foreign_ : open_clean_);
      if (reserved_[p]) --(foreign_[p] ? open_foreign_reserved_ : open_clean_reserved_);
    }
    occupied_[p] = 1;
    given_memory_[p] += bytes;
    if (r.mps) {
      given_mps_memory_[p] += bytes;
      given_mps_to_[p] = item.job;
    }
    free_at_[p] = std::max(free_at_[p], now_ + item.time_limit_ms);
  }
  held_by_user_[item.uid] += static_cast<int64_t>(chosen->uuids.size());
  if (item.array_limit > 0) ++array_running_[item.array_id];
  ++version_;
  slice_leases_stale_ = true;
  out_.start.push_back({item.id, std::move(chosen->uuids), head_.has_value()});
}

// "needs 20 GiB on one GPU; the most free declared memory is 12 GiB on GPU 3".
std::string Pass::SliceWhy(const model::GpuRequest& r, const Error& refusal) {
  const std::string need = "needs " + policy::FormatByteSize(*r.gpu_memory_bytes) +
                           (r.count == 1 ? std::string(" on one GPU") : " on each of " + Gpus(r.count));
  std::string why = refusal.message;
  if (why.rfind("need ", 0) == 0) {
    if (size_t comma = why.find(", "); comma != std::string::npos) why.erase(0, comma + 2);
    // "0 eligible: GPU 3 runs MPS for alice; ...": the GPUs' reasons are what is said.
    if (size_t colon = why.find(" eligible: "); colon != std::string::npos &&
        why.find_first_not_of("0123456789") == colon) {
      why.erase(0, colon + 11);
    }
  }
  if (refusal.code == ErrorCode::kNotFound) return need + "; " + why;
  auto verdicts = policy::EvaluateGpus(in_.snapshot, SliceLeases(), r);
  std::optional<int64_t> most;
  int most_index = -1;
  if (verdicts) {
    for (const auto& v : *verdicts) {
      if (v.slice_room_bytes && (!most || *v.slice_room_bytes > *most)) {
        most = v.slice_room_bytes;
        most_index = v.index;
      }
    }
  }
  // Room enough somewhere: memory is not what is missing (MPS's one user per GPU, ...).
  if (!most || *most >= *r.gpu_memory_bytes) return need + "; " + why;
  return need + "; the most free declared memory is " + policy::FormatByteSize(*most) + " on GPU " +
         std::to_string(most_index);
}

const std::vector<model::Lease>& Pass::SliceLeases() {
  if (!slice_leases_stale_) return slice_leases_;
  slice_leases_ = in_.leases;
  const auto& gpus = in_.snapshot.gpus;
  for (int p = 0; p < n_; ++p) {
    if (!gpus[p].uuid) continue;
    model::Lease lease;
    lease.id = -1;
    lease.user = "the scheduler";
    lease.gpu_uuids = {*gpus[p].uuid};
    if (given_[p] || (head_ && reserved_[p])) slice_leases_.push_back(lease);
    if (given_memory_[p] > given_mps_memory_[p]) {
      lease.gpu_memory_bytes = given_memory_[p] - given_mps_memory_[p];
      slice_leases_.push_back(lease);
    }
    if (given_mps_memory_[p] > 0) {
      // What this pass gave to MPS slices, as the lease they will be: their user's.
      lease.gpu_memory_bytes = given_mps_memory_[p];
      lease.mps = true;
      lease.uid = given_mps_to_[p]->uid;
      lease.user = given_mps_to_[p]->user;
      slice_leases_.push_back(std::move(lease));
    }
  }
  slice_leases_stale_ = false;
  return slice_leases_;
}

// A MIG job (--mig PROFILE, or MIG UUIDs in --gpus): placed by policy::Select on the MIG
// devices, exactly as `run --mig` would be, against the live leases plus the MIG devices
// this pass started jobs on. Like slices, MIG jobs start where they fit now and never
// become the head (a MIG device is no whole GPU to reserve; docs/scheduling.md).
void Pass::VisitMig(const Item& item) {
  const Job& job = *item.job;
  if (std::optional<int> cap = Cap(item.uid)) {
    const int64_t held = held_by_user_[item.uid];
    if (item.count > *cap) {
      return Wait(item, "user cap: job needs " + std::to_string(item.count) + " MIG devices, " + UserName(job) +
                            " may hold at most " + std::to_string(*cap));
    }
    if (held + item.count > *cap) {
      return Wait(item, "user cap: " + UserName(job) + " holds " + std::to_string(held) + " of " + std::to_string(*cap) +
                            " GPUs");
    }
  }
  model::GpuRequest req = job.request;
  req.uid = item.uid;
  const std::string key = RequestKey(req);
  if (auto it = mig_refused_.find(key); it != mig_refused_.end()) return Wait(item, it->second);
  for (const auto& uuid : in_.drained) req.drained.emplace(uuid, "");
  if (!mig_leases_ready_) {
    mig_leases_ = in_.leases;
    mig_leases_ready_ = true;
  }
  auto chosen = policy::Select(in_.snapshot, mig_leases_, req);
  if (!chosen) {
    std::string why = MigWhy(req, chosen.error());
    mig_refused_.emplace(key, why);
    return Wait(item, std::move(why));
  }
  model::Lease given;
  given.id = -1;
  given.user = "the scheduler";
  given.gpu_uuids = chosen->uuids;
  mig_leases_.push_back(std::move(given));
  // A request refused earlier in this pass stays refused: a pass only takes MIG devices away.
  held_by_user_[item.uid] += static_cast<int64_t>(chosen->uuids.size());
  if (item.array_limit > 0) ++array_running_[item.array_id];
  ++version_;
  out_.start.push_back({item.id, std::move(chosen->uuids), head_.has_value()});
}

// "needs 1 MIG device of profile 2g.20gb; all 2 are leased", or what Select says of the
// MIG devices ("GPU 0 unhealthy: ...", "GPU 1 drained (...)") when leases are not all.
std::string Pass::MigWhy(const model::GpuRequest& r, const Error& refusal) {
  const std::string devices = std::to_string(r.count) + (r.count == 1 ? " MIG device" : " MIG devices");
  std::string need = "needs " + devices;
  if (r.mig_profile) need += " of profile " + *r.mig_profile;
  else if (r.gpus) need += " of its --gpus list";
  // kInvalidArgument: no MIG device of the profile here (any more): run's own line.
  if (refusal.code == ErrorCode::kInvalidArgument) return need + "; " + refusal.message;
  int total = 0, leased = 0;
  std::unordered_set<std::string> taken;
  for (const auto& lease : mig_leases_) taken.insert(lease.gpu_uuids.begin(), lease.gpu_uuids.end());
  for (const auto& g : in_.snapshot.gpus) {
    for (const auto& m : g.mig_devices) {
      if (!m.uuid) continue;
      if (r.mig_profile && m.profile != r.mig_profile) continue;
      if (r.gpus && std::find(r.gpus->begin(), r.gpus->end(), *m.uuid) == r.gpus->end()) continue;
      ++total;
      if (taken.contains(*m.uuid)) ++leased;
    }
  }
  if (refusal.code == ErrorCode::kBusy && total > 0 && leased == total) {
    return need + "; " + (total == 1 ? std::string("the only one is leased") : "all " + std::to_string(total) + " are leased");
  }
  std::string why = refusal.message;
  if (why.rfind("need ", 0) == 0) {
    if (size_t comma = why.find(", "); comma != std::string::npos) why.erase(0, comma + 2);
  }
  if (leased > 0) return need + "; " + std::to_string(leased) + " of " + std::to_string(total) + " leased; " + why;
  return need + "; " + why;
}

void Pass::Wait(const Item& item, std::string reason, std::optional<int64_t> estimate) {
  out_.waiting.push_back({item.id, std::move(reason), ++position_counter_, estimate});
}

}  // namespace

SchedulerOutput Schedule(const SchedulerInput& in) { return Pass(in).Run(); }

namespace {
// FNV-1a, 64 bits.
struct KeyHash {
  uint64_t h = 1469598103934665603ULL;
  void Bytes(const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ULL;
  }
  template <typename T>
  void Value(const T& v) {
    static_assert(std::is_integral_v<T>);
    Bytes(&v, sizeof v);
  }
  void Text(const std::optional<std::string>& s) {
    Value<int>(s ? static_cast<int>(s->size()) : -1);
    if (s) Bytes(s->data(), s->size());
  }
  template <typename T>
  void Optional(const std::optional<T>& v) {
    Value<int>(v ? 1 : 0);
    if (v) Value<T>(*v);
  }
};
}  // namespace

uint64_t SnapshotKey(const model::MachineSnapshot& snapshot, bool momentary) {
  KeyHash k;
  k.Value(snapshot.gpus.size());
  for (const auto& g : snapshot.gpus) {
    k.Value(g.index);
    k.Text(g.uuid);
    k.Text(g.name);
    k.Text(g.compute_capability);
    k.Value<int>(g.is_healthy ? 1 : 0);
    k.Value(g.processes.size());
    for (const auto& p : g.processes) {
      k.Value(p.pid);
      k.Optional(p.uid);
    }
    if (momentary) {
      k.Optional(g.memory_free_bytes);
      k.Optional(g.memory_total_bytes);
      k.Optional(g.gpu_utilization_percent);
    }
  }
  return k.h;
}

bool AnyMomentaryFilters(const std::vector<model::Job>& jobs) {
  return std::any_of(jobs.begin(), jobs.end(), [](const Job& j) {
    return (j.state == JobState::kQueued || j.state == JobState::kHeld) &&
           (j.request.min_free_memory_bytes || j.request.max_utilization_percent || j.request.gpu_memory_bytes);
  });
}

double DecayUsage(double gpu_seconds, int64_t elapsed_ms, double half_life_s) {
  if (half_life_s <= 0 || elapsed_ms <= 0) return gpu_seconds;
  return gpu_seconds * std::exp2(-(static_cast<double>(elapsed_ms) / 1000.0) / half_life_s);
}

std::vector<int64_t> JobsWithFailedDependencies(const std::vector<model::Job>& jobs) {
  std::unordered_set<int64_t> named;
  for (const Job& job : jobs) named.insert(job.after.begin(), job.after.end());
  const std::unordered_map<int64_t, JobState> state_of = DependencyStates(jobs, named);
  std::vector<int64_t> out;
  for (const Job& job : jobs) {
    if (job.state != JobState::kQueued && job.state != JobState::kHeld) continue;
    for (int64_t dep : job.after) {
      auto it = state_of.find(dep);
      if (it != state_of.end() && model::IsFinal(it->second) &&
          it->second != JobState::kSucceeded) {
        out.push_back(job.id);
        break;
      }
    }
  }
  return out;
}

}  // namespace gpuman::sched
