// End-to-end: listings past the daemon's first page (500 jobs, 500 leases; docs/protocol.md,
// "queue", "leases"): `queue`, `leases` and `top` see every job and lease, once each.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <set>

#include "e2e/e2e_util.h"
#include "store/job_store.h"
#include "store/lease_store.h"
#include "store/proc_liveness.h"

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
      auto jobs = store::JobStore::Open(db, {});
      ASSERT_TRUE(jobs) << jobs.error().message;
      for (int i = 0; i < kMany; ++i) {
        model::Job draft;
        draft.name = "held-" + std::to_string(i);
        draft.uid = getuid();
        draft.user = "root";
        draft.argv = {"true"};
        draft.cwd = "/";
        draft.output_path = dir_.Join("never.log");
        draft.submitted_unix_ms = 1;
        auto job = (*jobs)->Submit(draft);
        ASSERT_TRUE(job) << job.error().message;
        auto held = (*jobs)->Transition(job->id, model::JobState::kQueued, model::JobState::kHeld, {});
        ASSERT_TRUE(held) << held.error().message;
        job_ids_.insert(job->id);
      }
      auto leases = store::LeaseStore::Open(db, {});
      ASSERT_TRUE(leases) << leases.error().message;
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
        auto lease = (*leases)->Acquire(
            draft, [&](const std::vector<model::Lease>&) -> Result<std::vector<std::string>> { return std::vector{gpu}; },
            store::ProcLivenessCheck());
        ASSERT_TRUE(lease) << lease.error().message;
        lease_ids_.insert(lease->id);
      }
    }
    auto env = CleanEnv(dir_.Join("leases"));
    daemon_ = fork();
    if (daemon_ == 0) {
      for (const auto& [k, v] : env) {
        if (v.empty()) unsetenv(k.c_str());
        else setenv(k.c_str(), v.c_str(), 1);
      }
      int null = open("/dev/null", O_WRONLY);
      dup2(null, 2);
      execl(kGpuman.c_str(), kGpuman.c_str(), "--simulate", scenario_.c_str(), "daemon", "--socket", socket_.c_str(),
            "--state-dir", dir_.Join("state").c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    for (int i = 0; i < 3000 && !DaemonAnswers(socket_); ++i) usleep(20000);
    ASSERT_TRUE(DaemonAnswers(socket_)) << "the daemon did not come up";
  }
  void TearDown() override {
    if (daemon_ > 0) {
      kill(daemon_, SIGTERM);
      waitpid(daemon_, nullptr, 0);
    }
  }
  testing::RunResult Gpuman(std::vector<std::string> args) {
    return RunGpuman(dir_.Join("leases"), std::move(args), {{"GPUMAN_SOCKET", socket_}});
  }

  TempDir dir_;
  std::string socket_, scenario_;
  pid_t daemon_ = -1;
  std::set<int64_t> job_ids_, lease_ids_;
};

TEST_F(PagingE2E, QueueLeasesAndTopSeeEveryJobAndLease) {
  auto queue = Gpuman({"queue", "--json"});
  ASSERT_EQ(queue.exit_code, 0) << queue.err;
  std::multiset<int64_t> jobs;
  for (const auto& j : json::parse(queue.out)["jobs"]) jobs.insert(j["id"].get<int64_t>());
  EXPECT_EQ(std::set<int64_t>(jobs.begin(), jobs.end()), job_ids_) << "every job";
  EXPECT_EQ(jobs.size(), job_ids_.size()) << "once each";

  auto leases = Gpuman({"leases", "--json"});
  ASSERT_EQ(leases.exit_code, 0) << leases.err;
  std::multiset<int64_t> listed;
  for (const auto& l : json::parse(leases.out)["leases"]) listed.insert(l["id"].get<int64_t>());
  EXPECT_EQ(std::set<int64_t>(listed.begin(), listed.end()), lease_ids_) << "every lease";
  EXPECT_EQ(listed.size(), lease_ids_.size()) << "once each";

  // top --once draws every holder: the last job and the last lease are past the first page.
  auto top = Gpuman({"--simulate", scenario_, "top", "--once"});
  ASSERT_EQ(top.exit_code, 0) << top.err;
  EXPECT_NE(top.out.find("job " + std::to_string(*job_ids_.rbegin()) + " "), std::string::npos) << top.out.substr(0, 4000);
  EXPECT_NE(top.out.find("lease " + std::to_string(*lease_ids_.rbegin()) + " "), std::string::npos);
  size_t rows = 0;
  for (size_t at = top.out.find("\njob "); at != std::string::npos; at = top.out.find("\njob ", at + 1)) ++rows;
  EXPECT_EQ(rows, job_ids_.size()) << "one row per held job, no more, no less";
}

}  // namespace
}  // namespace gpuman::e2e
