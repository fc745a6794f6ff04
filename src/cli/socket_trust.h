// Socket trust: may this client talk to the daemon socket at a path? The client sends a
// `submit` its command, working directory and whole environment, and believes the GPUs a
// `run` is given, so it only talks to a daemon run by root or by the calling user.
// Used by DaemonClient::Connect before and after connect(2); main thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "base/result.h"

namespace gpuman::cli {

/// What lstat(2) said about a path (only what the rule needs).
struct FileFacts {
  uint32_t uid = 0;
  uint32_t mode = 0;  // st_mode: type and permission bits
};

/// A uid's user name, or "" when it has none. The default reads the passwd database.
using UserNamer = std::function<std::string(uint32_t)>;
std::string PasswdUserName(uint32_t uid);

/// The rule, on facts already gathered (pure; unit-tested with made-up owners):
/// - the socket's directory is a real directory (not a symbolic link), owned by root or
///   `my_uid`, and not writable by group or others;
/// - the socket is a socket (not a symbolic link), owned by root or `my_uid`.
/// Errors: kPermissionDenied with one line that names the path and the offending owner or
/// mode, e.g. "refusing the daemon socket /tmp/gpuman-1001/gpuman.sock: its directory
/// belongs to mallory (uid 1002), not to you or root".
Status JudgeSocketTrust(const std::string& socket_path, const std::string& dir_path, const FileFacts& dir,
                        const FileFacts& socket, uint32_t my_uid, const UserNamer& name_of = PasswdUserName);

/// Gathers the facts with lstat(2) and applies JudgeSocketTrust. The directory is the
/// path's parent ("." for a bare name). Errors: kUnavailable when the directory or the
/// socket does not exist (no daemon there), with the message DaemonClient::Connect
/// gives; kPermissionDenied as JudgeSocketTrust; kIo when lstat fails otherwise.
/// What to do when no daemon answers, for the error line: root is told how to start the
/// machine's daemon, anyone else to ask their admin (never to start one of their own).
std::string NoDaemonAdvice();

/// Whether root's daemon serves at `socket_path` now: a socket root owns, on which a
/// connection is accepted by a root process (SO_PEERCRED; systemd's when the socket is
/// activated). Sends nothing. Used by a user's daemon, which yields to it (docs/cli.md).
bool RootDaemonServes(const std::string& socket_path);

Status CheckSocketTrust(const std::string& socket_path, uint32_t my_uid,
                        const UserNamer& name_of = PasswdUserName);

/// The rule for the process on the other end (its SO_PEERCRED uid): root, or `my_uid`
/// (the user's own daemon). Errors: kPermissionDenied, one line naming path and owner.
Status CheckPeerTrust(const std::string& socket_path, uint32_t peer_uid, uint32_t my_uid,
                      const UserNamer& name_of = PasswdUserName);

}  // namespace gpuman::cli
