// Leases record their host; only that host judges whether the holder lives (schema
// version 4). A lease table shared between nodes (a $HOME on NFS) must not lose node A's
// lease because node B cannot see A's pids.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "store/lease_store.h"
#include "store/migrations.h"
#include "support/temp_dir.h"

namespace gpuman::store {
namespace {

model::Lease Draft(int32_t pid) {
  model::Lease draft;
  draft.uid = 1000;
  draft.user = "ada";
  draft.command = "train";
  draft.kind = "run";
  draft.processes = {{pid, 1}};
  return draft;
}

ChooseGpus Take(std::string uuid) {
  return [uuid](const std::vector<model::Lease>&) -> Result<std::vector<std::string>> {
    return std::vector<std::string>{uuid};
  };
}

const LivenessCheck kNobodyAlive = [](const model::LeaseProcess&) { return false; };
const LivenessCheck kEveryoneAlive = [](const model::LeaseProcess&) { return true; };

std::unique_ptr<LeaseStore> OpenAs(const std::string& path, const std::string& host) {
  LeaseStoreOptions options;
  options.host = host;
  auto store = LeaseStore::Open(path, options);
  EXPECT_TRUE(store.has_value()) << store.error().message;
  return store ? std::move(*store) : nullptr;
}

TEST(LeaseHostTest, RecordedAndOnlyReclaimedByItsHost) {
  testing::TempDir dir;
  const std::string path = dir.Join("leases.db");
  auto a = OpenAs(path, "node-a");
  auto b = OpenAs(path, "node-b");
  ASSERT_TRUE(a && b);
  auto lease = a->Acquire(Draft(4321), Take("GPU-a"), kEveryoneAlive);
  ASSERT_TRUE(lease.has_value()) << lease.error().message;
  EXPECT_EQ(lease->host, "node-a");

  // node-b sees no pid 4321 alive, but the lease is node-a's: it stays.
  auto seen_by_b = b->List(kNobodyAlive);
  ASSERT_TRUE(seen_by_b.has_value());
  ASSERT_EQ(seen_by_b->size(), 1u);
  EXPECT_EQ((*seen_by_b)[0].host, "node-a");
  EXPECT_TRUE(b->ReclaimStale(kNobodyAlive)->empty());
  // node-b's own acquire cleans up nothing of node-a's either.
  ASSERT_TRUE(b->Acquire(Draft(99), Take("GPU-b"), kNobodyAlive).has_value());
  EXPECT_EQ(b->ListRecorded()->size(), 2u);

  // node-a judges its own lease.
  auto reclaimed = a->ReclaimStale(kNobodyAlive);
  ASSERT_TRUE(reclaimed.has_value());
  ASSERT_EQ(reclaimed->size(), 2u - 1u);
  EXPECT_EQ((*reclaimed)[0].id, lease->id);
}

TEST(LeaseHostTest, DefaultHostIsThisMachine) {
  testing::TempDir dir;
  auto store = LeaseStore::Open(dir.Join("leases.db"));
  ASSERT_TRUE(store.has_value());
  auto lease = (*store)->Acquire(Draft(1), Take("GPU-1"), kEveryoneAlive);
  ASSERT_TRUE(lease.has_value());
  char name[256] = {};
  ASSERT_EQ(gethostname(name, sizeof name - 1), 0);
  EXPECT_EQ(lease->host, name);
}

TEST(LeaseHostTest, VersionTwoLeasesHaveNoHostAndAreReclaimedHere) {
  testing::TempDir dir;
  const std::string path = dir.Join("leases.db");
  {
    // A file as a gpuman of schema version 2 left it.
    auto db = Database::Open(path);
    ASSERT_TRUE(db.has_value()) << db.error().message;
    ASSERT_EQ(*Migrate(**db, AllMigrations().first(2)), 0);
    ASSERT_TRUE((*db)->ExecScript("v2 rows", R"sql(
      INSERT INTO leases (id, uid, user, command, kind, created_unix_ms)
        VALUES (41, 1000, 'ada', 'python3 train.py', 'run', 1700000000000);
      INSERT INTO lease_gpus (gpu_uuid, lease_id, position) VALUES ('GPU-7', 41, 0);
      INSERT INTO lease_processes (lease_id, pid, start_time_ticks) VALUES (41, 4321, 99);
    )sql"));
  }
  auto store = OpenAs(path, "node-b");
  ASSERT_TRUE(store);
  auto recorded = store->ListRecorded();
  ASSERT_TRUE(recorded.has_value());
  ASSERT_EQ(recorded->size(), 1u);
  EXPECT_EQ((*recorded)[0].host, "");
  EXPECT_EQ((*recorded)[0].gpu_uuids, std::vector<std::string>{"GPU-7"});
  auto reclaimed = store->ReclaimStale(kNobodyAlive);  // no host: judged here, as before
  ASSERT_TRUE(reclaimed.has_value());
  EXPECT_EQ(reclaimed->size(), 1u);
}

}  // namespace
}  // namespace gpuman::store
