#include "tui/kill.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

namespace gpuman::tui {
namespace {

// A child that sleeps until signalled; reaped by the test.
pid_t StartSleeper() {
  pid_t pid = fork();
  if (pid == 0) {
    execl("/bin/sleep", "sleep", "300", static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

ProcessRow RowFor(pid_t pid, devices::ProcessInspector& procfs) {
  ProcessRow r;
  r.pid = static_cast<uint32_t>(pid);
  r.is_visible = true;
  auto d = procfs.Inspect(r.pid);
  if (d) {
    r.uid = d->uid;
    r.start_time_unix = d->start_time_unix;
  }
  return r;
}

TEST(SignalProcessTest, SignalsTheProcessTheRowShows) {
  devices::ProcfsInspector procfs("/proc");
  pid_t pid = StartSleeper();
  ASSERT_GT(pid, 0);
  // /proc/<pid> exists from fork on; wait until the exec has happened is not needed.
  ProcessRow row = RowFor(pid, procfs);
  ASSERT_TRUE(row.uid.has_value());
  Status sent = SignalProcess(row, SIGTERM, procfs);
  ASSERT_TRUE(sent.has_value()) << sent.error().message;
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
  // Reaped: gone.
  Status again = SignalProcess(row, SIGTERM, procfs);
  ASSERT_FALSE(again.has_value());
  EXPECT_EQ(again.error().code, ErrorCode::kNotFound);
  EXPECT_NE(again.error().message.find("pid " + std::to_string(pid)), std::string::npos);
}

TEST(SignalProcessTest, RefusesAPidThatIsNowAnotherProcess) {
  devices::ProcfsInspector procfs("/proc");
  pid_t pid = StartSleeper();
  ASSERT_GT(pid, 0);
  ProcessRow row = RowFor(pid, procfs);
  ASSERT_TRUE(row.start_time_unix.has_value());
  row.start_time_unix = *row.start_time_unix - 1000;  // what a simulated or recycled pid looks like
  Status sent = SignalProcess(row, SIGTERM, procfs);
  ASSERT_FALSE(sent.has_value());
  EXPECT_EQ(sent.error().code, ErrorCode::kConflict);
  int status = 0;
  EXPECT_EQ(waitpid(pid, &status, WNOHANG), 0);  // still running
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
}

TEST(SignalProcessTest, SignalNames) {
  EXPECT_EQ(SignalName(SIGTERM), "TERM");
  EXPECT_EQ(SignalName(SIGKILL), "KILL");
  EXPECT_EQ(SignalName(SIGINT), "INT");
}

}  // namespace
}  // namespace gpuman::tui
