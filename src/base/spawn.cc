// Everything the child runs is in the anonymous namespace's "child side" below and uses
// only async-signal-safe calls on data the parent prepared (spawn.h).
#include "base/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "base/posix_error.h"

extern char** environ;

namespace gpuman {
namespace {

constexpr size_t kLateMax = 64 * 1024;   // bytes a LateStart may take on the barrier pipe
constexpr size_t kLateEnvMax = 256;      // environment entries it may add
constexpr size_t kSubjectMax = 1024;     // what a report says a failure concerned
constexpr int kMpolPreferred = 1;        // linux/mempolicy.h
#ifndef CLOSE_RANGE_CLOEXEC
constexpr unsigned kCloseRangeCloexec = 1U << 2;  // linux/close_range.h
#else
constexpr unsigned kCloseRangeCloexec = CLOSE_RANGE_CLOEXEC;
#endif

// clone3's argument (linux/sched.h, struct clone_args, Linux 5.7's size with `cgroup`),
// declared here rather than included: glibc's <sched.h> and the kernel's header clash.
struct CloneArgs {
  uint64_t flags = 0, pidfd = 0, child_tid = 0, parent_tid = 0, exit_signal = 0;
  uint64_t stack = 0, stack_size = 0, tls = 0, set_tid = 0, set_tid_size = 0, cgroup = 0;
};
constexpr uint64_t kCloneIntoCgroup = 0x200000000ULL;  // CLONE_INTO_CGROUP

// The only place that forks: every process gpuman starts comes through Spawn. With a
// cgroup descriptor the child is created in that cgroup (*into says whether it was): a raw
// clone3 like fork(2) (no shared memory, SIGCHLD at exit) but without glibc's fork
// handlers, which the child does not need: until exec it makes only async-signal-safe
// system calls. Errors that say "this kernel or hierarchy cannot" fall back to fork(2).
pid_t ForkProcess(int cgroup_fd = -1, bool* into = nullptr) {
#ifdef SYS_clone3
  if (cgroup_fd >= 0) {
    CloneArgs args;
    args.flags = kCloneIntoCgroup;
    args.exit_signal = SIGCHLD;
    args.cgroup = static_cast<uint64_t>(cgroup_fd);
    const long pid = syscall(SYS_clone3, &args, sizeof args);
    if (pid >= 0) {
      if (into != nullptr) *into = true;
      return static_cast<pid_t>(pid);
    }
    // ENOSYS: no clone3; E2BIG/EINVAL: no CLONE_INTO_CGROUP; EBADF: not a v2 cgroup;
    // EOPNOTSUPP: a threaded or domain-invalid cgroup; EPERM: seccomp. Anything else
    // (EAGAIN, ENOMEM) would fail a fork too.
    if (errno != ENOSYS && errno != E2BIG && errno != EINVAL && errno != EBADF && errno != EOPNOTSUPP &&
        errno != EPERM) {
      return -1;
    }
  }
#else
  (void)cgroup_fd;
#endif
  if (into != nullptr) *into = false;
  return fork();
}

// ---- Text in a fixed buffer: the failure messages, built the same way by the child (for
// its stderr note) and by the parent (for the Error), with no allocation.
struct Text {
  char buf[4096];
  size_t n = 0;
  Text& Add(const char* s, size_t len) {
    for (size_t i = 0; i < len && n < sizeof buf; ++i) buf[n++] = s[i];
    return *this;
  }
  Text& Add(const char* s) { return Add(s, std::strlen(s)); }
  Text& AddLower(const char* s) {
    for (; *s && n < sizeof buf; ++s) buf[n++] = (*s >= 'A' && *s <= 'Z') ? static_cast<char>(*s - 'A' + 'a') : *s;
    return *this;
  }
  std::string str() const { return std::string(buf, n); }  // parent only
};

bool HasSlash(const char* s) { return std::strchr(s, '/') != nullptr; }

bool IsNotThere(int err) { return err == ENOENT || err == ENOTDIR; }

void AddExecErrorText(Text& t, int err) {
  if (err == ENOEXEC) {
    t.Add("not an executable format (a script needs a #! line)");
  } else {
    t.AddLower(ErrnoDescription(err));
  }
}

// FindProgram's words for a search that failed: `subject` is the name (nothing to run) or
// the file found that cannot be run.
void FormatFindFailure(Text& t, const char* subject, int err, const char* search_path) {
  if (IsNotThere(err)) {
    if (*subject == '\0') {
      t.Add("command not found: the command is empty");
    } else if (HasSlash(subject)) {
      t.Add("command not found: ").Add(subject).Add(": no such file");
    } else {
      const size_t len = std::strlen(search_path);
      t.Add("command not found: ").Add(subject).Add(" (not in PATH ").Add(search_path, std::min<size_t>(len, 200));
      if (len > 200) t.Add("...");
      t.Add(")");
    }
    return;
  }
  t.Add("could not execute ").Add(subject).Add(": ").AddLower(ErrnoDescription(err));
}

void FormatExecFailure(Text& t, const char* program, int err) {
  t.Add(err == ENOENT ? "command not found: " : "could not execute ").Add(program).Add(": ");
  AddExecErrorText(t, err);
}

// ---- The PATH rule (SearchProgram), on plain buffers so that the child can run it.
int Usable(const char* file) {
  struct stat st{};
  if (stat(file, &st) != 0) return errno;
  if (S_ISDIR(st.st_mode)) return EISDIR;
  if (!S_ISREG(st.st_mode)) return EACCES;
  if (faccessat(AT_FDCWD, file, X_OK, AT_EACCESS) != 0) return errno;
  return 0;
}

void CopyOut(char* out, size_t cap, const char* s, size_t len) {
  len = std::min(len, cap - 1);
  std::memcpy(out, s, len);
  out[len] = '\0';
}

// 0 with `out` the program, or the errno with `out` what it concerns (ProgramSearch).
int SearchRaw(const char* name, const char* search_path, char* out, size_t cap) {
  const size_t name_len = std::strlen(name);
  CopyOut(out, cap, name, name_len);
  if (name_len == 0) return ENOENT;
  if (HasSlash(name)) return Usable(name);
  if (search_path == nullptr) search_path = kDefaultSearchPath;
  char candidate[PATH_MAX];
  int denied = 0;
  for (const char* p = search_path;;) {
    const char* end = p;
    while (*end != '\0' && *end != ':') ++end;
    const char* dir = p;
    size_t dir_len = static_cast<size_t>(end - p);
    if (dir_len == 0) dir = ".", dir_len = 1;  // an empty entry is the current directory
    if (dir_len + 1 + name_len < sizeof candidate) {
      std::memcpy(candidate, dir, dir_len);
      candidate[dir_len] = '/';
      std::memcpy(candidate + dir_len + 1, name, name_len + 1);
      const int err = Usable(candidate);
      if (err == 0) {
        CopyOut(out, cap, candidate, dir_len + 1 + name_len);
        return 0;
      }
      if (denied == 0 && err != ENOENT && err != ENOTDIR && err != ENAMETOOLONG && err != ELOOP) {
        denied = err;
        CopyOut(out, cap, candidate, dir_len + 1 + name_len);
      }
    }
    if (*end == '\0') break;
    p = end + 1;
  }
  if (denied != 0) return denied;
  CopyOut(out, cap, name, name_len);
  return ENOENT;
}

// ---- Child -> parent reports, one fixed-size record each (atomic: below PIPE_BUF).
enum : char { kReportPid = 'P', kReportReady = 'R', kReportFailed = 'F' };

struct Report {
  char kind = 0;
  int32_t step = 0;
  int32_t err = 0;
  int32_t pid = 0;
  char subject[kSubjectMax] = {};
};
static_assert(sizeof(Report) < PIPE_BUF);

bool WriteAll(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// Reads a whole record: true, or false at EOF (a partial record counts as EOF).
bool ReadReport(int fd, Report& report) {
  char* p = reinterpret_cast<char*>(&report);
  size_t left = sizeof report;
  while (left > 0) {
    const ssize_t r = read(fd, p, left);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    left -= static_cast<size_t>(r);
  }
  return true;
}

// Everything the child needs, as plain data made before the fork.
struct Plan {
  const SpawnSpec* spec = nullptr;
  char** argv = nullptr;
  char** envp = nullptr;        // capacity for kLateEnvMax more entries
  size_t env_count = 0;
  const char* program = nullptr;  // null: search for argv[0]
  const char* search_path = nullptr;
  const char* cwd = nullptr;
  const char* uid_text = "";
  const char* gid_text = "";
  const gid_t* groups = nullptr;
  size_t group_count = 0;
  int* keep_sources = nullptr;    // one slot per spec->keep_fds entry
  char* late = nullptr;           // kLateMax bytes
  int max_fd = 1024;
  sigset_t exec_mask;
  int report = -1;   // write end
  int barrier = -1;  // read end, or -1
};

// ---- The child side: async-signal-safe only.
bool IsProgramStep(SpawnStep step) { return step == SpawnStep::kFindProgram || step == SpawnStep::kExec; }

[[noreturn]] void ChildFail(const Plan& plan, SpawnStep step, int err, const char* subject, bool barrier_passed = false) {
  Report report;
  report.kind = kReportFailed;
  report.step = static_cast<int32_t>(step);
  report.err = err;
  CopyOut(report.subject, sizeof report.subject, subject, std::strlen(subject));
  WriteAll(plan.report, &report, sizeof report);
  if (plan.spec->note_failure_on_stderr && IsProgramStep(step)) {
    Text note;
    note.Add("gpuman: ");
    if (step == SpawnStep::kFindProgram) {
      FormatFindFailure(note, subject, err, plan.search_path);
    } else {
      FormatExecFailure(note, subject, err);
    }
    note.Add("\n");
    WriteAll(2, note.buf, note.n);
  }
  // Held at a barrier: stay until the parent lets go or gives up, so the pid it may have
  // recorded stays ours until it knows.
  if (plan.barrier >= 0 && !barrier_passed) {
    char sink[256];
    while (true) {
      const ssize_t r = read(plan.barrier, sink, sizeof sink);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
    }
  }
  if (IsProgramStep(step)) _exit(err == ENOENT ? 127 : 126);
  _exit(125);
}

void DefaultSignals(const SpawnSpec& spec) {
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  if (spec.all_signals_default) {
    for (int sig = 1; sig < NSIG; ++sig) {
      if (sig != SIGKILL && sig != SIGSTOP) sigaction(sig, &dfl, nullptr);
    }
  }
  for (int sig : spec.default_signals) sigaction(sig, &dfl, nullptr);
}

// A copy of `fd` at `floor` or above (CLOEXEC), or -1.
int MoveUp(int fd, int floor) { return fcntl(fd, F_DUPFD_CLOEXEC, floor); }

void SetUpDescriptors(Plan& plan) {
  const SpawnSpec& spec = *plan.spec;
  int floor = 10;
  for (const auto& [target, source] : spec.keep_fds) floor = std::max(floor, target + 1);
  // Our own pipes first, out of the way of every target.
  plan.report = MoveUp(plan.report, floor);
  if (plan.report < 0) _exit(125);  // nowhere to say why
  if (plan.barrier >= 0) {
    plan.barrier = MoveUp(plan.barrier, floor);
    if (plan.barrier < 0) ChildFail(plan, SpawnStep::kDescriptors, errno, "");
  }
  const SpawnFd* std_fds[3] = {&spec.stdin_fd, &spec.stdout_fd, &spec.stderr_fd};
  const SpawnStep steps[3] = {SpawnStep::kStdin, SpawnStep::kStdout, SpawnStep::kStderr};
  int sources[3] = {-1, -1, -1};
  for (int i = 0; i < 3; ++i) {
    const SpawnFd& want = *std_fds[i];
    int fd = -1;
    switch (want.kind) {
      case SpawnFd::Kind::kInherit:
        continue;
      case SpawnFd::Kind::kNull:
        fd = open("/dev/null", (i == 0 ? O_RDONLY : O_WRONLY) | O_CLOEXEC);
        if (fd < 0) ChildFail(plan, steps[i], errno, "/dev/null");
        break;
      case SpawnFd::Kind::kFile:
        fd = open(want.path.c_str(), want.flags | O_CLOEXEC, want.mode);
        if (fd < 0 && want.or_null) fd = open("/dev/null", (i == 0 ? O_RDONLY : O_WRONLY) | O_CLOEXEC);
        if (fd < 0) ChildFail(plan, steps[i], errno, want.path.c_str());
        break;
      case SpawnFd::Kind::kFd:
        fd = want.fd;
        break;
      case SpawnFd::Kind::kSameAsStdout:
        fd = sources[1] >= 0 ? sources[1] : 1;
        break;
    }
    sources[i] = MoveUp(fd, floor);
    if (sources[i] < 0) ChildFail(plan, steps[i], errno, "");
  }
  for (size_t k = 0; k < spec.keep_fds.size(); ++k) {
    plan.keep_sources[k] = MoveUp(spec.keep_fds[k].second, floor);
    if (plan.keep_sources[k] < 0) ChildFail(plan, SpawnStep::kDescriptors, errno, "");
  }
  for (int i = 0; i < 3; ++i) {
    if (sources[i] >= 0 && dup2(sources[i], i) < 0) ChildFail(plan, steps[i], errno, "");
  }
  for (size_t k = 0; k < spec.keep_fds.size(); ++k) {
    if (dup2(plan.keep_sources[k], spec.keep_fds[k].first) < 0) ChildFail(plan, SpawnStep::kDescriptors, errno, "");
  }
  if (spec.close_other_fds) {
    // Marked CLOEXEC rather than closed, so our pipes stay open until the exec.
    if (syscall(SYS_close_range, 3U, ~0U, kCloseRangeCloexec) != 0) {
      for (int fd = 3; fd < plan.max_fd; ++fd) fcntl(fd, F_SETFD, FD_CLOEXEC);
    }
    for (const auto& [target, source] : spec.keep_fds) fcntl(target, F_SETFD, 0);
  }
}

// Digits to an int; -1 when there are none or too many.
int ParseSmallInt(const char* s) {
  int v = 0;
  if (*s == '\0') return -1;
  for (; *s; ++s) {
    if (*s < '0' || *s > '9' || v > 100000000) return -1;
    v = v * 10 + (*s - '0');
  }
  return v;
}

// The LateStart, as Encode() below wrote it: "g\0", then "E" KEY=VALUE | "C" cpu | "N" node,
// each ending in '\0', then the end mark ".\0".
void ApplyLate(Plan& plan, size_t size) {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  bool bind_cpus = false;
  int node = -1;
  char* p = plan.late;
  char* const end = plan.late + size;
  while (p < end) {
    char* field = p;
    while (p < end && *p != '\0') ++p;
    if (p == end) break;  // unterminated: Encode never does that
    ++p;
    const char kind = field[0];
    char* value = field + 1;
    if (kind == 'E' && *value != '\0') {
      size_t key_len = 0;
      while (value[key_len] != '\0' && value[key_len] != '=') ++key_len;
      size_t kept = 0;
      for (size_t i = 0; i < plan.env_count; ++i) {
        const char* e = plan.envp[i];
        const bool same = std::strncmp(e, value, key_len) == 0 && e[key_len] == '=';
        if (!same) plan.envp[kept++] = plan.envp[i];
      }
      plan.env_count = kept;
      plan.envp[plan.env_count++] = value;
      plan.envp[plan.env_count] = nullptr;
    } else if (kind == 'C') {
      const int cpu = ParseSmallInt(value);
      if (cpu >= 0 && cpu < CPU_SETSIZE) {
        CPU_SET(cpu, &cpus);
        bind_cpus = true;
      }
    } else if (kind == 'N') {
      node = ParseSmallInt(value);
    }
  }
  if (bind_cpus) sched_setaffinity(0, sizeof cpus, &cpus);
  if (node >= 0 && node < 64) {
    unsigned long mask = 1UL << node;
    syscall(SYS_set_mempolicy, kMpolPreferred, &mask, sizeof(mask) * 8 + 1);
  }
}

[[noreturn]] void ChildMain(Plan& plan) {
  const SpawnSpec& spec = *plan.spec;
  if (spec.detached) {
    if (setsid() < 0) ChildFail(plan, SpawnStep::kSession, errno, "");
    const pid_t child = ForkProcess();
    if (child < 0) ChildFail(plan, SpawnStep::kFork, errno, "");
    if (child > 0) {  // the intermediate: say who the child is, and go
      Report report;
      report.kind = kReportPid;
      report.pid = child;
      WriteAll(plan.report, &report, sizeof report);
      _exit(0);
    }
  }
  if (spec.group == SpawnSpec::Group::kNewSession && setsid() < 0) ChildFail(plan, SpawnStep::kSession, errno, "");
  if (spec.group == SpawnSpec::Group::kNewProcessGroup && setpgid(0, 0) != 0) {
    ChildFail(plan, SpawnStep::kProcessGroup, errno, "");
  }
  if (spec.group == SpawnSpec::Group::kJoinProcessGroup && setpgid(0, spec.process_group) != 0) {
    ChildFail(plan, SpawnStep::kProcessGroup, errno, "");
  }
  DefaultSignals(spec);
  // Raw system calls: this thread is the only one, and glibc's wrappers would try to
  // change the credentials of threads the parent had.
  if (spec.groups && syscall(SYS_setgroups, plan.group_count, plan.groups) != 0) {
    ChildFail(plan, SpawnStep::kGroups, errno, "");
  }
  if (spec.gid && syscall(SYS_setgid, *spec.gid) != 0) ChildFail(plan, SpawnStep::kGid, errno, plan.gid_text);
  if (spec.uid && syscall(SYS_setuid, *spec.uid) != 0) ChildFail(plan, SpawnStep::kUid, errno, plan.uid_text);
  if (spec.uid && *spec.uid != 0 && syscall(SYS_setuid, 0) == 0) {
    ChildFail(plan, SpawnStep::kKeepsRoot, EPERM, plan.uid_text);
  }
  if (plan.cwd != nullptr && chdir(plan.cwd) != 0) ChildFail(plan, SpawnStep::kChdir, errno, plan.cwd);
  SetUpDescriptors(plan);
  char found[PATH_MAX];
  const char* program = plan.program;
  if (program == nullptr) {
    const int err = SearchRaw(plan.argv[0], plan.search_path, found, sizeof found);
    if (err != 0) ChildFail(plan, SpawnStep::kFindProgram, err, found);
    program = found;
  }
  if (plan.barrier >= 0) {
    Report ready;
    ready.kind = kReportReady;
    WriteAll(plan.report, &ready, sizeof ready);
    // Up to the message's end mark, not to EOF: a sibling forked later (the ranks of
    // `run --per-gpu`) holds this barrier's write end open until its own exec.
    size_t got = 0;
    bool complete = false;
    while (got < kLateMax && !complete) {
      const ssize_t r = read(plan.barrier, plan.late + got, kLateMax - got);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      got += static_cast<size_t>(r);
      complete = got >= 3 && plan.late[got - 3] == '\0' && plan.late[got - 2] == '.' && plan.late[got - 1] == '\0';
    }
    if (!complete) _exit(125);  // the parent went away or gave up: never run unrecorded
    close(plan.barrier);
    plan.barrier = -1;
    ApplyLate(plan, got);
  }
  sigprocmask(SIG_SETMASK, &plan.exec_mask, nullptr);
  execve(program, plan.argv, plan.envp);
  ChildFail(plan, SpawnStep::kExec, errno, program, true);
}

std::string Encode(const LateStart& late) {
  std::string out = "g";
  out += '\0';
  for (const auto& e : late.env) out += "E" + e + '\0';
  for (int cpu : late.cpu_affinity) out += "C" + std::to_string(cpu) + '\0';
  if (late.preferred_numa_node) out += "N" + std::to_string(*late.preferred_numa_node) + '\0';
  out += ".";  // the end: no other field is "." alone
  out += '\0';
  return out;
}

// All of `data` through WriteNoSigpipe (the barrier's message; its reader may be gone).
bool WriteAllNoSigpipe(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    const ssize_t w = WriteNoSigpipe(fd, data.data() + off, data.size() - off);
    if (w <= 0) return false;
    off += static_cast<size_t>(w);
  }
  return true;
}

Error Failed(SpawnFailure f, SpawnFailure* out) {
  Error error = f.ToError();
  if (out != nullptr) *out = std::move(f);
  return error;
}

}  // namespace

ssize_t WriteNoSigpipe(int fd, const char* data, size_t n) {
  sigset_t pipe_set, old_set, pending;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  sigpending(&pending);
  const bool was_pending = sigismember(&pending, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old_set);
  ssize_t w;
  do {
    w = ::write(fd, data, n);
  } while (w < 0 && errno == EINTR);
  const int err = errno;
  if (w < 0 && err == EPIPE && !was_pending) {
    timespec zero = {0, 0};
    sigtimedwait(&pipe_set, nullptr, &zero);
  }
  pthread_sigmask(SIG_SETMASK, &old_set, nullptr);
  errno = err;
  return w;
}

ProgramSearch SearchProgram(const std::string& name, const std::optional<std::string>& search_path) {
  char out[PATH_MAX];
  ProgramSearch search;
  search.err = SearchRaw(name.c_str(), search_path ? search_path->c_str() : nullptr, out, sizeof out);
  search.path = out;
  return search;
}

Result<std::string> FindProgram(const std::string& name, const std::optional<std::string>& search_path) {
  ProgramSearch search = SearchProgram(name, search_path);
  if (search.err == 0) return search.path;
  SpawnFailure failure{SpawnStep::kFindProgram, search.err, search.path, search_path.value_or(kDefaultSearchPath)};
  return failure.ToError();
}

std::string ExecErrorText(int err) {
  Text text;
  AddExecErrorText(text, err);
  return text.str();
}

std::optional<std::string> EnvValue(const std::vector<std::string>& env, const std::string& name) {
  std::optional<std::string> value;
  for (const auto& e : env) {
    if (e.size() > name.size() && e.compare(0, name.size(), name) == 0 && e[name.size()] == '=') {
      value = e.substr(name.size() + 1);
    }
  }
  return value;
}

Error SpawnFailure::ToError() const {
  Text text;
  switch (step) {
    case SpawnStep::kFindProgram:
      FormatFindFailure(text, subject.c_str(), err, search_path.c_str());
      return Error{IsNotThere(err) ? ErrorCode::kNotFound : ErrorCode::kPermissionDenied, text.str()};
    case SpawnStep::kExec:
      FormatExecFailure(text, subject.c_str(), err);
      return Error{err == ENOENT ? ErrorCode::kNotFound : ErrorCode::kPermissionDenied, text.str()};
    case SpawnStep::kKeepsRoot:
      return Error{ErrorCode::kPermissionDenied, "setuid " + subject + ": root privileges could be regained"};
    case SpawnStep::kEnded:
      return Error{ErrorCode::kIo, "the process ended before it was ready"};
    case SpawnStep::kPipe: return PosixError(ErrorCode::kIo, "pipe", err);
    case SpawnStep::kFork: return PosixError(ErrorCode::kIo, "fork", err);
    case SpawnStep::kRelease: return PosixError(ErrorCode::kIo, "release", err);
    case SpawnStep::kSession: return PosixError("setsid", err);
    case SpawnStep::kProcessGroup: return PosixError("setpgid", err);
    case SpawnStep::kGroups: return PosixError("setgroups", err);
    case SpawnStep::kGid: return PosixError("setgid " + subject, err);
    case SpawnStep::kUid: return PosixError("setuid " + subject, err);
    case SpawnStep::kChdir: return PosixError("chdir " + subject, err);
    case SpawnStep::kStdin: return PosixError(subject.empty() ? "stdin" : "open " + subject, err);
    case SpawnStep::kStdout: return PosixError(subject.empty() ? "stdout" : "open " + subject, err);
    case SpawnStep::kStderr: return PosixError(subject.empty() ? "stderr" : "open " + subject, err);
    case SpawnStep::kDescriptors: return PosixError("dup2", err);
  }
  return PosixError("spawn", err);
}

Status SpawnedProcess::ReadReports(bool until_ready, SpawnFailure* failure) {
  Report report;
  while (report_ && ReadReport(report_.get(), report)) {
    if (report.kind == kReportReady) {
      if (until_ready) return {};
      continue;
    }
    if (report.kind != kReportFailed) continue;
    report.subject[sizeof report.subject - 1] = '\0';
    report_.reset();
    return Failed(SpawnFailure{static_cast<SpawnStep>(report.step), report.err, report.subject,
                               search_path_.value_or(kDefaultSearchPath)},
                  failure);
  }
  report_.reset();
  if (until_ready) return Failed(SpawnFailure{SpawnStep::kEnded, 0, name_, {}}, failure);
  return {};  // EOF: the exec closed the pipe
}

Status SpawnedProcess::WaitReady(SpawnFailure* failure) { return ReadReports(true, failure); }

Status SpawnedProcess::Release(const LateStart& late, SpawnFailure* failure) {
  const std::string message = Encode(late);
  if (message.size() > kLateMax || late.env.size() > kLateEnvMax) {
    barrier_.reset();  // the child exits without running
    if (failure != nullptr) *failure = SpawnFailure{SpawnStep::kRelease, E2BIG, name_, {}};
    return MakeError(ErrorCode::kInvalidArgument, "too much to hand a starting process (" +
                                                      std::to_string(message.size()) + " bytes)");
  }
  const bool sent = barrier_ && WriteAllNoSigpipe(barrier_.get(), message);
  barrier_.reset();
  Status outcome = ReadReports(false, failure);
  if (outcome && !sent) return Failed(SpawnFailure{SpawnStep::kEnded, 0, name_, {}}, failure);
  return outcome;
}

Status SpawnedProcess::ExecOutcome(SpawnFailure* failure) { return ReadReports(false, failure); }

Result<SpawnedProcess> Spawn(const SpawnSpec& spec, SpawnFailure* failure) {
  if (spec.argv.empty()) return MakeError(ErrorCode::kInvalidArgument, "nothing to run");
  if (spec.group == SpawnSpec::Group::kJoinProcessGroup && spec.process_group <= 0) {
    return MakeError(ErrorCode::kInvalidArgument, "no process group to join");
  }
  // Everything the child touches, made now.
  std::vector<std::string> env_storage;
  if (spec.env) {
    env_storage = *spec.env;
  } else {
    for (char** e = environ; *e != nullptr; ++e) env_storage.emplace_back(*e);
  }
  std::vector<char*> envp(env_storage.size() + kLateEnvMax + 1, nullptr);
  for (size_t i = 0; i < env_storage.size(); ++i) envp[i] = env_storage[i].data();
  std::vector<std::string> argv_storage = spec.argv;
  std::vector<char*> argv;
  for (auto& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::optional<std::string> search_path = spec.search_path;
  if (!search_path) search_path = EnvValue(env_storage, "PATH");
  const std::string uid_text = spec.uid ? std::to_string(*spec.uid) : "";
  const std::string gid_text = spec.gid ? std::to_string(*spec.gid) : "";
  std::vector<int> keep_sources(spec.keep_fds.size(), -1);
  std::vector<char> late(spec.start_barrier ? kLateMax : 0);

  Plan plan;
  plan.spec = &spec;
  plan.argv = argv.data();
  plan.envp = envp.data();
  plan.env_count = env_storage.size();
  plan.program = spec.program.empty() ? nullptr : spec.program.c_str();
  plan.search_path = search_path ? search_path->c_str() : nullptr;
  plan.cwd = spec.cwd.empty() ? nullptr : spec.cwd.c_str();
  plan.uid_text = uid_text.c_str();
  plan.gid_text = gid_text.c_str();
  if (spec.groups) {
    plan.groups = spec.groups->data();
    plan.group_count = spec.groups->size();
  }
  plan.keep_sources = keep_sources.data();
  plan.late = late.data();
  if (spec.signal_mask) {
    plan.exec_mask = *spec.signal_mask;
  } else {
    sigemptyset(&plan.exec_mask);
  }
  if (struct rlimit rl; getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    plan.max_fd = static_cast<int>(std::min<rlim_t>(rl.rlim_cur, 65536));
  }

  auto report = MakePipe();
  if (!report) return report.error();
  Pipe barrier;
  if (spec.start_barrier) {
    auto made = MakePipe();
    if (!made) return made.error();
    barrier = std::move(*made);
  }
  plan.report = report->write.get();
  plan.barrier = barrier.read.get();

  bool in_cgroup = false;
  const pid_t pid = ForkProcess(spec.detached ? -1 : spec.cgroup_fd, &in_cgroup);
  if (pid < 0) {
    const int err = errno;
    return Failed(SpawnFailure{SpawnStep::kFork, err, {}, {}}, failure);
  }
  if (pid == 0) {
    // Without the parent's end of the barrier the child sees EOF when the parent goes.
    if (barrier.write) close(barrier.write.get());
    ChildMain(plan);
  }
  report->write.reset();
  barrier.read.reset();

  SpawnedProcess child;
  child.pid_ = pid;
  child.in_cgroup_ = in_cgroup;
  child.report_ = std::move(report->read);
  child.barrier_ = std::move(barrier.write);
  child.name_ = spec.argv[0];
  child.search_path_ = search_path;
  if (spec.detached) {
    Report first;
    const bool got = ReadReport(child.report_.get(), first);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (got && first.kind == kReportFailed) {
      first.subject[sizeof first.subject - 1] = '\0';
      return Failed(SpawnFailure{static_cast<SpawnStep>(first.step), first.err, first.subject, {}}, failure);
    }
    if (!got || first.kind != kReportPid || first.pid <= 0) {
      return Failed(SpawnFailure{SpawnStep::kFork, ECHILD, {}, {}}, failure);
    }
    child.pid_ = first.pid;
  } else if (spec.group == SpawnSpec::Group::kNewProcessGroup) {
    setpgid(pid, pid);  // also done by the child; whichever runs first wins the race
  } else if (spec.group == SpawnSpec::Group::kJoinProcessGroup) {
    setpgid(pid, spec.process_group);  // the same race
  }
  return child;
}

}  // namespace gpuman
