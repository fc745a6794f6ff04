// The queue and leases ops in pages (docs/protocol.md, "queue", "leases"): after_id,
// limit, next; a page never outgrows the frame, even with huge names or commands; the
// pages together list every job (lease) once.
#include <gtest/gtest.h>

#include <set>

#include "daemon/call.h"
#include "daemon/daemon_world.h"
#include "protocol/framing.h"
#include "protocol/json_io.h"
#include "store/job_store.h"
#include "store/lease_store.h"
#include "store/proc_liveness.h"

namespace gpuman::daemon {
namespace {

using testing::PeerFor;
using testing::World;

int64_t SubmitNamed(World& world, const std::string& name) {
  protocol::SubmitArgs s;
  s.name = name;
  s.argv = {"true"};
  s.cwd = world.dir().path();
  s.output = world.dir().Join("never.log");
  auto reply = world.Call(PeerFor(Role::kOwner), s);
  EXPECT_TRUE(reply.ok()) << (reply.error ? reply.error->message : "");
  return reply.ok() ? reply.result["id"].get<int64_t>() : -1;
}

// Every page from the first, as `gpuman queue` fetches them; the ids in order.
std::vector<int64_t> AllPages(World& world, std::optional<int64_t> limit, size_t* pages = nullptr) {
  std::vector<int64_t> ids;
  protocol::QueueArgs args{true, 0, limit};
  for (int guard = 0; guard < 10000; ++guard) {
    auto reply = world.Call(PeerFor(Role::kOtherUser), args);
    EXPECT_TRUE(reply.ok());
    // The reply as sent (EncodeReplyFrame would replace a larger one by too_large).
    EXPECT_LE(protocol::DumpJson(protocol::ToJson(reply)).size(), protocol::kMaxMessageBytes);
    auto page = protocol::ResultOf<protocol::QueueResult>(reply);
    EXPECT_TRUE(page);
    if (!page) break;
    if (pages) ++*pages;
    for (const auto& j : page->jobs) ids.push_back(j.id);
    if (!page->next) break;
    EXPECT_GT(*page->next, args.after_id);
    args.after_id = *page->next;
  }
  return ids;
}

TEST(QueuePagingTest, LimitAndAfterIdWalkEveryJobOnce) {
  World world;
  std::vector<int64_t> submitted;
  for (int i = 0; i < 7; ++i) submitted.push_back(SubmitNamed(world, "j" + std::to_string(i)));
  auto first = protocol::ResultOf<protocol::QueueResult>(world.Call(PeerFor(Role::kOwner), protocol::QueueArgs{true, 0, 3}));
  ASSERT_TRUE(first);
  ASSERT_EQ(first->jobs.size(), 3u);
  EXPECT_EQ(first->next, submitted[2]);
  auto last = protocol::ResultOf<protocol::QueueResult>(
      world.Call(PeerFor(Role::kOwner), protocol::QueueArgs{true, submitted[5], 3}));
  ASSERT_TRUE(last);
  ASSERT_EQ(last->jobs.size(), 1u);
  EXPECT_EQ(last->jobs[0].id, submitted[6]);
  EXPECT_EQ(last->next, std::nullopt) << "the last page says so";
  size_t pages = 0;
  EXPECT_EQ(AllPages(world, 3, &pages), submitted);
  EXPECT_EQ(pages, 3u);
  // A page that holds the last job has no next.
  auto exact = protocol::ResultOf<protocol::QueueResult>(world.Call(PeerFor(Role::kOwner), protocol::QueueArgs{true, 0, 7}));
  ASSERT_TRUE(exact);
  EXPECT_EQ(exact->jobs.size(), 7u);
  EXPECT_EQ(exact->next, std::nullopt);
}

TEST(QueuePagingTest, TheDefaultAndLargestPageIsBounded) {
  World world;
  for (int i = 0; i < protocol::kMaxQueuePage + 20; ++i) SubmitNamed(world, "j");
  for (std::optional<int64_t> limit : {std::optional<int64_t>(), std::optional<int64_t>(1'000'000)}) {
    auto page = protocol::ResultOf<protocol::QueueResult>(world.Call(PeerFor(Role::kOwner), protocol::QueueArgs{true, 0, limit}));
    ASSERT_TRUE(page);
    EXPECT_EQ(page->jobs.size(), static_cast<size_t>(protocol::kMaxQueuePage));
    EXPECT_TRUE(page->next.has_value());
  }
  EXPECT_EQ(AllPages(world, std::nullopt).size(), static_cast<size_t>(protocol::kMaxQueuePage + 20));
}

// Rows from before submit bounded names (256 bytes), written into the state db directly.
int64_t StoreNamed(store::JobStore& jobs, const std::string& name) {
  model::Job draft;
  draft.name = name;
  draft.uid = testing::kOwnerUid;
  draft.user = "alice";
  draft.argv = {"true"};
  draft.cwd = "/";
  draft.submitted_unix_ms = 1;
  auto job = jobs.Submit(draft);
  EXPECT_TRUE(job) << (job ? "" : job.error().message);
  return job ? job->id : -1;
}

TEST(QueuePagingTest, PagesEndBeforeTheFrameLimitAndHugeNamesAreCut) {
  World world;
  auto jobs = store::JobStore::Open(world.dir().Join("state") + "/state.db", {});
  ASSERT_TRUE(jobs) << jobs.error().message;
  // 1,500 jobs with 1 kB names: about twice the frame limit in one list.
  std::vector<int64_t> submitted;
  for (int i = 0; i < 1500; ++i) submitted.push_back(StoreNamed(**jobs, std::to_string(i) + std::string(1000, 'n')));
  size_t pages = 0;
  EXPECT_EQ(AllPages(world, std::nullopt, &pages), submitted) << "every job once, in order";
  EXPECT_GE(pages, 3u) << "the byte budget, not the count (500), ended the pages";
  // And one whose name alone would fill most of a frame (escaped: six bytes per byte).
  const int64_t huge = StoreNamed(**jobs, std::string(600 << 10, '\x01'));
  submitted.push_back(huge);
  EXPECT_EQ(AllPages(world, std::nullopt), submitted);
  auto last = protocol::ResultOf<protocol::QueueResult>(
      world.Call(PeerFor(Role::kOwner), protocol::QueueArgs{true, huge - 1, std::nullopt}));
  ASSERT_TRUE(last);
  ASSERT_EQ(last->jobs.size(), 1u);
  EXPECT_LT(last->jobs[0].name.size(), size_t{65 << 10});
  EXPECT_EQ(last->jobs[0].name.substr(last->jobs[0].name.size() - 3), "\u2026");
  auto shown = world.Call(PeerFor(Role::kOwner), protocol::ShowArgs{huge});
  EXPECT_EQ(shown.result["job"]["name"].get<std::string>().size(), size_t{600 << 10}) << "show has it whole";
}

// `n` live leases (this process holds them) with `command`, straight into the daemon's
// table, each on a GPU of its own. Their ids, in order.
std::vector<int64_t> StoreLeases(World& world, int n, const std::string& command) {
  auto table = store::LeaseStore::Open(world.dir().Join("state") + "/state.db", {});
  EXPECT_TRUE(table) << (table ? "" : table.error().message);
  std::vector<int64_t> ids;
  if (!table) return ids;
  auto me = store::CurrentLeaseProcess(getpid());
  EXPECT_TRUE(me.has_value());
  for (int i = 0; i < n && me; ++i) {
    model::Lease draft;
    draft.uid = testing::kOwnerUid;
    draft.user = "alice";
    draft.kind = "run";
    draft.command = command;
    draft.processes = {*me};
    const std::string gpu = "GPU-" + std::to_string(i);
    auto lease = (*table)->Acquire(
        draft, [&](const std::vector<model::Lease>&) -> Result<std::vector<std::string>> { return std::vector{gpu}; },
        store::ProcLivenessCheck());
    EXPECT_TRUE(lease) << (lease ? "" : lease.error().message);
    if (lease) ids.push_back(lease->id);
  }
  return ids;
}

// Every leases page from the first, as `gpuman leases` fetches them; the ids in order.
std::vector<int64_t> AllLeasePages(World& world, std::optional<int64_t> limit, size_t* pages = nullptr) {
  std::vector<int64_t> ids;
  protocol::LeasesArgs args{std::nullopt, limit};
  for (int guard = 0; guard < 10000; ++guard) {
    auto reply = world.Call(PeerFor(Role::kOtherUser), args);
    EXPECT_TRUE(reply.ok());
    EXPECT_LE(protocol::DumpJson(protocol::ToJson(reply)).size(), protocol::kMaxMessageBytes);
    auto page = protocol::ResultOf<protocol::LeasesResult>(reply);
    EXPECT_TRUE(page);
    if (!page) break;
    if (pages) ++*pages;
    for (const auto& l : page->leases) ids.push_back(l.id);
    if (!page->next) break;
    if (args.after_id) {
      EXPECT_GT(*page->next, *args.after_id);
    }
    args.after_id = *page->next;
  }
  return ids;
}

TEST(LeasePagingTest, MoreThanOnePageOfLeasesIsListedOnceEach) {
  World world;
  const std::vector<int64_t> stored = StoreLeases(world, protocol::kMaxLeasePage + 20, "python train.py");
  ASSERT_EQ(stored.size(), static_cast<size_t>(protocol::kMaxLeasePage + 20));
  // The default page and the largest one: 500, and where to go on.
  for (std::optional<int64_t> limit : {std::optional<int64_t>(), std::optional<int64_t>(1'000'000)}) {
    auto page = protocol::ResultOf<protocol::LeasesResult>(world.Call(PeerFor(Role::kOwner), protocol::LeasesArgs{std::nullopt, limit}));
    ASSERT_TRUE(page);
    EXPECT_EQ(page->leases.size(), static_cast<size_t>(protocol::kMaxLeasePage));
    EXPECT_EQ(page->next, stored[protocol::kMaxLeasePage - 1]);
  }
  size_t pages = 0;
  EXPECT_EQ(AllLeasePages(world, std::nullopt, &pages), stored) << "every lease once, in id order";
  EXPECT_EQ(pages, 2u);
  // A page that holds the last lease has no next; after_id skips what came before.
  auto tail = protocol::ResultOf<protocol::LeasesResult>(
      world.Call(PeerFor(Role::kOwner), protocol::LeasesArgs{stored[stored.size() - 3], 5}));
  ASSERT_TRUE(tail);
  ASSERT_EQ(tail->leases.size(), 2u);
  EXPECT_EQ(tail->leases[0].id, stored[stored.size() - 2]);
  EXPECT_EQ(tail->next, std::nullopt);
  EXPECT_EQ(AllLeasePages(world, 7).size(), stored.size());
}

TEST(LeasePagingTest, PagesEndBeforeTheFrameLimit) {
  World world;
  // 400 leases with 4 KiB commands (the most a recorded command keeps): 1.6 MiB in one list.
  const std::vector<int64_t> stored = StoreLeases(world, 400, std::string(4096, 'c'));
  size_t pages = 0;
  EXPECT_EQ(AllLeasePages(world, std::nullopt, &pages), stored);
  EXPECT_GE(pages, 2u) << "the byte budget, not the count (500), ended the first page";
}

TEST(CutTextTest, CutsAtACharacterBoundary) {
  EXPECT_EQ(CutText("short", 10), "short");
  EXPECT_EQ(CutText("abcdefghij", 6), "abc\u2026");
  // "é" is two bytes: never half of it.
  EXPECT_EQ(CutText("\u00e9\u00e9\u00e9\u00e9", 6), "\u00e9\u2026");
  EXPECT_LE(CutText(std::string(100, 'x'), 10).size(), 10u);
}

}  // namespace
}  // namespace gpuman::daemon
