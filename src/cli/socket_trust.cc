// The client's trust rule for the daemon socket; see socket_trust.h and docs/design.md
// ("Trust between client and daemon").
//
// Why the path checks and the peer check both exist: SO_PEERCRED alone already tells us
// who listens, but only after connect(2), and a planted socket in a directory we do not
// control is worth naming before we touch it. The directory rule also covers the race
// the peer check cannot: a directory someone else may write is one where the socket can
// be swapped between our check and a later connect.
#include "base/posix_error.h"
#include "cli/socket_trust.h"

#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include "base/unique_fd.h"

namespace gpuman::cli {
namespace {

std::string Who(uint32_t uid, const UserNamer& name_of) {
  const std::string name = name_of ? name_of(uid) : std::string();
  return name.empty() ? "uid " + std::to_string(uid) : name + " (uid " + std::to_string(uid) + ")";
}

bool Trusted(uint32_t owner, uint32_t my_uid) { return owner == 0 || owner == my_uid; }

Error Refuse(const std::string& socket_path, const std::string& why) {
  return MakeError(ErrorCode::kPermissionDenied, "refusing the daemon socket " + socket_path + ": " + why);
}

std::string Octal(uint32_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", mode & 07777);
  return buf;
}

Error NoDaemon(const std::string& socket_path, int err) {
  return MakeError(ErrorCode::kUnavailable, "no gpuman daemon at " + socket_path + ": " + ErrnoDescription(err) + " (" +
                                                NoDaemonAdvice() + ")");
}

Status JudgeDirectory(const std::string& socket_path, const std::string& dir_path, const FileFacts& dir,
                      uint32_t my_uid, const UserNamer& name_of) {
  if (S_ISLNK(dir.mode)) return Refuse(socket_path, "its directory " + dir_path + " is a symbolic link");
  if (!S_ISDIR(dir.mode)) return Refuse(socket_path, "its directory " + dir_path + " is not a directory");
  if (!Trusted(dir.uid, my_uid)) {
    return Refuse(socket_path, "its directory belongs to " + Who(dir.uid, name_of) + ", not to you or root");
  }
  if ((dir.mode & (S_IWGRP | S_IWOTH)) != 0) {
    return Refuse(socket_path, "its directory " + dir_path + " (owned by " + Who(dir.uid, name_of) +
                                   ") is writable by others (mode " + Octal(dir.mode) + ")");
  }
  return {};
}

}  // namespace

std::string PasswdUserName(uint32_t uid) {
  passwd pw{};
  passwd* result = nullptr;
  std::vector<char> buf(16384);
  if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &result) == 0 && result != nullptr) return pw.pw_name;
  return "";
}

Status JudgeSocketTrust(const std::string& socket_path, const std::string& dir_path, const FileFacts& dir,
                        const FileFacts& socket, uint32_t my_uid, const UserNamer& name_of) {
  if (auto judged = JudgeDirectory(socket_path, dir_path, dir, my_uid, name_of); !judged) return judged;
  if (S_ISLNK(socket.mode)) return Refuse(socket_path, "it is a symbolic link");
  if (!S_ISSOCK(socket.mode)) return Refuse(socket_path, "it is not a socket");
  if (!Trusted(socket.uid, my_uid)) {
    return Refuse(socket_path, "it belongs to " + Who(socket.uid, name_of) + ", not to you or root");
  }
  return {};
}

Status CheckSocketTrust(const std::string& socket_path, uint32_t my_uid, const UserNamer& name_of) {
  std::string dir_path = std::filesystem::path(socket_path).parent_path().string();
  if (dir_path.empty()) dir_path = ".";
  struct stat dir_st{};
  if (lstat(dir_path.c_str(), &dir_st) != 0) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR) return NoDaemon(socket_path, err);
    return MakeError(err == EACCES ? ErrorCode::kPermissionDenied : ErrorCode::kIo,
                     "daemon socket directory " + dir_path + ": " + ErrnoDescription(err));
  }
  struct stat sock_st{};
  if (lstat(socket_path.c_str(), &sock_st) != 0) {
    const int err = errno;
    // Judge the directory first: a missing socket in someone else's directory is still
    // someone else's directory, and saying so beats "no daemon".
    const FileFacts dir{dir_st.st_uid, dir_st.st_mode};
    if (auto judged = JudgeDirectory(socket_path, dir_path, dir, my_uid, name_of); !judged) return judged;
    if (err == ENOENT || err == ENOTDIR) return NoDaemon(socket_path, err);
    return MakeError(err == EACCES ? ErrorCode::kPermissionDenied : ErrorCode::kIo,
                     "daemon socket " + socket_path + ": " + ErrnoDescription(err));
  }
  return JudgeSocketTrust(socket_path, dir_path, FileFacts{dir_st.st_uid, dir_st.st_mode},
                          FileFacts{sock_st.st_uid, sock_st.st_mode}, my_uid, name_of);
}

Status CheckPeerTrust(const std::string& socket_path, uint32_t peer_uid, uint32_t my_uid, const UserNamer& name_of) {
  if (Trusted(peer_uid, my_uid)) return {};
  return Refuse(socket_path, "the daemon on it runs as " + Who(peer_uid, name_of) + ", not as you or root");
}

}  // namespace gpuman::cli

namespace gpuman::cli {

std::string NoDaemonAdvice() {
  // The machine's daemon is the admin's to start: a user's own daemon would be a second
  // lease table beside the machine's (issue 23).
  if (getuid() == 0) return "start the machine's daemon: `systemctl start gpuman.socket`, or `gpuman daemon`";
  return "the machine's daemon is not running: ask your admin to start it (`systemctl start gpuman.socket`)";
}

bool RootDaemonServes(const std::string& socket_path) {
  struct stat st {};
  if (lstat(socket_path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode) || st.st_uid != 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof addr.sun_path) return false;
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size());
  // Non-blocking: a listener whose backlog is full still listens, and nobody waits on it.
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) return false;
  if (connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) return errno == EAGAIN;
  ucred cred{};
  socklen_t len = sizeof cred;
  return getsockopt(fd.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && cred.uid == 0;
}

}  // namespace gpuman::cli
