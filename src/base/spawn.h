// Spawn: the one way gpuman starts a process (the job supervisor and its job, `run`, the
// Slurm tool runner, output capture, alert hooks). A SpawnSpec says what the child gets
// (argv, never a shell; its whole environment; directory; descriptors; session or process
// group; user, group and supplementary groups; signal dispositions and mask), and Spawn
// forks and execs it.
//
// Between fork and exec the child makes only async-signal-safe calls (the parent may have
// threads: the daemon does): argv, the environment, paths and buffers are prepared as char
// arrays before the fork, the set-up steps are plain system calls, and the PATH search and
// the failure text use fixed buffers. The steps run in this order, each reporting its own
// failure:
//   new session / process group -> default signal dispositions -> setgroups, setgid,
//   setuid (and a check that root cannot be regained) -> chdir -> stdin/stdout/stderr and
//   kept descriptors (files opened now, as the new user, in the new directory) -> other
//   descriptors closed -> the program found on PATH (as the new user, in the new
//   directory) -> [start barrier: report ready, wait for the parent's go, apply what it
//   sends] -> signal mask -> execve.
// A child whose set-up fails writes the step and errno into its exec-error pipe (CLOEXEC,
// so a successful exec closes it and the parent reads EOF) and exits: 127 when the program
// is missing, 126 when it cannot be executed, 125 otherwise. A child held at a barrier that
// failed before it still waits there, so that its pid stays valid until the parent lets go.
//
// The start barrier holds the child until the parent says go, so the parent can record the
// pid (a lease, a cgroup) before anything runs; the go may carry what is only known then
// (environment, CPU affinity, NUMA node). If the parent goes away or gives up, the child
// reads EOF and exits 125 without running anything.
//
// `detached` gives a double fork for processes that must outlive the parent (the job
// supervisor): an intermediate child starts a new session, forks the real child and exits;
// Spawn reaps it and returns the real child's pid, which init (or a subreaper) adopts.
//
// The PATH search has one rule, FindProgram's, used before the fork (hooks, Slurm tools)
// or in the child (jobs: as their owner, in their directory, on their own PATH).
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"

namespace gpuman {

/// glibc's search path when PATH is unset (confstr(_CS_PATH)).
inline constexpr const char* kDefaultSearchPath = "/bin:/usr/bin";

/// Where a program named `name` is, or why not. err 0: `path` is it. Otherwise `path` is
/// the file that was found but cannot be run (err EACCES, EISDIR, ...), or `name` itself
/// when there is nothing to run (err ENOENT; ENOTDIR for a name with a '/').
struct ProgramSearch {
  std::string path;
  int err = 0;
};

/// The one PATH rule, execvp(3)'s without its shell fallback: a name with a '/' is used as
/// it is; otherwise each directory of `search_path` in turn (an empty entry is the current
/// directory; unset: kDefaultSearchPath), and the first regular file this process may
/// execute (effective ids) wins. Directories and files without execute permission are
/// skipped; the first of them is what err names if nothing runnable is found. Checks with
/// the caller's credentials and working directory.
ProgramSearch SearchProgram(const std::string& name, const std::optional<std::string>& search_path);

/// One write(2) (retried on EINTR) to a pipe whose reader may be gone, without taking
/// SIGPIPE: the signal is blocked for this thread during the write, and a SIGPIPE the
/// write raised is consumed. Returns write's result; errno is write's.
ssize_t WriteNoSigpipe(int fd, const char* data, size_t n);

/// SearchProgram with the messages users see. Errors: kNotFound "command not found: NAME
/// (not in PATH P)", "command not found: NAME: no such file" (a name with a '/'), "command
/// not found: the command is empty"; kPermissionDenied "could not execute FILE: permission
/// denied" (found, but a directory, without execute permission, on a noexec mount).
Result<std::string> FindProgram(const std::string& name, const std::optional<std::string>& search_path);

/// What execve's errno means, lower case ("permission denied"; ENOEXEC: "not an
/// executable format (a script needs a #! line)").
std::string ExecErrorText(int err);

/// The value of NAME in an environment of "NAME=VALUE" strings (the last one wins).
std::optional<std::string> EnvValue(const std::vector<std::string>& env, const std::string& name);

/// Where one of the child's standard descriptors comes from.
struct SpawnFd {
  enum class Kind { kInherit, kNull, kFd, kFile, kSameAsStdout };
  Kind kind = Kind::kInherit;
  int fd = -1;        // kFd: a descriptor of ours (CLOEXEC or not; the child gets a copy)
  std::string path;   // kFile: opened by the child after chdir and dropping privileges
  int flags = 0;      // kFile: open(2) flags (O_CLOEXEC is added and then cleared by dup2)
  mode_t mode = 0600; // kFile, with O_CREAT
  bool or_null = false;  // kFile: /dev/null when the file cannot be opened (not a failure)

  static SpawnFd Inherit() { return {}; }
  static SpawnFd Null() { return Of(Kind::kNull); }
  static SpawnFd Fd(int fd) {
    SpawnFd s = Of(Kind::kFd);
    s.fd = fd;
    return s;
  }
  static SpawnFd File(std::string path, int flags, mode_t mode = 0600) {
    SpawnFd s = Of(Kind::kFile);
    s.path = std::move(path);
    s.flags = flags;
    s.mode = mode;
    return s;
  }
  /// `path` when the child (as its user, in its directory) can open it, else /dev/null.
  static SpawnFd FileOrNull(std::string path, int flags) {
    SpawnFd s = File(std::move(path), flags);
    s.or_null = true;
    return s;
  }
  static SpawnFd SameAsStdout() { return Of(Kind::kSameAsStdout); }  // 2>&1

 private:
  static SpawnFd Of(Kind kind) {
    SpawnFd s;
    s.kind = kind;
    return s;
  }
};

struct SpawnSpec {
  std::vector<std::string> argv;  // argv[0] is also the program's name unless `program` is set
  /// The file to exec. Empty: argv[0] is looked up by the child (SearchProgram's rule) on
  /// `search_path`, or else on the PATH of the child's environment.
  std::string program;
  std::optional<std::string> search_path;
  /// The child's whole environment ("KEY=VALUE"); nullopt: this process's.
  std::optional<std::vector<std::string>> env;
  std::string cwd;  // empty: this process's
  SpawnFd stdin_fd, stdout_fd, stderr_fd;
  /// Extra descriptors the program gets: {number in the child, our descriptor}.
  std::vector<std::pair<int, int>> keep_fds;
  /// Everything but 0, 1, 2 and keep_fds is closed at exec (the daemon's sockets and
  /// database stay out of a hook). Off: descriptors without CLOEXEC are inherited, as a
  /// shell's child inherits them (`gpuman run cmd 3>file`).
  bool close_other_fds = false;
  /// kJoinProcessGroup: into `process_group`, an existing group of this session (the
  /// ranks of `run --per-gpu` share their first rank's group, which owns the terminal).
  enum class Group { kInherit, kNewProcessGroup, kNewSession, kJoinProcessGroup };
  Group group = Group::kInherit;
  pid_t process_group = 0;
  /// Drop privileges: setgroups(groups), setgid(gid), setuid(uid), in that order; with a uid
  /// other than 0, a child that could setuid(0) again fails instead of running.
  std::optional<std::vector<gid_t>> groups;
  std::optional<gid_t> gid;
  std::optional<uid_t> uid;
  /// Dispositions set back to SIG_DFL in the child (ignored ones would survive exec).
  bool all_signals_default = false;
  std::vector<int> default_signals;
  /// The signal mask the program starts with; nullopt: nothing blocked. Until exec the
  /// child keeps the parent's mask (a signal blocked around Spawn waits for the program).
  std::optional<sigset_t> signal_mask;
  /// Hold the child before exec until SpawnedProcess::Release.
  bool start_barrier = false;
  /// Double fork and a new session: the child is not ours to wait for (see above).
  bool detached = false;
  /// A cgroup v2 directory (an open descriptor of it) the child starts in: clone3 with
  /// CLONE_INTO_CGROUP puts it there as it is created, so nothing has to move it later (a
  /// move takes the kernel's cgroup lock for writing, which can wait for an RCU grace
  /// period: docs/enforce.md, "Cost"). Where the kernel cannot (a v1 hierarchy, Linux
  /// before 5.7, seccomp), the child is forked as usual and SpawnedProcess::in_cgroup()
  /// says false: the caller moves it. Not with `detached`.
  int cgroup_fd = -1;
  /// When the program cannot be found or exec'd, the child also writes "gpuman: <why>" to
  /// its stderr (a job's log).
  bool note_failure_on_stderr = false;
};

/// The set-up step that failed.
enum class SpawnStep {
  kPipe, kFork, kSession, kProcessGroup, kGroups, kGid, kUid, kKeepsRoot, kChdir,
  kStdin, kStdout, kStderr, kDescriptors, kFindProgram, kEnded, kRelease, kExec,
};

/// Why a child did not reach its program: the step, its errno and what it concerned (the
/// directory, the file, the program; a uid or gid in decimal).
struct SpawnFailure {
  SpawnStep step = SpawnStep::kExec;
  int err = 0;
  std::string subject;
  std::string search_path;  // kFindProgram: the PATH searched, for the message
  /// "chdir /x: no such file or directory", "command not found: NAME (not in PATH P)",
  /// "could not execute /x/tool: not an executable format (...)", ...
  Error ToError() const;
};

/// What a child held at its barrier is given when it is released.
struct LateStart {
  std::vector<std::string> env;            // "KEY=VALUE", added to / replacing the spec's
  std::vector<int> cpu_affinity;           // empty: inherit
  std::optional<int> preferred_numa_node;  // set_mempolicy(MPOL_PREFERRED) before exec
};

/// A started child. Owns the parent's ends of the exec-error pipe and the barrier; the
/// process itself is the caller's to wait for (waitpid), signal and reap.
class SpawnedProcess {
 public:
  SpawnedProcess() = default;
  SpawnedProcess(SpawnedProcess&&) = default;
  SpawnedProcess& operator=(SpawnedProcess&&) = default;

  pid_t pid() const { return pid_; }
  /// Whether the child was created inside SpawnSpec::cgroup_fd's cgroup.
  bool in_cgroup() const { return in_cgroup_; }

  /// Barrier only: blocks until the child has done every step before the barrier and
  /// waits there; or fails with the step that failed (kEnded: the child went away). A
  /// child that failed still waits at the barrier: Abandon() it and reap it.
  Status WaitReady(SpawnFailure* failure = nullptr);

  /// Barrier only: lets the child go on with `late`, then waits until it has exec'd.
  /// Errors: the step that failed (before or after the barrier); the child then exits and
  /// is the caller's to reap. kEnded: the child was gone before the go (killed), so it is
  /// for waitpid to say how it ended. kInvalidArgument (step kRelease) when `late` is too
  /// big (64 KiB, 256 entries): the child is let go without running.
  Status Release(const LateStart& late = {}, SpawnFailure* failure = nullptr);

  /// Without a barrier: waits until the child has exec'd (EOF on the exec-error pipe) and
  /// says whether it did. Once the child has been reaped it answers at once.
  Status ExecOutcome(SpawnFailure* failure = nullptr);

  /// Closes the barrier without a go: the child exits 125 without running.
  void Abandon() { barrier_.reset(); }

 private:
  friend Result<SpawnedProcess> Spawn(const SpawnSpec& spec, SpawnFailure* failure);
  Status ReadReports(bool until_ready, SpawnFailure* failure);
  pid_t pid_ = -1;
  bool in_cgroup_ = false;
  UniqueFd report_;   // child -> parent: ready, or the step that failed; EOF at exec
  UniqueFd barrier_;  // parent -> child: go (and the LateStart), or EOF
  std::string name_;  // argv[0], for messages
  std::optional<std::string> search_path_;
};

/// Starts the child described by `spec` (see above). Returns once it is forked (and, when
/// detached, its pid is known); failures of the child's own steps come from WaitReady,
/// Release or ExecOutcome. Errors: kInvalidArgument (empty argv), kIo (pipe, fork).
Result<SpawnedProcess> Spawn(const SpawnSpec& spec, SpawnFailure* failure = nullptr);

}  // namespace gpuman
