// share_trace_bench: what memory slices buy on a real job trace (issue 25, docs/share.md).
//
// Replays a cut of Microsoft's ITP trace (../shared/traces/cuts/, default the single-server
// week itp-node8-c05w6.csv: 399 jobs on one 8-GPU node, offered load 1.01) in virtual time
// through the real scheduling pass (sched::Schedule, the daemon's code), on 8 stand-in
// GPUs of 80 GiB, three times:
//   whole      every job holds whole GPUs (what gpuman did before slices);
//   slices     each 1-GPU job declares a memory size drawn for it (below) and is a slice,
//              unless it drew the whole 80 GiB; multi-GPU jobs stay whole;
//   slices+25% the same, each slice job running 25 % longer than in the trace: a
//              pessimistic guess at what sharing a GPU's SMs costs.
// The trace has no memory figures. The size of a 1-GPU job is drawn with a fixed seed
// (so every run replays the same draw): 5 GiB 10 %, 10 GiB 30 %, 20 GiB 30 %, 40 GiB 20 %,
// a whole 80 GiB GPU 10 %. Durations are the trace's and are also the jobs' time limits
// (the backfill's estimates), as in the trace README's reference simulator.
//
// The week's makespan is set by its last arrivals (a burst of 8-GPU jobs near the end), so
// jobs per hour over it hardly moves; the same three runs are repeated with every job
// submitted at once (a backlog), where jobs per hour is the machine's throughput.
//
// Event loop: at each event time, jobs that end are removed (their leases with them),
// arrivals join the queue, and one pass starts what it decides. Printed per run: jobs per
// hour over the makespan, mean and p99 wait (start - submit), mean completion time, GPU
// time busy, and the mean time of one pass.
//
// Usage: share_trace_bench [TRACE.csv]   (default $GPUMAN_TRACES/cuts/itp-node8-c05w6.csv,
//        GPUMAN_TRACES defaulting to ../shared/traces)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "sched/scheduler.h"

namespace {

using gpuman::model::Job;
using gpuman::model::JobState;
using gpuman::sched::SchedulerInput;

constexpr int kGpus = 8;
constexpr int64_t kGiB = int64_t{1} << 30;
constexpr int64_t kGpuMemory = 80 * kGiB;
constexpr int64_t kEpochMs = 1'800'000'000'000;

struct TraceJob {
  int64_t submit_s = 0;
  int64_t duration_s = 0;
  int gpus = 1;
  int64_t memory = kGpuMemory;  // drawn for 1-GPU jobs; whole otherwise
};

std::vector<TraceJob> ReadTrace(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot be read");
  std::string line;
  std::getline(in, line);  // header
  std::vector<TraceJob> jobs;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::vector<std::string> cells;
    std::stringstream ss(line);
    for (std::string cell; std::getline(ss, cell, ',');) cells.push_back(cell);
    if (cells.size() < 4) throw std::runtime_error(path + ": a row with fewer than 4 columns: " + line);
    jobs.push_back({std::stoll(cells[1]), std::stoll(cells[2]), std::stoi(cells[3])});
  }
  std::mt19937_64 rng(25);
  for (auto& j : jobs) {
    if (j.gpus != 1) continue;
    const int r = std::uniform_int_distribution<int>(0, 99)(rng);
    j.memory = (r < 10 ? 5 : r < 40 ? 10 : r < 70 ? 20 : r < 90 ? 40 : 80) * kGiB;
  }
  return jobs;
}

std::string Uuid(int i) { return "GPU-0000000" + std::to_string(i) + "-aaaa-bbbb-cccc-dddddddddddd"; }

struct Figures {
  size_t jobs = 0, never = 0;
  double makespan_h = 0, mean_wait_h = 0, p99_wait_h = 0, mean_jct_h = 0, busy = 0, pass_ms = 0;
  size_t passes = 0, sliced = 0;
};

Figures Replay(const std::vector<TraceJob>& trace, bool slices, double slowdown) {
  SchedulerInput in;
  for (int i = 0; i < kGpus; ++i) {
    gpuman::model::DeviceSnapshot gpu;
    gpu.index = i;
    gpu.uuid = Uuid(i);
    gpu.name = "NVIDIA H100 80GB HBM3";
    gpu.compute_capability = "9.0";
    gpu.memory_total_bytes = kGpuMemory;
    gpu.memory_used_bytes = 0;
    gpu.numa_node = i / 4;
    in.snapshot.gpus.push_back(std::move(gpu));
  }
  std::vector<size_t> order(trace.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return trace[a].submit_s < trace[b].submit_s; });

  std::map<int64_t, int64_t> ends_at;  // job id -> end (ms), running jobs
  std::vector<int64_t> started_at(trace.size() + 1, -1), ended_at(trace.size() + 1, -1);
  std::vector<int64_t> duration_ms(trace.size() + 1, 0);
  Figures f;
  size_t next = 0;
  int64_t now = kEpochMs + trace[order[0]].submit_s * 1000;
  double gpu_ms = 0;
  while (true) {
    // Ends first, then arrivals, then one pass.
    for (auto it = ends_at.begin(); it != ends_at.end();) {
      if (it->second > now) {
        ++it;
        continue;
      }
      const int64_t id = it->first;
      ended_at[id] = it->second;
      std::erase_if(in.jobs, [&](const Job& j) { return j.id == id; });
      std::erase_if(in.leases, [&](const gpuman::model::Lease& l) { return l.id == id; });
      it = ends_at.erase(it);
    }
    while (next < order.size() && kEpochMs + trace[order[next]].submit_s * 1000 <= now) {
      const TraceJob& t = trace[order[next]];
      Job job;
      job.id = static_cast<int64_t>(next) + 1;
      job.uid = 1000;
      job.user = "itp";
      job.state = JobState::kQueued;
      job.request.count = t.gpus;
      const bool slice = slices && t.gpus == 1 && t.memory < kGpuMemory;
      if (slice) job.request.gpu_memory_bytes = t.memory;
      duration_ms[job.id] = static_cast<int64_t>(static_cast<double>(t.duration_s) * 1000 * (slice ? slowdown : 1.0));
      job.time_limit_ms = std::max<int64_t>(1000, duration_ms[job.id]);
      job.submitted_unix_ms = kEpochMs + t.submit_s * 1000;
      in.jobs.push_back(std::move(job));
      ++next;
    }
    in.now_unix_ms = now;
    const auto t0 = std::chrono::steady_clock::now();
    const auto out = gpuman::sched::Schedule(in);
    f.pass_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    ++f.passes;
    for (const auto& s : out.start) {
      auto job = std::find_if(in.jobs.begin(), in.jobs.end(), [&](const Job& j) { return j.id == s.job_id; });
      job->state = JobState::kRunning;
      job->started_unix_ms = now;
      job->gpu_uuids = s.gpu_uuids;
      job->lease_id = job->id;
      gpuman::model::Lease lease;
      lease.id = job->id;
      lease.uid = job->uid;
      lease.user = job->user;
      lease.kind = "job";
      lease.gpu_uuids = s.gpu_uuids;
      lease.gpu_memory_bytes = job->request.gpu_memory_bytes;
      in.leases.push_back(std::move(lease));
      started_at[job->id] = now;
      ends_at[job->id] = now + duration_ms[job->id];
      if (job->request.gpu_memory_bytes) {
        ++f.sliced;
        gpu_ms += static_cast<double>(duration_ms[job->id]) * static_cast<double>(*job->request.gpu_memory_bytes) /
                  static_cast<double>(kGpuMemory);
      } else {
        gpu_ms += static_cast<double>(duration_ms[job->id]) * static_cast<double>(s.gpu_uuids.size());
      }
    }
    int64_t upcoming = INT64_MAX;
    if (next < order.size()) upcoming = kEpochMs + trace[order[next]].submit_s * 1000;
    for (const auto& [id, end] : ends_at) upcoming = std::min(upcoming, end);
    if (upcoming == INT64_MAX) break;
    now = upcoming;
  }
  std::vector<double> waits;
  double jct = 0;
  int64_t first = INT64_MAX, last = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    const int64_t id = static_cast<int64_t>(i) + 1;
    const int64_t submitted = kEpochMs + trace[order[i]].submit_s * 1000;
    first = std::min(first, submitted);
    if (started_at[id] < 0) {
      ++f.never;
      continue;
    }
    waits.push_back(static_cast<double>(started_at[id] - submitted) / 3.6e6);
    jct += static_cast<double>(ended_at[id] - submitted) / 3.6e6;
    last = std::max(last, ended_at[id]);
  }
  std::sort(waits.begin(), waits.end());
  f.jobs = waits.size();
  f.makespan_h = static_cast<double>(last - first) / 3.6e6;
  for (double w : waits) f.mean_wait_h += w / static_cast<double>(waits.size());
  f.p99_wait_h = waits.empty() ? 0 : waits[std::min(waits.size() - 1, waits.size() * 99 / 100)];
  f.mean_jct_h = jct / static_cast<double>(std::max<size_t>(1, f.jobs));
  f.busy = gpu_ms / (static_cast<double>(last - first) * kGpus);
  f.pass_ms /= static_cast<double>(std::max<size_t>(1, f.passes));
  return f;
}

void Print(const char* name, const Figures& f) {
  std::printf("%-11s %4zu jobs (%4zu as slices, %zu never ran)  %6.2f jobs/h  wait mean %6.2f h  p99 %6.1f h  "
              "JCT mean %6.2f h  makespan %6.1f h  GPU memory-time held %5.1f %%  pass %.3f ms (%zu passes)\n",
              name, f.jobs, f.sliced, f.never, static_cast<double>(f.jobs) / f.makespan_h, f.mean_wait_h, f.p99_wait_h,
              f.mean_jct_h, f.makespan_h, 100 * f.busy, f.pass_ms, f.passes);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::string path;
    if (argc > 1) {
      path = argv[1];
    } else {
      const char* traces = std::getenv("GPUMAN_TRACES");
      path = std::string(traces ? traces : "../shared/traces") + "/cuts/itp-node8-c05w6.csv";
    }
    const auto trace = ReadTrace(path);
    size_t singles = 0;
    for (const auto& j : trace) singles += j.gpus == 1 ? 1 : 0;
    std::printf("share_trace_bench: %s, %zu jobs (%zu of 1 GPU), %d GPUs of 80 GiB\n", path.c_str(), trace.size(), singles,
                kGpus);
    std::printf("1-GPU jobs' memory, drawn with seed 25: 5 GiB 10%%, 10 GiB 30%%, 20 GiB 30%%, 40 GiB 20%%, whole 10%%\n");
    auto backlog = trace;
    for (auto& j : backlog) j.submit_s = 0;
    const std::vector<TraceJob>* runs[] = {&trace, &backlog};
    for (const std::vector<TraceJob>* arrivals : runs) {
      std::printf(arrivals == &trace ? "arrivals as in the trace:\n" : "every job submitted at once (throughput):\n");
      const Figures whole = Replay(*arrivals, false, 1.0);
      const Figures sliced = Replay(*arrivals, true, 1.0);
      const Figures slower = Replay(*arrivals, true, 1.25);
      Print("whole", whole);
      Print("slices", sliced);
      Print("slices+25%", slower);
      auto rate = [](const Figures& f) { return static_cast<double>(f.jobs) / f.makespan_h; };
      std::printf("slices vs whole: jobs/h x%.2f, mean wait x%.2f (slices+25%%: jobs/h x%.2f, mean wait x%.2f)\n",
                  rate(sliced) / rate(whole), sliced.mean_wait_h / whole.mean_wait_h, rate(slower) / rate(whole),
                  slower.mean_wait_h / whole.mean_wait_h);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "share_trace_bench: error: %s\n", e.what());
    return 1;
  }
}
