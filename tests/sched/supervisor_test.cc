// The detached job supervisor against the real OS and a real state db: outcome recording,
// barrier, cancellation, time limit, log ownership, independence from the launcher.
#include "sched/supervisor.h"

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <fstream>
#include <sstream>
#include <thread>

#include "store/job_store.h"
#include "store/lease_store.h"
#include "store/proc_liveness.h"
#include "support/temp_dir.h"

namespace gpuman::sched {
namespace {

using gpuman::testing::TempDir;

class SupervisorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = dir_.Join("state.db");
    auto jobs = store::JobStore::Open(db_);
    ASSERT_TRUE(jobs.has_value()) << jobs.error().message;
    jobs_ = std::move(*jobs);
    auto leases = store::LeaseStore::Open(db_);
    ASSERT_TRUE(leases.has_value());
    leases_ = std::move(*leases);
  }

  // Submits a job for us, moves it to starting, and returns it.
  model::Job Starting(std::vector<std::string> argv, std::optional<int64_t> time_limit_ms = std::nullopt,
                      const std::function<void(model::Job&)>& tweak = {}) {
    model::Job draft;
    draft.uid = getuid();
    draft.gid = getgid();
    draft.user = "test";
    draft.argv = std::move(argv);
    draft.env = {{"PATH", "/usr/bin:/bin"}};
    draft.cwd = dir_.path();
    draft.output_path = dir_.Join("job.log");
    draft.time_limit_ms = time_limit_ms;
    draft.submitted_unix_ms = 1;
    if (tweak) tweak(draft);
    auto job = jobs_->Submit(draft);
    EXPECT_TRUE(job.has_value());
    store::JobStore::Update update;
    update.gpu_uuids = std::vector<std::string>{"GPU-test"};
    auto starting = jobs_->Transition(job->id, model::JobState::kQueued, model::JobState::kStarting, update);
    EXPECT_TRUE(starting.has_value()) << starting.error().message;
    return *starting;
  }

  // Launches the supervisor, leases for it, lets it go.
  std::unique_ptr<PendingSupervisor> Launch(const model::Job& job, bool go = true) {
    SupervisorSpec spec;
    spec.job = job;
    spec.state_db = db_;
    spec.extra_env = {"CUDA_VISIBLE_DEVICES=GPU-test", "GPUMAN_JOB_ID=" + std::to_string(job.id)};
    spec.grace_ms = 500;
    auto pending = LaunchSupervisor(spec, GPUMAN_TEST_BINARY);
    EXPECT_TRUE(pending.has_value());
    if (!go) return std::move(*pending);
    model::Lease draft;
    draft.uid = getuid();
    draft.user = "test";
    draft.kind = "job";
    draft.command = "test";
    draft.created_unix_ms = 1;
    auto sup = store::CurrentLeaseProcess((*pending)->pid());
    EXPECT_TRUE(sup.has_value());
    draft.processes = {*sup};
    auto lease = leases_->Acquire(
        draft, [](const std::vector<model::Lease>&) -> Result<std::vector<std::string>> {
          return std::vector<std::string>{"GPU-test"};
        },
        [](const model::LeaseProcess&) { return true; });
    EXPECT_TRUE(lease.has_value()) << lease.error().message;
    EXPECT_TRUE((*pending)->Go(lease->id, "").has_value());
    return std::move(*pending);
  }

  model::Job WaitFinal(int64_t id, int ms = 10000) {
    for (int waited = 0; waited < ms; waited += 20) {
      auto job = jobs_->Get(id);
      if (job.has_value() && *job && model::IsFinal((*job)->state)) return **job;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ADD_FAILURE() << "job " << id << " did not finish";
    return {};
  }

  std::string Log() {
    std::ifstream in(dir_.Join("job.log"));
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  TempDir dir_;
  std::string db_;
  std::unique_ptr<store::JobStore> jobs_;
  std::unique_ptr<store::LeaseStore> leases_;
};

TEST_F(SupervisorTest, RecordsTheOutcomeAndReleasesTheLease) {
  auto job = Starting({"sh", "-c", "echo \"hi $CUDA_VISIBLE_DEVICES $GPUMAN_JOB_ID\"; pwd; exit 3"});
  auto sup = Launch(job);
  auto done = WaitFinal(job.id);
  EXPECT_EQ(done.state, model::JobState::kFailed);
  EXPECT_EQ(done.exit_code, 3);
  EXPECT_TRUE(done.started_unix_ms.has_value());
  EXPECT_TRUE(done.ended_unix_ms.has_value());
  EXPECT_EQ(done.supervisor_pid, sup->pid());
  EXPECT_EQ(Log(), "hi GPU-test " + std::to_string(job.id) + "\n" + dir_.path() + "\n");
  for (int i = 0; i < 100 && !leases_->ListRecorded()->empty(); ++i) usleep(20000);
  EXPECT_TRUE(leases_->ListRecorded()->empty()) << "the supervisor releases the lease";
  auto usage = jobs_->Usage(2'000'000'000'000LL, 7 * 86400.0);
  ASSERT_TRUE(usage.has_value());
  EXPECT_EQ(usage->size(), 1u);
}

TEST_F(SupervisorTest, SucceedsAndIsNotOurChild) {
  auto job = Starting({"sh", "-c", "sleep 0.3"});
  auto sup = Launch(job);
  std::ifstream stat("/proc/" + std::to_string(sup->pid()) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  size_t close = text.rfind(')');
  std::istringstream rest(text.substr(close + 2));
  std::string state;
  int ppid = 0;
  rest >> state >> ppid;
  int is_subreaper = 0;
  prctl(PR_GET_CHILD_SUBREAPER, &is_subreaper);
  // (Another test in this binary made us a subreaper; orphans then come to us, not init.)
  if (!is_subreaper) {
    EXPECT_NE(ppid, getpid()) << "the supervisor must not depend on the daemon";
  }
  EXPECT_EQ(WaitFinal(job.id).state, model::JobState::kSucceeded);
}

TEST_F(SupervisorTest, WithoutGoTheJobNeverRuns) {
  auto job = Starting({"sh", "-c", "touch " + dir_.Join("ran")});
  { auto sup = Launch(job, /*go=*/false); }  // the daemon died before recording it
  usleep(300 * 1000);
  EXPECT_FALSE(std::ifstream(dir_.Join("ran")).good());
  auto now = jobs_->Get(job.id);
  EXPECT_EQ((*now)->state, model::JobState::kStarting) << "left for the daemon to requeue";
}

TEST_F(SupervisorTest, CancelAndTimeLimit) {
  auto job = Starting({"sleep", "30"});
  auto sup = Launch(job);
  for (int i = 0; i < 100; ++i) {
    auto j = jobs_->Get(job.id);
    if ((*j)->state == model::JobState::kRunning) break;
    usleep(20000);
  }
  kill(sup->pid(), SIGTERM);
  auto cancelled = WaitFinal(job.id);
  EXPECT_EQ(cancelled.state, model::JobState::kCancelled);
  EXPECT_EQ(cancelled.exit_code, 128 + SIGTERM);

  auto slow = Starting({"sleep", "30"}, /*time_limit_ms=*/200);
  auto sup2 = Launch(slow);
  auto timed_out = WaitFinal(slow.id);
  EXPECT_EQ(timed_out.state, model::JobState::kTimedOut);
}

// The job's own pid (with its start time) is in the lease before the job runs: the first
// thing the job does is write its pid, and by then the lease names it.
TEST_F(SupervisorTest, TheJobsPidIsInTheLeaseBeforeItRuns) {
  const std::string pid_file = dir_.Join("pid");
  auto job = Starting({"sh", "-c", "echo $$ > " + pid_file + ".tmp; mv " + pid_file + ".tmp " + pid_file + "; exec sleep 30"});
  auto sup = Launch(job);
  int pid = 0;
  for (int i = 0; i < 500 && pid == 0; ++i) {
    std::ifstream in(pid_file);
    if (!(in >> pid)) pid = 0;
    if (pid == 0) usleep(20000);
  }
  ASSERT_GT(pid, 0) << "the job did not start";
  auto running = jobs_->Get(job.id);
  ASSERT_TRUE(running.has_value() && *running);
  ASSERT_TRUE((*running)->lease_id.has_value());
  auto lease = leases_->Get(*(*running)->lease_id);
  ASSERT_TRUE(lease.has_value() && *lease);
  auto start = store::ProcessStartTicks(pid);
  ASSERT_TRUE(start.has_value());
  std::vector<model::LeaseProcess> expected = {{sup->pid(), *store::ProcessStartTicks(sup->pid())},
                                               {pid, *start}};
  EXPECT_EQ((*lease)->processes, expected) << "the supervisor, then the job's leader";
  EXPECT_EQ(getpgid(pid), pid) << "the job leads its own process group";
  kill(sup->pid(), SIGTERM);
  EXPECT_EQ(WaitFinal(job.id).state, model::JobState::kCancelled);
}

// kill -9 of the supervisor: the lease stays alive for as long as the job does.
TEST_F(SupervisorTest, AfterTheSupervisorIsKilledTheLeaseLivesWithTheJob) {
  const std::string pid_file = dir_.Join("pid");
  auto job = Starting({"sh", "-c", "echo $$ > " + pid_file + ".tmp; mv " + pid_file + ".tmp " + pid_file + "; exec sleep 30"});
  auto sup = Launch(job);
  int pid = 0;
  for (int i = 0; i < 500 && pid == 0; ++i) {
    std::ifstream in(pid_file);
    if (!(in >> pid)) pid = 0;
    if (pid == 0) usleep(20000);
  }
  ASSERT_GT(pid, 0) << "the job did not start";
  ASSERT_EQ(kill(sup->pid(), SIGKILL), 0);
  for (int i = 0; i < 250 && store::ProcessStartTicks(sup->pid()); ++i) usleep(20000);
  ASSERT_FALSE(store::ProcessStartTicks(sup->pid()).has_value()) << "the supervisor is gone";
  auto live = leases_->List(store::ProcLivenessCheck());
  ASSERT_TRUE(live.has_value());
  EXPECT_EQ(live->size(), 1u) << "the job still runs, so its GPUs stay taken";
  EXPECT_EQ((*jobs_->Get(job.id))->state, model::JobState::kRunning);
  kill(-pid, SIGKILL);
  bool stale = false;
  for (int i = 0; i < 250 && !stale; ++i) {
    auto now = leases_->List(store::ProcLivenessCheck());
    stale = now.has_value() && now->empty();
    if (!stale) usleep(20000);
  }
  EXPECT_TRUE(stale) << "with the job gone too, nothing holds the lease";
}

// A job that cannot start ends failed with the reason and its kind, and never runs: no
// exit code, no start time, its marker file never touched, the lease released.
class SupervisorFailureTest : public SupervisorTest {
 protected:
  void ExpectNeverRan(const model::Job& done, model::JobFailure failure, const std::string& reason) {
    EXPECT_EQ(done.state, model::JobState::kFailed);
    EXPECT_EQ(done.failure, failure) << model::JobFailureName(done.failure);
    EXPECT_NE(done.reason.find(reason), std::string::npos) << done.reason;
    EXPECT_FALSE(done.exit_code.has_value()) << "it never ran, so it has no exit code";
    EXPECT_FALSE(std::filesystem::exists(marker_)) << "the command ran";
    for (int i = 0; i < 100 && !leases_->ListRecorded()->empty(); ++i) usleep(20000);
    EXPECT_TRUE(leases_->ListRecorded()->empty()) << "the supervisor releases the lease";
  }
  // A script that proves it ran by creating the marker.
  std::string Tool(const std::string& dir, const std::string& name, const std::string& body, mode_t mode) {
    std::filesystem::create_directories(dir);
    std::string path = dir + "/" + name;
    std::ofstream(path) << body;
    chmod(path.c_str(), mode);
    return path;
  }
  std::string marker_ = dir_.Join("ran");
};

TEST_F(SupervisorFailureTest, MissingCommandIsCommandNotFound) {
  auto job = Starting({"/nonexistent/cmd"});
  auto sup = Launch(job);
  auto done = WaitFinal(job.id);
  ExpectNeverRan(done, model::JobFailure::kCommandNotFound, "command not found: /nonexistent/cmd");
  EXPECT_FALSE(done.started_unix_ms.has_value());
  EXPECT_NE(Log().find("gpuman: command not found: /nonexistent/cmd"), std::string::npos) << Log();
}

TEST_F(SupervisorFailureTest, CommandOnNoneOfTheJobsPathIsCommandNotFound) {
  auto job = Starting({"gpuman-no-such-tool-anywhere"});
  auto sup = Launch(job);
  ExpectNeverRan(WaitFinal(job.id), model::JobFailure::kCommandNotFound,
                 "command not found: gpuman-no-such-tool-anywhere (not in PATH /usr/bin:/bin)");
}

TEST_F(SupervisorFailureTest, OutputFileThatCannotBeOpenedFailsBeforeRunning) {
  auto job = Starting({"touch", marker_}, std::nullopt,
                      [&](model::Job& j) { j.output_path = dir_.Join("missing/dir/job.log"); });
  auto sup = Launch(job);
  ExpectNeverRan(WaitFinal(job.id), model::JobFailure::kCannotStart,
                 "cannot open its output file " + dir_.Join("missing/dir/job.log") + ": no such file or directory");
}

TEST_F(SupervisorFailureTest, OutputPathUnderAFileFailsBeforeRunning) {
  std::ofstream(dir_.Join("plain")) << "x";
  auto job = Starting({"touch", marker_}, std::nullopt, [&](model::Job& j) { j.output_path = dir_.Join("plain/job.log"); });
  auto sup = Launch(job);
  ExpectNeverRan(WaitFinal(job.id), model::JobFailure::kCannotStart, "cannot open its output file");
}

TEST_F(SupervisorFailureTest, WorkingDirectoryThatCannotBeEnteredFailsInsteadOfRunningElsewhere) {
  auto job = Starting({"touch", marker_}, std::nullopt, [&](model::Job& j) { j.cwd = dir_.Join("removed-after-submit"); });
  auto sup = Launch(job);
  ExpectNeverRan(WaitFinal(job.id), model::JobFailure::kCannotStart,
                 "cannot enter its working directory " + dir_.Join("removed-after-submit") +
                     ": no such file or directory");
}

TEST_F(SupervisorFailureTest, FileWithoutExecutePermissionIsCannotExecute) {
  std::string tool = Tool(dir_.Join("bin"), "tool", "#!/bin/sh\ntouch " + marker_ + "\n", 0644);
  auto job = Starting({tool});
  auto sup = Launch(job);
  ExpectNeverRan(WaitFinal(job.id), model::JobFailure::kCannotExecute,
                 "could not execute " + tool + ": permission denied");
}

TEST_F(SupervisorFailureTest, ScriptWithoutInterpreterLineIsNeverGivenToAShell) {
  // execvp(3) would hand this to /bin/sh, which would touch the marker.
  std::string tool = Tool(dir_.Join("bin"), "tool", "touch " + marker_ + "\n", 0755);
  auto job = Starting({tool});
  auto sup = Launch(job);
  ExpectNeverRan(WaitFinal(job.id), model::JobFailure::kCannotExecute,
                 "could not execute " + tool + ": not an executable format");
}

TEST_F(SupervisorFailureTest, DirectoryOnPathNamedLikeTheCommandIsSkipped) {
  std::filesystem::create_directories(dir_.Join("first/tool"));
  Tool(dir_.Join("second"), "tool", "#!/bin/sh\ntouch " + marker_ + "\n", 0755);
  auto job = Starting({"tool"}, std::nullopt,
                      [&](model::Job& j) { j.env["PATH"] = dir_.Join("first") + ":" + dir_.Join("second") + ":/usr/bin:/bin"; });
  auto sup = Launch(job);
  auto done = WaitFinal(job.id);
  EXPECT_EQ(done.state, model::JobState::kSucceeded) << done.reason;
  EXPECT_TRUE(std::filesystem::exists(marker_));
}

// The command is looked up on the job's PATH (from its submitted environment), not on the
// supervisor's: this test's own PATH does not name the tool's directory.
TEST_F(SupervisorTest, CommandIsResolvedOnTheJobsOwnPath) {
  const std::string marker = dir_.Join("ran");
  std::filesystem::create_directories(dir_.Join("mybin"));
  std::ofstream(dir_.Join("mybin/gpuman-test-tool")) << "#!/bin/sh\necho \"$0\" > " << marker << "\n";
  chmod(dir_.Join("mybin/gpuman-test-tool").c_str(), 0755);
  auto job = Starting({"gpuman-test-tool"}, std::nullopt,
                      [&](model::Job& j) { j.env["PATH"] = "/usr/bin:" + dir_.Join("mybin") + ":/bin"; });
  auto sup = Launch(job);
  auto done = WaitFinal(job.id);
  EXPECT_EQ(done.state, model::JobState::kSucceeded) << done.reason;
  EXPECT_EQ(done.failure, model::JobFailure::kNone);
  std::ifstream in(marker);
  std::string ran;
  std::getline(in, ran);
  EXPECT_EQ(ran, dir_.Join("mybin/gpuman-test-tool"));
}

}  // namespace
}  // namespace gpuman::sched
