// Process groups from /proc: a fake /proc for the parsing, the real one for a live group.
#include "sched/process_group.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "store/proc_liveness.h"
#include "support/temp_dir.h"

namespace gpuman::sched {
namespace {

void WriteStat(const testing::TempDir& root, int pid, const std::string& comm, char state, int pgrp, int64_t start) {
  std::filesystem::create_directories(root.Join(std::to_string(pid)));
  std::ofstream(root.Join(std::to_string(pid) + "/stat"))
      << pid << " (" << comm << ") " << state << " 1 " << pgrp << " " << pgrp
      << " 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 " << start << " 1000 100 0\n";
}

TEST(ProcessGroupTest, ReadsGroupsFromAFakeProc) {
  testing::TempDir root;
  WriteStat(root, 100, "train) 5 (x", 'S', 100, 5000);  // comm with ") " in it
  WriteStat(root, 101, "worker", 'R', 100, 5001);
  WriteStat(root, 102, "done", 'Z', 100, 5002);          // exited, not reaped: not counted
  WriteStat(root, 200, "other", 'S', 200, 6000);
  std::filesystem::create_directories(root.Join("self"));
  EXPECT_EQ(ProcessGroupOf(101, root.path()), 100);
  EXPECT_EQ(ProcessGroupOf(102, root.path()), std::nullopt);
  EXPECT_EQ(ProcessGroupOf(999, root.path()), std::nullopt);
  std::vector<model::LeaseProcess> expected = {{100, 5000}, {101, 5001}};
  EXPECT_EQ(ProcessesInGroup(100, root.path()), expected);
  EXPECT_TRUE(ProcessesInGroup(1, root.path()).empty()) << "never init's group";
}

TEST(ProcessGroupTest, FindsTheMembersOfALiveGroup) {
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t leader = fork();
  if (leader == 0) {
    setpgid(0, 0);
    if (fork() == 0) {
      execlp("sleep", "sleep", "30", static_cast<char*>(nullptr));
      _exit(127);
    }
    (void)!write(ready[1], "x", 1);
    execlp("sleep", "sleep", "30", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(ready[1]);
  char c;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  close(ready[0]);
  setpgid(leader, leader);
  std::vector<model::LeaseProcess> members;
  for (int i = 0; i < 100 && members.size() < 2; ++i) {
    members = ProcessesInGroup(leader);
    if (members.size() < 2) usleep(20000);
  }
  ASSERT_EQ(members.size(), 2u);
  EXPECT_EQ(members[0].pid, leader);
  EXPECT_EQ(members[0].start_time_ticks, store::ProcessStartTicks(leader));
  EXPECT_EQ(ProcessGroupOf(members[1].pid), leader);
  kill(-leader, SIGKILL);
  int status = 0;
  waitpid(leader, &status, 0);
  std::vector<model::LeaseProcess> left = members;
  for (int i = 0; i < 250 && !left.empty(); ++i) {
    left = ProcessesInGroup(leader);
    if (!left.empty()) usleep(20000);
  }
  EXPECT_TRUE(left.empty()) << "the grandchild, re-parented, is reaped or a zombie";
  while (waitpid(-leader, &status, WNOHANG) > 0) {  // if we are a subreaper, it came to us
  }
}

}  // namespace
}  // namespace gpuman::sched
