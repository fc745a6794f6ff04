// What `gpuman slurm prolog` and `gpuman slurm epilog` judge on a job's GPUs: processes and
// memory left on them (another job's, before the job starts; the job's own, after it
// ended), unhealthy GPUs, and the drain reasons that name them. Pure, except
// WaitForLeftovers, which polls through the functions it is given. Thread-compatible.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "model/device_snapshot.h"
#include "model/health.h"

namespace gpuman::slurm {

/// One thing left on a GPU: a process (pid set), or memory in use with no process NVML
/// lists (pid unset; e.g. a process in another PID namespace, or a leaked context).
struct GpuLeftover {
  int gpu_index = 0;  // NVML index
  std::string gpu_uuid;
  std::optional<uint32_t> pid;
  std::optional<std::string> user;  // the process's owner, when /proc shows it
  std::optional<int64_t> used_bytes;  // the process's memory, else the GPU's used memory
};

/// What is left on the GPUs `uuids` of `snap`: every process, and a GPU whose used memory
/// exceeds `idle_memory_bytes` while it lists no process. A GPU of `uuids` that `snap`
/// does not show is not reported here (the health findings and the mapping report it).
std::vector<GpuLeftover> FindLeftovers(const model::MachineSnapshot& snap, const std::vector<std::string>& uuids,
                                       int64_t idle_memory_bytes);

/// "GPU 1 pid 4242 user bob (1.5 GiB)", "GPU 1 1.2 GiB used, no process" (for stderr).
std::string DescribeLeftover(const GpuLeftover& left);

/// The prolog's verdict on a job about to start on `uuids`: one problem per unhealthy
/// GPU (a fatal finding on it), per Slurm index that leads to no GPU (`mapping_problems`),
/// and per leftover. Empty: the job may start.
struct PrologCheck {
  std::vector<std::string> problems;  // for stderr, one line each
  std::optional<std::string> reason;  // "gpuman-prolog: job 12 GPU 1 pid 4242 user bob" (+N more)
};
PrologCheck CheckPrologGpus(const std::string& job_id, const std::vector<std::string>& uuids,
                            const std::vector<std::string>& mapping_problems,
                            const std::vector<model::Finding>& findings, const std::vector<GpuLeftover>& leftovers);

/// "gpuman-epilog: job 12 GPU 1 user alice pid 4242" naming the first leftover ("+N more"
/// after it); a leftover without a pid names its memory and the job's user.
std::string EpilogReason(const std::string& job_id, const std::string& job_user,
                         const std::vector<GpuLeftover>& leftovers);

/// Polls for the epilog's grace period: takes a snapshot, returns as soon as nothing is
/// left on `uuids`, else sleeps `poll_ms` and looks again until `grace_ms` have passed;
/// returns the last leftovers. A failed snapshot ends the wait with its error.
struct Poller {
  std::function<Result<model::MachineSnapshot>()> snapshot;
  std::function<int64_t()> now_ms;    // monotonic
  std::function<void(int64_t)> sleep_ms;
};
Result<std::vector<GpuLeftover>> WaitForLeftovers(const Poller& poller, const std::vector<std::string>& uuids,
                                                  int64_t idle_memory_bytes, int64_t grace_ms, int64_t poll_ms = 500);

}  // namespace gpuman::slurm
