#include "store/state_db.h"

#include "store/migrations.h"

namespace gpuman::store {

Result<StateDb> OpenStateDb(const std::string& path, JobStoreOptions options) {
  DatabaseOptions db_options;
  db_options.busy_timeout = options.busy_timeout;
  UseSchema(db_options, StateFileSchema());  // refuse a file that is not ours before writing
  auto opened = Database::Open(path, db_options);
  if (!opened) return opened.error();
  std::shared_ptr<Database> db(std::move(*opened));
  if (auto migrated = Migrate(*db); !migrated) return migrated.error();
  StateDb out;
  auto jobs = JobStore::Attach(db, std::move(options));
  if (!jobs) return jobs.error();
  out.jobs = std::move(*jobs);
  auto leases = LeaseStore::Attach(db);
  if (!leases) return leases.error();
  out.leases = std::move(*leases);
  return out;
}

}  // namespace gpuman::store
