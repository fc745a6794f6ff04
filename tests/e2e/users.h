// Throwaway Unix users for end-to-end tests (CI runs as root; elsewhere the tests skip):
// create them with useradd, and run a command as one of them with a given environment.
#pragma once

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "e2e/e2e_util.h"

namespace gpuman::e2e {

/// The user `name`, created (no home directory) when missing; nullopt when that fails.
inline std::optional<passwd> EnsureTestUser(const std::string& name) {
  if (getpwnam(name.c_str()) == nullptr) {
    testing::Run({"/usr/sbin/useradd", "--no-create-home", "--shell", "/bin/sh", name});
  }
  passwd* pw = getpwnam(name.c_str());
  if (!pw) return std::nullopt;
  return *pw;
}

/// Starts `sleep 60` as `user` (nullptr: as ourselves) and returns its pid, for tests that
/// need a real process of someone's (an intruder the stand-in reports on a GPU). With
/// `ignore_term`, SIGTERM does not end it. The caller kills and reaps it.
inline pid_t SleepAs(const passwd* user, bool ignore_term = false) {
  pid_t pid = fork();
  if (pid == 0) {
    if (ignore_term) signal(SIGTERM, SIG_IGN);
    if (user && (setgid(user->pw_gid) != 0 || setuid(user->pw_uid) != 0)) _exit(126);
    execl("/bin/sleep", "sleep", "60", static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

/// Runs argv as `user` (fork, initgroups, setgid, setuid, exec) in `cwd`, with exactly
/// `env` as the environment. Output goes through files the user may write.
inline testing::RunResult RunAsUser(const passwd& user, const std::vector<std::string>& argv,
                                    const std::map<std::string, std::string>& env, const std::string& cwd = "/") {
  testing::TempDir out;
  chmod(out.path().c_str(), 0777);
  const std::string stdout_path = out.Join("out"), stderr_path = out.Join("err");
  pid_t pid = fork();
  if (pid == 0) {
    initgroups(user.pw_name, user.pw_gid);
    if (setgid(user.pw_gid) != 0 || setuid(user.pw_uid) != 0) _exit(126);
    if (chdir(cwd.c_str()) != 0) _exit(126);
    int o = open(stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0666);
    int e = open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0666);
    dup2(o, 1);
    dup2(e, 2);
    std::vector<std::string> envs;
    for (const auto& [k, v] : env) {
      if (!v.empty()) envs.push_back(k + "=" + v);
    }
    std::vector<char*> envp;
    for (auto& e2 : envs) envp.push_back(e2.data());
    envp.push_back(nullptr);
    std::vector<std::string> args = argv;
    std::vector<char*> cargv;
    for (auto& a : args) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    execve(cargv[0], cargv.data(), envp.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), Slurp(stdout_path), Slurp(stderr_path)};
}

}  // namespace gpuman::e2e
