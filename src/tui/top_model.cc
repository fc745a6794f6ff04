#include "tui/top_model.h"

#include <algorithm>
#include <set>

#include "model/intruders.h"
#include "model/mps_mark.h"
#include "base/duration.h"

namespace gpuman::tui {

const char* SortKeyName(SortKey key) {
  switch (key) {
    case SortKey::kGpuMemory: return "gpu-mem";
    case SortKey::kSmUtil: return "sm";
    case SortKey::kPid: return "pid";
    case SortKey::kUser: return "user";
    case SortKey::kGpu: return "gpu";
  }
  return "?";
}

SortKey NextSortKey(SortKey key) {
  switch (key) {
    case SortKey::kGpuMemory: return SortKey::kSmUtil;
    case SortKey::kSmUtil: return SortKey::kPid;
    case SortKey::kPid: return SortKey::kUser;
    case SortKey::kUser: return SortKey::kGpu;
    case SortKey::kGpu: return SortKey::kGpuMemory;
  }
  return SortKey::kGpuMemory;
}

namespace {

bool Holds(const std::vector<std::string>& uuids, const std::string& uuid) {
  return !uuid.empty() && std::find(uuids.begin(), uuids.end(), uuid) != uuids.end();
}

bool IsActive(model::JobState s) { return s == model::JobState::kRunning || s == model::JobState::kStarting; }

// The MIG device of `gpu` whose instance runs `pid`, or nullptr.
const model::MigDevice* MigDeviceOf(const model::DeviceSnapshot& gpu, uint32_t pid) {
  for (const auto& m : gpu.mig_devices) {
    for (const auto& p : m.processes) {
      if (p.pid == pid) return &m;
    }
  }
  return nullptr;
}

}  // namespace

std::string HeldBy(const std::string& gpu_uuid, uint32_t pid, const std::vector<model::Lease>& leases,
                   const std::vector<model::Job>& jobs) {
  for (const auto& lease : leases) {
    if (!Holds(lease.gpu_uuids, gpu_uuid)) continue;
    for (const auto& p : lease.processes) {
      if (p.pid == static_cast<int32_t>(pid)) {
        for (const auto& job : jobs) {
          if (job.lease_id && *job.lease_id == lease.id) return "job " + std::to_string(job.id);
        }
        return "lease " + std::to_string(lease.id);
      }
    }
  }
  for (const auto& job : jobs) {
    if (IsActive(job.state) && Holds(job.gpu_uuids, gpu_uuid)) return "job " + std::to_string(job.id);
  }
  for (const auto& lease : leases) {
    if (Holds(lease.gpu_uuids, gpu_uuid)) return "lease " + std::to_string(lease.id);
  }
  return "";
}

std::vector<ProcessRow> BuildProcessRows(const model::MachineSnapshot& snap, const std::vector<model::Lease>& leases,
                                         const std::vector<model::Job>& jobs) {
  std::vector<ProcessRow> rows;
  for (const auto& gpu : snap.gpus) {
    for (const auto& p : gpu.processes) {
      ProcessRow r;
      r.gpu_index = gpu.index;
      r.gpu_uuid = gpu.uuid.value_or("");
      r.pid = p.pid;
      r.type = p.type;
      r.is_visible = p.is_visible;
      r.uid = p.uid;
      r.user = p.user.value_or("");
      r.command = p.command.value_or("");
      r.start_time_unix = p.start_time_unix;
      r.memory_bytes = p.used_memory_bytes;
      r.sm_percent = p.sm_util_percent;
      // On a GPU leased to someone else (model/intruders.h): nobody's, and said so.
      r.held_by = model::IntrudedLease(gpu, p, leases) ? "INTRUDER" : HeldBy(r.gpu_uuid, p.pid, leases, jobs);
      // A process on a MIG instance is held by the lease of its MIG device.
      if (const model::MigDevice* m = MigDeviceOf(gpu, p.pid); m && m->uuid && r.held_by.empty()) {
        r.held_by = HeldBy(*m->uuid, p.pid, leases, jobs);
      }
      rows.push_back(std::move(r));
    }
  }
  return rows;
}

std::vector<ProcessRow> FilterRows(std::vector<ProcessRow> rows, const RowFilter& filter) {
  std::erase_if(rows, [&](const ProcessRow& r) {
    if (filter.only_uid && (!r.uid || *r.uid != *filter.only_uid)) return true;
    if (filter.gpu_index && r.gpu_index != *filter.gpu_index) return true;
    return false;
  });
  return rows;
}

namespace {

// -1, 0, 1 with unknown values after known ones, larger first.
template <typename T>
int CompareDescending(const std::optional<T>& a, const std::optional<T>& b) {
  if (a.has_value() != b.has_value()) return a ? -1 : 1;
  if (!a || *a == *b) return 0;
  return *a > *b ? -1 : 1;
}

int Compare(const ProcessRow& a, const ProcessRow& b, SortKey key) {
  int c = 0;
  switch (key) {
    case SortKey::kGpuMemory: c = CompareDescending(a.memory_bytes, b.memory_bytes); break;
    case SortKey::kSmUtil: c = CompareDescending(a.sm_percent, b.sm_percent); break;
    case SortKey::kPid: c = a.pid == b.pid ? 0 : (a.pid < b.pid ? -1 : 1); break;
    case SortKey::kUser:
      // Unknown owners last.
      if (a.user.empty() != b.user.empty()) return a.user.empty() ? 1 : -1;
      c = a.user.compare(b.user);
      c = c < 0 ? -1 : (c > 0 ? 1 : 0);
      if (c == 0) c = CompareDescending(a.memory_bytes, b.memory_bytes);
      break;
    case SortKey::kGpu:
      c = a.gpu_index == b.gpu_index ? 0 : (a.gpu_index < b.gpu_index ? -1 : 1);
      if (c == 0) c = CompareDescending(a.memory_bytes, b.memory_bytes);
      break;
  }
  if (c != 0) return c;
  if (a.gpu_index != b.gpu_index) return a.gpu_index < b.gpu_index ? -1 : 1;
  if (a.pid != b.pid) return a.pid < b.pid ? -1 : 1;
  return 0;
}

}  // namespace

void SortRows(std::vector<ProcessRow>& rows, SortKey key, bool reverse) {
  std::stable_sort(rows.begin(), rows.end(),
                   [key](const ProcessRow& a, const ProcessRow& b) { return Compare(a, b, key) < 0; });
  if (reverse) std::reverse(rows.begin(), rows.end());
}

namespace {

// "0,1" by index; a MIG device by its GPU's index and its profile ("0:2g.20gb"); a UUID
// prefix for what the snapshot does not list.
std::string GpuList(const std::vector<std::string>& uuids, const model::MachineSnapshot* snap) {
  std::string out;
  for (const auto& uuid : uuids) {
    std::string name;
    if (snap) {
      for (const auto& g : snap->gpus) {
        if (g.uuid && *g.uuid == uuid) name = std::to_string(g.index);
        for (const auto& m : g.mig_devices) {
          if (m.uuid && *m.uuid == uuid) {
            name = std::to_string(g.index) + ":" + m.profile.value_or("MIG " + std::to_string(m.index));
          }
        }
      }
    }
    if (name.empty()) name = uuid.substr(0, std::min<size_t>(uuid.size(), 12));
    out += (out.empty() ? "" : ",") + name;
  }
  return out.empty() ? "-" : out;
}

}  // namespace

std::vector<HolderRow> BuildHolderRows(const std::vector<model::Lease>& leases, const std::vector<model::Job>& jobs,
                                       const model::MachineSnapshot* snap) {
  std::set<int64_t> job_leases;
  for (const auto& j : jobs) {
    if (j.lease_id) job_leases.insert(*j.lease_id);
  }
  std::vector<const model::Lease*> sorted_leases;
  for (const auto& l : leases) {
    if (!job_leases.count(l.id)) sorted_leases.push_back(&l);
  }
  std::sort(sorted_leases.begin(), sorted_leases.end(), [](auto* a, auto* b) { return a->id < b->id; });
  // Memory slices (docs/share.md): the GPUs column says the slice ("3:20G"), and a lease
  // whose holder is over what their slices of a GPU declare is marked "over".
  std::set<int64_t> over;
  if (snap) {
    for (const auto& g : snap->gpus) {
      if (!g.uuid) continue;
      for (const auto& o : model::SliceOverruns(g, leases)) {
        for (const auto& l : leases) {
          if (l.uid == o.uid && l.gpu_memory_bytes &&
              std::find(l.gpu_uuids.begin(), l.gpu_uuids.end(), *g.uuid) != l.gpu_uuids.end()) {
            over.insert(l.id);
          }
        }
      }
    }
  }
  auto slice = [](std::optional<int64_t> bytes) -> std::string {
    if (!bytes) return "";
    const int64_t tenths = (*bytes * 10 + (int64_t{1} << 29)) >> 30;  // GiB, rounded to 0.1
    return ":" + std::to_string(tenths / 10) + (tenths % 10 ? "." + std::to_string(tenths % 10) : "") + "G";
  };
  // An MPS lease (docs/share.md "MPS"): "3:20G MPS 25%".
  auto mps = [](bool on, std::optional<int> share) -> std::string {
    return on ? " " + model::MpsMark(on, share) : "";
  };
  std::vector<HolderRow> rows;
  for (const auto* l : sorted_leases) {
    HolderRow r;
    r.what = "lease " + std::to_string(l->id);
    r.state = over.count(l->id) ? "over" : "held";
    r.user = l->user;
    r.gpus = GpuList(l->gpu_uuids, snap) + slice(l->gpu_memory_bytes) + mps(l->mps, l->gpu_share_percent);
    r.since_unix_ms = l->created_unix_ms;
    r.idle_since_unix_ms = l->idle_since_unix_ms;
    r.detail = l->command;
    rows.push_back(std::move(r));
  }
  for (int pass = 0; pass < 2; ++pass) {
    for (const auto& j : jobs) {
      const bool active = IsActive(j.state);
      if (model::IsFinal(j.state) || active != (pass == 0)) continue;
      HolderRow r;
      r.what = "job " + std::to_string(j.id);
      r.state = model::JobStateName(j.state);
      r.user = j.user;
      if (active) {
        r.gpus = GpuList(j.gpu_uuids, snap) + slice(j.request.gpu_memory_bytes) +
                 mps(j.request.mps, j.request.gpu_share_percent);
        if (j.lease_id && over.count(*j.lease_id)) r.state = "over";
        r.since_unix_ms = j.started_unix_ms.value_or(j.submitted_unix_ms);
        r.idle_since_unix_ms = j.idle_since_unix_ms;
      } else {
        r.gpus = "wants " + std::to_string(j.request.count) + slice(j.request.gpu_memory_bytes) +
                 (j.request.mig_profile ? ":" + *j.request.mig_profile : "") +
                 mps(j.request.mps, j.request.gpu_share_percent);
        r.since_unix_ms = j.submitted_unix_ms;
      }
      r.detail = j.name;
      if (!j.reason.empty()) r.detail += (r.detail.empty() ? "" : ": ") + j.reason;
      rows.push_back(std::move(r));
    }
  }
  return rows;
}

std::string MigSummary(const model::DeviceSnapshot& gpu, const std::vector<model::Lease>& leases,
                       const std::vector<model::Job>& jobs) {
  if (gpu.mig_devices.empty()) return gpu.mig_mode_current.value_or(false) ? "MIG mode, no MIG devices" : "";
  std::vector<std::string> taken;
  std::vector<std::pair<std::string, int>> free;  // profile, how many; in order of first appearance
  for (const auto& m : gpu.mig_devices) {
    const std::string profile = m.profile.value_or("MIG " + std::to_string(m.index));
    const model::Lease* holder = nullptr;
    for (const auto& l : leases) {
      if (m.uuid && Holds(l.gpu_uuids, *m.uuid)) holder = &l;
    }
    if (!holder) {
      auto at = std::find_if(free.begin(), free.end(), [&](const auto& f) { return f.first == profile; });
      if (at == free.end()) free.emplace_back(profile, 1);
      else ++at->second;
      continue;
    }
    std::string what = "lease " + std::to_string(holder->id);
    for (const auto& j : jobs) {
      if (j.lease_id && *j.lease_id == holder->id) what = "job " + std::to_string(j.id);
    }
    taken.push_back(profile + " " + holder->user + " (" + what + ")");
  }
  std::string out = "MIG " + std::to_string(taken.size()) + "/" + std::to_string(gpu.mig_devices.size()) + " leased";
  for (size_t i = 0; i < taken.size(); ++i) out += (i == 0 ? ": " : ", ") + taken[i];
  for (size_t i = 0; i < free.size(); ++i) {
    out += (i == 0 ? "; free: " : ", ") + free[i].first;
    if (free[i].second > 1) out += " x" + std::to_string(free[i].second);
  }
  return out;
}

std::string IdleText(std::optional<int64_t> idle_since_unix_ms, int64_t now_unix_ms) {
  if (!idle_since_unix_ms) return "-";
  return FormatDurationMs(std::max<int64_t>(0, now_unix_ms - *idle_since_unix_ms));
}

const model::GpuDrain* DrainOf(const Frame* frame, const model::DeviceSnapshot& gpu) {
  if (!frame || !gpu.uuid) return nullptr;
  for (const auto& d : frame->drains) {
    if (d.uuid == *gpu.uuid) return &d;
  }
  return nullptr;
}

std::string GpuKey(const model::DeviceSnapshot& gpu) {
  return gpu.uuid ? *gpu.uuid : "#" + std::to_string(gpu.index);
}

void TopModel::Ingest(std::shared_ptr<const Frame> frame) {
  if (!frame || (frame_ && frame->sequence <= frame_->sequence)) return;
  frame_ = std::move(frame);
  if (!frame_->snapshot) return;
  const std::shared_ptr<const Frame> before = std::move(last_good_);
  last_good_ = frame_;
  for (const auto& gpu : frame_->snapshot->gpus) {
    auto it = history_.try_emplace(GpuKey(gpu), capacity_).first;
    GpuHistory& h = it->second;
    auto to_double = [](const auto& v) -> std::optional<double> {
      if (!v) return std::nullopt;
      return static_cast<double>(*v);
    };
    h.utilization.Push(to_double(gpu.gpu_utilization_percent));
    std::optional<double> mem;
    if (gpu.memory_used_bytes && gpu.memory_total_bytes && *gpu.memory_total_bytes > 0) {
      mem = 100.0 * static_cast<double>(*gpu.memory_used_bytes) / static_cast<double>(*gpu.memory_total_bytes);
    }
    h.memory_percent.Push(mem);
    h.temperature_c.Push(to_double(gpu.temperature_c));
    h.power_w.Push(gpu.power_usage_w);
  }
  rows_ = BuildProcessRows(*frame_->snapshot, frame_->leases, frame_->jobs);
  // Host CPU % from the delta of utime+stime since the previous frame, as nvitop shows it.
  for (auto& r : rows_) {
    auto now = frame_->host.find(r.pid);
    if (now == frame_->host.end()) continue;
    r.rss_bytes = now->second.rss_bytes;
    if (!before) continue;
    auto then = before->host.find(r.pid);
    r.cpu_percent = CpuPercent(then == before->host.end() ? nullptr : &then->second, now->second,
                               frame_->taken_at_unix_ms - before->taken_at_unix_ms, frame_->clock_ticks_per_s);
  }
}

const model::MachineSnapshot* TopModel::snapshot() const {
  return last_good_ ? &*last_good_->snapshot : nullptr;
}

const GpuHistory* TopModel::HistoryFor(const model::DeviceSnapshot& gpu) const {
  auto it = history_.find(GpuKey(gpu));
  return it == history_.end() ? nullptr : &it->second;
}

}  // namespace gpuman::tui
