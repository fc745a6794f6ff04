// End-to-end: listings past the daemon's first page (500 jobs, 500 leases; docs/protocol.md,
// "queue", "leases"): `queue`, `leases` and `top` see every job and lease, once each.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <regex>
#include <set>

#include "e2e/e2e_util.h"
#include "store/proc_liveness.h"
#include "store/state_db.h"

namespace gpuman::e2e {
namespace {

using nlohmann::json;
using testing::TempDir;

constexpr int kMany = 520;  // past the 500 of one page

class PagingE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    socket_ = dir_.Join("gpuman.sock");
    scenario_ = IdleScenario(dir_, "a100-4");
    const std::string db = dir_.Join("state") + "/state.db";
    ASSERT_EQ(mkdir(dir_.Join("state").c_str(), 0700), 0);
    // The state the daemon finds when it starts: held jobs (never started) and leases this
    // test process holds, written through the store as the daemon would have.
    {
      // One connection with both tables, as the daemon opens it (store/state_db.h).
      auto state = store::OpenStateDb(db, {});
      ASSERT_TRUE(state) << state.error().message;
      auto& jobs = state->jobs;
      for (int i = 0; i < kMany; ++i) {
        model::Job draft;
        draft.name = "held-" + std::to_string(i);
        draft.uid = getuid();
        draft.user = "root";
        draft.argv = {"true"};
        draft.cwd = "/";
        draft.output_path = dir_.Join("never.log");
        draft.submitted_unix_ms = 1;
        auto job = jobs->Submit(draft);
        ASSERT_TRUE(job) << job.error().message;
        auto held = jobs->Transition(job->id, model::JobState::kQueued, model::JobState::kHeld, {});
        ASSERT_TRUE(held) << held.error().message;
        job_ids_.insert(job->id);
      }
      auto& leases = state->leases;
      auto me = store::CurrentLeaseProcess(getpid());
      ASSERT_TRUE(me.has_value());
      for (int i = 0; i < kMany; ++i) {
        model::Lease draft;
        draft.uid = getuid();
        draft.user = "root";
        draft.kind = "run";
        draft.command = "held by the test " + std::to_string(i);
        draft.processes = {*me};
        draft.created_unix_ms = 1;
        const std::string gpu = "GPU-not-on-this-machine-" + std::to_string(i);
        auto lease = leases->Acquire(
            draft, [&](const std::vector<model::Lease>&) -> Result<std::vector<std::string>> { return std::vector{gpu}; },
            store::ProcLivenessCheck());
        ASSERT_TRUE(lease) << lease.error().message;
        lease_ids_.insert(lease->id);
      }
    }
    ASSERT_TRUE(daemon_.Start({.scenario = scenario_,
                               .socket = socket_,
                               .state_dir = dir_.Join("state"),
                               .env = CleanEnv(dir_.Join("leases")),
                               .stderr_path = "/dev/null"}));
  }
  void TearDown() override { daemon_.Stop(); }
  testing::RunResult Gpuman(std::vector<std::string> args) {
    return RunGpuman(dir_.Join("leases"), std::move(args), {{"GPUMAN_SOCKET", socket_}});
  }

  TempDir dir_;
  std::string socket_, scenario_;
  PrivateDaemon daemon_;
  std::set<int64_t> job_ids_, lease_ids_;
};

TEST_F(PagingE2E, QueueLeasesAndTopSeeEveryJobAndLease) {
  auto queue = Gpuman({"queue", "--json"});
  ASSERT_EQ(queue.exit_code, 0) << queue.err;
  // Parsed into a variable: a range-for over parse(...)["jobs"] would read a destroyed temporary.
  const json queue_doc = json::parse(queue.out);
  std::multiset<int64_t> jobs;
  for (const auto& j : queue_doc.at("jobs")) jobs.insert(j.at("id").get<int64_t>());
  EXPECT_EQ(std::set<int64_t>(jobs.begin(), jobs.end()), job_ids_) << "every job";
  EXPECT_EQ(jobs.size(), job_ids_.size()) << "once each";

  auto leases = Gpuman({"leases", "--json"});
  ASSERT_EQ(leases.exit_code, 0) << leases.err;
  const json leases_doc = json::parse(leases.out);
  std::multiset<int64_t> listed;
  for (const auto& l : leases_doc.at("leases")) listed.insert(l.at("id").get<int64_t>());
  EXPECT_EQ(std::set<int64_t>(listed.begin(), listed.end()), lease_ids_) << "every lease";
  EXPECT_EQ(listed.size(), lease_ids_.size()) << "once each";

  // top counts every holder: the rows it draws plus its "+N more" are all 1,040 (it read
  // only the first 500 jobs before, which made 1,020).
  auto top = Gpuman({"--simulate", scenario_, "top", "--once"});
  ASSERT_EQ(top.exit_code, 0) << top.err;
  size_t rows = 0;
  for (const char* kind : {"\nlease ", "\njob "}) {
    for (size_t at = top.out.find(kind); at != std::string::npos; at = top.out.find(kind, at + 1)) ++rows;
  }
  std::smatch more;
  ASSERT_TRUE(std::regex_search(top.out, more, std::regex(R"(\+(\d+) more \(gpuman leases, gpuman queue\))"))) << top.out;
  EXPECT_EQ(rows + std::stoul(more[1].str()), job_ids_.size() + lease_ids_.size()) << top.out;
  EXPECT_GE(rows, 1u) << top.out;
}

}  // namespace
}  // namespace gpuman::e2e
