// Habits users bring from Slurm to the queue (issue 26): squeue's and scancel's --user,
// --me, --state and --name, `cancel --all`, `wait` of several jobs, and --output's %j,
// %x and %u. Through a private daemon, as root and as a second user: a filter chooses
// among the jobs, the daemon still decides whose jobs a caller may change.
#include <sys/stat.h>

#include "e2e/e2e_util.h"
#include "e2e/queue_daemon_fixture.h"
#include "e2e/users.h"

namespace gpuman::e2e {
namespace {


class QueueHabitsE2E : public QueueDaemonE2E {
 protected:
  // The ids of `queue` (with these options), in order.
  std::vector<int64_t> Queue(std::vector<std::string> args) {
    args.insert(args.begin(), {"queue", "--json"});
    auto r = Gpuman(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::vector<int64_t> ids;
    if (r.exit_code != 0) return ids;
    const nlohmann::json parsed = nlohmann::json::parse(r.out);
    for (const auto& j : parsed["jobs"]) ids.push_back(j["id"].get<int64_t>());
    return ids;
  }
};

TEST_F(QueueHabitsE2E, FiltersChooseJobsAndTheDaemonStillGuardsThem) {
  // All four GPUs held by a running job: everything else waits.
  const int64_t blocker = Submit({"-n", "4", "--name", "blocker", "--", "sleep", "60"});
  const int64_t a = Submit({"--name", "sweep", "--", "true"});
  const int64_t b = Submit({"--name", "sweep", "--", "true"});
  const int64_t c = Submit({"--name", "eval", "--", "true"});
  ASSERT_EQ(Gpuman({"hold", std::to_string(c)}).exit_code, 0);

  EXPECT_EQ(Queue({"--name", "sweep"}), (std::vector<int64_t>{a, b}));
  EXPECT_EQ(Queue({"--state", "held"}), (std::vector<int64_t>{c}));
  EXPECT_EQ(Queue({"--state", "queued,held", "--name", "eval"}), (std::vector<int64_t>{c}));
  EXPECT_EQ(Queue({"--me"}).size(), 4u);
  EXPECT_EQ(Queue({"--user", "root"}).size(), 4u);
  EXPECT_TRUE(Queue({"--user", "nobody-here"}).empty());
  auto typo = Gpuman({"queue", "--state", "runing"});
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_EQ(typo.err, "gpuman: error: --state: unknown state 'runing' (did you mean 'running'?)\n");

  // Another user's `cancel --all` touches only their own jobs (none); naming root's jobs
  // by --user is refused per job by the daemon.
  auto other = EnsureTestUser("gpumanta");
  if (getuid() == 0 && other) {
    std::map<std::string, std::string> env = CleanEnv("");
    env["GPUMAN_SOCKET"] = socket_;
    env["PATH"] = "/usr/bin:/bin";
    auto mine = RunAsUser(*other, {kGpuman, "cancel", "--all"}, env);
    EXPECT_EQ(mine.exit_code, 0) << mine.err;
    EXPECT_EQ(mine.err, "gpuman: cancel: no job matches\n");
    auto theirs = RunAsUser(*other, {kGpuman, "cancel", "--user", "root", "--name", "sweep"}, env);
    EXPECT_NE(theirs.exit_code, 0);
    EXPECT_EQ(theirs.err, "gpuman: error: job " + std::to_string(a) + " belongs to another user\ngpuman: error: job " +
                              std::to_string(b) + " belongs to another user\n");
    EXPECT_EQ(Queue({"--name", "sweep"}), (std::vector<int64_t>{a, b})) << "nothing of root's was cancelled";
  }

  // By name: only the sweep; then --all: the rest of one's own.
  EXPECT_EQ(Gpuman({"cancel", "--name", "sweep"}).exit_code, 0);
  EXPECT_EQ(Queue({}), (std::vector<int64_t>{blocker, c}));
  EXPECT_EQ(Gpuman({"resume", "--all"}).exit_code, 0);
  EXPECT_EQ(Queue({"--state", "queued"}), (std::vector<int64_t>{c}));
  EXPECT_EQ(Gpuman({"cancel", "--all"}).exit_code, 0);  // the running blocker too
  EXPECT_EQ(Gpuman({"wait", std::to_string(blocker)}).exit_code, 193);
  EXPECT_TRUE(Queue({}).empty());
  EXPECT_EQ(Queue({"--state", "cancelled"}), (std::vector<int64_t>{blocker, a, b, c}))
      << "a final state reads finished jobs";

  auto neither = Gpuman({"cancel"});
  EXPECT_EQ(neither.exit_code, 2);
  EXPECT_NE(neither.err.find("name the jobs by ID, or choose them with --all"), std::string::npos);
  EXPECT_EQ(Gpuman({"cancel", std::to_string(a), "--all"}).exit_code, 2);

  // Many refusals of one kind: five lines, then one that counts the rest.
  if (getuid() == 0 && other) {
    std::map<std::string, std::string> env = CleanEnv("");
    env["GPUMAN_SOCKET"] = socket_;
    env["PATH"] = "/usr/bin:/bin";
    const int64_t wide = Submit({"--array", "0-7", "--name", "wide", "--", "sleep", "60"});
    auto many = RunAsUser(*other, {kGpuman, "cancel", "--user", "root", "--name", "wide"}, env);
    EXPECT_EQ(many.exit_code, 5) << many.err;
    std::string want;
    for (int t = 0; t < 5; ++t) want += "gpuman: error: job " + std::to_string(wide) + "_" + std::to_string(t) + " belongs to another user\n";
    want += "gpuman: error: and 3 more jobs refused the same way (the last: job " + std::to_string(wide) + "_7)\n";
    EXPECT_EQ(many.err, want);
    EXPECT_EQ(Gpuman({"cancel", std::to_string(wide)}).exit_code, 0);
  }
}

TEST_F(QueueHabitsE2E, WaitTakesSeveralJobsAndOutputPatternsAreFilledIn) {
  const int64_t ok = Submit({"--name", "fine", "--output", dir_.Join("%x-%j.log"), "--", "echo", "hello"});
  const int64_t bad = Submit({"--name", "sad/path", "--output", dir_.Join("%x-%j-%u.log"), "--", "sh", "-c", "exit 3"});
  auto waited = Gpuman({"wait", std::to_string(ok), std::to_string(bad)});
  EXPECT_EQ(waited.exit_code, 3) << "the first job that did not succeed gives the code";
  EXPECT_EQ(waited.err, "gpuman: job " + std::to_string(bad) + " failed: exit code 3 (exit 3)\n");
  auto both_ok = Gpuman({"wait", std::to_string(ok), std::to_string(ok), "--json"});
  EXPECT_EQ(both_ok.exit_code, 0) << both_ok.err;
  EXPECT_EQ(std::count(both_ok.out.begin(), both_ok.out.end(), '\n'), 2) << "one JSON line per job";

  const std::string log = dir_.Join("fine-" + std::to_string(ok) + ".log");
  EXPECT_EQ(Slurp(log), "hello\n");
  const std::string sad = dir_.Join("sad_path-" + std::to_string(bad) + "-root.log");
  struct stat st{};
  EXPECT_EQ(stat(sad.c_str(), &st), 0) << "a '/' in the name makes no directory";
  auto shown = Gpuman({"show", std::to_string(ok)});
  EXPECT_NE(shown.out.find(log), std::string::npos) << shown.out;

  // The daemon's log says when and why it stopped (issue 26: nothing was logged).
  EXPECT_EQ(daemon_.Stop(), 0);
  const std::string daemon_log = Slurp(dir_.Join("daemon.log"));
  EXPECT_NE(daemon_log.find("gpuman: daemon stopped (SIGTERM); running jobs go on under their supervisors"),
            std::string::npos)
      << daemon_log;
}

// `update` (scontrol update's everyday use): priority, time limit and name of waiting jobs,
// a task or a whole array; never a running job, never above the default priority for a
// user, never another user's job.
TEST_F(QueueHabitsE2E, UpdateChangesWaitingJobsWithinTheRules) {
  const int64_t blocker = Submit({"-n", "4", "--", "sleep", "60"});
  const int64_t job = Submit({"--name", "eval", "--", "true"});
  const int64_t array = Submit({"--array", "0-2", "--name", "sweep", "--", "true"});
  auto shown = [&](const std::string& ref) {
    auto r = Gpuman({"show", ref, "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json();
  };

  auto changed = Gpuman({"update", std::to_string(job), "--priority", "-5", "--time-limit", "2h", "--name", "eval-2"});
  EXPECT_EQ(changed.exit_code, 0) << changed.err;
  nlohmann::json j = shown(std::to_string(job));
  EXPECT_EQ(j["priority"], -5);
  EXPECT_EQ(j["time_limit_ms"], 7200000);
  EXPECT_EQ(j["name"], "eval-2");
  EXPECT_EQ(j["state"], "queued");

  EXPECT_EQ(Gpuman({"update", std::to_string(array) + "_1", "--name", "one"}).exit_code, 0);
  EXPECT_EQ(shown(std::to_string(array) + "_1")["name"], "one");
  EXPECT_EQ(shown(std::to_string(array) + "_2")["name"], "sweep");
  EXPECT_EQ(Gpuman({"update", std::to_string(array), "--time-limit", "10m"}).exit_code, 0);
  for (const char* task : {"_0", "_1", "_2"}) {
    EXPECT_EQ(shown(std::to_string(array) + task)["time_limit_ms"], 600000) << task;
  }

  auto running = Gpuman({"update", std::to_string(blocker), "--time-limit", "1h"});
  EXPECT_EQ(running.exit_code, 1);
  EXPECT_EQ(running.err, "gpuman: error: job " + std::to_string(blocker) +
                             ": it is running: only a queued or held job can be updated\n");
  auto nothing = Gpuman({"update", std::to_string(job)});
  EXPECT_EQ(nothing.exit_code, 2);
  EXPECT_EQ(nothing.err, "gpuman: error: update: give --priority, --time-limit or --name\n");

  auto other = EnsureTestUser("gpumanta");
  if (getuid() == 0 && other) {
    std::map<std::string, std::string> env = CleanEnv("");
    env["GPUMAN_SOCKET"] = socket_;
    env["PATH"] = "/usr/bin:/bin";
    auto theirs = RunAsUser(*other, {kGpuman, "update", std::to_string(job), "--priority", "-9"}, env);
    EXPECT_EQ(theirs.exit_code, 5) << theirs.err;
    // One line that names the job once (not "job 5: job 5 belongs ...").
    EXPECT_EQ(theirs.err, "gpuman: error: job " + std::to_string(job) + " belongs to another user\n");
    auto missing = Gpuman({"cancel", "999999"});
    EXPECT_EQ(missing.exit_code, 2) << missing.err;
    EXPECT_EQ(missing.err, "gpuman: error: no job 999999\n");
    const std::string dir = dir_.Join("as-user");
    ASSERT_EQ(mkdir(dir.c_str(), 0777), 0);
    chmod(dir.c_str(), 0777);
    auto own = RunAsUser(*other, {"/bin/sh", "-c", "cd \"$0\" && \"$1\" submit -- true", dir, kGpuman}, env);
    ASSERT_EQ(own.exit_code, 0) << own.err;
    const std::string mine = std::to_string(std::atoll(own.out.c_str()));
    auto raise = RunAsUser(*other, {kGpuman, "update", mine, "--priority", "10"}, env);
    EXPECT_EQ(raise.exit_code, 5) << raise.err;
    EXPECT_EQ(raise.err, "gpuman: error: only root or the admin group may raise a job's priority above 0\n");
    EXPECT_EQ(shown(mine)["priority"], 0);
    EXPECT_EQ(Gpuman({"update", mine, "--priority", "10"}).exit_code, 0) << "root may";
    EXPECT_EQ(shown(mine)["priority"], 10);
  }
}

}  // namespace
}  // namespace gpuman::e2e
