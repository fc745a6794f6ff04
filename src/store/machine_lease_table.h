// The machine lease table: where leases live when no daemon runs, shared by every user of
// the machine (docs/design.md, "Machine-wide leases without a daemon", for the trust model).
//
// Layout of a shared table (the default, /run/gpuman/leases): the directory belongs to root
// (0755) and holds leases.db, leases.db-wal and leases.db-shm, created by root with mode
// 0666 (users open them; they can never create, rename or replace a file there, so no
// symlink or planted file can redirect another user's writes). Root creates all of it on
// first use (any root gpuman command, the daemon, scripts/setup.sh).
// A private table: a directory that belongs to the caller (GPUMAN_LEASE_DIR for tests, or a
// single-user machine); created 0700 with 0600 files when missing.
// Anything else is refused with one line that names the path and its owner.
#pragma once

#include <memory>
#include <string>

#include "base/result.h"
#include "store/lease_store.h"

namespace gpuman::store {

inline constexpr const char* kDefaultMachineLeaseDir = "/run/gpuman/leases";

struct MachineLeaseTable {
  std::unique_ptr<LeaseStore> store;
  std::string dir;
  bool shared = false;  // root's table for every user (else the caller's private one)
};

/// Opens (and as root, or in the caller's own directory, creates) the lease table in
/// `dir` for the calling uid. Errors: kPermissionDenied (the directory or a file belongs
/// to another user, is a symlink, or is writable by others: "refusing the lease table in
/// DIR: it belongs to bob (uid 1002), not to root or you"), kUnavailable (a shared table
/// that root has not created yet: "... does not exist yet: run any gpuman command once as
/// root (e.g. `sudo gpuman leases`), or start the daemon"), errors of LeaseStore::Open.
Result<MachineLeaseTable> OpenMachineLeaseTable(const std::string& dir, uint32_t uid,
                                                const LeaseStoreOptions& options = {});

}  // namespace gpuman::store
