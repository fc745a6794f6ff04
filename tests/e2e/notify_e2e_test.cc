// End-of-job notifications (issue 26, `submit --notify`): through a private daemon, a test
// user's job that ends runs the user's notify program once, as that user, with the job's
// facts and nothing of the job's environment; a failing job, a cancelled queued job, an
// array (once for the whole array) and the mail hook likewise; a notification due while
// no daemon ran (kill -9) runs when it starts again, once; bad --notify values are refused
// up front with one line.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "e2e/e2e_util.h"
#include "e2e/users.h"
#include "store/job_store.h"

namespace gpuman::e2e {
namespace {

using nlohmann::json;

// Appends one block per run to $1: who, where, its arguments, the environment that
// matters; prints a line to its stdout (the job's log) and exits with $2.
constexpr const char* kNotifyScript = R"SH(#!/bin/sh
out="$1"; rc="$2"; shift 2
{
  echo "run uid=$(id -u) gid=$(id -g) cwd=$(pwd)"
  for a in "$@"; do echo "arg=$a"; done
  env | grep -E '^(GPUMAN_|HOME=|USER=|LOGNAME=|PATH=|SECRET=)' | sort
  echo "stdin=[$(cat)]"
} >> "$out"
echo "notified-output"
exit "$rc"
)SH";

// A sendmail stand-in: its arguments, uid and the message on stdin.
constexpr const char* kSendmailScript = R"SH(#!/bin/sh
out="$(dirname "$0")/mail/sent"
{ echo "sendmail uid=$(id -u) args=$*"; cat; } >> "$out"
)SH";

class NotifyE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (a test user, a daemon that runs jobs as their owners)";
    user_ = EnsureTestUser("gpumanta");
    if (!user_) GTEST_SKIP() << "cannot create the test user gpumanta";
    chmod(dir_.path().c_str(), 0755);
    socket_ = dir_.Join("gpuman.sock");
    work_ = dir_.Join("work");
    out_ = dir_.Join("work/notified");  // the user may write there
    std::filesystem::create_directories(work_);
    std::filesystem::create_directories(dir_.Join("mail"));
    chmod(work_.c_str(), 0777);
    chmod(dir_.Join("mail").c_str(), 0777);
    script_ = dir_.Write("notify.sh", kNotifyScript);
    chmod(script_.c_str(), 0755);
    sendmail_ = dir_.Join("sendmail");
    config_ = dir_.Write("config.toml", "[notify]\nmail = \"" + sendmail_ + "\"\n");
    scenario_ = IdleScenario(dir_, "a100-4");
    StartDaemon();
  }
  void TearDown() override {
    if (daemon_.running()) Gpuman({"cancel", "--all"}, /*as_user=*/true);
    daemon_.Stop();
  }

  void StartDaemon() {
    auto env = CleanEnv(dir_.Join("leases"));
    env["GPUMAN_CONFIG"] = config_;
    env["PATH"] = "/usr/bin:/bin";
    ASSERT_TRUE(daemon_.Start({.scenario = scenario_,
                               .socket = socket_,
                               .state_dir = dir_.Join("state"),
                               .env = env,
                               .stderr_path = dir_.Join("daemon.log")}));
  }

  // gpuman as gpumanta (or root), in the work directory, with a variable the notification
  // must not see.
  testing::RunResult Gpuman(std::vector<std::string> args, bool as_user = true) {
    auto env = CleanEnv(dir_.Join("leases"));
    env["GPUMAN_SOCKET"] = socket_;
    env["PATH"] = "/usr/bin:/bin";
    env["HOME"] = "/tmp";
    env["SECRET"] = "the-jobs-own";
    args.insert(args.begin(), kGpuman);
    if (as_user) return RunAsUser(*user_, args, env, work_);
    args.erase(args.begin());
    return RunGpuman(dir_.Join("leases"), args, env);
  }
  int64_t Submit(std::vector<std::string> args) {
    args.insert(args.begin(), "submit");
    auto r = Gpuman(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return std::atoll(r.out.c_str());
  }
  std::string NotifyArg(int rc = 0) { return script_ + " " + out_ + " " + std::to_string(rc); }

  json Show(const std::string& id) {
    auto r = Gpuman({"show", "--json", id});
    return r.exit_code == 0 ? json::parse(r.out) : json{{"error", r.err}};
  }
  // Waits (up to a minute: the machine may be loaded) until `show` says the notification
  // was sent; the job's JSON then.
  json WaitNotified(const std::string& id) {
    json j;
    for (int waited = 0; waited < 60000; waited += 100) {
      j = Show(id);
      if (j.contains("notify") && j["notify"]["sent"] == true) return j;
      usleep(100000);
    }
    ADD_FAILURE() << "job " << id << " was never notified: " << j.dump() << "\n" << Slurp(dir_.Join("daemon.log"));
    return j;
  }
  // The blocks the notify program wrote, one per run.
  std::vector<std::string> Runs() {
    std::vector<std::string> runs;
    std::istringstream in(Slurp(out_));
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("run ", 0) == 0) runs.emplace_back();
      if (!runs.empty()) runs.back() += line + "\n";
    }
    return runs;
  }
  std::string Uid() const { return std::to_string(user_->pw_uid); }

  testing::TempDir dir_;
  std::optional<passwd> user_;
  std::string socket_, work_, out_, script_, sendmail_, config_, scenario_;
  PrivateDaemon daemon_;
};

TEST_F(NotifyE2E, AJobThatEndsRunsItsNotifyOnceAsItsOwnerWithItsFacts) {
  const int64_t id = Submit({"--name", "tell", "--notify", NotifyArg() + " 'job %j' %s \"[%e]\" %x%%", "--", "/bin/true"});
  const json j = WaitNotified(std::to_string(id));
  EXPECT_EQ(j["state"], "succeeded");
  EXPECT_EQ(j["notify"]["kind"], "program");
  EXPECT_EQ(j["notify"]["argv"][0], script_) << "resolved and stored at submit";
  EXPECT_EQ(j["notify"]["outcome"], "exited with status 0");
  const auto runs = Runs();
  ASSERT_EQ(runs.size(), 1u) << Slurp(out_);
  const std::string& run = runs[0];
  const std::string ids = std::to_string(id);
  EXPECT_NE(run.find("run uid=" + Uid() + " gid=" + std::to_string(user_->pw_gid) + " cwd=" + work_ + "\n"), std::string::npos) << run;
  for (const std::string& want : {"arg=job " + ids, std::string("arg=succeeded"), std::string("arg=[0]"), std::string("arg=tell%"),
                                  "GPUMAN_JOB_ID=" + ids, std::string("GPUMAN_JOB_NAME=tell"), std::string("GPUMAN_JOB_STATE=succeeded"),
                                  std::string("GPUMAN_JOB_EXIT_CODE=0"), "GPUMAN_JOB_LOG=" + work_ + "/gpuman-" + ids + ".log",
                                  std::string("USER=gpumanta"), std::string("LOGNAME=gpumanta"), std::string("PATH=/usr/bin:/bin"),
                                  std::string("stdin=[]")}) {
    EXPECT_NE(run.find(want + "\n"), std::string::npos) << want << "\n" << run;
  }
  EXPECT_EQ(run.find("SECRET"), std::string::npos) << "the job's environment stays the job's:\n" << run;
  EXPECT_EQ(run.find("GPUMAN_JOB_REASON"), std::string::npos) << run;
  EXPECT_NE(Slurp(work_ + "/gpuman-" + ids + ".log").find("notified-output\n"), std::string::npos) << "its output goes to the job's log";
  struct stat st {};
  ASSERT_EQ(stat(out_.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, user_->pw_uid) << "the file it wrote is the user's, not root's";
  auto text = Gpuman({"show", std::to_string(id)});
  EXPECT_NE(text.out.find("  notify:    " + script_ + " " + out_ + " 0 job %j %s [%e] %x%% (sent "), std::string::npos) << text.out;
  EXPECT_EQ(Show(std::to_string(id))["notify"].dump(), j["notify"].dump()) << "not run again";
  EXPECT_EQ(Runs().size(), 1u);
}

TEST_F(NotifyE2E, AFailingJobAndAFailingNotifyLeaveTheJobsOutcomeAlone) {
  const int64_t id = Submit({"--notify", NotifyArg(5) + " %s %e", "--", "/bin/sh", "-c", "exit 3"});
  const json j = WaitNotified(std::to_string(id));
  EXPECT_EQ(j["state"], "failed");
  EXPECT_EQ(j["exit_code"], 3) << "the notify's own failure never changes the job's";
  EXPECT_EQ(j["notify"]["outcome"], "exited with status 5");
  const auto runs = Runs();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_NE(runs[0].find("arg=failed\narg=3\n"), std::string::npos) << runs[0];
  EXPECT_NE(runs[0].find("GPUMAN_JOB_STATE=failed\n"), std::string::npos) << runs[0];
  EXPECT_NE(runs[0].find("GPUMAN_JOB_EXIT_CODE=3\n"), std::string::npos) << runs[0];
  EXPECT_NE(Slurp(dir_.Join("daemon.log")).find("notify job " + std::to_string(id) + " (" + script_ + "): exited with status 5"),
            std::string::npos)
      << Slurp(dir_.Join("daemon.log"));
}

TEST_F(NotifyE2E, ACancelledQueuedJobIsNotifiedWithoutAnExitCode) {
  const int64_t all = Submit({"-n", "4", "--", "/bin/sleep", "600"});  // every GPU taken: the next one waits
  const int64_t id = Submit({"--notify", NotifyArg() + " %s [%e]", "--", "/bin/true"});
  ASSERT_EQ(Show(std::to_string(id))["state"], "queued");
  auto cancelled = Gpuman({"cancel", std::to_string(id)});
  ASSERT_EQ(cancelled.exit_code, 0) << cancelled.err;
  const json j = WaitNotified(std::to_string(id));
  EXPECT_EQ(j["state"], "cancelled");
  const auto runs = Runs();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_NE(runs[0].find("arg=cancelled\narg=[]\n"), std::string::npos) << runs[0];
  EXPECT_NE(runs[0].find("GPUMAN_JOB_REASON=cancelled by gpumanta\n"), std::string::npos) << runs[0];
  EXPECT_NE(runs[0].find("GPUMAN_JOB_EXIT_CODE=\n"), std::string::npos) << runs[0];
  EXPECT_FALSE(Show(std::to_string(all)).contains("notify")) << "a job without --notify has none";
}

TEST_F(NotifyE2E, AnArrayIsNotifiedOnceWhenItsLastTaskEnds) {
  auto r = Gpuman({"submit", "--json", "--array", "0-2", "--notify", NotifyArg() + " %j %s %e", "--", "/bin/sh", "-c",
                   "exit $GPUMAN_ARRAY_TASK_ID"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string array = std::to_string(json::parse(r.out)["id"].get<int64_t>());
  const json j = WaitNotified(array);
  const auto runs = Runs();
  ASSERT_EQ(runs.size(), 1u) << "one notification for three tasks:\n" << Slurp(out_);
  EXPECT_NE(runs[0].find("arg=" + array + "\narg=failed\narg=1\n"), std::string::npos) << runs[0];
  for (const std::string want : {"GPUMAN_ARRAY_TASKS=3", "GPUMAN_ARRAY_TASKS_SUCCEEDED=1", "GPUMAN_ARRAY_TASKS_FAILED=2",
                                 "GPUMAN_ARRAY_TASKS_CANCELLED=0", "GPUMAN_JOB_STATE=failed"}) {
    EXPECT_NE(runs[0].find(want + "\n"), std::string::npos) << want << "\n" << runs[0];
  }
  for (const char* task : {"_0", "_1", "_2"}) {
    EXPECT_EQ(Show(array + task)["notify"]["sent"], true) << "every task is marked: " << task;
  }
  EXPECT_EQ(Runs().size(), 1u);
}

TEST_F(NotifyE2E, ANotificationDueWhileNoDaemonRanRunsWhenItStartsOnce) {
  const std::string go = dir_.Join("go");
  const int64_t id = Submit({"--notify", NotifyArg() + " %s", "--", "/bin/sh", "-c", "while [ ! -e " + go + " ]; do sleep 0.1; done"});
  for (int waited = 0; waited < 60000 && Show(std::to_string(id))["state"] != "running"; waited += 100) usleep(100000);
  ASSERT_EQ(Show(std::to_string(id))["state"], "running");
  ASSERT_EQ(daemon_.Stop(SIGKILL), 128 + SIGKILL);
  std::ofstream(go) << "";
  // The job's supervisor records its end while no daemon runs.
  auto store = store::JobStore::Open(dir_.Join("state/state.db"));
  ASSERT_TRUE(store.has_value()) << store.error().message;
  std::optional<model::Job> job;
  for (int waited = 0; waited < 60000; waited += 100) {
    job = *(*store)->Get(id);
    if (job && model::IsFinal(job->state)) break;
    usleep(100000);
  }
  ASSERT_TRUE(job && job->state == model::JobState::kSucceeded);
  EXPECT_FALSE(job->notified_unix_ms.has_value());
  EXPECT_TRUE(Runs().empty()) << "nobody ran it yet";
  store->reset();
  StartDaemon();
  const json j = WaitNotified(std::to_string(id));
  const auto runs = Runs();
  ASSERT_EQ(runs.size(), 1u) << Slurp(out_);
  EXPECT_NE(runs[0].find("arg=succeeded\n"), std::string::npos) << runs[0];
  EXPECT_NE(runs[0].find("run uid=" + Uid() + " "), std::string::npos) << runs[0];
  // Started again, it does not notify again.
  daemon_.Stop();
  StartDaemon();
  EXPECT_EQ(Show(std::to_string(id))["notify"].dump(), j["notify"].dump());
  EXPECT_EQ(Runs().size(), 1u);
}

TEST_F(NotifyE2E, TheMailHookMailsTheOwnerAsTheOwnerAndIsRefusedWithoutAMailProgram) {
  auto refused = Gpuman({"submit", "--notify", "mail", "--", "/bin/true"});
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  EXPECT_EQ(refused.err, "gpuman: error: --notify mail: the machine's mail program " + sendmail_ +
                             " is not there or cannot be run\n");
  dir_.Write("sendmail", kSendmailScript);
  chmod(sendmail_.c_str(), 0755);
  const int64_t id = Submit({"--name", "mailme", "--notify", "mail", "--", "/bin/true"});
  const json j = WaitNotified(std::to_string(id));
  EXPECT_EQ(j["notify"]["kind"], "mail");
  const std::string sent = Slurp(dir_.Join("mail/sent"));
  EXPECT_NE(sent.find("sendmail uid=" + Uid() + " args=-oi gpumanta\nTo: gpumanta\nSubject: gpuman job " + std::to_string(id) +
                      " (mailme) succeeded, exit 0\n"),
            std::string::npos)
      << sent;
}

TEST_F(NotifyE2E, BadNotifyValuesAreRefusedAtSubmitWithOneLine) {
  struct Case {
    std::string notify, err;
  } cases[] = {
      {"x 'open", "gpuman: error: --notify: unterminated ' quote\n"},
      {"", "gpuman: error: --notify: no program given (--notify 'PROGRAM ARGS...' or --notify mail)\n"},
      {"no-such-notifier %j", "gpuman: error: --notify: command not found: no-such-notifier (not in PATH /usr/bin:/bin)\n"},
  };
  for (const Case& c : cases) {
    auto r = Gpuman({"submit", "--notify", c.notify, "--", "/bin/true"});
    EXPECT_EQ(r.exit_code, 2) << c.notify;
    EXPECT_EQ(r.err, c.err) << c.notify;
  }
  auto queue = Gpuman({"queue", "--all", "--json"});
  EXPECT_TRUE(json::parse(queue.out)["jobs"].empty()) << "nothing was queued";
}

}  // namespace
}  // namespace gpuman::e2e
