// What of other users' processes the snapshot op passes on: the kernel's /proc rule
// (hidepid, gid=, PID namespaces), table-driven, and the mountinfo parser.
#include "daemon/proc_visibility.h"

#include <unistd.h>

#include <gtest/gtest.h>

namespace gpuman::daemon {
namespace {

TEST(ProcMountTest, ParsesHidepidInBothSpellings) {
  const char* info =
      "22 27 0:21 / /proc rw,relatime - proc proc rw\n"
      "30 27 0:40 / /sys rw - sysfs sysfs rw\n";
  auto plain = ParseProcMount(info);
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->hidepid, 0);
  EXPECT_FALSE(plain->gid);

  auto numeric = ParseProcMount("22 27 0:21 / /proc rw,nosuid - proc proc rw,hidepid=2,gid=27\n");
  ASSERT_TRUE(numeric);
  EXPECT_EQ(numeric->hidepid, 2);
  EXPECT_EQ(numeric->gid, 27u);
  auto named = ParseProcMount("22 27 0:21 / /proc rw shared:12 - proc proc rw,hidepid=noaccess\n");
  ASSERT_TRUE(named);
  EXPECT_EQ(named->hidepid, 1);
  EXPECT_EQ(ParseProcMount("1 2 0:1 / /proc rw - proc proc rw,hidepid=ptraceable\n")->hidepid, 4);
  EXPECT_EQ(ParseProcMount("1 2 0:1 / /proc rw - proc proc rw,hidepid=someday\n")->hidepid, 2)
      << "an unknown spelling counts as the strictest";
  // A later mount over /proc (a container's) is the one in force.
  auto stacked = ParseProcMount(
      "22 27 0:21 / /proc rw - proc proc rw\n"
      "99 27 0:55 / /proc rw - proc proc rw,hidepid=invisible\n");
  EXPECT_EQ(stacked->hidepid, 2);
  EXPECT_FALSE(ParseProcMount("30 27 0:40 / /sys rw - sysfs sysfs rw\n"));
  EXPECT_FALSE(ParseProcMount("22 27 0:21 / /proc/sub rw - proc proc rw\n"));
}

struct ViewCase {
  const char* name;
  CallerView caller;
  std::optional<uint32_t> process_uid;
  ProcessView want;
};

TEST(ProcVisibilityTest, TheKernelsRule) {
  const CallerView bob_open{1002, {1002}, {0, std::nullopt}, true};
  const CallerView bob_noaccess{1002, {1002}, {1, std::nullopt}, true};
  const CallerView bob_invisible{1002, {1002}, {2, std::nullopt}, true};
  const CallerView bob_ptraceable{1002, {1002}, {4, std::nullopt}, true};
  const CallerView bob_in_gid{1002, {1002, 27}, {2, 27u}, true};
  const CallerView bob_not_in_gid{1002, {1002, 28}, {2, 27u}, true};
  const CallerView root_invisible{0, {0}, {2, std::nullopt}, true};
  const CallerView bob_in_container{1002, {1002}, {0, std::nullopt}, false};
  const ViewCase cases[] = {
      {"hidepid off: everyone's", bob_open, 1003, ProcessView::kFull},
      {"noaccess: owner, no command", bob_noaccess, 1003, ProcessView::kOwnerOnly},
      {"noaccess: own process", bob_noaccess, 1002, ProcessView::kFull},
      {"invisible: other's hidden", bob_invisible, 1003, ProcessView::kHidden},
      {"invisible: own process", bob_invisible, 1002, ProcessView::kFull},
      {"invisible: owner unknown", bob_invisible, std::nullopt, ProcessView::kHidden},
      {"ptraceable: other's hidden", bob_ptraceable, 0, ProcessView::kHidden},
      {"gid= member sees all", bob_in_gid, 1003, ProcessView::kFull},
      {"other group does not", bob_not_in_gid, 1003, ProcessView::kHidden},
      {"root sees all", root_invisible, 1003, ProcessView::kFull},
      {"other PID namespace: nothing", bob_in_container, 1002, ProcessView::kHidden},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(ViewOf(c.caller, c.process_uid), c.want) << c.name;
  }
}

TEST(ProcVisibilityTest, FilterClearsWhatTheCallerMayNotSee) {
  model::MachineSnapshot snap;
  model::DeviceSnapshot g;
  auto proc = [](uint32_t pid, uint32_t uid) {
    model::GpuProcess p;
    p.pid = pid;
    p.is_visible = true;
    p.uid = uid;
    p.user = "u" + std::to_string(uid);
    p.command = "python train.py --secret-flag";
    p.start_time_unix = 1700000000;
    p.used_memory_bytes = 1 << 20;
    return p;
  };
  g.processes = {proc(10, 1002), proc(11, 1003)};
  snap.gpus = {g};

  model::MachineSnapshot noaccess = snap;
  FilterForCaller(noaccess, CallerView{1002, {1002}, {1, std::nullopt}, true});
  const auto& own = noaccess.gpus[0].processes[0];
  const auto& other = noaccess.gpus[0].processes[1];
  EXPECT_EQ(own.command, "python train.py --secret-flag");
  EXPECT_TRUE(other.is_visible);
  EXPECT_EQ(other.user, "u1003");
  EXPECT_FALSE(other.command.has_value());
  EXPECT_FALSE(other.start_time_unix.has_value());
  EXPECT_EQ(other.used_memory_bytes, 1 << 20) << "NVML's part is everyone's";

  model::MachineSnapshot invisible = snap;
  FilterForCaller(invisible, CallerView{1002, {1002}, {2, std::nullopt}, true});
  const auto& hidden = invisible.gpus[0].processes[1];
  EXPECT_EQ(hidden.pid, 11u);
  EXPECT_FALSE(hidden.is_visible);
  EXPECT_FALSE(hidden.uid || hidden.user || hidden.command || hidden.start_time_unix);
  EXPECT_TRUE(invisible.gpus[0].processes[0].command.has_value());
}

// This test process asking about itself: its own /proc mount and namespace.
TEST(ProcVisibilityTest, ReadsACallersViewFromProc) {
  CallerView me = ReadCallerView(getuid(), getgid(), getpid());
  EXPECT_TRUE(me.same_pid_namespace);
  EXPECT_EQ(me.uid, getuid());
  CallerView gone = ReadCallerView(1002, 1002, 0x3ffffff0);
  EXPECT_FALSE(gone.same_pid_namespace) << "a vanished caller sees nothing";
  EXPECT_EQ(ViewOf(gone, 1002), ProcessView::kHidden);
}

}  // namespace
}  // namespace gpuman::daemon
