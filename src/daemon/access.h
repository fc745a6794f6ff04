// Who may do what in the daemon: the caller's identity (Peer, from SO_PEERCRED), the
// access levels of the command table (daemon.h, commands.cc), the few finer rules that
// handlers check on an argument, and the allow/deny matrix docs/protocol.md shows.
// Pure; any thread.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace gpuman::daemon {

/// Who is calling, from SO_PEERCRED (never from the message).
struct Peer {
  uint32_t uid = 0;
  uint32_t gid = 0;
  int32_t pid = 0;
  std::string user;
  bool is_admin = false;  // root or a member of the admin group
};

/// Who may call an operation (or pass a finer rule).
enum class Access {
  kAnyone,   // every user who can connect
  kJobUser,  // whoever the daemon runs jobs for: anyone in system mode, its own user otherwise
  kOwner,    // the owner of the job or lease the request names, the admin group, root
  kAdmin,    // the admin group and root
  kRoot,     // root only
};

/// What the request names, resolved by the command table before its handler runs.
enum class Target {
  kNone,
  kJob,    // one job id: a missing job is not_found before any handler runs
  kJobs,   // several job ids: each is resolved and checked on its own
  kLease,  // one lease id
};

/// The facts about the daemon that access depends on.
struct DaemonIdentity {
  bool system_mode = false;  // root daemon serving everyone
  uint32_t uid = 0;          // the daemon's own uid (the only job user in user mode)
};

/// Whether `peer` passes `who`. `owner_uid` is the uid owning the named job or lease
/// (kOwner with no owner passes only the admin group and root).
bool Permits(Access who, const Peer& peer, std::optional<uint32_t> owner_uid, const DaemonIdentity& daemon);

// The finer rules, checked by handlers on what a request says.
/// show: the job's private fields (argv, env, cwd, output path).
inline constexpr Access kSeePrivateFields = Access::kOwner;
/// submit: a priority above kDefaultPriority (lowering it, like Slurm's --nice, is anyone's).
inline constexpr Access kRaisePriority = Access::kAdmin;
inline constexpr int kDefaultPriority = 0;
/// acquire, add_processes: a process that belongs to another user.
inline constexpr Access kNameOthersProcess = Access::kRoot;

// ---- The allow/deny matrix (docs/protocol.md, "Who may do what").

/// The matrix's columns, in order.
enum class Role {
  kOwner,       // owns the job or lease named; for an operation that names none, any user
  kOtherUser,   // an ordinary user who does not own it
  kAdminGroup,  // a member of the admin group, not root
  kRoot,
};
inline constexpr std::array<Role, 4> kRoles = {Role::kOwner, Role::kOtherUser, Role::kAdminGroup, Role::kRoot};
/// "owner", "other user", "admin group", "root": the matrix's column headers.
const char* RoleName(Role role);

/// Whether `role` passes `who` on a system-mode daemon (the matrix's view).
bool Allows(Access who, Role role);

/// One operation (or finer rule) and who may call it, as the command table has it.
struct AccessRule {
  std::string name;  // an op name, or a finer rule such as "submit: priority above 0"
  Access who = Access::kAnyone;
};

/// One row of the matrix: a name and one cell per role ("yes", "no", or "yes*" for
/// kJobUser, whose footnote explains user mode).
struct MatrixRow {
  std::string name;
  std::array<std::string, 4> cells;
  bool operator==(const MatrixRow&) const = default;
};

/// The matrix for `ops` (the command table's operations, in table order) followed by the
/// finer rules above.
std::vector<MatrixRow> AccessMatrix(std::span<const AccessRule> ops);

/// The finer rules as matrix rows' names and levels.
std::vector<AccessRule> FinerRules();

}  // namespace gpuman::daemon
