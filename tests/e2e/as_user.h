// Throwaway Unix users for end-to-end tests that need two identities (CI runs as root):
// EnsureUser creates one with useradd, RunAs runs a program as that user with an exact
// environment. Header-only; callers GTEST_SKIP when not root or when useradd fails.
#pragma once

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "e2e/e2e_util.h"

namespace gpuman::e2e {

/// The user `name`, created (no home, /bin/sh) when missing; nullopt when that failed.
inline std::optional<passwd> EnsureUser(const std::string& name) {
  if (getpwnam(name.c_str()) == nullptr) {
    testing::Run({"/usr/sbin/useradd", "--no-create-home", "--shell", "/bin/sh", name});
  }
  passwd* pw = getpwnam(name.c_str());
  if (!pw) return std::nullopt;
  return *pw;
}

/// Runs argv as `user` (initgroups, setgid, setuid, then execve with exactly `env`) in
/// `cwd`, killed after `timeout_s`. Output is captured through a directory the user may write.
inline testing::RunResult RunAs(const passwd& user, std::vector<std::string> argv,
                                const std::map<std::string, std::string>& env, const std::string& cwd = "/",
                                unsigned timeout_s = 60) {
  testing::TempDir out;
  chmod(out.path().c_str(), 0777);
  const std::string stdout_path = out.Join("out"), stderr_path = out.Join("err");
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp, args;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  const std::string name = user.pw_name;
  const uid_t uid = user.pw_uid;
  const gid_t gid = user.pw_gid;
  pid_t pid = fork();
  if (pid == 0) {
    initgroups(name.c_str(), gid);
    if (setgid(gid) != 0 || setuid(uid) != 0) _exit(126);
    if (chdir(cwd.c_str()) != 0) _exit(126);
    int o = open(stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0666);
    int e = open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0666);
    dup2(o, 1);
    dup2(e, 2);
    alarm(timeout_s);  // survives exec: a hung gpuman fails the test instead of hanging it
    execve(args[0], args.data(), envp.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), Slurp(stdout_path), Slurp(stderr_path)};
}

/// CleanEnv plus what a login would give `user`, as an explicit map (no empty values):
/// PATH, HOME (a directory the user may write), USER, and GPUMAN_STATE_DIR = state_dir.
inline std::map<std::string, std::string> UserEnv(const passwd& user, const std::string& home,
                                                  const std::string& state_dir) {
  std::map<std::string, std::string> env;
  for (const auto& [k, v] : CleanEnv(state_dir)) {
    if (!v.empty()) env[k] = v;
  }
  env["PATH"] = "/usr/bin:/bin";
  env["HOME"] = home;
  env["USER"] = user.pw_name;
  return env;
}

}  // namespace gpuman::e2e
