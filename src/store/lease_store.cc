#include "store/lease_store.h"

#include <unistd.h>

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "store/migrations.h"

namespace gpuman::store {

// Time of an event, from SQLite's clock (the store holds no Clock; events are a log).
#define GPUMAN_SQL_NOW_MS "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)"

// All SQL of the lease store, prepared at open so a schema mismatch fails there.
struct LeaseStore::Statements {
  Statement select_leases;
  Statement select_lease;
  Statement select_gpus;
  Statement select_lease_gpus;
  Statement select_processes;
  Statement select_lease_processes;
  Statement insert_lease;
  Statement insert_gpu;
  Statement upsert_process;
  Statement lease_exists;
  Statement gpu_holder;
  Statement log_lease_event;
  Statement delete_lease;
  Statement prune_events;
  Statement data_version;
  Statement select_fact;
  Statement upsert_fact;
};

namespace {

constexpr int kEventsKept = 10000;

std::string ThisHost() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "";
  return name;
}

}  // namespace

Result<std::unique_ptr<LeaseStore>> LeaseStore::Open(const std::string& path,
                                                     const LeaseStoreOptions& options) {
  DatabaseOptions db_options;
  db_options.busy_timeout = options.busy_timeout;
  db_options.file_mode = options.file_mode;
  UseSchema(db_options, StateFileSchema());  // refuse a file that is not ours before writing
  auto db = Database::Open(path, db_options);
  if (!db) return db.error();
  if (auto migrated = Migrate(**db); !migrated) return migrated.error();
  return Attach(std::shared_ptr<Database>(std::move(*db)), options.host);
}

Result<std::unique_ptr<LeaseStore>> LeaseStore::Attach(std::shared_ptr<Database> db, std::string host) {
  auto stmts = std::make_unique<Statements>();
  const struct {
    Statement* target;
    const char* name;
    const char* sql;
  } specs[] = {
      {&stmts->select_leases, "read leases",
       "SELECT id, uid, user, command, kind, created_unix_ms, host, master_port, gpu_memory_bytes, mps, gpu_share_percent "
       "FROM leases "
       "ORDER BY id"},
      {&stmts->select_lease, "read lease",
       "SELECT id, uid, user, command, kind, created_unix_ms, host, master_port, gpu_memory_bytes, mps, gpu_share_percent "
       "FROM leases "
       "WHERE id = ?1"},
      {&stmts->select_gpus, "read lease gpus",
       "SELECT lease_id, gpu_uuid, gpu_index FROM lease_gpus ORDER BY lease_id, position"},
      {&stmts->select_lease_gpus, "read lease gpus",
       "SELECT lease_id, gpu_uuid, gpu_index FROM lease_gpus WHERE lease_id = ?1 ORDER BY position"},
      {&stmts->select_processes, "read lease processes",
       "SELECT lease_id, pid, start_time_ticks FROM lease_processes ORDER BY lease_id, pid"},
      {&stmts->select_lease_processes, "read lease processes",
       "SELECT lease_id, pid, start_time_ticks FROM lease_processes WHERE lease_id = ?1 "
       "ORDER BY pid"},
      {&stmts->insert_lease, "insert lease",
       "INSERT INTO leases (uid, user, command, kind, created_unix_ms, host, master_port, gpu_memory_bytes, mps, "
       "gpu_share_percent) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"},
      {&stmts->insert_gpu, "insert lease gpu",
       "INSERT INTO lease_gpus (gpu_uuid, lease_id, position, gpu_index) VALUES (?1, ?2, ?3, ?4)"},
      {&stmts->upsert_process, "record lease process",
       "INSERT INTO lease_processes (lease_id, pid, start_time_ticks) VALUES (?1, ?2, ?3) "
       "ON CONFLICT (lease_id, pid) DO UPDATE SET start_time_ticks = excluded.start_time_ticks"},
      {&stmts->lease_exists, "find lease", "SELECT 1 FROM leases WHERE id = ?1"},
      {&stmts->gpu_holder, "find gpu holder",
       "SELECT lease_id FROM lease_gpus WHERE gpu_uuid = ?1 ORDER BY lease_id"},
      {&stmts->log_lease_event, "log lease event",
       "INSERT INTO events (at_unix_ms, kind, lease_id, uid, gpu_uuids) "
       "SELECT " GPUMAN_SQL_NOW_MS ", ?2, l.id, l.uid, "
       "  COALESCE((SELECT group_concat(gpu_uuid, ',') FROM "
       "    (SELECT gpu_uuid FROM lease_gpus WHERE lease_id = l.id ORDER BY position)), '') "
       "FROM leases l WHERE l.id = ?1"},
      {&stmts->delete_lease, "delete lease", "DELETE FROM leases WHERE id = ?1"},
      {&stmts->prune_events, "prune events",
       "DELETE FROM events WHERE id <= (SELECT MAX(id) FROM events) - ?1"},
      {&stmts->data_version, "read data version", "PRAGMA data_version"},
      {&stmts->select_fact, "read machine fact", "SELECT value FROM machine_facts WHERE key = ?1"},
      {&stmts->upsert_fact, "record machine fact",
       "INSERT INTO machine_facts (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO UPDATE SET value = excluded.value"},
  };
  // Each is prepared at its first use: a command uses a few of them (status: three), and
  // preparing all cost every open 0.7 M instructions.
  for (const auto& spec : specs) *spec.target = db->PrepareLater(spec.name, spec.sql);
  if (host.empty()) host = ThisHost();
  return std::unique_ptr<LeaseStore>(new LeaseStore(std::move(db), std::move(stmts), std::move(host)));
}

LeaseStore::LeaseStore(std::shared_ptr<Database> db, std::unique_ptr<Statements> stmts, std::string host)
    : db_(std::move(db)), stmts_(std::move(stmts)), host_(std::move(host)) {}

LeaseStore::~LeaseStore() = default;

Result<std::vector<model::Lease>> LeaseStore::LoadLocked(std::optional<int64_t> only_id) {
  Statement& leases = only_id ? stmts_->select_lease : stmts_->select_leases;
  Statement& gpus = only_id ? stmts_->select_lease_gpus : stmts_->select_gpus;
  Statement& procs = only_id ? stmts_->select_lease_processes : stmts_->select_processes;

  std::vector<model::Lease> out;
  std::map<int64_t, size_t> index;  // lease id -> position in `out`
  {
    auto use = leases.Use();
    if (only_id) leases.Bind(1, *only_id);
    while (true) {
      auto row = leases.Step();
      if (!row) return row.error();
      if (!*row) break;
      model::Lease lease;
      lease.id = leases.ColumnInt64(0);
      lease.uid = static_cast<uint32_t>(leases.ColumnInt64(1));
      lease.user = leases.ColumnText(2);
      lease.command = leases.ColumnText(3);
      lease.kind = leases.ColumnText(4);
      lease.created_unix_ms = leases.ColumnInt64(5);
      lease.host = leases.ColumnText(6);
      if (!leases.ColumnIsNull(7)) lease.master_port = static_cast<int>(leases.ColumnInt64(7));
      if (!leases.ColumnIsNull(8)) lease.gpu_memory_bytes = leases.ColumnInt64(8);
      lease.mps = leases.ColumnInt64(9) != 0;
      if (!leases.ColumnIsNull(10)) lease.gpu_share_percent = static_cast<int>(leases.ColumnInt64(10));
      index[lease.id] = out.size();
      out.push_back(std::move(lease));
    }
  }
  {
    auto use = gpus.Use();
    if (only_id) gpus.Bind(1, *only_id);
    while (true) {
      auto row = gpus.Step();
      if (!row) return row.error();
      if (!*row) break;
      auto it = index.find(gpus.ColumnInt64(0));
      if (it == index.end()) continue;
      model::Lease& lease = out[it->second];
      lease.gpu_uuids.push_back(gpus.ColumnText(1));
      lease.gpu_indices.push_back(gpus.ColumnIsNull(2) ? -1 : static_cast<int>(gpus.ColumnInt64(2)));
    }
  }
  {
    auto use = procs.Use();
    if (only_id) procs.Bind(1, *only_id);
    while (true) {
      auto row = procs.Step();
      if (!row) return row.error();
      if (!*row) break;
      auto it = index.find(procs.ColumnInt64(0));
      if (it == index.end()) continue;
      out[it->second].processes.push_back(model::LeaseProcess{
          static_cast<int32_t>(procs.ColumnInt64(1)), procs.ColumnInt64(2)});
    }
  }
  return out;
}

Status LeaseStore::DeleteLocked(int64_t lease_id, const char* event_kind) {
  {
    // Logging first doubles as the existence check: no row, no lease.
    auto use = stmts_->log_lease_event.Use();
    stmts_->log_lease_event.Bind(1, lease_id).Bind(2, event_kind);
    if (auto s = stmts_->log_lease_event.Run(); !s) return s;
    if (db_->Changes() == 0) {
      return MakeError(ErrorCode::kNotFound, "no lease " + std::to_string(lease_id));
    }
  }
  auto use = stmts_->delete_lease.Use();
  stmts_->delete_lease.Bind(1, lease_id);
  return stmts_->delete_lease.Run();  // lease_gpus and lease_processes cascade
}

bool LeaseStore::IsLive(const model::Lease& lease, const LivenessCheck& alive) const {
  const bool is_foreign = !lease.host.empty() && lease.host != host_;
  return is_foreign ||
         std::any_of(lease.processes.begin(), lease.processes.end(),
                     [&alive](const model::LeaseProcess& p) { return alive(p); }) ||
         (held_ && held_(lease.id));
}

Result<std::vector<model::Lease>> LeaseStore::ReclaimLocked(
    const LivenessCheck& alive, std::vector<model::Lease>* reclaimed) {
  auto recorded = LoadLocked(std::nullopt);
  if (!recorded) return recorded.error();
  std::vector<model::Lease> live;
  for (model::Lease& lease : *recorded) {
    if (IsLive(lease, alive)) {
      live.push_back(std::move(lease));
      continue;
    }
    if (auto s = DeleteLocked(lease.id, "reclaimed"); !s) return s.error();
    reclaimed->push_back(std::move(lease));
  }
  return live;
}

Result<model::Lease> LeaseStore::InsertLocked(const model::Lease& draft, const std::vector<std::string>& uuids,
                                              const std::vector<int>& indices) {
  model::Lease lease;
  {
    Statement& s = stmts_->insert_lease;
    auto use = s.Use();
    s.Bind(1, static_cast<int64_t>(draft.uid))
        .Bind(2, draft.user)
        .Bind(3, draft.command)
        .Bind(4, draft.kind)
        .Bind(5, draft.created_unix_ms)
        .Bind(6, host_);
    if (draft.master_port) s.Bind(7, static_cast<int64_t>(*draft.master_port));
    else s.BindNull(7);
    if (draft.gpu_memory_bytes) s.Bind(8, *draft.gpu_memory_bytes);
    else s.BindNull(8);
    s.Bind(9, static_cast<int64_t>(draft.mps ? 1 : 0));
    if (draft.gpu_share_percent) s.Bind(10, static_cast<int64_t>(*draft.gpu_share_percent));
    else s.BindNull(10);
    if (auto r = s.Run(); !r) return r.error();
    lease.id = db_->LastInsertRowId();
  }
  for (size_t i = 0; i < uuids.size(); ++i) {
    Statement& s = stmts_->insert_gpu;
    auto use = s.Use();
    s.Bind(1, uuids[i]).Bind(2, lease.id).Bind(3, static_cast<int64_t>(i));
    if (i < indices.size() && indices[i] >= 0) s.Bind(4, static_cast<int64_t>(indices[i]));
    else s.BindNull(4);
    auto r = s.Run();
    if (r) continue;
    if (r.error().code != ErrorCode::kConflict) return r.error();
    // The trigger lease_gpus_whole said no (a whole lease beside another): name a holder.
    std::string holder;
    Statement& q = stmts_->gpu_holder;
    auto use_q = q.Use();
    q.Bind(1, uuids[i]);
    if (auto row = q.Step(); row && *row) holder = " (lease " + std::to_string(q.ColumnInt64(0)) + ")";
    return MakeError(ErrorCode::kConflict, uuids[i] + " is already leased" + holder);
  }
  for (const model::LeaseProcess& p : draft.processes) {
    Statement& s = stmts_->upsert_process;
    auto use = s.Use();
    s.Bind(1, lease.id).Bind(2, static_cast<int64_t>(p.pid)).Bind(3, p.start_time_ticks);
    if (auto r = s.Run(); !r) return r.error();
  }
  {
    auto use = stmts_->log_lease_event.Use();
    stmts_->log_lease_event.Bind(1, lease.id).Bind(2, "acquired");
    if (auto r = stmts_->log_lease_event.Run(); !r) return r.error();
  }
  {
    auto use = stmts_->prune_events.Use();
    stmts_->prune_events.Bind(1, kEventsKept);
    if (auto r = stmts_->prune_events.Run(); !r) return r.error();
  }
  // Return what the database holds (processes by pid, a repeated pid once), as Get would.
  auto stored = LoadLocked(lease.id);
  if (!stored) return stored.error();
  GPUMAN_CHECK(stored->size() == 1);
  return std::move(stored->front());
}

Result<model::Lease> LeaseStore::Acquire(const model::Lease& draft, const ChooseGpus& choose,
                                         const LivenessCheck& alive, const GpuIndexOf& index_of,
                                         const ChoosePort& choose_port) {
  const char* context = "acquire lease";
  if (draft.processes.empty()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     std::string(context) + ": a lease needs at least one process");
  }
  auto tx = Transaction::BeginWrite(*db_);
  if (!tx) return tx.error().WithContext(context);
  std::vector<model::Lease> reclaimed;
  auto live = ReclaimLocked(alive, &reclaimed);
  if (!live) return live.error().WithContext(context);

  // From here on a failure still commits the cleanup above.
  auto fail = [&](Error error) -> Result<model::Lease> {
    if (!db_->InTransaction()) return error;  // SQLite rolled back already (disk full, ...)
    if (auto s = tx->Commit(); !s) return s.error().WithContext(context);
    return error;
  };

  auto chosen = choose(*live);
  if (!chosen) return fail(chosen.error());
  if (chosen->empty()) {
    return fail(MakeError(ErrorCode::kInvalidArgument,
                          std::string(context) + ": no GPUs were chosen"));
  }
  std::set<std::string> unique;
  for (const std::string& uuid : *chosen) {
    if (!unique.insert(uuid).second) {
      return fail(MakeError(ErrorCode::kInvalidArgument,
                            std::string(context) + ": " + uuid + " was chosen twice"));
    }
  }

  auto savepoint = Savepoint::Begin(*db_, "insert_lease");
  if (!savepoint) return fail(savepoint.error().WithContext(context));
  std::vector<int> indices;
  if (index_of) {
    for (const std::string& uuid : *chosen) indices.push_back(index_of(uuid));
  }
  model::Lease with_port = draft;
  with_port.master_port = choose_port ? choose_port(*live) : std::nullopt;
  auto lease = InsertLocked(with_port, *chosen, indices);
  if (!lease) {
    { Savepoint dropped = std::move(*savepoint); }  // undo the partial insert before committing
    return fail(lease.error().WithContext(context));
  }
  if (auto s = savepoint->Release(); !s) return fail(s.error().WithContext(context));
  if (auto s = tx->Commit(); !s) return s.error().WithContext(context);
  return lease;
}

Status LeaseStore::AddProcesses(int64_t lease_id,
                                const std::vector<model::LeaseProcess>& processes) {
  const std::string context = "add processes to lease " + std::to_string(lease_id);
  auto tx = Transaction::BeginWrite(*db_);
  if (!tx) return tx.error().WithContext(context);
  {
    auto use = stmts_->lease_exists.Use();
    stmts_->lease_exists.Bind(1, lease_id);
    auto row = stmts_->lease_exists.Step();
    if (!row) return row.error().WithContext(context);
    if (!*row) return MakeError(ErrorCode::kNotFound, context + ": no such lease");
  }
  for (const model::LeaseProcess& p : processes) {
    Statement& s = stmts_->upsert_process;
    auto use = s.Use();
    s.Bind(1, lease_id).Bind(2, static_cast<int64_t>(p.pid)).Bind(3, p.start_time_ticks);
    if (auto r = s.Run(); !r) return r.error().WithContext(context);
  }
  if (auto s = tx->Commit(); !s) return s.error().WithContext(context);
  return {};
}

Status LeaseStore::Release(int64_t lease_id) {
  const std::string context = "release lease " + std::to_string(lease_id);
  auto tx = Transaction::BeginWrite(*db_);
  if (!tx) return tx.error().WithContext(context);
  if (auto s = DeleteLocked(lease_id, "released"); !s) {
    if (s.error().code == ErrorCode::kNotFound) {
      return MakeError(ErrorCode::kNotFound, context + ": no such lease");
    }
    return s.error().WithContext(context);
  }
  if (auto s = tx->Commit(); !s) return s.error().WithContext(context);
  return {};
}

Result<std::vector<model::Lease>> LeaseStore::List(const LivenessCheck& alive) {
  // A full disk must not stop a reader: the live leases are then listed without deleting
  // the stale ones (a later writer reclaims them).
  auto read_only = [&](const Error& e) -> Result<std::vector<model::Lease>> {
    if (!IsDiskFull(e)) return e.WithContext("list leases");
    return ListLive(alive);
  };
  // Read first: most lists find nothing stale, and then need no write lock.
  if (auto recorded = ListRecorded()) {
    const bool any_stale = std::any_of(recorded->begin(), recorded->end(),
                                       [&](const model::Lease& lease) { return !IsLive(lease, alive); });
    if (!any_stale) return recorded;
  }
  std::vector<model::Lease> reclaimed;
  Result<std::vector<model::Lease>> live = std::vector<model::Lease>{};
  {
    auto tx = Transaction::BeginWrite(*db_);
    if (!tx) return tx.error().WithContext("list leases");
    live = ReclaimLocked(alive, &reclaimed);
    if (live) {
      if (auto s = tx->Commit(); !s) live = s.error();
    }
  }  // rolled back here unless committed
  if (!live) return read_only(live.error());
  return live;
}

Result<std::vector<model::Lease>> LeaseStore::ListLive(const LivenessCheck& alive) {
  auto all = ListRecorded();
  if (!all) return all.error();
  std::erase_if(*all, [&](const model::Lease& l) { return !IsLive(l, alive); });
  return all;
}

Result<std::vector<model::Lease>> LeaseStore::ListRecorded() {
  auto tx = Transaction::BeginRead(*db_);
  if (!tx) return tx.error().WithContext("list leases");
  int64_t data_version = 0;
  {
    Statement& v = stmts_->data_version;
    auto use = v.Use();
    auto row = v.Step();
    if (!row) return row.error().WithContext("list leases");
    if (*row) data_version = v.ColumnInt64(0);
  }
  const int64_t total_changes = db_->TotalChanges();
  if (recorded_ && recorded_->data_version == data_version && recorded_->total_changes == total_changes) {
    return recorded_->leases;
  }
  auto all = LoadLocked(std::nullopt);
  if (!all) return all.error().WithContext("list leases");
  if (auto s = tx->Commit(); !s) return s.error().WithContext("list leases");
  recorded_ = Recorded{data_version, total_changes, *all};
  return all;
}

Result<std::optional<model::Lease>> LeaseStore::Get(int64_t lease_id) {
  const std::string context = "read lease " + std::to_string(lease_id);
  auto tx = Transaction::BeginRead(*db_);
  if (!tx) return tx.error().WithContext(context);
  auto found = LoadLocked(lease_id);
  if (!found) return found.error().WithContext(context);
  if (auto s = tx->Commit(); !s) return s.error().WithContext(context);
  if (found->empty()) return std::optional<model::Lease>();
  return std::optional<model::Lease>(std::move(found->front()));
}

Result<std::optional<std::string>> LeaseStore::Fact(const std::string& key) {
  Statement& s = stmts_->select_fact;
  auto use = s.Use();
  s.Bind(1, key);
  auto row = s.Step();
  if (!row) return row.error().WithContext("read machine fact " + key);
  if (!*row) return std::optional<std::string>();
  return std::optional<std::string>(s.ColumnText(0));
}

Status LeaseStore::RecordFact(const std::string& key, const std::string& value) {
  Statement& s = stmts_->upsert_fact;
  auto use = s.Use();
  s.Bind(1, key).Bind(2, value);
  if (auto r = s.Run(); !r) return r.error().WithContext("record machine fact " + key);
  return {};
}

Result<std::vector<LeaseStore::MpsControl>> LeaseStore::MpsControls() {
  auto s = db_->Prepare("read mps controls",
                        "SELECT gpu_uuid, uid, user, pipe_directory, log_directory, started_unix_ms FROM mps_controls "
                        "ORDER BY gpu_uuid");
  if (!s) return s.error();
  auto use = s->Use();
  std::vector<MpsControl> out;
  for (;;) {
    auto row = s->Step();
    if (!row) return row.error();
    if (!*row) break;
    out.push_back({s->ColumnText(0), static_cast<uint32_t>(s->ColumnInt64(1)), s->ColumnText(2), s->ColumnText(3),
                   s->ColumnText(4), s->ColumnInt64(5)});
  }
  return out;
}

Status LeaseStore::RecordMpsControl(const MpsControl& c) {
  auto s = db_->Prepare("record mps control",
                        "INSERT INTO mps_controls (gpu_uuid, uid, user, pipe_directory, log_directory, started_unix_ms) "
                        "VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (gpu_uuid) DO UPDATE SET uid = excluded.uid, "
                        "user = excluded.user, pipe_directory = excluded.pipe_directory, "
                        "log_directory = excluded.log_directory, started_unix_ms = excluded.started_unix_ms");
  if (!s) return s.error();
  auto use = s->Use();
  s->Bind(1, c.gpu_uuid).Bind(2, static_cast<int64_t>(c.uid)).Bind(3, c.user).Bind(4, c.pipe_directory)
      .Bind(5, c.log_directory).Bind(6, c.started_unix_ms);
  return s->Run();
}

Status LeaseStore::ForgetMpsControl(const std::string& gpu_uuid) {
  auto s = db_->Prepare("forget mps control", "DELETE FROM mps_controls WHERE gpu_uuid = ?1");
  if (!s) return s.error();
  auto use = s->Use();
  s->Bind(1, gpu_uuid);
  return s->Run();
}

Result<std::vector<model::Lease>> LeaseStore::ReclaimStale(const LivenessCheck& alive) {
  auto tx = Transaction::BeginWrite(*db_);
  if (!tx) return tx.error().WithContext("reclaim stale leases");
  std::vector<model::Lease> reclaimed;
  auto live = ReclaimLocked(alive, &reclaimed);
  if (!live) return live.error().WithContext("reclaim stale leases");
  if (auto s = tx->Commit(); !s) return s.error().WithContext("reclaim stale leases");
  return reclaimed;
}

}  // namespace gpuman::store
