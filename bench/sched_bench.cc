// sched_bench: how long one Schedule() pass takes with 10,000 queued jobs on 512 GPUs.
// Goal (from the scheduler issue): <= 10 ms per pass.
//
// The machine is 64 NVSwitch groups of 8 GPUs in one snapshot (every pair in a group
// NV18; PXB within a pair, NODE within a half, SYS otherwise), like 64 DGX nodes seen as
// one. Two scenes are timed, each as the median of N passes:
//   steady  most GPUs run jobs of mixed sizes, a few dozen are free (what the daemon
//           sees whenever a job ends);
//   empty   nothing runs: the first pass after a restart, which starts hundreds of jobs.
// The queue: 10,000 jobs from 12 users, sizes 1/2/4/8/16/32, time limits 10 min..48 h,
// a few priorities, 2 % held, 2 % with an `after` dependency, 3 % with a model filter.
//
// A third scene, slices (issue 25, docs/share.md): 8 GPUs of 80 GiB with 16 memory slices
// running (a mixed 5-40 GiB each), 10,000 queued slice jobs of 5, 10, 20 or 40 GiB drawn
// uniformly, 12 users. Goal: <= 10 ms per pass.
//
// Usage: sched_bench [passes]   (default 21)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "sched/scheduler.h"

namespace {

using gpuman::model::Job;
using gpuman::model::JobState;
using gpuman::model::PcieLevel;
using gpuman::sched::SchedulerInput;
using gpuman::sched::SchedulerOutput;

constexpr int kGroups = 64;
constexpr int kPerGroup = 8;
constexpr int kGpus = kGroups * kPerGroup;
constexpr int kQueued = 10'000;
constexpr int64_t kNow = 1'800'000'000'000;
constexpr int64_t kMinute = 60'000;
constexpr int64_t kHour = 60 * kMinute;

std::string Uuid(int i) { return "GPU-" + std::to_string(100000 + i); }

gpuman::model::MachineSnapshot Machine() {
  gpuman::model::MachineSnapshot snap;
  for (int i = 0; i < kGpus; ++i) {
    gpuman::model::DeviceSnapshot gpu;
    gpu.index = i;
    gpu.uuid = Uuid(i);
    gpu.name = i < kGpus / 2 ? "NVIDIA H100 80GB HBM3" : "NVIDIA A100-SXM4-80GB";
    gpu.compute_capability = i < kGpus / 2 ? "9.0" : "8.0";
    gpu.memory_total_bytes = int64_t{80} << 30;
    gpu.memory_free_bytes = int64_t{80} << 30;
    gpu.memory_used_bytes = 0;
    gpu.gpu_utilization_percent = 0;
    gpu.numa_node = i / 4;
    snap.gpus.push_back(std::move(gpu));
  }
  gpuman::model::Topology t;
  t.nvlinks.assign(kGpus, std::vector<int>(kGpus, 0));
  t.pcie.assign(kGpus, std::vector<PcieLevel>(kGpus, PcieLevel::kSystem));
  for (int a = 0; a < kGpus; ++a) {
    for (int b = 0; b < kGpus; ++b) {
      if (a == b) {
        t.pcie[a][b] = PcieLevel::kSelf;
      } else if (a / kPerGroup == b / kPerGroup) {
        t.nvlinks[a][b] = 18;
        t.pcie[a][b] = a / 2 == b / 2   ? PcieLevel::kMultipleSwitch
                       : a / 4 == b / 4 ? PcieLevel::kNumaNode
                                        : PcieLevel::kSystem;
      }
    }
  }
  snap.topology = std::move(t);
  return snap;
}

int PickSize(std::mt19937_64& rng) {
  int r = std::uniform_int_distribution<int>(0, 99)(rng);
  if (r < 55) return 1;
  if (r < 75) return 2;
  if (r < 87) return 4;
  if (r < 96) return 8;
  if (r < 99) return 16;
  return 32;
}

SchedulerInput Scene(bool steady, uint64_t seed) {
  std::mt19937_64 rng(seed);
  SchedulerInput in;
  in.now_unix_ms = kNow;
  in.snapshot = Machine();
  in.config.default_max_gpus_per_user = 128;
  int64_t next_id = 1;

  if (steady) {
    // Fill each group with running jobs of 8, 4, 2 or 1 GPUs; leave ~6 % free.
    for (int g = 0; g < kGroups; ++g) {
      int p = g * kPerGroup;
      const int end = p + kPerGroup;
      while (p < end) {
        if (std::uniform_int_distribution<int>(0, 99)(rng) < 15) {
          ++p;
          continue;
        }
        int size = std::min(1 << std::uniform_int_distribution<int>(0, 3)(rng), end - p);
        Job job;
        job.id = next_id++;
        job.uid = 1000 + static_cast<uint32_t>(std::uniform_int_distribution<int>(0, 11)(rng));
        job.user = "user" + std::to_string(job.uid);
        job.state = JobState::kRunning;
        job.request.count = size;
        job.time_limit_ms = std::uniform_int_distribution<int64_t>(kHour, 48 * kHour)(rng);
        job.started_unix_ms = kNow - std::uniform_int_distribution<int64_t>(0, *job.time_limit_ms)(rng);
        job.submitted_unix_ms = *job.started_unix_ms - kMinute;
        job.lease_id = job.id;
        for (int i = 0; i < size; ++i) job.gpu_uuids.push_back(Uuid(p + i));
        gpuman::model::Lease lease;
        lease.id = job.id;
        lease.uid = job.uid;
        lease.user = job.user;
        lease.kind = "job";
        lease.gpu_uuids = job.gpu_uuids;
        in.leases.push_back(std::move(lease));
        in.jobs.push_back(std::move(job));
        p += size;
      }
    }
  }

  const int64_t first_queued = next_id;
  for (int i = 0; i < kQueued; ++i) {
    Job job;
    job.id = next_id++;
    job.uid = 1000 + static_cast<uint32_t>(std::uniform_int_distribution<int>(0, 11)(rng));
    job.user = "user" + std::to_string(job.uid);
    job.state = std::uniform_int_distribution<int>(0, 99)(rng) < 2 ? JobState::kHeld
                                                                     : JobState::kQueued;
    job.request.count = PickSize(rng);
    if (std::uniform_int_distribution<int>(0, 99)(rng) < 3) job.request.model = "H100";
    job.priority = std::uniform_int_distribution<int>(0, 99)(rng) < 5 ? 10 : 0;
    job.time_limit_ms = std::uniform_int_distribution<int64_t>(10 * kMinute, 48 * kHour)(rng);
    job.submitted_unix_ms = kNow - std::uniform_int_distribution<int64_t>(0, 72 * kHour)(rng);
    if (i > 0 && std::uniform_int_distribution<int>(0, 99)(rng) < 2) {
      job.after = {std::uniform_int_distribution<int64_t>(first_queued, job.id - 1)(rng)};
    }
    in.jobs.push_back(std::move(job));
  }
  for (uint32_t u = 0; u < 12; ++u) in.usage.push_back({1000 + u, 3600.0 * u * u});
  return in;
}

// 8 x 80 GiB; 16 slices run; 10,000 slice jobs wait.
SchedulerInput SliceScene(uint32_t seed) {
  std::mt19937 rng(seed);
  SchedulerInput in;
  in.now_unix_ms = kNow;
  for (int i = 0; i < 8; ++i) {
    gpuman::model::DeviceSnapshot gpu;
    gpu.index = i;
    gpu.uuid = Uuid(i);
    gpu.name = "NVIDIA H100 80GB HBM3";
    gpu.compute_capability = "9.0";
    gpu.memory_total_bytes = int64_t{80} << 30;
    gpu.numa_node = i / 4;
    in.snapshot.gpus.push_back(std::move(gpu));
  }
  const int64_t sizes[] = {5, 10, 20, 40};
  int64_t id = 1;
  for (int r = 0; r < 16; ++r, ++id) {
    Job job;
    job.id = id;
    job.uid = 1000 + static_cast<uint32_t>(r % 12);
    job.state = JobState::kRunning;
    job.request.count = 1;
    job.request.gpu_memory_bytes = sizes[r % 3] << 30;
    job.started_unix_ms = kNow - kHour;
    job.time_limit_ms = 4 * kHour;
    job.lease_id = 100000 + id;
    job.gpu_uuids = {Uuid(r % 8)};
    gpuman::model::Lease lease;
    lease.id = *job.lease_id;
    lease.uid = job.uid;
    lease.kind = "job";
    lease.gpu_uuids = job.gpu_uuids;
    lease.gpu_memory_bytes = job.request.gpu_memory_bytes;
    in.leases.push_back(lease);
    in.jobs.push_back(std::move(job));
  }
  for (int i = 0; i < kQueued; ++i, ++id) {
    Job job;
    job.id = id;
    job.uid = 1000 + std::uniform_int_distribution<uint32_t>(0, 11)(rng);
    job.state = JobState::kQueued;
    job.request.count = 1;
    job.request.gpu_memory_bytes = sizes[std::uniform_int_distribution<int>(0, 3)(rng)] << 30;
    job.time_limit_ms = std::uniform_int_distribution<int64_t>(10 * kMinute, 8 * kHour)(rng);
    job.submitted_unix_ms = kNow - std::uniform_int_distribution<int64_t>(0, 72 * kHour)(rng);
    in.jobs.push_back(std::move(job));
  }
  return in;
}

struct Timing {
  double median_ms;
  double min_ms;
  SchedulerOutput last;
};

Timing Time(const SchedulerInput& in, int passes) {
  std::vector<double> ms;
  SchedulerOutput out;
  for (int i = 0; i < passes; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    out = gpuman::sched::Schedule(in);
    auto t1 = std::chrono::steady_clock::now();
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms.front(), std::move(out)};
}

void Report(const char* name, const SchedulerInput& in, const Timing& t) {
  int free_gpus = kGpus;
  for (const auto& l : in.leases) free_gpus -= static_cast<int>(l.gpu_uuids.size());
  int backfilled = 0;
  int started_gpus = 0;
  for (const auto& s : t.last.start) {
    backfilled += s.backfilled ? 1 : 0;
    started_gpus += static_cast<int>(s.gpu_uuids.size());
  }
  std::printf(
      "%-6s  %d GPUs (%d free), %zu jobs in input: started %zu jobs on %d GPUs (%d backfilled), "
      "%zu waiting, head %s\n"
      "        median %.2f ms, min %.2f ms\n",
      name, kGpus, free_gpus, in.jobs.size(), t.last.start.size(), started_gpus, backfilled,
      t.last.waiting.size(),
      t.last.reserved_job ? std::to_string(*t.last.reserved_job).c_str() : "none", t.median_ms,
      t.min_ms);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    int passes = argc > 1 ? std::max(1, std::atoi(argv[1])) : 21;
    SchedulerInput steady = Scene(/*steady=*/true, 42);
    SchedulerInput empty = Scene(/*steady=*/false, 42);
    Timing s = Time(steady, passes);
    Timing e = Time(empty, std::max(1, passes / 4));
    std::printf("sched_bench: one Schedule() pass, %d queued jobs, median of %d passes\n", kQueued,
                passes);
    Report("steady", steady, s);
    Report("empty", empty, e);
    std::printf("goal: <= 10 ms per pass (steady): %s\n", s.median_ms <= 10.0 ? "met" : "NOT met");
    SchedulerInput slices = SliceScene(42);
    Timing sl = Time(slices, passes);
    std::printf("slices  8 GPUs of 80 GiB, 16 slices running, %d slice jobs queued: started %zu, %zu waiting\n"
                "        median %.2f ms, min %.2f ms\n",
                kQueued, sl.last.start.size(), sl.last.waiting.size(), sl.median_ms, sl.min_ms);
    std::printf("goal: <= 10 ms per pass (slices): %s\n", sl.median_ms <= 10.0 ? "met" : "NOT met");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sched_bench: error: %s\n", e.what());
    return 1;
  }
}
