#include "model/job_notify.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpuman::model {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

Job Ended(JobState state, std::optional<int> exit_code) {
  Job j;
  j.id = 12;
  j.name = "train";
  j.uid = 1000;
  j.user = "ada";
  j.state = state;
  j.exit_code = exit_code;
  j.output_path = "/home/ada/gpuman-12.log";
  j.env = {{"SECRET", "do not pass"}, {"PATH", "/job/path"}};
  return j;
}

TEST(NotifyArgvTest, PatternsAreFilledInAndTheProgramIsLeftAlone) {
  Job j = Ended(JobState::kFailed, 3);
  const auto facts = NotifyFactsOf(j);
  EXPECT_EQ(ExpandNotifyArgv({"/bin/%j", "%j", "%x-%u", "[%s]", "exit=%e", "100%%", "%q", "%"}, facts),
            (std::vector<std::string>{"/bin/%j", "12", "train-ada", "[failed]", "exit=3", "100%", "%q", "%"}));
  j.exit_code.reset();
  j.state = JobState::kCancelled;
  EXPECT_EQ(ExpandNotifyArgv({"/n", "%s:%e"}, NotifyFactsOf(j)), (std::vector<std::string>{"/n", "cancelled:"}));
}

TEST(NotifyArgvTest, ALoneTaskIsNamedAsATaskAndAWholeArrayByItsId) {
  Job task = Ended(JobState::kSucceeded, 0);
  task.id = 15;
  task.array_id = 12;
  task.array_task = 3;
  EXPECT_EQ(NotifyFactsOf(task).id, "12_3");
  Job head = task;
  head.id = 12;
  head.array_task = 0;
  const auto facts = ArrayNotifyFacts(head, {{JobState::kSucceeded, 3}}, std::nullopt);
  EXPECT_EQ(ExpandNotifyArgv({"/n", "%j"}, facts)[1], "12");
}

TEST(NotifyEnvTest, TheJobsFactsAndTheOwnersBasicsButNotTheJobsEnvironment) {
  Job j = Ended(JobState::kTimedOut, 143);
  j.reason = "ran past its time limit";
  const auto env = NotifyEnv(NotifyFactsOf(j), "/home/ada", "/usr/bin:/bin");
  EXPECT_EQ(env, (std::vector<std::string>{
                     "HOME=/home/ada", "USER=ada", "LOGNAME=ada", "PATH=/usr/bin:/bin", "GPUMAN_JOB_ID=12",
                     "GPUMAN_JOB_NAME=train", "GPUMAN_JOB_STATE=timed_out", "GPUMAN_JOB_EXIT_CODE=143",
                     "GPUMAN_JOB_LOG=/home/ada/gpuman-12.log", "GPUMAN_JOB_REASON=ran past its time limit"}));
  EXPECT_THAT(env, Not(Contains(HasSubstr("SECRET"))));
  const auto no_exit = NotifyEnv(NotifyFactsOf(Ended(JobState::kCancelled, std::nullopt)), "/", "/bin");
  EXPECT_THAT(no_exit, Contains("GPUMAN_JOB_EXIT_CODE="));
  EXPECT_THAT(no_exit, Not(Contains(HasSubstr("GPUMAN_JOB_REASON"))));
}

TEST(ArrayNotifyFactsTest, OneSummaryForTheWholeArray) {
  Job head = Ended(JobState::kSucceeded, 0);
  head.array_id = 12;
  head.array_task = 0;
  auto all_ok = ArrayNotifyFacts(head, {{JobState::kSucceeded, 3}}, std::nullopt);
  EXPECT_EQ(all_ok.state, "succeeded");
  EXPECT_EQ(all_ok.exit_code, 0);
  auto mixed = ArrayNotifyFacts(head, {{JobState::kSucceeded, 2}, {JobState::kFailed, 1}, {JobState::kCancelled, 1}}, 7);
  EXPECT_EQ(mixed.state, "failed");
  EXPECT_EQ(mixed.exit_code, 7);
  const auto env = NotifyEnv(mixed, "/", "/bin");
  EXPECT_THAT(env, Contains("GPUMAN_ARRAY_TASKS=4"));
  EXPECT_THAT(env, Contains("GPUMAN_ARRAY_TASKS_SUCCEEDED=2"));
  EXPECT_THAT(env, Contains("GPUMAN_ARRAY_TASKS_FAILED=1"));
  EXPECT_THAT(env, Contains("GPUMAN_ARRAY_TASKS_CANCELLED=1"));
  EXPECT_THAT(env, Contains("GPUMAN_ARRAY_TASKS_TIMED_OUT=0"));
  EXPECT_EQ(ArrayNotifyFacts(head, {{JobState::kCancelled, 3}}, std::nullopt).state, "cancelled");
}

TEST(MailMessageTest, HeadersCannotBeInjectedThroughTheName) {
  Job j = Ended(JobState::kSucceeded, 0);
  EXPECT_EQ(NotifySubject(NotifyFactsOf(j)), "gpuman job 12 (train) succeeded, exit 0");
  j.name = "x\nBcc: eve@example.com";
  const std::string m = MailMessage(NotifyFactsOf(j));
  EXPECT_THAT(m, ::testing::StartsWith("To: ada\nSubject: gpuman job 12 (x?Bcc: eve@example.com) succeeded, exit 0\n"));
  EXPECT_THAT(m, Not(HasSubstr("\nBcc:")));
  EXPECT_THAT(m, HasSubstr("\n\n"));
  EXPECT_THAT(m, HasSubstr("log:       /home/ada/gpuman-12.log\n"));
  EXPECT_EQ(MailArgv("/usr/sbin/sendmail", "ada"), (std::vector<std::string>{"/usr/sbin/sendmail", "-oi", "ada"}));
}

TEST(CheckNotifyTest, OnlyWhatCanBeRunIsStored) {
  EXPECT_EQ(CheckNotify({.mail = true}), std::nullopt);
  EXPECT_EQ(CheckNotify({.argv = {"/usr/bin/notify-send", "%j"}}), std::nullopt);
  EXPECT_THAT(CheckNotify({.argv = {"notify-send"}}).value_or(""), HasSubstr("absolute path"));
  EXPECT_THAT(CheckNotify({}).value_or(""), HasSubstr("no program"));
  EXPECT_THAT(CheckNotify({.mail = true, .argv = {"/x"}}).value_or(""), HasSubstr("mail takes no arguments"));
  EXPECT_THAT(CheckNotify({.argv = {"/x", std::string("a\0b", 3)}}).value_or(""), HasSubstr("NUL"));
  EXPECT_THAT(CheckNotify({.argv = std::vector<std::string>(kMaxNotifyArgs + 1, "/x")}).value_or(""), HasSubstr("limit"));
  EXPECT_THAT(CheckNotify({.argv = {"/x", std::string(kMaxNotifyArgvBytes, 'a')}}).value_or(""), HasSubstr("limit"));
}

}  // namespace
}  // namespace gpuman::model
