// LeaseStore: the lease table of one machine, in an SQLite file shared by every gpuman
// process of that machine (today each CLI invocation; later the daemon). GPUs are keyed
// by UUID, and the database itself guarantees that a GPU is in at most one lease.
// One LeaseStore per thread; processes and threads each open their own on the same file.
// Schema and transaction rules: docs/state.md.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "model/lease.h"
#include "store/liveness.h"
#include "store/sqlite.h"

namespace gpuman::store {

/// Picks GPUs for a new lease, given the live leases. Runs inside the write transaction:
/// it must be quick and must not touch the state db. Returning an error aborts the lease.
using ChooseGpus =
    std::function<Result<std::vector<std::string>>(const std::vector<model::Lease>& live)>;
/// A chosen GPU's NVML index, recorded with the lease for display; -1 when not known.
using GpuIndexOf = std::function<int(const std::string& uuid)>;
/// Picks the new lease's rendezvous port, given the live leases (inside the write
/// transaction, as ChooseGpus); nullopt: none.
using ChoosePort = std::function<std::optional<int>(const std::vector<model::Lease>& live)>;

struct LeaseStoreOptions {
  /// How long to wait for another process's write transaction before failing with kBusy.
  std::chrono::milliseconds busy_timeout{5000};
  /// Mode of the file when Open creates it (see DatabaseOptions::file_mode).
  unsigned file_mode = 0600;
  /// The host this store runs on, recorded in each new lease; only leases of this host
  /// (or without a host) are reclaimed as stale. Empty: gethostname().
  std::string host;
};

class LeaseStore {
 public:
  /// Opens the state db at `path`, creating the file (0600) and its parent directories
  /// (0700) if needed, and migrates it to the current schema.
  /// A file that is not ours is refused before anything writes to it (store/migrations.h,
  /// CheckFile). Errors: kPermissionDenied, kIo (unusable path, disk full, corrupt,
  /// truncated or not a gpuman database, newer schema than this binary knows: "X was
  /// written by a newer gpuman (schema N; this one knows up to M); ..."), kBusy.
  static Result<std::unique_ptr<LeaseStore>> Open(const std::string& path,
                                                  const LeaseStoreOptions& options = {});
  /// A lease store on a connection already opened and migrated (store/state_db.h).
  /// Its statements are prepared at their first use, so SQL that does not match the schema
  /// fails that call (kInternal), not this one.
  /// `host` as LeaseStoreOptions::host.
  static Result<std::unique_ptr<LeaseStore>> Attach(std::shared_ptr<Database> db, std::string host = "");
  ~LeaseStore();
  LeaseStore(const LeaseStore&) = delete;
  LeaseStore& operator=(const LeaseStore&) = delete;

  /// In one BEGIN IMMEDIATE transaction: deletes the stale leases (this host's leases none
  /// of whose processes is alive per `alive`; another host's lease is never stale here), calls `choose` with the live ones, and stores a lease for the
  /// returned UUIDs with `draft`'s uid, user, command, kind, created_unix_ms and processes,
  /// and this store's host.
  /// Returns the stored lease, with its id.
  /// If choose fails, its error is returned; the stale-lease cleanup is still committed
  /// (as it is when the insert fails). Errors: choose's error; kInvalidArgument (draft
  /// without processes, no UUIDs, a UUID twice); kConflict (a UUID is already leased: the
  /// database refuses it even when `choose` is wrong); kBusy; kIo.
  /// `index_of`, when given, says each chosen GPU's index (stored with it, shown by
  /// `leases`); without it the indices are not recorded. `choose_port`, when given, picks
  /// its rendezvous port under the same lock (lease/ports.h); without it, none.
  Result<model::Lease> Acquire(const model::Lease& draft, const ChooseGpus& choose,
                               const LivenessCheck& alive, const GpuIndexOf& index_of = {},
                               const ChoosePort& choose_port = {});

  /// Adds processes to a lease (the runner records the job's pid after fork). A pid the
  /// lease already has gets the new start time. Errors: kNotFound, kBusy, kIo.
  Status AddProcesses(int64_t lease_id, const std::vector<model::LeaseProcess>& processes);

  /// Deletes a lease. Errors: kNotFound, kBusy, kIo.
  Status Release(int64_t lease_id);

  /// The live leases, in id order, after deleting the stale ones. The leases are read first
  /// (ListRecorded); only when one of them is stale does a short write transaction delete
  /// it, so a monitor that lists every second does not take the write lock and no writer
  /// waits for it. Errors: kBusy, kIo.
  Result<std::vector<model::Lease>> List(const LivenessCheck& alive);

  /// The live leases as List() judges them (another host's lease counts as live), read
  /// without writing: stale ones stay recorded for the next writer to reclaim. For a look
  /// that must not take the write lock (a preview, the look before an acquire).
  /// Errors: kIo.
  Result<std::vector<model::Lease>> ListLive(const LivenessCheck& alive);

  /// Every recorded lease, stale or not, without writing (a read snapshot; never waits
  /// for writers). When nothing was written since the last call (PRAGMA data_version for
  /// other connections, the connection's own change count for this one) the rows read then
  /// are returned again, not read anew. Errors: kIo.
  Result<std::vector<model::Lease>> ListRecorded();

  /// The recorded lease with this id (alive or not), or nullopt. Errors: kIo.
  Result<std::optional<model::Lease>> Get(int64_t lease_id);

  /// A fact of the machine recorded with RecordFact (machine_facts: static facts such as
  /// the topology, advisory), or nullopt. Errors: kIo.
  Result<std::optional<std::string>> Fact(const std::string& key);
  /// Records (or replaces) a fact. Errors: kBusy, kIo.
  Status RecordFact(const std::string& key, const std::string& value);

  /// An MPS control daemon the gpuman daemon runs (docs/share.md, "MPS"; schema 10).
  struct MpsControl {
    std::string gpu_uuid;
    uint32_t uid = 0;
    std::string user;
    std::string pipe_directory;
    std::string log_directory;
    int64_t started_unix_ms = 0;
    bool operator==(const MpsControl&) const = default;
  };
  /// The recorded MPS controls, by GPU. Errors: kIo.
  Result<std::vector<MpsControl>> MpsControls();
  /// Records (or replaces) the control of `control.gpu_uuid`. Errors: kBusy, kIo.
  Status RecordMpsControl(const MpsControl& control);
  /// Forgets the control of `gpu_uuid` (no error when none is recorded). Errors: kBusy, kIo.
  Status ForgetMpsControl(const std::string& gpu_uuid);

  /// Deletes the stale leases and returns them (callers may log them). Errors: kBusy, kIo.
  Result<std::vector<model::Lease>> ReclaimStale(const LivenessCheck& alive);

  /// A second reason a lease lives, asked by lease id when none of its recorded processes
  /// runs: the daemon's "its cgroup still has processes" (confine/cgroup.h), so that a
  /// confined lease ends only when everything in it has. Unset: processes only.
  void SetHeld(std::function<bool(int64_t lease_id)> held) { held_ = std::move(held); }

  /// The connection, for tests that need to reach below the API (e.g. to simulate a full
  /// disk with PRAGMA max_page_count).
  Database& DatabaseForTesting() { return *db_; }

 private:
  struct Statements;
  LeaseStore(std::shared_ptr<Database> db, std::unique_ptr<Statements> stmts, std::string host);

  // Whether `lease` lives: another host's always does here (its processes are not ours
  // to look up); ours while one of its processes runs.
  bool IsLive(const model::Lease& lease, const LivenessCheck& alive) const;
  Result<std::vector<model::Lease>> LoadLocked(std::optional<int64_t> only_id);
  // Splits the recorded leases into live (returned) and stale (deleted, appended to
  // `reclaimed`). Must run inside a write transaction.
  Result<std::vector<model::Lease>> ReclaimLocked(const LivenessCheck& alive,
                                                  std::vector<model::Lease>* reclaimed);
  Status DeleteLocked(int64_t lease_id, const char* event_kind);
  Result<model::Lease> InsertLocked(const model::Lease& draft, const std::vector<std::string>& uuids,
                                    const std::vector<int>& indices);

  std::shared_ptr<Database> db_;       // shared with the job store of the same state db
  std::unique_ptr<Statements> stmts_;  // finalized before db_ closes (reverse order)
  std::string host_;                   // recorded in new leases; judges liveness of its own
  std::function<bool(int64_t)> held_;  // SetHeld
  // ListRecorded's last answer and the (data_version, total changes) it was read at.
  struct Recorded {
    int64_t data_version = 0;
    int64_t total_changes = 0;
    std::vector<model::Lease> leases;
  };
  std::optional<Recorded> recorded_;
};

}  // namespace gpuman::store
