// The daemon's state db (state.db) has one owner: one connection, opened and migrated once,
// on which both the job table and the lease table are attached. The daemon and every job
// supervisor open it this way; neither store opens or migrates the file by itself there.
// docs/state.md.
#pragma once

#include <memory>
#include <string>

#include "base/result.h"
#include "store/job_store.h"
#include "store/lease_store.h"

namespace gpuman::store {

struct StateDb {
  std::unique_ptr<JobStore> jobs;
  std::unique_ptr<LeaseStore> leases;
};

/// Opens `path` once (creating it 0600 and its directories 0700 if needed), migrates it,
/// and attaches both stores to that connection. Errors: as JobStore::Open.
Result<StateDb> OpenStateDb(const std::string& path, JobStoreOptions options = {});

}  // namespace gpuman::store
