// Process liveness from /proc: the real LivenessCheck for the lease store, and the start
// time the runner records when it adds a process to a lease. Stateless; any thread.
// Only pids of this PID namespace are meaningful (as with everything else in /proc).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "model/lease.h"
#include "store/liveness.h"

namespace gpuman::store {

/// The fields of <proc_root>/<pid>/stat that gpuman uses.
struct ProcStat {
  char state = '?';         // field 3
  int pgrp = 0;             // field 5: process group
  int64_t start_ticks = 0;  // field 22: clock ticks since boot
};

/// <proc_root>/<pid>/stat of a live process, or nullopt when there is no such process (or
/// it is a zombie, or the file is unreadable).
std::optional<ProcStat> ReadProcStat(int pid, const std::string& proc_root = "/proc");

/// Start time of `pid` (field 22 of <proc_root>/<pid>/stat, clock ticks since boot), or
/// nullopt when there is no such process (or it is a zombie, or the file is unreadable).
std::optional<int64_t> ProcessStartTicks(int pid, const std::string& proc_root = "/proc");

/// The lease process for `pid` as it is now, ready to record; nullopt as above.
std::optional<model::LeaseProcess> CurrentLeaseProcess(int pid,
                                                       const std::string& proc_root = "/proc");

/// true while `process.pid` exists, is not a zombie, and started at
/// `process.start_time_ticks`: a recycled pid (same number, later start) is dead.
bool IsProcessAlive(const model::LeaseProcess& process, const std::string& proc_root = "/proc");

/// IsProcessAlive bound to `proc_root`.
LivenessCheck ProcLivenessCheck(std::string proc_root = "/proc");

}  // namespace gpuman::store
