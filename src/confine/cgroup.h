// Device confinement with cgroups (docs/enforce.md): each confined lease (a queued job's,
// or a `run` the daemon granted) gets a cgroup of its own, <base>/lease-<id>, whose
// processes may open only the lease's GPU nodes (device_rule.h). The cgroup is also the
// lease's identity: every process in it, daemonized children included, belongs to the
// lease, and the lease ends only when it is empty.
//
//   cgroup v2: the device rule is a BPF_PROG_TYPE_CGROUP_DEVICE program attached to the
//              lease's cgroup (BPF_F_ALLOW_MULTI: the programs of the cgroups above still
//              run, and all must allow). `cgroup.kill` ends everything at once where the
//              kernel has it (5.14).
//   cgroup v1: the devices controller's deny list ("c 195:M rwm" for each GPU minor the
//              lease does not hold).
// On a hybrid host (v1 controllers, v2 mounted beside them) the kernel checks both on every
// open; one is enough, and v2 is preferred.
//
// <base> is a directory under the daemon's own cgroup (gpuman.service with Delegate=yes):
// gpuman-jobs for the system daemon's state directory, gpuman-jobs-<hash> for any other,
// so that two daemons (tests, a simulation) never share lease cgroups.
//
// Only root changes cgroups (the daemon, the job supervisor). Reading a cgroup's processes
// and signalling one's own processes in it needs no privilege (`run` ends what its command
// left behind this way).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "confine/device_rule.h"

namespace gpuman::confine {

/// `[enforce] devices`: "cgroup" (v2 where it works, else v1), "cgroup-v2", "cgroup-v1",
/// "off".
enum class DevicesSetting { kCgroup, kCgroupV2, kCgroupV1, kOff };
/// Errors: kInvalidArgument naming the allowed values.
Result<DevicesSetting> ParseDevicesSetting(std::string_view text);
std::string_view DevicesSettingName(DevicesSetting s);

enum class CgroupVersion { kV1, kV2 };

/// Where the daemon confines leases, or why it does not.
struct Confinement {
  bool on = false;
  CgroupVersion version = CgroupVersion::kV2;
  std::string base;     // the directory lease cgroups are made in
  std::string why_off;  // when !on: one line ("the kernel refused a device program: ...")
  /// The cgroup2 mount has `favordynmods`: moving a process into a cgroup (what `run`'s
  /// command needs) does not wait for an RCU grace period (docs/enforce.md, "Cost").
  bool favordynmods = false;
  /// "cgroup v2 device programs in /sys/fs/cgroup/..." or "off: WHY".
  std::string Describe() const;
};

/// What the process's cgroups are, from /proc (a seam for tests).
struct CgroupSystem {
  std::string mountinfo = "/proc/self/mountinfo";
  std::string self_cgroup = "/proc/self/cgroup";
};

/// The name of the base directory for a daemon with state in `state_dir`.
std::string BaseName(const std::string& state_dir);

/// Finds the cgroup hierarchy `setting` asks for, makes <base> and proves that a lease
/// cgroup with a device rule can be made there (a probe cgroup, removed again). Never
/// fails: a host, container or user that does not allow it gives `on = false` and why.
Confinement PrepareConfinement(DevicesSetting setting, uid_t euid, const std::string& state_dir,
                               const CgroupSystem& system = {});

/// <base>/lease-<id>.
std::string LeaseCgroup(const Confinement& c, int64_t lease_id);

/// Makes the lease's cgroup with `rule` applied. One left from an earlier lease with this
/// id (a daemon whose state was reset) is removed first if empty. Errors: kConflict when a
/// non-empty one is there; the mkdir / program / deny-list failure otherwise.
Result<std::string> CreateLeaseCgroup(const Confinement& c, int64_t lease_id, const DeviceRule& rule);

/// Moves `pid` (all its threads) into the cgroup `dir`. Root only.
Status MoveIntoCgroup(const std::string& dir, pid_t pid);

/// The processes in `dir` now (cgroup.procs); empty when it is empty or gone.
std::vector<pid_t> CgroupProcesses(const std::string& dir);

/// Whether `dir` exists and has a process in it.
bool CgroupHasProcesses(const std::string& dir);

/// Ends every process in `dir`: SIGTERM, up to `grace_ms` for them to go, then SIGKILL
/// (cgroup.kill where it exists and we may write it), and waits up to a few seconds more
/// until it is empty. Returns whether it is empty. Processes forked meanwhile are caught
/// by the repeated reads. The caller's own exited children are reaped meanwhile (a zombie
/// counts as a process of its cgroup until it is reaped): call it as the subreaper
/// (PR_SET_CHILD_SUBREAPER) of what is ended, as `run` and the job supervisor are.
bool EndCgroupProcesses(const std::string& dir, int grace_ms);

/// Removes `dir` if it is empty (rmdir); a missing one is fine. Errors: kConflict (still
/// has processes), others as rmdir's.
Status RemoveCgroup(const std::string& dir);

/// When the daemon stops: removes the empty lease cgroups and then the base, if empty.
/// Those of jobs that still run (their supervisors outlive the daemon) stay.
void RemoveEmptyCgroups(const Confinement& c);

/// The lease ids that have a cgroup under the base (lease-<id> directories).
std::vector<int64_t> LeaseCgroupIds(const Confinement& c);

}  // namespace gpuman::confine
