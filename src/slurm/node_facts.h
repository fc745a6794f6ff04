// What a Slurm node says about the job gpuman runs in: gres.conf (Slurm index -> device
// file -> minor), whether the job's devices are confined (cgroup, Slurm config), and which
// GPU processes belong to the job. Reads files under SlurmPaths; called once per command
// by the CLI, only inside a Slurm job. Thread-compatible.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "visibility/ids.h"
#include "visibility/slurm_gpus.h"

namespace gpuman::slurm {

/// Where the node's files are; tests point these into a temp dir.
struct SlurmPaths {
  std::string proc = "/proc";
  std::string cgroup = "/sys/fs/cgroup";
  std::string default_conf_dir = "/etc/slurm";
};

/// `[slurm] node` of the config: whether this host is a Slurm compute node.
enum class SlurmNodeMode { kAuto, kYes, kNo };

struct SlurmNodeVerdict {
  bool is_node = false;
  std::string reason;  // "slurmd runs (pid 812)", "[slurm] node = yes", ...
};

/// Whether this host is a Slurm compute node, where gpuman's per-GPU drains and idle-lease
/// releases step aside (Slurm drains whole nodes and ends jobs itself; docs/slurm.md).
/// kYes / kNo: as configured. kAuto: yes when a process named `slurmd` runs (a scan of
/// `paths.proc`; covers configless nodes), or when slurm.conf ($SLURM_CONF, else
/// `default_conf_dir`/slurm.conf) has a NodeName= (or NodeHostname=) naming `hostname` or
/// its short form; a login or controller host has slurm.conf but is no NodeName. Reads
/// files; call it when a decision is due, not per sample.
SlurmNodeVerdict DetectSlurmNode(SlurmNodeMode mode, const visibility::Environment& env, const std::string& hostname,
                                 const SlurmPaths& paths = {});

/// True when `env` looks like the inside of a Slurm job or step (SLURM_JOB_ID, or a
/// SLURM_STEP_GPUS / SLURM_JOB_GPUS list).
bool InSlurmJob(const visibility::Environment& env);

/// Reads gres.conf from the directory of $SLURM_CONF (else default_conf_dir), keeping the
/// lines for this node ($SLURMD_NODENAME, else `hostname`), and fills each entry's minor:
/// the device's minor number when the file is an NVIDIA character device (major 195),
/// else the N of its name "nvidiaN". Detects confinement by Slurm's own rule: slurm.conf
/// TaskPlugin includes task/cgroup and cgroup.conf has ConstrainDevices=yes (unknown when
/// slurm.conf cannot be read). Never fails: what cannot be
/// read stays unknown, with the reason in gres_error / constrained_evidence.
visibility::SlurmNode ReadSlurmNode(const visibility::Environment& env, const std::string& hostname,
                                    const SlurmPaths& paths = {});

/// The minor number of a GPU device file: from the device when it is an NVIDIA character
/// device (major 195), else the N of its name "nvidiaN"; nullopt otherwise.
std::optional<int> MinorOfDeviceFile(const std::string& file);

/// Of `pids`, those in the cgroup of Slurm job `job_id` (/proc/PID/cgroup names
/// ".../job_<id>/..."); nullopt when this process is not in such a cgroup itself (no
/// cgroup proctrack), so membership cannot be told.
std::optional<std::set<uint32_t>> JobPids(const std::string& job_id, const std::vector<uint32_t>& pids,
                                          const SlurmPaths& paths = {});

}  // namespace gpuman::slurm
