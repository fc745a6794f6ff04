// MpsControls (daemon/mps_control.h) against the stand-in nvidia-cuda-mps-control
// (tests/e2e/fake_mps), run as this test's own user: a GPU's first MPS lease starts its
// control with the GPU's environment, the last one's end sends it "quit" on stdin, a
// restarted daemon finds a control that still runs and stops one no lease wants, and a
// missing program is one clear refusal. The users' side (as whom it runs) is in
// tests/e2e/share_e2e_test.cc.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "daemon/mps_control.h"
#include "store/lease_store.h"
#include "support/temp_dir.h"

namespace gpuman::daemon {
namespace {

using ::testing::HasSubstr;

const std::string kStandIn = std::string(GPUMAN_TEST_SOURCE_DIR) + "/e2e/fake_mps/nvidia-cuda-mps-control";

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int Count(const std::string& text, const std::string& line) {
  int n = 0;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) n += l == line;
  return n;
}

class MpsControlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = store::LeaseStore::Open(dir_.Join("leases.db"));
    ASSERT_TRUE(store.has_value()) << store.error().message;
    store_ = std::move(*store);
    options_.program = kStandIn;
    options_.run_dir = dir_.Join("mps");
  }
  model::Lease MpsLease(int64_t id, const std::string& uuid) {
    model::Lease l;
    l.id = id;
    l.uid = geteuid();
    l.user = "me";
    l.gpu_uuids = {uuid};
    l.gpu_memory_bytes = int64_t{10} << 30;
    l.mps = true;
    return l;
  }
  std::string Log(const std::string& uuid) { return Slurp(options_.run_dir + "/" + uuid + "/log/stand-in.log"); }

  testing::TempDir dir_;
  std::unique_ptr<store::LeaseStore> store_;
  MpsControlOptions options_;
};

TEST_F(MpsControlTest, TheFirstLeaseStartsTheControlAndTheLastOnesEndTellsItToQuit) {
  MpsControls mps(options_, *store_);
  auto where = mps.Ensure("GPU-a", geteuid(), "me", 5);
  ASSERT_TRUE(where.has_value()) << where.error().message;
  EXPECT_EQ(where->pipe_directory, options_.run_dir + "/GPU-a/pipe");
  EXPECT_EQ(where->log_directory, options_.run_dir + "/GPU-a/log");
  std::string log = Log("GPU-a");
  EXPECT_EQ(Count(log, "run -d"), 1) << log;
  EXPECT_EQ(Count(log, "uid " + std::to_string(geteuid())), 1) << log;
  EXPECT_EQ(Count(log, "env CUDA_VISIBLE_DEVICES=GPU-a"), 1) << log;
  EXPECT_EQ(Count(log, "env CUDA_MPS_PIPE_DIRECTORY=" + where->pipe_directory), 1) << log;
  EXPECT_EQ(Count(log, "env CUDA_MPS_LOG_DIRECTORY=" + where->log_directory), 1) << log;
  struct stat st {};
  ASSERT_EQ(stat(where->pipe_directory.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_EQ(st.st_uid, geteuid());

  // A second lease of the same user: the control runs already.
  ASSERT_TRUE(mps.Ensure("GPU-a", geteuid(), "me", 6).has_value());
  EXPECT_EQ(Count(Log("GPU-a"), "run -d"), 1);
  // Another user's lease on that GPU is refused (the scheduler never asks for it).
  auto other = mps.Ensure("GPU-a", geteuid() + 1, "you", 7);
  ASSERT_FALSE(other.has_value());
  EXPECT_EQ(other.error().code, ErrorCode::kConflict);
  EXPECT_THAT(other.error().message, HasSubstr("runs MPS for me; MPS serves one user at a time"));

  // While a lease lives, nothing changes; once none does, "quit" on its stdin.
  mps.Reconcile({MpsLease(1, "GPU-a")}, /*verify=*/false, 8);
  EXPECT_EQ(Count(Log("GPU-a"), "stdin quit"), 0);
  mps.Reconcile({}, /*verify=*/false, 9);
  log = Log("GPU-a");
  EXPECT_EQ(Count(log, "stdin quit"), 1) << log;
  EXPECT_EQ(Count(log, "run "), 1) << log;  // the quit run: no arguments
  EXPECT_TRUE(mps.RunningGpus().empty());
  mps.Reconcile({}, /*verify=*/false, 10);  // nothing left to stop
  EXPECT_EQ(Count(Log("GPU-a"), "stdin quit"), 1);
}

TEST_F(MpsControlTest, ARestartedDaemonFindsLiveControlsRestartsDeadOnesAndStopsOrphans) {
  {
    MpsControls before(options_, *store_);
    ASSERT_TRUE(before.Ensure("GPU-a", geteuid(), "me", 1).has_value());
    ASSERT_TRUE(before.Ensure("GPU-b", geteuid(), "me", 1).has_value());
    ASSERT_TRUE(before.Ensure("GPU-c", geteuid(), "me", 1).has_value());
  }
  // GPU-b's control died meanwhile (its pid file names a process that is gone).
  std::ifstream pidfile(options_.run_dir + "/GPU-b/pipe/nvidia-cuda-mps-control.pid");
  pid_t pid = 0;
  ASSERT_TRUE(pidfile >> pid);
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  for (int i = 0; i < 200 && kill(pid, 0) == 0; ++i) usleep(10000);

  // A new daemon: leases live on GPU-a and GPU-b; GPU-c's lease ended while none ran.
  MpsControls after(options_, *store_);
  after.Reconcile({MpsLease(1, "GPU-a"), MpsLease(2, "GPU-b")}, /*verify=*/true, 2);
  EXPECT_EQ(Count(Log("GPU-a"), "run -d"), 1) << "found, not started again";
  EXPECT_EQ(Count(Log("GPU-b"), "run -d"), 2) << "gone: started again";
  EXPECT_EQ(Count(Log("GPU-c"), "stdin quit"), 1) << "an orphan: told to quit";
  EXPECT_EQ(after.RunningGpus(), (std::vector<std::string>{"GPU-a", "GPU-b"}));
  after.Reconcile({}, /*verify=*/false, 3);
  EXPECT_EQ(Count(Log("GPU-a"), "stdin quit"), 1);
  EXPECT_EQ(Count(Log("GPU-b"), "stdin quit"), 1);
}

TEST_F(MpsControlTest, AMissingControlProgramIsOneClearRefusal) {
  options_.program = dir_.Join("no/nvidia-cuda-mps-control");
  MpsControls mps(options_, *store_);
  auto program = mps.Program();
  ASSERT_FALSE(program.has_value());
  EXPECT_EQ(program.error().code, ErrorCode::kNotFound);
  EXPECT_THAT(program.error().message, HasSubstr("--mps: MPS is not available here"));
  EXPECT_THAT(program.error().message, HasSubstr("[share] mps_control"));
  auto ensure = mps.Ensure("GPU-a", geteuid(), "me", 1);
  ASSERT_FALSE(ensure.has_value());
  EXPECT_EQ(ensure.error().code, ErrorCode::kNotFound);
  // Not on PATH either: the name is looked up there.
  options_.program = "nvidia-cuda-mps-control-not-here";
  options_.search_path = dir_.path();
  EXPECT_FALSE(MpsControls(options_, *store_).Program().has_value());
}

}  // namespace
}  // namespace gpuman::daemon
