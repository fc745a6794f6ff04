#include "daemon/mps_control.h"

#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <utility>

#include "base/posix_error.h"
#include "base/spawn.h"
#include "base/strings.h"
#include "base/unique_fd.h"

namespace gpuman::daemon {
namespace {

using Control = store::LeaseStore::MpsControl;

constexpr const char* kPidFile = "nvidia-cuda-mps-control.pid";  // NVIDIA's, in the pipe directory
constexpr const char* kControlPath = "/usr/sbin:/usr/bin:/sbin:/bin";

void Log(const std::string& line) { std::fprintf(stderr, "gpuman: mps: %s\n", line.c_str()); }

struct Account {
  gid_t gid = 0;
  std::vector<gid_t> groups;
  std::string home = "/";
};

std::optional<Account> AccountOf(uint32_t uid) {
  passwd* pw = getpwuid(uid);
  if (!pw) return std::nullopt;
  Account a;
  a.gid = pw->pw_gid;
  if (pw->pw_dir && pw->pw_dir[0] == '/') a.home = pw->pw_dir;
  int n = 64;
  std::vector<gid_t> groups(static_cast<size_t>(n));
  if (getgrouplist(pw->pw_name, pw->pw_gid, groups.data(), &n) < 0) {
    groups.resize(static_cast<size_t>(n));
    if (getgrouplist(pw->pw_name, pw->pw_gid, groups.data(), &n) < 0) n = 0;
  }
  groups.resize(static_cast<size_t>(n));
  a.groups = std::move(groups);
  return a;
}

// A directory that exists as a directory (made with `mode` when missing), owned by
// `uid`:`gid` when we are root.
Status MakeDir(const std::string& path, mode_t mode, std::optional<std::pair<uid_t, gid_t>> owner) {
  if (mkdir(path.c_str(), mode) != 0 && errno != EEXIST) return PosixError(ErrorCode::kIo, "mkdir " + path, errno);
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return PosixError(ErrorCode::kIo, "stat " + path, errno);
  if (!S_ISDIR(st.st_mode)) return MakeError(ErrorCode::kIo, path + ": not a directory");
  if (owner && chown(path.c_str(), owner->first, owner->second) != 0) {
    return PosixError(ErrorCode::kIo, "chown " + path, errno);
  }
  if (chmod(path.c_str(), mode) != 0) return PosixError(ErrorCode::kIo, "chmod " + path, errno);
  return {};
}

std::optional<pid_t> ReadPid(const std::string& path) {
  std::ifstream in(path);
  long long pid = 0;
  if (!(in >> pid) || pid <= 0) return std::nullopt;
  return static_cast<pid_t>(pid);
}

}  // namespace

MpsControls::MpsControls(MpsControlOptions options, store::LeaseStore& store)
    : options_(std::move(options)), store_(store) {}

Result<std::string> MpsControls::Program() const {
  auto found = FindProgram(options_.program, options_.search_path);
  if (found) return found;
  return MakeError(ErrorCode::kNotFound, "--mps: MPS is not available here: " + found.error().message +
                                             " (the daemon runs nvidia-cuda-mps-control; [share] mps_control names it)");
}

Status MpsControls::RunProgram(const Control& control, const std::vector<std::string>& args, const std::string& payload) {
  auto program = Program();
  if (!program) return program.error();
  const std::string what = options_.program + (args.empty() ? "" : " " + Join(args, " ")) + " for " + control.gpu_uuid;
  SpawnSpec spec;
  spec.program = *program;
  spec.argv = {options_.program};
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  std::string home = "/";
  const bool as_other = geteuid() == 0 && control.uid != 0;
  if (as_other) {
    auto account = AccountOf(control.uid);
    if (!account) return MakeError(ErrorCode::kIo, what + ": uid " + std::to_string(control.uid) + " has no account");
    spec.uid = control.uid;
    spec.gid = account->gid;
    spec.groups = account->groups;
    home = account->home;
  } else if (geteuid() != control.uid) {
    return MakeError(ErrorCode::kPermissionDenied, what + ": the daemon runs as uid " + std::to_string(geteuid()) +
                                                       " and cannot run MPS for uid " + std::to_string(control.uid));
  }
  spec.env = std::vector<std::string>{"CUDA_VISIBLE_DEVICES=" + control.gpu_uuid,
                                      "CUDA_MPS_PIPE_DIRECTORY=" + control.pipe_directory,
                                      "CUDA_MPS_LOG_DIRECTORY=" + control.log_directory,
                                      std::string("PATH=") + kControlPath, "LANG=C.UTF-8", "HOME=" + home};
  spec.cwd = "/";
  auto in = MakePipe();
  if (!in) return in.error().WithContext(what);
  spec.stdin_fd = SpawnFd::Fd(in->read.get());
  spec.stdout_fd = SpawnFd::Null();
  spec.stderr_fd = SpawnFd::Null();
  spec.close_other_fds = true;
  spec.group = SpawnSpec::Group::kNewSession;
  spec.all_signals_default = true;
  auto child = Spawn(spec);
  if (!child) return child.error().WithContext(what);
  in->read.reset();
  if (!payload.empty()) (void)WriteNoSigpipe(in->write.get(), payload.data(), payload.size());
  in->write.reset();
  SpawnFailure failure;
  const Status exec = child->ExecOutcome(&failure);
  int status = 0;
  bool ended = false;
  for (int64_t waited = 0; waited <= options_.timeout_ms; waited += 10) {
    const pid_t r = waitpid(child->pid(), &status, WNOHANG);
    if (r == child->pid() || (r < 0 && errno != EINTR)) {
      ended = r == child->pid();
      break;
    }
    usleep(10 * 1000);
  }
  if (!ended) {
    kill(-child->pid(), SIGKILL);
    kill(child->pid(), SIGKILL);
    waitpid(child->pid(), &status, 0);
    return MakeError(ErrorCode::kIo, what + ": still running after " + std::to_string(options_.timeout_ms) + " ms; killed");
  }
  if (!exec) return MakeError(ErrorCode::kIo, what + ": " + failure.ToError().message);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return {};
  return MakeError(ErrorCode::kIo, what + ": " +
                                       (WIFEXITED(status) ? "exited with status " + std::to_string(WEXITSTATUS(status))
                                                          : "killed by signal " + std::to_string(WTERMSIG(status))));
}

bool MpsControls::Alive(const Control& control) const {
  auto pid = ReadPid(control.pipe_directory + "/" + kPidFile);
  return pid && (kill(*pid, 0) == 0 || errno == EPERM);
}

Status MpsControls::Start(const Control& control) {
  const bool root = geteuid() == 0;
  std::optional<std::pair<uid_t, gid_t>> owner;
  if (root) {
    auto account = AccountOf(control.uid);
    if (!account) return MakeError(ErrorCode::kIo, "MPS for uid " + std::to_string(control.uid) + ": no such account");
    owner = std::pair<uid_t, gid_t>{control.uid, account->gid};
  }
  // RUN_DIR and RUN_DIR/UUID are the daemon's (0755: clients reach their pipe directory
  // through them); pipe/ and log/ belong to the control's user alone (0700): another
  // user's CUDA cannot even connect.
  const std::string gpu_dir = std::filesystem::path(control.pipe_directory).parent_path().string();
  for (const std::string& dir : {options_.run_dir, gpu_dir}) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (auto made = MakeDir(dir, 0755, std::nullopt); !made) return made;
  }
  // A pipe directory left by an earlier control (another user's, perhaps) starts afresh.
  std::error_code ec;
  std::filesystem::remove_all(control.pipe_directory, ec);
  if (auto made = MakeDir(control.pipe_directory, 0700, owner); !made) return made;
  if (auto made = MakeDir(control.log_directory, 0700, owner); !made) return made;
  if (auto ran = RunProgram(control, {"-d"}, ""); !ran) return ran;
  if (auto recorded = store_.RecordMpsControl(control); !recorded) return recorded.error().WithContext("record MPS control");
  Log("started the MPS control daemon of GPU " + control.gpu_uuid + " for " + control.user);
  return {};
}

Status MpsControls::Stop(const Control& control) {
  // `echo quit | nvidia-cuda-mps-control`: the control daemon ends once its clients have.
  Status ran = RunProgram(control, {}, "quit\n");
  if (!ran) Log("stopping the MPS control daemon of GPU " + control.gpu_uuid + ": " + ran.error().message);
  else Log("stopped the MPS control daemon of GPU " + control.gpu_uuid + " (" + control.user + ")");
  // Forgotten either way: a control that cannot be told (gone already) holds nothing.
  if (auto forgot = store_.ForgetMpsControl(control.gpu_uuid); !forgot) return forgot.error();
  return ran;
}

Result<visibility::MpsClient> MpsControls::Ensure(const std::string& uuid, uint32_t uid, const std::string& user,
                                                  int64_t now_ms) {
  visibility::MpsClient where = visibility::MpsDirectories(options_.run_dir, uuid);
  auto recorded = store_.MpsControls();
  if (!recorded) return recorded.error().WithContext("read MPS controls");
  for (const auto& c : *recorded) {
    if (c.gpu_uuid != uuid) continue;
    if (c.uid != uid) {
      return MakeError(ErrorCode::kConflict, "GPU " + uuid + " runs MPS for " + c.user + "; MPS serves one user at a time");
    }
    if (Alive(c)) return visibility::MpsClient{c.pipe_directory, c.log_directory, std::nullopt};
  }
  Control control{uuid, uid, user, where.pipe_directory, where.log_directory, now_ms};
  if (auto started = Start(control); !started) return started.error();
  return where;
}

void MpsControls::Reconcile(const std::vector<model::Lease>& live, bool verify, int64_t now_ms) {
  // Wanted: GPU -> the user of its live MPS leases (one user per GPU: policy::Select).
  std::map<std::string, std::pair<uint32_t, std::string>> wanted;
  for (const auto& l : live) {
    if (!l.mps) continue;
    for (const auto& uuid : l.gpu_uuids) wanted.emplace(uuid, std::pair{l.uid, l.user});
  }
  auto recorded = store_.MpsControls();
  if (!recorded) {
    Log("read MPS controls: " + recorded.error().message);
    return;
  }
  std::map<std::string, Control> have;
  for (const auto& c : *recorded) {
    auto it = wanted.find(c.gpu_uuid);
    if (it == wanted.end() || it->second.first != c.uid) {
      (void)Stop(c);  // logged
      continue;
    }
    have.emplace(c.gpu_uuid, c);
  }
  for (const auto& [uuid, who] : wanted) {
    auto it = have.find(uuid);
    if (it != have.end() && (!verify || Alive(it->second))) continue;
    if (it != have.end()) Log("the MPS control daemon of GPU " + uuid + " is gone; starting it again");
    auto where = visibility::MpsDirectories(options_.run_dir, uuid);
    if (auto started = Start(Control{uuid, who.first, who.second, where.pipe_directory, where.log_directory, now_ms});
        !started) {
      Log("starting the MPS control daemon of GPU " + uuid + ": " + started.error().message);
    }
  }
}

std::vector<std::string> MpsControls::RunningGpus() {
  std::vector<std::string> out;
  if (auto recorded = store_.MpsControls()) {
    for (const auto& c : *recorded) out.push_back(c.gpu_uuid);
  }
  return out;
}

}  // namespace gpuman::daemon
