#include "devices/process_inspector.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include "support/temp_dir.h"

namespace gpuman::devices {
namespace {

TEST(ProcfsInspectorTest, ReadsOurOwnProcess) {
  ProcfsInspector inspector;
  auto me = inspector.Inspect(static_cast<uint32_t>(getpid()));
  ASSERT_TRUE(me.has_value());
  EXPECT_EQ(me->uid, getuid());
  EXPECT_FALSE(me->user.empty());
  EXPECT_NE(me->command.find("devices_test"), std::string::npos) << me->command;
  ASSERT_TRUE(me->start_time_unix.has_value());
  EXPECT_LE(*me->start_time_unix, time(nullptr) + 1);
  EXPECT_GT(*me->start_time_unix, time(nullptr) - 3600);
}

TEST(ProcfsInspectorTest, ParsesAFakeProcTree) {
  testing::TempDir dir;
  dir.Write("stat", "cpu  1 2 3\nbtime 1764400000\nprocesses 10\n");
  // comm with spaces and a ')' inside, starttime (field 22) = 500 ticks.
  std::string stat = "4242 (py thon) x) S 1 4242 4242 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 500 0 0";
  dir.Write("4242/stat", stat);
  // /proc/PID/cmdline: each argument NUL-terminated (28 bytes; sizeof counts the literal's own
  // terminating NUL too).
  constexpr char kCmdline[] = "python\0train.py\0--epochs\0" "90\0";
  static_assert(sizeof kCmdline - 1 == 28);
  dir.Write("4242/cmdline", std::string(kCmdline, sizeof kCmdline - 1));
  ProcfsInspector inspector(dir.path());
  auto got = inspector.Inspect(4242);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->command, "python train.py --epochs 90");
  long hz = sysconf(_SC_CLK_TCK);
  ASSERT_TRUE(got->start_time_unix.has_value());
  EXPECT_EQ(*got->start_time_unix, 1764400000 + 500 / hz);
}

TEST(ProcfsInspectorTest, KernelThreadGetsCommInBrackets) {
  testing::TempDir dir;
  dir.Write("7/stat", "7 (kworker/0:1) I 2 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0");
  dir.Write("7/cmdline", "");
  ProcfsInspector inspector(dir.path());
  auto got = inspector.Inspect(7);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->command, "[kworker/0:1]");
  EXPECT_FALSE(got->start_time_unix.has_value());  // no btime in this fake tree
}

TEST(EnrichProcessesTest, UnknownPidStaysListedButInvisible) {
  model::MachineSnapshot snap;
  snap.gpus.resize(1);
  model::GpuProcess known, foreign;
  known.pid = 100;
  foreign.pid = 200;
  snap.gpus[0].processes = {known, foreign};
  ProcessDetails alice;
  alice.uid = 1001;
  alice.user = "alice";
  alice.command = "python train.py";
  testing::TempDir empty_proc;
  ProcfsInspector procfs(empty_proc.path());
  StaticProcessTable table({{100, alice}}, &procfs);
  EnrichProcesses(snap, table);
  ASSERT_EQ(snap.gpus[0].processes.size(), 2u);
  EXPECT_TRUE(snap.gpus[0].processes[0].is_visible);
  EXPECT_EQ(snap.gpus[0].processes[0].user, "alice");
  EXPECT_FALSE(snap.gpus[0].processes[1].is_visible);
  EXPECT_FALSE(snap.gpus[0].processes[1].user.has_value());
}

}  // namespace
}  // namespace gpuman::devices
