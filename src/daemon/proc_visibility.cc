#include "daemon/proc_visibility.h"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <string>

#include "base/file.h"
#include "base/strings.h"

namespace gpuman::daemon {
namespace {

std::optional<int> HidepidValue(std::string_view v) {
  if (v == "0" || v == "off") return 0;
  if (v == "1" || v == "noaccess") return 1;
  if (v == "2" || v == "invisible") return 2;
  if (v == "4" || v == "ptraceable") return 4;
  return std::nullopt;
}

std::string Link(const std::string& path) {
  char buf[PATH_MAX];
  ssize_t n = readlink(path.c_str(), buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

}  // namespace

std::optional<ProcMount> ParseProcMount(std::string_view mountinfo, std::string_view mount_point) {
  std::optional<ProcMount> found;
  for (std::string_view line : Split(mountinfo, '\n')) {
    // "22 27 0:21 / /proc rw,relatime - proc proc rw,hidepid=2,gid=10"
    auto fields = Split(Trim(line), ' ');
    if (fields.size() < 5 || fields[4] != mount_point) continue;
    auto dash = std::find(fields.begin(), fields.end(), "-");
    if (dash == fields.end() || fields.end() - dash < 4 || *(dash + 1) != "proc") continue;
    ProcMount m;
    bool strict_unknown = false;
    for (std::string_view opt : Split(*(dash + 3), ',')) {
      if (opt.rfind("hidepid=", 0) == 0) {
        auto v = HidepidValue(opt.substr(8));
        if (v) m.hidepid = *v;
        else strict_unknown = true;
      } else if (opt.rfind("gid=", 0) == 0) {
        if (auto g = ParseInt(opt.substr(4)); g && *g >= 0 && *g <= UINT32_MAX) m.gid = static_cast<uint32_t>(*g);
      }
    }
    if (strict_unknown) m.hidepid = 2;  // a spelling we do not know: assume the strictest
    found = m;                          // a later mount over the same point hides earlier ones
  }
  return found;
}

ProcessView ViewOf(const CallerView& caller, std::optional<uint32_t> process_uid) {
  if (!caller.same_pid_namespace) return ProcessView::kHidden;
  if (caller.uid == 0) return ProcessView::kFull;  // CAP_SYS_PTRACE reads every /proc/<pid>
  if (caller.proc.hidepid == 0) return ProcessView::kFull;
  if (process_uid && *process_uid == caller.uid) return ProcessView::kFull;
  if (caller.proc.gid &&
      std::find(caller.groups.begin(), caller.groups.end(), *caller.proc.gid) != caller.groups.end()) {
    return ProcessView::kFull;
  }
  return caller.proc.hidepid == 1 ? ProcessView::kOwnerOnly : ProcessView::kHidden;
}

void FilterForCaller(model::MachineSnapshot& snap, const CallerView& caller) {
  for (auto& gpu : snap.gpus) {
    for (auto& p : gpu.processes) {
      if (!p.is_visible) continue;
      switch (ViewOf(caller, p.uid)) {
        case ProcessView::kFull:
          break;
        case ProcessView::kOwnerOnly:
          p.command.reset();
          p.start_time_unix.reset();
          break;
        case ProcessView::kHidden:
          p.is_visible = false;
          p.uid.reset();
          p.user.reset();
          p.command.reset();
          p.start_time_unix.reset();
          break;
      }
    }
  }
}

CallerView ReadCallerView(uint32_t uid, uint32_t gid, int32_t pid) {
  CallerView v;
  v.uid = uid;
  v.groups = {gid};
  if (pid <= 0) {  // no process to ask (a caller inside the daemon, tests): the daemon's /proc
    v.proc = ParseProcMount(ReadWholeFile("/proc/self/mountinfo").value_or("")).value_or(ProcMount{2, std::nullopt});
    return v;
  }
  const std::string dir = "/proc/" + std::to_string(pid);
  auto mounts = ReadWholeFile(dir + "/mountinfo");
  v.proc = (mounts ? ParseProcMount(*mounts) : std::nullopt).value_or(ProcMount{2, std::nullopt});
  if (auto status = ReadWholeFile(dir + "/status")) {
    for (std::string_view line : Split(*status, '\n')) {
      if (line.rfind("Groups:", 0) != 0) continue;
      for (std::string_view g : Split(Trim(line.substr(7)), ' ')) {
        if (auto n = ParseInt(Trim(g)); n && *n >= 0 && *n <= UINT32_MAX) v.groups.push_back(static_cast<uint32_t>(*n));
      }
    }
  }
  const std::string theirs = Link(dir + "/ns/pid"), ours = Link("/proc/self/ns/pid");
  v.same_pid_namespace = !theirs.empty() && theirs == ours;
  return v;
}

}  // namespace gpuman::daemon
