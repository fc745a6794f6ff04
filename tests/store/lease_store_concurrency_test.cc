// Several processes, each with its own LeaseStore on one file, acquire and release GPUs
// in a loop. Besides the database's own checks, every holder marks its GPU in shared
// memory while it holds the lease: two holders of one GPU at the same time would collide
// there.
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "store/lease_store.h"
#include "store/proc_liveness.h"
#include "support/temp_dir.h"

namespace gpuman::store {
namespace {

constexpr int kGpus = 8;
constexpr int kProcesses = 4;
constexpr int kIterations = 200;
constexpr int32_t kDeadPid = 2147483646;  // above any pid_max

struct Shared {
  std::atomic<int32_t> owner[kGpus];
  std::atomic<int32_t> violations;
  std::atomic<int32_t> acquired;
};
static_assert(std::atomic<int32_t>::is_always_lock_free);

std::string Uuid(int i) { return "GPU-" + std::to_string(i); }

int Child(const std::string& path, Shared* shared) {
  auto store = LeaseStore::Open(path);
  if (!store) {
    std::fprintf(stderr, "child %d: %s\n", getpid(), store.error().message.c_str());
    return 2;
  }
  auto me = CurrentLeaseProcess(getpid());
  if (!me) return 3;
  model::Lease draft;
  draft.uid = 1000;
  draft.user = "ada";
  draft.command = "loop";
  draft.kind = "run";
  draft.processes = {*me};
  LivenessCheck alive = ProcLivenessCheck();
  unsigned seed = static_cast<unsigned>(getpid());

  for (int i = 0; i < kIterations; ++i) {
    auto choose = [&](const std::vector<model::Lease>& live) -> Result<std::vector<std::string>> {
      bool taken[kGpus] = {};
      for (const auto& lease : live) {
        for (const auto& uuid : lease.gpu_uuids) {
          int g = std::atoi(uuid.c_str() + 4);
          if (taken[g]) shared->violations++;  // two live leases share a GPU
          taken[g] = true;
        }
      }
      int start = static_cast<int>(rand_r(&seed) % kGpus);
      for (int k = 0; k < kGpus; ++k) {
        int g = (start + k) % kGpus;
        if (!taken[g]) return std::vector<std::string>{Uuid(g)};
      }
      return MakeError(ErrorCode::kUnavailable, "all GPUs leased");
    };
    draft.created_unix_ms = i;
    auto lease = (*store)->Acquire(draft, choose, alive);
    if (!lease) {
      std::fprintf(stderr, "child %d: %s\n", getpid(), lease.error().message.c_str());
      return 4;
    }
    int g = std::atoi(lease->gpu_uuids[0].c_str() + 4);
    int32_t expected = 0;
    if (!shared->owner[g].compare_exchange_strong(expected, getpid())) shared->violations++;
    shared->acquired++;
    for (int k = 0; k < 50; ++k) sched_yield();  // hold it for a moment
    expected = getpid();
    if (!shared->owner[g].compare_exchange_strong(expected, 0)) shared->violations++;
    if (auto s = (*store)->Release(lease->id); !s) {
      std::fprintf(stderr, "child %d: %s\n", getpid(), s.error().message.c_str());
      return 5;
    }
  }
  return 0;
}

TEST(LeaseStoreConcurrencyTest, ProcessesNeverShareAGpu) {
  testing::TempDir dir;
  std::string path = dir.Join("leases.db");
  {
    // Two leases of a process that is gone: some child reclaims them along the way.
    auto store = LeaseStore::Open(path);
    ASSERT_TRUE(store.has_value()) << store.error().message;
    model::Lease dead;
    dead.kind = "run";
    dead.processes = {{kDeadPid, 1}};
    auto always = [](const model::LeaseProcess&) { return true; };
    for (const char* uuid : {"GPU-0", "GPU-5"}) {
      auto take = [uuid](const std::vector<model::Lease>&) -> Result<std::vector<std::string>> {
        return std::vector<std::string>{uuid};
      };
      ASSERT_TRUE((*store)->Acquire(dead, take, always).has_value());
    }
  }

  void* mem = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                   -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  auto* shared = new (mem) Shared{};

  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) _exit(Child(path, shared));
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child exit status " << status;
  }
  EXPECT_EQ(shared->violations.load(), 0);
  EXPECT_EQ(shared->acquired.load(), kProcesses * kIterations);
  munmap(mem, sizeof(Shared));

  auto store = LeaseStore::Open(path);
  ASSERT_TRUE(store.has_value());
  EXPECT_TRUE((*store)->ListRecorded()->empty());
  auto events = (*store)->DatabaseForTesting().Prepare(
      "events", "SELECT kind, COUNT(*) FROM events GROUP BY kind ORDER BY kind");
  auto use = events->Use();
  std::vector<std::string> counts;
  while (*events->Step()) {
    counts.push_back(events->ColumnText(0) + "=" + std::to_string(events->ColumnInt64(1)));
  }
  EXPECT_THAT(counts, ::testing::ElementsAre("acquired=" + std::to_string(kProcesses * kIterations + 2),
                                             "reclaimed=2",
                                             "released=" + std::to_string(kProcesses * kIterations)));
}

// Processes that find no file yet race to create it, switch it to WAL and migrate it.
TEST(LeaseStoreConcurrencyTest, SimultaneousFirstOpensAllSucceed) {
  testing::TempDir dir;
  std::string path = dir.Join("fresh/state/leases.db");
  std::vector<pid_t> children;
  for (int p = 0; p < 6; ++p) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      auto store = LeaseStore::Open(path);
      if (!store) {
        std::fprintf(stderr, "child %d: %s\n", getpid(), store.error().message.c_str());
        _exit(2);
      }
      model::Lease draft;
      draft.kind = "run";
      draft.processes = {{getpid(), 1}};
      auto take = [p](const std::vector<model::Lease>&) -> Result<std::vector<std::string>> {
        return std::vector<std::string>{Uuid(p)};
      };
      auto always = [](const model::LeaseProcess&) { return true; };
      auto lease = (*store)->Acquire(draft, take, always);
      if (!lease) std::fprintf(stderr, "child %d: %s\n", getpid(), lease.error().message.c_str());
      _exit(lease ? 0 : 3);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child exit status " << status;
  }
  auto store = LeaseStore::Open(path);
  ASSERT_TRUE(store.has_value());
  EXPECT_EQ((*store)->ListRecorded()->size(), 6u);
}

}  // namespace
}  // namespace gpuman::store
