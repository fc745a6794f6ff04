// Device confinement on the real kernel (root only; CI is root): a process moved into a
// lease's cgroup opens fake GPU nodes (mknod, major 195): ENXIO for its own GPUs (allowed;
// no driver answers) and EPERM for the others (the cgroup refuses), under cgroup v2's device
// program and under cgroup v1's device list. Ending the cgroup ends a daemonized child too.
#include "confine/cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "base/spawn.h"
#include "base/unique_fd.h"
#include "support/temp_dir.h"

namespace gpuman::confine {
namespace {

class CgroupTest : public ::testing::TestWithParam<DevicesSetting> {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root";
    prctl(PR_SET_CHILD_SUBREAPER, 1);  // as `run` and the supervisor: orphans come back here to be reaped
    confinement_ = PrepareConfinement(GetParam(), 0, state_.path());
    if (!confinement_.on) GTEST_SKIP() << "this host cannot: " << confinement_.why_off;
    for (int i = 0; i < 8; ++i) {
      const std::string node = dev_.Join("nvidia" + std::to_string(i));
      ASSERT_EQ(mknod(node.c_str(), S_IFCHR | 0666, makedev(195, i)), 0) << node;
    }
  }
  void TearDown() override {
    if (!confinement_.on) return;
    for (int64_t id : LeaseCgroupIds(confinement_)) {
      EndCgroupProcesses(LeaseCgroup(confinement_, id), 0);
      (void)RemoveCgroup(LeaseCgroup(confinement_, id));
    }
    rmdir(confinement_.base.c_str());
  }

  // Forks a child held until it is in `cgroup`, which then opens nvidia0..7 and reports
  // each open's errno (0: opened). With `daemonize`, it also leaves a setsid'ed sleeper.
  std::vector<int> OpenAllFrom(const std::string& cgroup, bool daemonize = false) {
    int go[2], report[2];
    EXPECT_EQ(pipe(go), 0);
    EXPECT_EQ(pipe(report), 0);
    pid_t pid = fork();
    if (pid == 0) {
      close(go[1]);
      close(report[0]);
      char c;
      if (read(go[0], &c, 1) != 1) _exit(1);
      int errs[8];
      for (int i = 0; i < 8; ++i) {
        int fd = open(dev_.Join("nvidia" + std::to_string(i)).c_str(), O_RDWR);
        errs[i] = fd >= 0 ? 0 : errno;
        if (fd >= 0) close(fd);
      }
      if (daemonize) {
        pid_t middle = fork();
        if (middle == 0) {
          setsid();
          if (fork() == 0) {
            close(report[1]);
            pause();
          }
          _exit(0);
        }
        // Reaped here, so that only the grandchild is left in the cgroup (an orphaned
        // zombie would stay listed there until whoever adopts it reaps it).
        waitpid(middle, nullptr, 0);
      }
      (void)!write(report[1], errs, sizeof errs);
      _exit(0);
    }
    close(go[0]);
    close(report[1]);
    Status moved = MoveIntoCgroup(cgroup, pid);
    EXPECT_TRUE(moved) << moved.error().message;
    (void)!write(go[1], "g", 1);
    close(go[1]);
    int errs[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
    EXPECT_EQ(read(report[0], errs, sizeof errs), static_cast<ssize_t>(sizeof errs));
    close(report[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    return std::vector<int>(errs, errs + 8);
  }

  testing::TempDir state_, dev_;
  Confinement confinement_;
};

TEST_P(CgroupTest, AConfinedProcessOpensOnlyItsOwnGpus) {
  auto dir = CreateLeaseCgroup(confinement_, 7, DeviceRule{{1, 5}});
  ASSERT_TRUE(dir) << dir.error().message;
  EXPECT_EQ(*dir, LeaseCgroup(confinement_, 7));
  const auto errs = OpenAllFrom(*dir);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(errs[i], i == 1 || i == 5 ? ENXIO : EPERM) << "nvidia" << i << ": " << strerror(errs[i]);
  }
  // Outside the cgroup every node is allowed.
  int fd = open(dev_.Join("nvidia0").c_str(), O_RDWR);
  EXPECT_EQ(fd, -1);
  EXPECT_EQ(errno, ENXIO);
  EXPECT_FALSE(CgroupHasProcesses(*dir));
  EXPECT_TRUE(RemoveCgroup(*dir));
}

TEST_P(CgroupTest, EndingTheCgroupEndsADaemonizedChild) {
  auto dir = CreateLeaseCgroup(confinement_, 8, DeviceRule{{0}});
  ASSERT_TRUE(dir) << dir.error().message;
  OpenAllFrom(*dir, /*daemonize=*/true);
  // The child exited; its setsid'ed grandchild lives on in the cgroup.
  for (int i = 0; i < 200 && CgroupProcesses(*dir).size() != 1; ++i) usleep(10000);
  ASSERT_EQ(CgroupProcesses(*dir).size(), 1u);
  EXPECT_EQ(RemoveCgroup(*dir).error().code, ErrorCode::kConflict);
  auto again = CreateLeaseCgroup(confinement_, 8, DeviceRule{{0}});
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, ErrorCode::kConflict);
  EXPECT_TRUE(EndCgroupProcesses(*dir, 2000));
  EXPECT_TRUE(CgroupProcesses(*dir).empty());
  EXPECT_TRUE(RemoveCgroup(*dir));
  EXPECT_TRUE(LeaseCgroupIds(confinement_).empty());
}

TEST_P(CgroupTest, AnEmptyCgroupOfAnEarlierLeaseIsMadeAgain) {
  auto first = CreateLeaseCgroup(confinement_, 9, DeviceRule{{0}});
  ASSERT_TRUE(first) << first.error().message;
  auto second = CreateLeaseCgroup(confinement_, 9, DeviceRule{{2}});
  ASSERT_TRUE(second) << second.error().message;
  const auto errs = OpenAllFrom(*second);
  EXPECT_EQ(errs[0], EPERM);
  EXPECT_EQ(errs[2], ENXIO);
  EXPECT_EQ(LeaseCgroupIds(confinement_), std::vector<int64_t>{9});
}

// The job supervisor's start (sched/supervisor.cc): Spawn creates the child inside the
// lease's cgroup (clone3, CLONE_INTO_CGROUP) on cgroup v2, so nothing moves it; on v1 it
// cannot, says so, and the caller's move puts it there before it runs.
TEST_P(CgroupTest, SpawnStartsTheChildInsideTheCgroupWhereTheKernelCan) {
  auto dir = CreateLeaseCgroup(confinement_, 10, DeviceRule{{3}});
  ASSERT_TRUE(dir) << dir.error().message;
  UniqueFd cgroup(open(dir->c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(cgroup);
  const std::string out = state_.Join("cgroup.txt");
  SpawnSpec spec;
  spec.argv = {"/bin/sh", "-c", "cat /proc/self/cgroup; : 3<>\"$1\"", "sh",
               dev_.Join("nvidia0")};
  spec.stdout_fd = SpawnFd::File(out, O_WRONLY | O_CREAT | O_TRUNC);
  spec.stderr_fd = SpawnFd::SameAsStdout();
  spec.env = std::vector<std::string>{"PATH=/usr/bin:/bin", "LC_ALL=C"};
  spec.start_barrier = true;
  spec.cgroup_fd = cgroup.get();
  auto child = Spawn(spec);
  ASSERT_TRUE(child) << child.error().message;
  EXPECT_EQ(child->in_cgroup(), GetParam() == DevicesSetting::kCgroupV2);
  ASSERT_TRUE(child->WaitReady());
  if (!child->in_cgroup()) {
    Status moved = MoveIntoCgroup(*dir, child->pid());
    EXPECT_TRUE(moved) << moved.error().message;
  }
  // Before it runs, it is already listed in the lease's cgroup.
  EXPECT_EQ(CgroupProcesses(*dir), std::vector<pid_t>{child->pid()});
  ASSERT_TRUE(child->Release());
  int status = 0;
  waitpid(child->pid(), &status, 0);
  std::stringstream text;
  text << std::ifstream(out).rdbuf();
  EXPECT_NE(text.str().find("/lease-10\n"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("Operation not permitted"), std::string::npos) << "nvidia0 is not this lease's GPU: " << text.str();
}

INSTANTIATE_TEST_SUITE_P(Versions, CgroupTest, ::testing::Values(DevicesSetting::kCgroupV2, DevicesSetting::kCgroupV1),
                         [](const auto& param_info) { return param_info.param == DevicesSetting::kCgroupV2 ? "V2" : "V1"; });

TEST(ConfinementTest, OffWhenAskedOrNotRoot) {
  testing::TempDir state;
  auto off = PrepareConfinement(DevicesSetting::kOff, 0, state.path());
  EXPECT_FALSE(off.on);
  EXPECT_EQ(off.Describe(), "off: [enforce] devices = \"off\"");
  auto user = PrepareConfinement(DevicesSetting::kCgroup, 1000, state.path());
  EXPECT_FALSE(user.on);
  EXPECT_EQ(user.why_off, "the daemon does not run as root");
}

TEST(ConfinementTest, NoHierarchyMountedSaysSo) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to reach the checks";
  testing::TempDir state, proc;
  CgroupSystem none{proc.Write("mountinfo", "22 1 0:20 / /proc rw - proc proc rw\n"),
                    proc.Write("cgroup", "0::/\n")};
  auto c = PrepareConfinement(DevicesSetting::kCgroup, 0, state.path(), none);
  EXPECT_FALSE(c.on);
  EXPECT_EQ(c.why_off, "cgroup v2 is not mounted; cgroup v1 devices is not mounted");
}

// Whether the cgroup2 mount has favordynmods (moves without an RCU wait) is read from its
// super-options, for the daemon's status and doctor's `confinement_start` note.
TEST(ConfinementTest, TheCgroup2MountsFavordynmodsIsRead) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to make the base cgroup";
  auto real = PrepareConfinement(DevicesSetting::kCgroupV2, 0, "/tmp/gpuman-favordynmods-probe");
  if (!real.on) GTEST_SKIP() << "this host cannot: " << real.why_off;
  // The real mount point, described once with the option and once without.
  const std::string point = real.base.substr(0, real.base.rfind('/'));
  testing::TempDir state, proc;
  for (bool with : {true, false}) {
    CgroupSystem sys{proc.Write("mountinfo", "40 30 0:37 / " + point + " rw,relatime - cgroup2 cgroup2 rw" +
                                                 std::string(with ? ",nsdelegate,favordynmods" : ",nsdelegate") + "\n"),
                     proc.Write("cgroup", "0::/\n")};
    auto c = PrepareConfinement(DevicesSetting::kCgroupV2, 0, state.path(), sys);
    ASSERT_TRUE(c.on) << c.why_off;
    EXPECT_EQ(c.favordynmods, with);
    rmdir(c.base.c_str());
  }
  rmdir(real.base.c_str());
}

TEST(ConfinementTest, SettingsParseAndNameBack) {
  for (auto s : {DevicesSetting::kCgroup, DevicesSetting::kCgroupV2, DevicesSetting::kCgroupV1, DevicesSetting::kOff}) {
    auto parsed = ParseDevicesSetting(DevicesSettingName(s));
    ASSERT_TRUE(parsed);
    EXPECT_EQ(*parsed, s);
  }
  auto bad = ParseDevicesSetting("yes");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message, "devices must be \"cgroup\", \"cgroup-v2\", \"cgroup-v1\" or \"off\", not \"yes\"");
  EXPECT_EQ(BaseName("/var/lib/gpuman"), "gpuman-jobs");
  EXPECT_NE(BaseName("/tmp/a"), BaseName("/tmp/b"));
  EXPECT_EQ(BaseName("/tmp/a").rfind("gpuman-jobs-", 0), 0u);
}

}  // namespace
}  // namespace gpuman::confine
