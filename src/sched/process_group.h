// The processes of a job's process group, from /proc: what keeps a job's GPUs taken after
// its supervisor is gone (the daemon adopts such a job and watches its group). Stateless;
// any thread. Only pids of this PID namespace are meaningful.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "model/lease.h"

namespace gpuman::sched {

/// The process group of `pid` (field 5 of <proc_root>/<pid>/stat), or nullopt when there
/// is no such process, it is a zombie, or the file is unreadable.
std::optional<int> ProcessGroupOf(int pid, const std::string& proc_root = "/proc");

/// Every live (not zombie) process of process group `pgid`, with its start time, in pid
/// order. A process group's id is not handed to a new process while the group has a
/// member, so the members found are the group's own. Empty for pgid <= 1.
std::vector<model::LeaseProcess> ProcessesInGroup(int pgid, const std::string& proc_root = "/proc");

}  // namespace gpuman::sched
