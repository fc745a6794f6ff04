#include "store/lease_store.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "store/migrations.h"
#include "store/proc_liveness.h"
#include "store/sqlite.h"
#include "support/temp_dir.h"

namespace gpuman::store {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Processes are fake (pid, start ticks) pairs; `alive_` decides which ones exist.
class LeaseStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.Join("state/leases.db");
    auto store = LeaseStore::Open(path_);
    ASSERT_TRUE(store.has_value()) << store.error().message;
    store_ = std::move(*store);
  }

  // A second connection to the same file that waits only 30 ms for a lock.
  Result<std::unique_ptr<LeaseStore>> OpenQuick() {
    LeaseStoreOptions quick;
    quick.busy_timeout = std::chrono::milliseconds(30);
    return LeaseStore::Open(path_, quick);
  }

  static model::Lease Draft(int32_t pid, const std::string& command = "python train.py") {
    model::Lease d;
    d.uid = 1000;
    d.user = "ada";
    d.command = command;
    d.kind = "run";
    d.created_unix_ms = 1764400000000;
    d.processes = {{pid, 100 + pid}};
    return d;
  }

  LivenessCheck Alive() {
    return [this](const model::LeaseProcess& p) {
      return alive_.count(p.pid) > 0 && p.start_time_ticks == 100 + p.pid;
    };
  }

  static ChooseGpus Take(std::vector<std::string> uuids) {
    return [uuids](const std::vector<model::Lease>&) -> Result<std::vector<std::string>> {
      return uuids;
    };
  }

  Result<model::Lease> AcquireFor(int32_t pid, std::vector<std::string> uuids) {
    alive_.insert(pid);
    return store_->Acquire(Draft(pid), Take(std::move(uuids)), Alive());
  }

  std::vector<int64_t> Ids(const std::vector<model::Lease>& leases) {
    std::vector<int64_t> ids;
    for (const auto& l : leases) ids.push_back(l.id);
    return ids;
  }

  int64_t CountRows(const char* table) {
    auto stmt = store_->DatabaseForTesting().Prepare("count", std::string("SELECT COUNT(*) FROM ") + table);
    auto use = stmt->Use();
    auto row = stmt->Step();
    return (row && *row) ? stmt->ColumnInt64(0) : -1;
  }

  std::vector<std::string> Events() {
    auto stmt = store_->DatabaseForTesting().Prepare(
        "events", "SELECT kind, lease_id, gpu_uuids FROM events ORDER BY id");
    auto use = stmt->Use();
    std::vector<std::string> out;
    while (true) {
      auto row = stmt->Step();
      if (!row || !*row) break;
      out.push_back(stmt->ColumnText(0) + " " + std::to_string(stmt->ColumnInt64(1)) + " " +
                    stmt->ColumnText(2));
    }
    return out;
  }

  testing::TempDir dir_;
  std::string path_;
  std::unique_ptr<LeaseStore> store_;
  std::set<int32_t> alive_;
};

TEST_F(LeaseStoreTest, OpenUsesWal) {
  auto stmt = store_->DatabaseForTesting().Prepare("mode", "PRAGMA journal_mode");
  auto use = stmt->Use();
  ASSERT_TRUE(*stmt->Step());
  EXPECT_EQ(stmt->ColumnText(0), "wal");
}

TEST_F(LeaseStoreTest, AcquireListGetRelease) {
  auto a = AcquireFor(11, {"GPU-b", "GPU-a"});
  ASSERT_TRUE(a.has_value()) << a.error().message;
  EXPECT_GT(a->id, 0);
  EXPECT_THAT(a->gpu_uuids, ElementsAre("GPU-b", "GPU-a"));  // order kept
  EXPECT_EQ(a->user, "ada");
  EXPECT_EQ(a->uid, 1000u);
  EXPECT_EQ(a->command, "python train.py");
  EXPECT_EQ(a->kind, "run");
  EXPECT_EQ(a->created_unix_ms, 1764400000000);
  EXPECT_THAT(a->processes, ElementsAre(model::LeaseProcess{11, 111}));

  auto b = AcquireFor(12, {"GPU-c"});
  ASSERT_TRUE(b.has_value()) << b.error().message;
  EXPECT_GT(b->id, a->id);

  auto live = store_->List(Alive());
  ASSERT_TRUE(live.has_value());
  EXPECT_THAT(Ids(*live), ElementsAre(a->id, b->id));
  EXPECT_THAT((*live)[0].gpu_uuids, ElementsAre("GPU-b", "GPU-a"));

  auto got = store_->Get(a->id);
  ASSERT_TRUE(got.has_value());
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ((*got)->gpu_uuids, a->gpu_uuids);
  EXPECT_EQ((*got)->processes, a->processes);

  ASSERT_TRUE(store_->Release(a->id));
  EXPECT_FALSE(store_->Get(a->id)->has_value());
  EXPECT_THAT(Ids(*store_->List(Alive())), ElementsAre(b->id));
  EXPECT_EQ(CountRows("lease_gpus"), 1);       // cascaded
  EXPECT_EQ(CountRows("lease_processes"), 1);  // cascaded

  // A released GPU can be leased again; ids are never reused.
  auto c = AcquireFor(13, {"GPU-a"});
  ASSERT_TRUE(c.has_value()) << c.error().message;
  EXPECT_GT(c->id, b->id);
  EXPECT_THAT(Events(), ElementsAre("acquired 1 GPU-b,GPU-a", "acquired 2 GPU-c",
                                    "released 1 GPU-b,GPU-a", "acquired 3 GPU-a"));
}

TEST_F(LeaseStoreTest, LeasesSurviveReopening) {
  auto a = AcquireFor(11, {"GPU-a"});
  ASSERT_TRUE(a.has_value());
  store_.reset();
  auto reopened = LeaseStore::Open(path_);
  ASSERT_TRUE(reopened.has_value()) << reopened.error().message;
  auto all = (*reopened)->ListRecorded();
  ASSERT_TRUE(all.has_value());
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].gpu_uuids, a->gpu_uuids);
}

TEST_F(LeaseStoreTest, ReleaseAndAddProcessesOfAMissingLeaseAreNotFound) {
  auto r = store_->Release(42);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(r.error().message, "release lease 42: no such lease");
  auto p = store_->AddProcesses(42, {{1, 2}});
  ASSERT_FALSE(p.has_value());
  EXPECT_EQ(p.error().code, ErrorCode::kNotFound);
  EXPECT_TRUE(Events().empty());
}

TEST_F(LeaseStoreTest, AddedProcessesKeepTheLeaseAlive) {
  auto a = AcquireFor(11, {"GPU-a"});
  ASSERT_TRUE(a.has_value());
  alive_.insert(20);
  ASSERT_TRUE(store_->AddProcesses(a->id, {{20, 120}, {21, 121}}));
  ASSERT_TRUE(store_->AddProcesses(a->id, {{21, 999}}));  // same pid: new start time wins
  auto got = store_->Get(a->id);
  EXPECT_THAT((*got)->processes,
              ElementsAre(model::LeaseProcess{11, 111}, model::LeaseProcess{20, 120},
                          model::LeaseProcess{21, 999}));
  alive_.erase(11);  // the runner exits; the job (pid 20) still runs
  EXPECT_THAT(Ids(*store_->List(Alive())), ElementsAre(a->id));
  alive_.erase(20);
  EXPECT_TRUE(store_->List(Alive())->empty());
}

TEST_F(LeaseStoreTest, StaleLeasesAreReclaimed) {
  auto a = AcquireFor(11, {"GPU-a"});
  auto b = AcquireFor(12, {"GPU-b"});
  ASSERT_TRUE(a && b);
  alive_.erase(11);
  auto reclaimed = store_->ReclaimStale(Alive());
  ASSERT_TRUE(reclaimed.has_value());
  EXPECT_THAT(Ids(*reclaimed), ElementsAre(a->id));
  EXPECT_THAT((*reclaimed)[0].gpu_uuids, ElementsAre("GPU-a"));
  EXPECT_TRUE(store_->ReclaimStale(Alive())->empty());
  EXPECT_THAT(Ids(*store_->ListRecorded()), ElementsAre(b->id));
  EXPECT_THAT(Events().back(), "reclaimed 1 GPU-a");
  // Its GPU is free again.
  EXPECT_TRUE(AcquireFor(13, {"GPU-a"}).has_value());
}

TEST_F(LeaseStoreTest, ChooseSeesOnlyLiveLeases) {
  ASSERT_TRUE(AcquireFor(11, {"GPU-a"}));
  auto b = AcquireFor(12, {"GPU-b"});
  alive_.erase(11);
  std::vector<int64_t> seen;
  alive_.insert(13);
  auto c = store_->Acquire(
      Draft(13),
      [&](const std::vector<model::Lease>& live) -> Result<std::vector<std::string>> {
        seen = Ids(live);
        return std::vector<std::string>{"GPU-a"};
      },
      Alive());
  ASSERT_TRUE(c.has_value()) << c.error().message;
  EXPECT_THAT(seen, ElementsAre(b->id));
}

TEST_F(LeaseStoreTest, ARecycledPidDoesNotKeepALeaseAlive) {
  auto ticks = ProcessStartTicks(getpid());
  ASSERT_TRUE(ticks.has_value());
  model::Lease mine = Draft(0);
  mine.processes = {{getpid(), *ticks}};
  model::Lease impostor = Draft(0);
  impostor.processes = {{getpid(), *ticks + 12345}};  // our pid, but someone else's start
  auto live_check = ProcLivenessCheck();
  auto a = store_->Acquire(mine, Take({"GPU-a"}), live_check);
  auto b = store_->Acquire(impostor, Take({"GPU-b"}), live_check);
  ASSERT_TRUE(a && b);
  auto live = store_->List(live_check);
  ASSERT_TRUE(live.has_value());
  EXPECT_THAT(Ids(*live), ElementsAre(a->id));
}

TEST_F(LeaseStoreTest, DoubleAllocationIsRefusedEvenIfChooseIsWrong) {
  auto a = AcquireFor(11, {"GPU-a", "GPU-b"});
  ASSERT_TRUE(a.has_value());
  auto b = AcquireFor(12, {"GPU-c", "GPU-b"});
  ASSERT_FALSE(b.has_value());
  EXPECT_EQ(b.error().code, ErrorCode::kConflict);
  EXPECT_EQ(b.error().message, "acquire lease: GPU-b is already leased (lease " +
                                   std::to_string(a->id) + ")");
  // Nothing of the refused lease was written (not even GPU-c).
  EXPECT_EQ(CountRows("leases"), 1);
  EXPECT_EQ(CountRows("lease_gpus"), 2);
  EXPECT_EQ(CountRows("lease_processes"), 1);
  EXPECT_EQ(Events().size(), 1u);
  EXPECT_TRUE(AcquireFor(12, {"GPU-c"}).has_value());
}

TEST_F(LeaseStoreTest, ConflictStillCommitsTheStaleCleanup) {
  auto a = AcquireFor(11, {"GPU-a"});
  auto b = AcquireFor(12, {"GPU-b"});
  alive_.erase(11);
  auto c = AcquireFor(13, {"GPU-b"});
  ASSERT_FALSE(c.has_value());
  EXPECT_EQ(c.error().code, ErrorCode::kConflict);
  EXPECT_THAT(Ids(*store_->ListRecorded()), ElementsAre(b->id));
}

TEST_F(LeaseStoreTest, ChooseErrorIsReturnedAndCleanupIsCommitted) {
  auto a = AcquireFor(11, {"GPU-a"});
  auto b = AcquireFor(12, {"GPU-b"});
  ASSERT_TRUE(a && b);
  alive_.erase(11);
  alive_.insert(13);
  auto c = store_->Acquire(
      Draft(13),
      [](const std::vector<model::Lease>&) -> Result<std::vector<std::string>> {
        return MakeError(ErrorCode::kUnavailable, "no free GPU with 40 GiB");
      },
      Alive());
  ASSERT_FALSE(c.has_value());
  EXPECT_EQ(c.error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(c.error().message, "no free GPU with 40 GiB");
  // The stale lease is gone for good, even though the transaction produced no lease.
  EXPECT_THAT(Ids(*store_->ListRecorded()), ElementsAre(b->id));
}

TEST_F(LeaseStoreTest, BadRequestsAreInvalidArguments) {
  model::Lease no_process = Draft(11);
  no_process.processes.clear();
  auto r1 = store_->Acquire(no_process, Take({"GPU-a"}), Alive());
  ASSERT_FALSE(r1.has_value());
  EXPECT_EQ(r1.error().code, ErrorCode::kInvalidArgument);
  auto r2 = AcquireFor(11, {});
  ASSERT_FALSE(r2.has_value());
  EXPECT_EQ(r2.error().code, ErrorCode::kInvalidArgument);
  auto r3 = AcquireFor(11, {"GPU-a", "GPU-a"});
  ASSERT_FALSE(r3.has_value());
  EXPECT_EQ(r3.error().code, ErrorCode::kInvalidArgument);
  EXPECT_THAT(r3.error().message, HasSubstr("GPU-a was chosen twice"));
  EXPECT_EQ(CountRows("leases"), 0);
}

TEST_F(LeaseStoreTest, DiskFullIsReportedAndTheStoreStaysUsable) {
  auto a = AcquireFor(11, {"GPU-a"});
  ASSERT_TRUE(a.has_value());
  Database& db = store_->DatabaseForTesting();
  auto pages = db.Prepare("pages", "PRAGMA page_count");
  std::string count;
  {
    auto use = pages->Use();
    ASSERT_TRUE(*pages->Step());
    count = pages->ColumnText(0);
  }
  ASSERT_TRUE(db.ExecScript("cap", "PRAGMA max_page_count = " + count));
  alive_.insert(12);
  auto big = store_->Acquire(Draft(12, std::string(200000, 'x')), Take({"GPU-b"}), Alive());
  ASSERT_FALSE(big.has_value());
  EXPECT_EQ(big.error().code, ErrorCode::kIo);
  EXPECT_THAT(big.error().message, HasSubstr("no space left on device"));
  EXPECT_FALSE(db.InTransaction());
  EXPECT_THAT(Ids(*store_->List(Alive())), ElementsAre(a->id));
  ASSERT_TRUE(db.ExecScript("uncap", "PRAGMA max_page_count = 1073741823"));
  EXPECT_TRUE(store_->Acquire(Draft(12), Take({"GPU-b"}), Alive()).has_value());
}

TEST_F(LeaseStoreTest, BusyWriterGivesKBusyAfterTheTimeout) {
  auto holder = Database::Open(path_);
  ASSERT_TRUE(holder.has_value());
  auto tx = Transaction::BeginWrite(**holder);
  ASSERT_TRUE(tx.has_value());
  auto other = OpenQuick();
  ASSERT_TRUE(other.has_value()) << other.error().message;  // up to date: no write lock
  alive_.insert(11);
  auto a = (*other)->Acquire(Draft(11), Take({"GPU-a"}), Alive());
  ASSERT_FALSE(a.has_value());
  EXPECT_EQ(a.error().code, ErrorCode::kBusy);
  EXPECT_THAT(a.error().message, HasSubstr("acquire lease: state db " + path_));
  EXPECT_TRUE((*other)->ListRecorded().has_value());  // reads still work
}

// ListRecorded keeps its last answer while nothing changes: a write through another
// connection (PRAGMA data_version) and through this one (its change count) are both seen.
TEST_F(LeaseStoreTest, ListSeesEveryWriteOfEitherConnection) {
  auto other = LeaseStore::Open(path_);
  ASSERT_TRUE(other.has_value()) << other.error().message;
  EXPECT_TRUE(store_->ListRecorded()->empty());
  EXPECT_TRUE(store_->ListRecorded()->empty());  // the kept answer
  alive_.insert(11);
  auto a = (*other)->Acquire(Draft(11), Take({"GPU-a"}), Alive());
  ASSERT_TRUE(a.has_value());
  EXPECT_THAT(Ids(*store_->ListRecorded()), ElementsAre(a->id));
  auto b = AcquireFor(12, {"GPU-b"});
  ASSERT_TRUE(b.has_value());
  EXPECT_THAT(Ids(*store_->ListRecorded()), ElementsAre(a->id, b->id));
  ASSERT_TRUE(store_->AddProcesses(b->id, {{13, 113}}));
  auto listed = store_->ListRecorded();
  ASSERT_TRUE(listed.has_value());
  EXPECT_EQ(listed->back().processes.size(), 2u);
  ASSERT_TRUE((*other)->Release(a->id));
  EXPECT_THAT(Ids(*store_->List(Alive())), ElementsAre(b->id));
  ASSERT_TRUE(store_->Release(b->id));
  EXPECT_TRUE(store_->List(Alive())->empty());
}

// List takes the write lock only to delete a stale lease: with another writer holding it,
// a list with nothing stale answers at once, and one with a stale lease waits (kBusy).
TEST_F(LeaseStoreTest, ListTakesTheWriteLockOnlyToReclaim) {
  auto a = AcquireFor(11, {"GPU-a"});
  ASSERT_TRUE(a.has_value());
  auto holder = Database::Open(path_);
  ASSERT_TRUE(holder.has_value());
  auto tx = Transaction::BeginWrite(**holder);
  ASSERT_TRUE(tx.has_value());
  auto other = OpenQuick();
  ASSERT_TRUE(other.has_value()) << other.error().message;
  auto live = (*other)->List(Alive());
  ASSERT_TRUE(live.has_value()) << live.error().message;
  EXPECT_THAT(Ids(*live), ElementsAre(a->id));
  alive_.erase(11);  // now stale: deleting it needs the lock
  auto stale = (*other)->List(Alive());
  ASSERT_FALSE(stale.has_value());
  EXPECT_EQ(stale.error().code, ErrorCode::kBusy);
  ASSERT_TRUE(tx->Commit());
  auto after = (*other)->List(Alive());
  ASSERT_TRUE(after.has_value()) << after.error().message;
  EXPECT_TRUE(after->empty());
  EXPECT_TRUE(store_->ListRecorded()->empty());  // it was deleted, not just hidden
}

TEST(LeaseStoreOpenTest, CorruptFileIsKIoNotACrash) {
  testing::TempDir dir;
  std::string garbage;
  for (int i = 0; i < 10000; ++i) garbage.push_back(static_cast<char>((i * 7919) % 251));
  std::string path = dir.Write("leases.db", garbage);
  auto store = LeaseStore::Open(path);
  ASSERT_FALSE(store.has_value());
  EXPECT_EQ(store.error().code, ErrorCode::kIo);
  EXPECT_THAT(store.error().message, HasSubstr(path + " is not a gpuman state database (not an SQLite file)"));
}

TEST(LeaseStoreOpenTest, CorruptPagesAfterAValidHeaderAreKIo) {
  testing::TempDir dir;
  std::string path = dir.Join("leases.db");
  {
    auto store = LeaseStore::Open(path);
    ASSERT_TRUE(store.has_value());
    ASSERT_TRUE((*store)->DatabaseForTesting().ExecScript("checkpoint", "PRAGMA wal_checkpoint(TRUNCATE)"));
  }
  // Keep the 100-byte header, scribble over the rest of the file.
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  ASSERT_GT(bytes.size(), 200u);
  for (size_t i = 100; i < bytes.size(); ++i) bytes[i] = static_cast<char>(0xA5 ^ i);
  dir.Write("leases.db", bytes);
  auto store = LeaseStore::Open(path);
  ASSERT_FALSE(store.has_value());
  EXPECT_EQ(store.error().code, ErrorCode::kIo) << store.error().message;
  EXPECT_THAT(store.error().message, HasSubstr("corrupt"));
}

TEST(LeaseStoreOpenTest, PathUnderARegularFileFails) {
  auto store = LeaseStore::Open("/etc/passwd/x.db");
  ASSERT_FALSE(store.has_value());
  EXPECT_EQ(store.error().code, ErrorCode::kIo);
  EXPECT_THAT(store.error().message, HasSubstr("not a directory"));
}

TEST(LeaseStoreOpenTest, ReadOnlyStateDirIsPermissionDenied) {
  if (geteuid() == 0) GTEST_SKIP() << "root ignores directory permissions";
  testing::TempDir dir;
  ASSERT_EQ(mkdir(dir.Join("ro").c_str(), 0500), 0);
  auto store = LeaseStore::Open(dir.Join("ro/leases.db"));
  ASSERT_FALSE(store.has_value());
  EXPECT_EQ(store.error().code, ErrorCode::kPermissionDenied);
  EXPECT_EQ(store.error().message,
            "open state db " + dir.Join("ro/leases.db") + ": create " + dir.Join("ro/leases.db") +
                ": permission denied");
  chmod(dir.Join("ro").c_str(), 0700);
}

}  // namespace
}  // namespace gpuman::store

namespace gpuman::store {
namespace {

// ---- Memory slices (docs/share.md): several leases of one GPU, whole leases alone.

constexpr int64_t kSliceGiB = int64_t{1} << 30;

class LeaseSliceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = LeaseStore::Open(dir_.Join("leases.db"));
    ASSERT_TRUE(store.has_value()) << store.error().message;
    store_ = std::move(*store);
  }
  Result<model::Lease> Take(int32_t pid, std::vector<std::string> uuids, std::optional<int64_t> gib) {
    model::Lease d;
    d.uid = 1000 + static_cast<uint32_t>(pid);
    d.user = "u" + std::to_string(pid);
    d.kind = "run";
    d.processes = {{pid, 1}};
    if (gib) d.gpu_memory_bytes = *gib * kSliceGiB;
    return store_->Acquire(
        d, [uuids](const std::vector<model::Lease>&) -> Result<std::vector<std::string>> { return uuids; },
        [](const model::LeaseProcess&) { return true; });
  }
  testing::TempDir dir_;
  std::unique_ptr<LeaseStore> store_;
};

TEST_F(LeaseSliceTest, SlicesOfOneGpuAreStoredTogetherWithTheirMemory) {
  auto a = Take(1, {"GPU-a"}, 30);
  auto b = Take(2, {"GPU-a"}, 20);
  ASSERT_TRUE(a.has_value()) << a.error().message;
  ASSERT_TRUE(b.has_value()) << b.error().message;
  EXPECT_EQ(a->gpu_memory_bytes, 30 * kSliceGiB);
  auto live = store_->ListLive([](const model::LeaseProcess&) { return true; });
  ASSERT_TRUE(live.has_value());
  ASSERT_EQ(live->size(), 2u);
  EXPECT_EQ((*live)[1].gpu_uuids, std::vector<std::string>{"GPU-a"});
  EXPECT_EQ((*live)[1].gpu_memory_bytes, 20 * kSliceGiB);
}

TEST_F(LeaseSliceTest, AnMpsLeaseKeepsItsFlagAndShareAndTheMpsControlsAreRecorded) {
  model::Lease d;
  d.uid = 1000;
  d.user = "ada";
  d.kind = "run";
  d.processes = {{7, 1}};
  d.gpu_memory_bytes = 10 * kSliceGiB;
  d.mps = true;
  d.gpu_share_percent = 40;
  auto got = store_->Acquire(
      d, [](const std::vector<model::Lease>&) -> Result<std::vector<std::string>> { return std::vector<std::string>{"GPU-a"}; },
      [](const model::LeaseProcess&) { return true; });
  ASSERT_TRUE(got.has_value()) << got.error().message;
  EXPECT_TRUE(got->mps);
  EXPECT_EQ(got->gpu_share_percent, 40);
  auto plain = Take(8, {"GPU-b"}, 10);
  ASSERT_TRUE(plain.has_value());
  EXPECT_FALSE(plain->mps);
  EXPECT_FALSE(plain->gpu_share_percent.has_value());

  LeaseStore::MpsControl c{"GPU-a", 1000, "ada", "/run/x/GPU-a/pipe", "/run/x/GPU-a/log", 5};
  ASSERT_TRUE(store_->RecordMpsControl(c));
  c.uid = 1001;  // replaced, not added
  ASSERT_TRUE(store_->RecordMpsControl(c));
  auto controls = store_->MpsControls();
  ASSERT_TRUE(controls.has_value());
  ASSERT_EQ(controls->size(), 1u);
  EXPECT_EQ((*controls)[0], c);
  ASSERT_TRUE(store_->ForgetMpsControl("GPU-a"));
  ASSERT_TRUE(store_->ForgetMpsControl("GPU-a"));  // no error when gone
  EXPECT_TRUE(store_->MpsControls()->empty());
}

TEST_F(LeaseSliceTest, TheTableRefusesAWholeLeaseBesideAnyOtherWhateverTheCallerChose) {
  ASSERT_TRUE(Take(1, {"GPU-a"}, 30).has_value());
  auto whole = Take(2, {"GPU-a"}, std::nullopt);
  ASSERT_FALSE(whole.has_value());
  EXPECT_EQ(whole.error().code, ErrorCode::kConflict);
  EXPECT_THAT(whole.error().message, HasSubstr("GPU-a is already leased (lease 1)"));
  ASSERT_TRUE(Take(3, {"GPU-b"}, std::nullopt).has_value());
  auto slice = Take(4, {"GPU-b"}, 10);
  ASSERT_FALSE(slice.has_value());
  EXPECT_EQ(slice.error().code, ErrorCode::kConflict);
  auto again = Take(5, {"GPU-b"}, std::nullopt);
  ASSERT_FALSE(again.has_value());
  EXPECT_EQ(again.error().code, ErrorCode::kConflict);
}

TEST(LeaseSliceMigrationTest, LeasesOfSchema7KeepTheirGpusAndAreWhole) {
  testing::TempDir dir;
  const std::string path = dir.Join("leases.db");
  {
    auto db = Database::Open(path);
    ASSERT_TRUE(db.has_value());
    ASSERT_TRUE(Migrate(**db, AllMigrations().first(7)));
    ASSERT_TRUE((*db)->ExecScript("a lease of schema 7",
                                  "INSERT INTO leases (id, uid, user, command, kind, created_unix_ms, host) "
                                  "VALUES (4, 1000, 'ada', 'python x.py', 'run', 1, '');"
                                  "INSERT INTO lease_gpus (gpu_uuid, lease_id, position, gpu_index) VALUES "
                                  "('GPU-a', 4, 0, 0), ('GPU-b', 4, 1, 1);"
                                  "INSERT INTO lease_processes (lease_id, pid, start_time_ticks) VALUES (4, 77, 1);"));
  }
  auto store = LeaseStore::Open(path);
  ASSERT_TRUE(store.has_value()) << store.error().message;
  auto got = (*store)->Get(4);
  ASSERT_TRUE(got.has_value() && got->has_value());
  EXPECT_EQ((*got)->gpu_uuids, (std::vector<std::string>{"GPU-a", "GPU-b"}));
  EXPECT_EQ((*got)->gpu_indices, (std::vector<int>{0, 1}));
  EXPECT_FALSE((*got)->gpu_memory_bytes.has_value());
  // Still whole: a slice of its GPU is refused by the table.
  model::Lease d;
  d.uid = 1001;
  d.kind = "run";
  d.processes = {{78, 1}};
  d.gpu_memory_bytes = kSliceGiB;
  auto slice = (*store)->Acquire(
      d, [](const std::vector<model::Lease>&) -> Result<std::vector<std::string>> { return std::vector<std::string>{"GPU-b"}; },
      [](const model::LeaseProcess&) { return true; });
  ASSERT_FALSE(slice.has_value());
  EXPECT_EQ(slice.error().code, ErrorCode::kConflict);
}

}  // namespace
}  // namespace gpuman::store
