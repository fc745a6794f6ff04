#include "confine/cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <sstream>

#include "base/file.h"
#include "base/posix_error.h"
#include "base/strings.h"
#include "base/unique_fd.h"

namespace gpuman::confine {
namespace {

constexpr char kSystemStateDir[] = "/var/lib/gpuman";

// A mount of a cgroup hierarchy: where it is mounted and which cgroup is its root.
struct CgroupMount {
  std::string point;
  std::string root;
  bool favordynmods = false;  // cgroup2's super-options
};

// mountinfo: "id parent major:minor root point options ... - fstype source super-options".
std::optional<CgroupMount> FindMount(const std::string& mountinfo, CgroupVersion version) {
  auto text = ReadWholeFile(mountinfo);
  if (!text) return std::nullopt;
  std::istringstream lines(*text);
  std::string line;
  while (std::getline(lines, line)) {
    const auto dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream head(line.substr(0, dash)), tail(line.substr(dash + 3));
    std::string id, parent, dev, root, point, fstype, source, super;
    head >> id >> parent >> dev >> root >> point;
    tail >> fstype >> source >> super;
    if (version == CgroupVersion::kV2 && fstype == "cgroup2") {
      const auto opts = Split(super, ',');
      return CgroupMount{point, root, std::find(opts.begin(), opts.end(), "favordynmods") != opts.end()};
    }
    if (version == CgroupVersion::kV1 && fstype == "cgroup") {
      for (const auto& opt : Split(super, ',')) {
        if (opt == "devices") return CgroupMount{point, root};
      }
    }
  }
  return std::nullopt;
}

// This process's cgroup in the hierarchy: "0::/path" (v2) or "N:devices:/path" (v1).
std::optional<std::string> OwnCgroup(const std::string& self_cgroup, CgroupVersion version) {
  auto text = ReadWholeFile(self_cgroup);
  if (!text) return std::nullopt;
  std::istringstream lines(*text);
  std::string line;
  while (std::getline(lines, line)) {
    const auto a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    const std::string path = line.substr(b + 1);
    if (version == CgroupVersion::kV2 && line.compare(0, a, "0") == 0 && controllers.empty()) return path;
    if (version == CgroupVersion::kV1) {
      for (const auto& c : Split(controllers, ',')) {
        if (c == "devices") return path;
      }
    }
  }
  return std::nullopt;
}

std::string JoinPath(const std::string& a, const std::string& b) {
  if (b.empty() || b == "/") return a;
  if (!a.empty() && a.back() == '/') return a + (b.front() == '/' ? b.substr(1) : b);
  return a + (b.front() == '/' ? b : "/" + b);
}

Status WriteTo(const std::string& path, const std::string& text) {
  UniqueFd fd(open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd) return PosixError("open " + path, errno);
  ssize_t n;
  do {
    n = write(fd.get(), text.data(), text.size());
  } while (n < 0 && errno == EINTR);
  if (n < 0) return PosixError("write '" + std::string(Trim(text)) + "' to " + path, errno);
  return {};
}

long Bpf(int cmd, bpf_attr* attr) { return syscall(__NR_bpf, cmd, attr, sizeof *attr); }

// Loads the device program for `rule` and attaches it to `dir`.
Status AttachDeviceProgram(const std::string& dir, const DeviceRule& rule) {
  const std::vector<bpf_insn> program = BuildDeviceProgram(rule);
  static const char kLicense[] = "GPL";  // the kernel's word for "no restricted helpers needed"; none are used
  bpf_attr load{};
  load.prog_type = BPF_PROG_TYPE_CGROUP_DEVICE;
  load.insns = reinterpret_cast<uint64_t>(program.data());
  load.insn_cnt = static_cast<uint32_t>(program.size());
  load.license = reinterpret_cast<uint64_t>(kLicense);
  UniqueFd prog(static_cast<int>(Bpf(BPF_PROG_LOAD, &load)));
  if (!prog) return PosixError("load a cgroup device program", errno);
  UniqueFd cgroup(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!cgroup) return PosixError("open " + dir, errno);
  bpf_attr attach{};
  attach.target_fd = static_cast<uint32_t>(cgroup.get());
  attach.attach_bpf_fd = static_cast<uint32_t>(prog.get());
  attach.attach_type = BPF_CGROUP_DEVICE;
  attach.attach_flags = BPF_F_ALLOW_MULTI;
  if (Bpf(BPF_PROG_ATTACH, &attach) != 0) return PosixError("attach a device program to " + dir, errno);
  return {};  // the attachment keeps the program while the cgroup exists
}

Status WriteDenyList(const std::string& dir, const DeviceRule& rule) {
  for (uint32_t m : DeniedGpuMinors(rule)) {
    if (Status s = WriteTo(dir + "/devices.deny", "c " + std::to_string(kNvidiaMajor) + ":" + std::to_string(m) + " rwm");
        !s) {
      return s;
    }
  }
  return {};
}

Status MakeCgroup(const Confinement& c, const std::string& dir, const DeviceRule& rule) {
  if (mkdir(dir.c_str(), 0755) != 0) return PosixError("mkdir " + dir, errno);
  Status applied = c.version == CgroupVersion::kV2 ? AttachDeviceProgram(dir, rule) : WriteDenyList(dir, rule);
  if (!applied) {
    rmdir(dir.c_str());
    return applied;
  }
  return {};
}

void SleepMs(int ms) {
  timespec ts{ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

void SignalEach(const std::string& dir, int sig) {
  for (pid_t pid : CgroupProcesses(dir)) kill(pid, sig);
}

// Polls until `dir` is empty or `ms` pass. Our own exited children are reaped meanwhile:
// a zombie stays in its cgroup until reaped, and the callers are the subreapers of what
// they end (docs/enforce.md).
bool WaitEmpty(const std::string& dir, int ms) {
  for (int waited = 0;; waited += 20) {
    while (waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    if (!CgroupHasProcesses(dir)) return true;
    if (waited >= ms) return false;
    SleepMs(20);
  }
}

}  // namespace

Result<DevicesSetting> ParseDevicesSetting(std::string_view text) {
  if (text == "cgroup") return DevicesSetting::kCgroup;
  if (text == "cgroup-v2") return DevicesSetting::kCgroupV2;
  if (text == "cgroup-v1") return DevicesSetting::kCgroupV1;
  if (text == "off") return DevicesSetting::kOff;
  return MakeError(ErrorCode::kInvalidArgument, "devices must be \"cgroup\", \"cgroup-v2\", \"cgroup-v1\" or \"off\", not \"" +
                                                    std::string(text) + "\"");
}

std::string_view DevicesSettingName(DevicesSetting s) {
  switch (s) {
    case DevicesSetting::kCgroup: return "cgroup";
    case DevicesSetting::kCgroupV2: return "cgroup-v2";
    case DevicesSetting::kCgroupV1: return "cgroup-v1";
    case DevicesSetting::kOff: return "off";
  }
  return "off";
}

std::string Confinement::Describe() const {
  if (!on) return "off: " + why_off;
  return version == CgroupVersion::kV2 ? "cgroup v2 device programs in " + base : "cgroup v1 device lists in " + base;
}

std::string BaseName(const std::string& state_dir) {
  if (state_dir == kSystemStateDir) return "gpuman-jobs";
  uint32_t h = 2166136261u;  // FNV-1a of the state directory
  for (unsigned char ch : state_dir) {
    h ^= ch;
    h *= 16777619u;
  }
  char hex[9];
  snprintf(hex, sizeof hex, "%08x", h);
  return std::string("gpuman-jobs-") + hex;
}

Confinement PrepareConfinement(DevicesSetting setting, uid_t euid, const std::string& state_dir,
                               const CgroupSystem& system) {
  Confinement c;
  if (setting == DevicesSetting::kOff) {
    c.why_off = "[enforce] devices = \"off\"";
    return c;
  }
  if (euid != 0) {
    c.why_off = "the daemon does not run as root";
    return c;
  }
  std::vector<CgroupVersion> tries;
  if (setting != DevicesSetting::kCgroupV1) tries.push_back(CgroupVersion::kV2);
  if (setting != DevicesSetting::kCgroupV2) tries.push_back(CgroupVersion::kV1);
  std::vector<std::string> why;
  for (CgroupVersion v : tries) {
    const char* name = v == CgroupVersion::kV2 ? "cgroup v2" : "cgroup v1 devices";
    auto mount = FindMount(system.mountinfo, v);
    auto own = OwnCgroup(system.self_cgroup, v);
    if (!mount || !own) {
      why.push_back(std::string(name) + " is not mounted");
      continue;
    }
    // Our cgroup as seen from the mount (a container's mount root is its own cgroup).
    std::string rel = *own;
    if (mount->root != "/" && rel.compare(0, mount->root.size(), mount->root) == 0) rel = rel.substr(mount->root.size());
    const std::string base = JoinPath(JoinPath(mount->point, rel), BaseName(state_dir));
    if (mkdir(base.c_str(), 0755) != 0 && errno != EEXIST) {
      why.push_back(std::string(name) + ": " + PosixErrorText(errno) + " making " + base);
      continue;
    }
    Confinement probe;
    probe.on = true;
    probe.version = v;
    probe.base = base;
    // The kernel's cgroup lock is one for every hierarchy; only cgroup2's mount sets it.
    if (auto v2 = FindMount(system.mountinfo, CgroupVersion::kV2)) probe.favordynmods = v2->favordynmods;
    const std::string dir = base + "/probe-" + std::to_string(getpid());
    rmdir(dir.c_str());
    if (Status made = MakeCgroup(probe, dir, DeviceRule{}); !made) {
      why.push_back(std::string(name) + ": " + made.error().message);
      continue;
    }
    rmdir(dir.c_str());
    return probe;
  }
  c.why_off = Join(why, "; ");
  return c;
}

std::string LeaseCgroup(const Confinement& c, int64_t lease_id) {
  return c.base + "/lease-" + std::to_string(lease_id);
}

Result<std::string> CreateLeaseCgroup(const Confinement& c, int64_t lease_id, const DeviceRule& rule) {
  if (!c.on) return MakeError(ErrorCode::kUnavailable, "device confinement is off");
  const std::string dir = LeaseCgroup(c, lease_id);
  if (access(dir.c_str(), F_OK) == 0) {
    if (CgroupHasProcesses(dir)) {
      return MakeError(ErrorCode::kConflict, "the cgroup " + dir + " of an earlier lease " + std::to_string(lease_id) +
                                                 " still has processes");
    }
    if (rmdir(dir.c_str()) != 0) return PosixError("rmdir " + dir, errno);
  }
  if (Status made = MakeCgroup(c, dir, rule); !made) return made.error();
  return dir;
}

Status MoveIntoCgroup(const std::string& dir, pid_t pid) {
  return WriteTo(dir + "/cgroup.procs", std::to_string(pid));
}

std::vector<pid_t> CgroupProcesses(const std::string& dir) {
  std::vector<pid_t> pids;
  auto text = ReadWholeFile(dir + "/cgroup.procs");
  if (!text) return pids;
  std::istringstream in(*text);
  long pid;
  while (in >> pid) pids.push_back(static_cast<pid_t>(pid));
  return pids;
}

bool CgroupHasProcesses(const std::string& dir) {
  auto text = ReadWholeFile(dir + "/cgroup.procs");
  return text && text->find_first_not_of(" \n") != std::string::npos;
}

bool EndCgroupProcesses(const std::string& dir, int grace_ms) {
  if (!CgroupHasProcesses(dir)) return true;
  SignalEach(dir, SIGTERM);
  // A process forked between the read and the signal gets the next round.
  for (int waited = 0; waited < grace_ms; waited += 100) {
    if (WaitEmpty(dir, std::min(100, grace_ms - waited))) return true;
    SignalEach(dir, SIGTERM);
  }
  const bool kill_file = static_cast<bool>(WriteTo(dir + "/cgroup.kill", "1"));
  for (int round = 0; round < 50; ++round) {  // about 5 s
    if (!kill_file) SignalEach(dir, SIGKILL);
    if (WaitEmpty(dir, 100)) return true;
    if (kill_file) (void)WriteTo(dir + "/cgroup.kill", "1");
  }
  return !CgroupHasProcesses(dir);
}

Status RemoveCgroup(const std::string& dir) {
  if (rmdir(dir.c_str()) == 0 || errno == ENOENT) return {};
  if (errno == EBUSY) return MakeError(ErrorCode::kConflict, "the cgroup " + dir + " still has processes");
  return PosixError("rmdir " + dir, errno);
}

void RemoveEmptyCgroups(const Confinement& c) {
  if (!c.on) return;
  for (int64_t id : LeaseCgroupIds(c)) {
    const std::string dir = LeaseCgroup(c, id);
    if (!CgroupHasProcesses(dir)) (void)RemoveCgroup(dir);
  }
  rmdir(c.base.c_str());
}

std::vector<int64_t> LeaseCgroupIds(const Confinement& c) {
  std::vector<int64_t> ids;
  if (!c.on) return ids;
  DIR* d = opendir(c.base.c_str());
  if (!d) return ids;
  while (dirent* e = readdir(d)) {
    if (strncmp(e->d_name, "lease-", 6) != 0) continue;
    char* end = nullptr;
    long long id = strtoll(e->d_name + 6, &end, 10);
    if (end && *end == '\0' && id > 0) ids.push_back(id);
  }
  closedir(d);
  return ids;
}

}  // namespace gpuman::confine
