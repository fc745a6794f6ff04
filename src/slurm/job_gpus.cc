#include "slurm/job_gpus.h"

#include <algorithm>
#include <cstdio>
#include <set>

#include "base/strings.h"
#include "slurm/healthcheck.h"

namespace gpuman::slurm {
namespace {

std::string Bytes(int64_t bytes) {
  char buf[32];
  constexpr double kMiB = 1024.0 * 1024.0;
  if (bytes >= 1024LL * 1024 * 1024) {
    std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(bytes) / (kMiB * 1024));
  } else {
    std::snprintf(buf, sizeof buf, "%.0f MiB", static_cast<double>(bytes) / kMiB);
  }
  return buf;
}

// "+2 more" when `total` things were found and one is named.
std::string More(size_t total) { return total > 1 ? " +" + std::to_string(total - 1) + " more" : ""; }

}  // namespace

std::vector<GpuLeftover> FindLeftovers(const model::MachineSnapshot& snap, const std::vector<std::string>& uuids,
                                       int64_t idle_memory_bytes) {
  const std::set<std::string> wanted(uuids.begin(), uuids.end());
  std::vector<GpuLeftover> out;
  for (const model::DeviceSnapshot& gpu : snap.gpus) {
    if (!gpu.uuid || !wanted.count(*gpu.uuid)) continue;
    for (const model::GpuProcess& p : gpu.processes) {
      GpuLeftover left{gpu.index, *gpu.uuid, p.pid, p.user, p.used_memory_bytes};
      out.push_back(std::move(left));
    }
    if (gpu.processes.empty() && gpu.memory_used_bytes && *gpu.memory_used_bytes > idle_memory_bytes) {
      out.push_back(GpuLeftover{gpu.index, *gpu.uuid, std::nullopt, std::nullopt, gpu.memory_used_bytes});
    }
  }
  return out;
}

std::string DescribeLeftover(const GpuLeftover& left) {
  std::string text = "GPU " + std::to_string(left.gpu_index);
  if (left.pid) {
    text += " pid " + std::to_string(*left.pid) + " user " + EscapeControl(left.user.value_or("?"));
    if (left.used_bytes) text += " (" + Bytes(*left.used_bytes) + ")";
  } else {
    text += " " + (left.used_bytes ? Bytes(*left.used_bytes) : std::string("memory")) + " used, no process";
  }
  return text;
}

PrologCheck CheckPrologGpus(const std::string& job_id, const std::vector<std::string>& uuids,
                            const std::vector<std::string>& mapping_problems,
                            const std::vector<model::Finding>& findings, const std::vector<GpuLeftover>& leftovers) {
  PrologCheck check;
  const std::set<std::string> job(uuids.begin(), uuids.end());
  std::vector<std::string> short_forms;  // for the reason
  for (const std::string& p : mapping_problems) {
    check.problems.push_back(EscapeControl(p));
    short_forms.push_back(EscapeControl(p));
  }
  for (const model::Finding& f : findings) {
    if (f.severity != model::Severity::kFatal) continue;
    // A driver-wide finding makes every GPU unfit; a GPU's own finding only its job.
    if (!f.gpu_uuid.empty() && !job.count(f.gpu_uuid)) continue;
    const std::string what = f.code == "xid" && f.xid ? "xid " + std::to_string(*f.xid) : f.code;
    const std::string gpu = f.gpu_index ? "GPU " + std::to_string(*f.gpu_index) : (f.gpu_uuid.empty() ? "driver" : f.gpu_uuid);
    check.problems.push_back(gpu + " is unhealthy: " + what + ": " + EscapeControl(f.message));
    short_forms.push_back(gpu + " " + what);
  }
  for (const GpuLeftover& left : leftovers) {
    check.problems.push_back(DescribeLeftover(left) + " is still there");
    std::string s = "GPU " + std::to_string(left.gpu_index);
    s += left.pid ? " pid " + std::to_string(*left.pid) + " user " + EscapeControl(left.user.value_or("?"))
                  : " " + (left.used_bytes ? Bytes(*left.used_bytes) : std::string("memory")) + " used";
    short_forms.push_back(std::move(s));
  }
  if (!short_forms.empty()) {
    check.reason = std::string(kPrologPrefix) + "job " + job_id + " " + short_forms.front() + More(short_forms.size());
  }
  return check;
}

std::string EpilogReason(const std::string& job_id, const std::string& job_user,
                         const std::vector<GpuLeftover>& leftovers) {
  std::string reason = std::string(kEpilogPrefix) + "job " + job_id;
  if (leftovers.empty()) return reason;
  const GpuLeftover& first = leftovers.front();
  reason += " GPU " + std::to_string(first.gpu_index);
  if (first.pid) {
    reason += " user " + EscapeControl(first.user.value_or(job_user)) + " pid " + std::to_string(*first.pid);
  } else {
    reason += " user " + EscapeControl(job_user) + " " +
              (first.used_bytes ? Bytes(*first.used_bytes) : std::string("memory")) + " used, no process";
  }
  return reason + More(leftovers.size());
}

Result<std::vector<GpuLeftover>> WaitForLeftovers(const Poller& poller, const std::vector<std::string>& uuids,
                                                  int64_t idle_memory_bytes, int64_t grace_ms, int64_t poll_ms) {
  const int64_t deadline = poller.now_ms() + std::max<int64_t>(grace_ms, 0);
  for (;;) {
    auto snap = poller.snapshot();
    if (!snap) return snap.error();
    std::vector<GpuLeftover> left = FindLeftovers(*snap, uuids, idle_memory_bytes);
    const int64_t remaining = deadline - poller.now_ms();
    if (left.empty() || remaining <= 0) return left;
    poller.sleep_ms(std::min(poll_ms, remaining));
  }
}

}  // namespace gpuman::slurm
