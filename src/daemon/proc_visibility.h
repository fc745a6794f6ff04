// What of another user's GPU process a caller may learn through the daemon: never more
// than the kernel's /proc would show that caller. The daemon (root) reads every process's
// owner and command line; before a snapshot goes to a client, FilterForCaller removes what
// the caller's own /proc would hide: with `hidepid=noaccess` (1) another user's command line
// and start time, with `hidepid=invisible` (2) or `ptraceable` (4) the process's details
// altogether, unless the caller is root, owns the process, or is in the mount's `gid=`
// group. A caller in another PID namespace sees no details at all (its /proc has other
// pids). docs/protocol.md, "Processes through the daemon". Pure except ReadCallerView.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "model/device_snapshot.h"

namespace gpuman::daemon {

/// The options of one procfs mount that decide who sees whose /proc/<pid>.
struct ProcMount {
  int hidepid = 0;                 // 0 off, 1 noaccess, 2 invisible, 4 ptraceable
  std::optional<uint32_t> gid;     // members see everything regardless of hidepid
  bool operator==(const ProcMount&) const = default;
};

/// The /proc mount of a mountinfo text (/proc/<pid>/mountinfo): the last procfs mounted
/// at `mount_point`. hidepid in either spelling ("hidepid=2", "hidepid=invisible").
/// nullopt when no procfs is mounted there.
std::optional<ProcMount> ParseProcMount(std::string_view mountinfo, std::string_view mount_point = "/proc");

/// The caller as the kernel judges /proc access: its uid and groups, its /proc mount, and
/// whether it shares the daemon's PID namespace.
struct CallerView {
  uint32_t uid = 0;
  std::vector<uint32_t> groups;  // primary and supplementary
  ProcMount proc;
  bool same_pid_namespace = true;
  bool operator==(const CallerView&) const = default;
};

/// How much of one process the caller may see.
enum class ProcessView {
  kFull,       // user, command line, start time
  kOwnerOnly,  // who owns it (the directory's owner is visible), not what it runs
  kHidden,     // nothing: the caller's /proc does not show it
};
ProcessView ViewOf(const CallerView& caller, std::optional<uint32_t> process_uid);

/// Clears in `snap` what `caller` may not see (kOwnerOnly: command and start time become
/// unknown; kHidden: the process stays, with is_visible false and no details, as a pid
/// outside the caller's PID namespace would).
void FilterForCaller(model::MachineSnapshot& snap, const CallerView& caller);

/// Reads the caller's view from /proc/<pid>/{mountinfo,status,ns/pid} (as the daemon, which
/// as root may read them). What cannot be read is assumed at its strictest: /proc with
/// hidepid=invisible, no supplementary groups, another PID namespace (a vanished pid sees
/// nothing). pid 0 (no process: tests) gets the daemon's own /proc mount and namespace.
CallerView ReadCallerView(uint32_t uid, uint32_t gid, int32_t pid);

}  // namespace gpuman::daemon
