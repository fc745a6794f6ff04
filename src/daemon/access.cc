#include "daemon/access.h"

namespace gpuman::daemon {

bool Permits(Access who, const Peer& peer, std::optional<uint32_t> owner_uid, const DaemonIdentity& daemon) {
  switch (who) {
    case Access::kAnyone:
      return true;
    case Access::kJobUser:
      return daemon.system_mode || peer.uid == daemon.uid;
    case Access::kOwner:
      return peer.is_admin || peer.uid == 0 || (owner_uid && *owner_uid == peer.uid);
    case Access::kAdmin:
      return peer.is_admin || peer.uid == 0;
    case Access::kRoot:
      return peer.uid == 0;
  }
  return false;
}

const char* RoleName(Role role) {
  switch (role) {
    case Role::kOwner:
      return "owner";
    case Role::kOtherUser:
      return "other user";
    case Role::kAdminGroup:
      return "admin group";
    case Role::kRoot:
      return "root";
  }
  return "?";
}

bool Allows(Access who, Role role) {
  // The same answers as Permits, for one representative peer per role.
  constexpr uint32_t kOwnerUid = 1001, kOtherUid = 1002, kAdminUid = 1003;
  Peer peer;
  switch (role) {
    case Role::kOwner:
      peer = Peer{kOwnerUid, kOwnerUid, 0, "owner", false};
      break;
    case Role::kOtherUser:
      peer = Peer{kOtherUid, kOtherUid, 0, "other", false};
      break;
    case Role::kAdminGroup:
      peer = Peer{kAdminUid, kAdminUid, 0, "admin", true};
      break;
    case Role::kRoot:
      peer = Peer{0, 0, 0, "root", true};
      break;
  }
  return Permits(who, peer, kOwnerUid, DaemonIdentity{true, 0});
}

std::vector<AccessRule> FinerRules() {
  return {
      {"show: private fields", kSeePrivateFields},
      {"submit, update: priority above 0", kRaisePriority},
      {"acquire, add_processes: another user's process", kNameOthersProcess},
  };
}

std::vector<MatrixRow> AccessMatrix(std::span<const AccessRule> ops) {
  std::vector<AccessRule> rules(ops.begin(), ops.end());
  for (auto& r : FinerRules()) rules.push_back(std::move(r));
  std::vector<MatrixRow> rows;
  for (const auto& rule : rules) {
    MatrixRow row{rule.name, {}};
    for (size_t i = 0; i < kRoles.size(); ++i) {
      bool yes = Allows(rule.who, kRoles[i]);
      row.cells[i] = yes ? (rule.who == Access::kJobUser ? "yes*" : "yes") : "no";
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace gpuman::daemon
