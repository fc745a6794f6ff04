#include "sched/child_process.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace gpuman::sched {
namespace {

constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP};
constexpr int kMpolPreferred = 1;  // linux/mempolicy.h

sigset_t RunnerSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : kForwarded) sigaddset(&set, sig);
  sigaddset(&set, SIGCHLD);
  return set;
}

int TranslateStatus(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

void WriteAll(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    p += w;
    n -= static_cast<size_t>(w);
  }
}

// The StartInfo travels over the barrier pipe as NUL-terminated fields:
//   "E" KEY=VALUE | "C" cpu | "N" node   ... then EOF.
std::string Encode(const StartInfo& info) {
  std::string out;
  for (const auto& e : info.env) out += "E" + e + '\0';
  for (int cpu : info.cpu_affinity) out += "C" + std::to_string(cpu) + '\0';
  if (info.preferred_numa_node) out += "N" + std::to_string(*info.preferred_numa_node) + '\0';
  return out;
}

// Runs in the child between fork and exec. The runner is single-threaded, so ordinary
// library calls are safe here.
[[noreturn]] void ChildMain(const JobSpec& spec, int go_read, int exec_write, const sigset_t& old_mask) {
  setpgid(0, 0);
  for (int sig : kForwarded) signal(sig, SIG_DFL);
  signal(SIGCHLD, SIG_DFL);
  signal(SIGPIPE, SIG_DFL);
  std::string message;
  char buf[4096];
  bool go = false;
  while (true) {
    ssize_t r = read(go_read, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    message.append(buf, static_cast<size_t>(r));
    go = true;
  }
  if (!go) _exit(125);  // the runner died before recording us: never run without a lease
  close(go_read);

  std::vector<std::string> env = spec.env;
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  bool bind_cpus = false;
  std::optional<int> node;
  size_t pos = 0;
  while (pos < message.size()) {
    size_t end = message.find('\0', pos);
    if (end == std::string::npos) end = message.size();
    std::string field = message.substr(pos, end - pos);
    pos = end + 1;
    if (field.size() < 2) continue;  // the bare "go" byte
    std::string value = field.substr(1);
    if (field[0] == 'E') {
      std::string key = value.substr(0, value.find('='));
      std::erase_if(env, [&](const std::string& e) { return e.compare(0, key.size() + 1, key + "=") == 0; });
      env.push_back(value);
    } else if (field[0] == 'C') {
      int cpu = std::atoi(value.c_str());
      if (cpu >= 0 && cpu < CPU_SETSIZE) {
        CPU_SET(cpu, &cpus);
        bind_cpus = true;
      }
    } else if (field[0] == 'N') {
      node = std::atoi(value.c_str());
    }
  }
  if (bind_cpus) sched_setaffinity(0, sizeof cpus, &cpus);
  if (node && *node >= 0 && *node < 64) {
    unsigned long mask = 1UL << *node;
    syscall(SYS_set_mempolicy, kMpolPreferred, &mask, sizeof(mask) * 8 + 1);
  }
  std::vector<char*> argv, envp;
  for (const auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  // The job's own PATH finds the program, never this process's (ResolveCommand).
  auto program = ResolveCommand(spec.argv[0], EnvValue(env, "PATH"));
  int err = ENOENT;
  if (program) {
    execve(program->c_str(), argv.data(), envp.data());
    err = errno;
  } else if (program.error().code == ErrorCode::kPermissionDenied) {
    err = EACCES;
  }
  WriteAll(exec_write, &err, sizeof err);
  _exit(err == ENOENT ? 127 : 126);
}

std::string Lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

}  // namespace

std::optional<std::string> EnvValue(const std::vector<std::string>& env, const std::string& name) {
  std::optional<std::string> value;
  for (const auto& e : env) {
    if (e.size() > name.size() && e.compare(0, name.size(), name) == 0 && e[name.size()] == '=') {
      value = e.substr(name.size() + 1);
    }
  }
  return value;
}

std::string ExecErrorText(int err) {
  if (err == ENOEXEC) return "not an executable format (a script needs a #! line)";
  return Lower(std::strerror(err));
}

Result<std::string> ResolveCommand(const std::string& name, const std::optional<std::string>& path_var) {
  if (name.empty()) return MakeError(ErrorCode::kNotFound, "command not found: the command is empty");
  // Why a file found is not one we may run: a directory, or no execute permission.
  auto unusable = [](const std::string& file) -> std::optional<int> {
    struct stat st{};
    if (stat(file.c_str(), &st) != 0) return errno;
    if (S_ISDIR(st.st_mode)) return EISDIR;
    if (!S_ISREG(st.st_mode)) return EACCES;
    if (faccessat(AT_FDCWD, file.c_str(), X_OK, AT_EACCESS) != 0) return errno;
    return std::nullopt;
  };
  if (name.find('/') != std::string::npos) {
    std::optional<int> err = unusable(name);
    if (!err) return name;
    if (*err == ENOENT || *err == ENOTDIR) {
      return MakeError(ErrorCode::kNotFound, "command not found: " + name + ": no such file");
    }
    return MakeError(ErrorCode::kPermissionDenied, "could not execute " + name + ": " + Lower(std::strerror(*err)));
  }
  const std::string path = path_var.value_or("/bin:/usr/bin");
  std::optional<std::pair<std::string, int>> denied;  // the first match we may not run
  size_t start = 0;
  while (true) {
    size_t colon = path.find(':', start);
    std::string dir = path.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    std::string file = (dir.empty() ? std::string(".") : dir) + "/" + name;
    std::optional<int> err = unusable(file);
    if (!err) return file;
    if (*err != ENOENT && *err != ENOTDIR && *err != ENAMETOOLONG && *err != ELOOP && !denied) {
      denied = std::make_pair(file, *err);
    }
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  if (denied) {
    return MakeError(ErrorCode::kPermissionDenied,
                     "could not execute " + denied->first + ": " + Lower(std::strerror(denied->second)));
  }
  std::string shown = path.size() > 200 ? path.substr(0, 200) + "..." : path;
  return MakeError(ErrorCode::kNotFound, "command not found: " + name + " (not in PATH " + shown + ")");
}

Result<std::unique_ptr<ChildProcess>> ChildProcess::Fork(const JobSpec& spec) {
  if (spec.argv.empty()) return MakeError(ErrorCode::kInvalidArgument, "no command given");
  int go[2], ex[2];
  if (pipe2(go, O_CLOEXEC) != 0) return MakeError(ErrorCode::kIo, std::string("pipe: ") + std::strerror(errno));
  if (pipe2(ex, O_CLOEXEC) != 0) {
    close(go[0]);
    close(go[1]);
    return MakeError(ErrorCode::kIo, std::string("pipe: ") + std::strerror(errno));
  }
  // Block the signals we forward before fork, so none is lost between fork and the wait loop.
  sigset_t runner = RunnerSignals(), old_mask;
  sigprocmask(SIG_BLOCK, &runner, &old_mask);

  // Orphans of the job (daemonized workers) are re-parented to us rather than to PID 1, so
  // we can see them, end them with the job and reap them.
  prctl(PR_SET_CHILD_SUBREAPER, 1);

  bool take_terminal = spec.foreground_tty && isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp();
  pid_t pid = fork();
  if (pid < 0) {
    int err = errno;
    sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    for (int fd : {go[0], go[1], ex[0], ex[1]}) close(fd);
    return MakeError(ErrorCode::kIo, std::string("fork: ") + std::strerror(err));
  }
  if (pid == 0) {
    close(go[1]);
    close(ex[0]);
    ChildMain(spec, go[0], ex[1], old_mask);
  }
  setpgid(pid, pid);  // also done by the child; whichever runs first wins the race
  close(go[0]);
  close(ex[1]);
  std::unique_ptr<ChildProcess> child(new ChildProcess());
  child->pid_ = pid;
  child->go_fd_ = go[1];
  child->exec_fd_ = ex[0];
  if (take_terminal) {
    signal(SIGTTOU, SIG_IGN);
    child->took_terminal_ = tcsetpgrp(STDIN_FILENO, pid) == 0;
  }
  return child;
}

Status ChildProcess::Start(const StartInfo& info) {
  std::string message = "g";
  message += '\0';
  message += Encode(info);
  WriteAll(go_fd_, message.data(), message.size());
  close(go_fd_);
  go_fd_ = -1;
  int err = 0;
  ssize_t r;
  do {
    r = read(exec_fd_, &err, sizeof err);
  } while (r < 0 && errno == EINTR);
  close(exec_fd_);
  exec_fd_ = -1;
  started_ = true;
  if (r == static_cast<ssize_t>(sizeof err)) {
    int status = 0;
    waitpid(pid_, &status, 0);
    reaped_ = true;
    if (took_terminal_) tcsetpgrp(STDIN_FILENO, getpgrp());
    ErrorCode code = err == ENOENT ? ErrorCode::kNotFound : ErrorCode::kPermissionDenied;
    return MakeError(code, "cannot run the command: " + ExecErrorText(err));
  }
  return {};
}

int ChildProcess::WaitForwardingSignals(int grace_ms) {
  sigset_t runner = RunnerSignals();
  int status = 0;
  while (true) {
    pid_t done = waitpid(pid_, &status, WNOHANG);
    if (done == pid_) break;
    siginfo_t info;
    timespec timeout{0, 200 * 1000 * 1000};
    int sig = sigtimedwait(&runner, &info, &timeout);
    if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) kill(-pid_, sig);
  }
  reaped_ = true;
  if (took_terminal_) tcsetpgrp(STDIN_FILENO, getpgrp());
  // Whatever is left of the job's process group ends with it.
  auto group_alive = [this] {
    int ignored = 0;
    while (waitpid(-pid_, &ignored, WNOHANG) > 0) {  // reap adopted orphans
    }
    return kill(-pid_, 0) == 0;
  };
  if (group_alive()) {
    kill(-pid_, SIGTERM);
    for (int waited = 0; waited < grace_ms && group_alive(); waited += 50) {
      timespec ts{0, 50 * 1000 * 1000};
      nanosleep(&ts, nullptr);
    }
    if (group_alive()) kill(-pid_, SIGKILL);
    group_alive();
  }
  return TranslateStatus(status);
}

ChildProcess::~ChildProcess() {
  if (go_fd_ >= 0) close(go_fd_);  // an unstarted child reads EOF and exits
  if (exec_fd_ >= 0) close(exec_fd_);
  if (pid_ > 0 && !reaped_) {
    if (started_) kill(-pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
  sigset_t runner = RunnerSignals();
  sigprocmask(SIG_UNBLOCK, &runner, nullptr);
}

}  // namespace gpuman::sched
