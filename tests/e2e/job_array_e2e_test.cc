// Job arrays (issue 26), as Slurm users know them: `submit --array 0-9%2` makes one task per
// index, each with GPUMAN_ARRAY_JOB_ID / GPUMAN_ARRAY_TASK_ID and its own --output (%A,
// %a); %2 caps how many run at once; `queue` shows the waiting tasks as one row until
// -r; a task is named 12_7 and the array by its id, for show, cancel, hold, resume and
// wait; `--after ARRAY` waits for every task. Through a private daemon, as root and as a
// second user.
#include <sys/stat.h>

#include "e2e/e2e_util.h"
#include "e2e/queue_daemon_fixture.h"
#include "e2e/users.h"

namespace gpuman::e2e {
namespace {


class JobArrayE2E : public QueueDaemonE2E {
 protected:
  nlohmann::json QueueJson(std::vector<std::string> args = {}) {
    args.insert(args.begin(), {"queue", "--json"});
    auto r = Gpuman(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? nlohmann::json::parse(r.out)["jobs"] : nlohmann::json::array();
  }
  // The state of every task of `array` by index, from `queue --all --json`.
  std::map<int64_t, std::string> TaskStates(int64_t array) {
    std::map<int64_t, std::string> out;
    for (const auto& j : QueueJson({"--all"})) {
      if (j.contains("array_id") && j["array_id"] == array) out[j["array_task"].get<int64_t>()] = j["state"];
    }
    return out;
  }
};

TEST_F(JobArrayE2E, TasksGetTheirIndexTheirOwnLogAndRunAtMostTheLimitAtOnce) {
  // Each task records its variables, and how many tasks ran beside it.
  const std::string running = dir_.Join("running");
  ASSERT_EQ(mkdir(running.c_str(), 0755), 0);
  const std::string script =
      "touch " + running + "/$GPUMAN_ARRAY_TASK_ID; echo \"$GPUMAN_ARRAY_JOB_ID $GPUMAN_ARRAY_TASK_ID $GPUMAN_JOB_ID "
      "$(ls " + running + " | wc -l)\"; sleep 0.3; rm " + running + "/$GPUMAN_ARRAY_TASK_ID";
  auto submitted = Gpuman({"submit", "--array", "0-4,7%2", "--json", "--output", dir_.Join("t-%A_%a.log"), "--", "sh",
                           "-c", script});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.err;
  const nlohmann::json reply = nlohmann::json::parse(submitted.out);
  const int64_t array = reply["id"].get<int64_t>();
  EXPECT_EQ(reply["tasks"], 6);

  auto waited = Gpuman({"wait", std::to_string(array)});
  EXPECT_EQ(waited.exit_code, 0) << waited.err;
  for (int64_t task : {0, 1, 2, 3, 4, 7}) {
    const std::string log = Slurp(dir_.Join("t-" + std::to_string(array) + "_" + std::to_string(task) + ".log"));
    std::istringstream in(log);
    int64_t array_id = 0, task_id = -1, job_id = 0, beside = 0;
    in >> array_id >> task_id >> job_id >> beside;
    EXPECT_EQ(array_id, array) << log;
    EXPECT_EQ(task_id, task) << log;
    EXPECT_GE(job_id, array) << "each task is a job of its own";
    EXPECT_GE(beside, 1);
    EXPECT_LE(beside, 2) << "task " << task << " ran beside " << beside - 1 << " others: the limit is %2";
  }
  EXPECT_EQ(TaskStates(array),
            (std::map<int64_t, std::string>{{0, "succeeded"}, {1, "succeeded"}, {2, "succeeded"}, {3, "succeeded"},
                                            {4, "succeeded"}, {7, "succeeded"}}));
  auto shown = Gpuman({"show", std::to_string(array)});
  EXPECT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_NE(shown.out.find("6 tasks, at most 2 at once"), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find("succeeded: 0-4,7"), std::string::npos) << shown.out;
  auto task = Gpuman({"show", std::to_string(array) + "_7"});
  EXPECT_EQ(task.exit_code, 0) << task.err;
  EXPECT_NE(task.out.find("job " + std::to_string(array) + "_7 "), std::string::npos) << task.out;
  auto logs = Gpuman({"logs", std::to_string(array)});
  EXPECT_EQ(logs.exit_code, 2);
  EXPECT_NE(logs.err.find("is an array of 6 tasks: name one, as " + std::to_string(array) + "_0"), std::string::npos)
      << logs.err;
  EXPECT_EQ(Gpuman({"logs", std::to_string(array) + "_2"}).exit_code, 0);
}

TEST_F(JobArrayE2E, OneRowUntilExpandedAndTasksOrArraysAreCancelledHeldAndWaitedFor) {
  const int64_t blocker = Submit({"-n", "4", "--", "sleep", "60"});
  const int64_t array = Submit({"--array", "0-9", "--name", "sweep", "--", "true"});
  const int64_t after = Submit({"--after", std::to_string(array), "--", "true"});
  EXPECT_EQ(QueueJson().size(), 12u) << "JSON has every task";
  auto table = Gpuman({"queue"});
  EXPECT_NE(table.out.find(std::to_string(array) + "_[0-9]"), std::string::npos) << table.out;
  EXPECT_EQ(std::count(table.out.begin(), table.out.end(), '\n'), 4) << "header, blocker, the array, the dependent\n"
                                                                       << table.out;
  auto expanded = Gpuman({"queue", "-r"});
  EXPECT_EQ(std::count(expanded.out.begin(), expanded.out.end(), '\n'), 13) << expanded.out;

  // One task, then the whole array: hold, resume, cancel.
  EXPECT_EQ(Gpuman({"hold", std::to_string(array) + "_3"}).exit_code, 0);
  EXPECT_EQ(TaskStates(array)[3], "held");
  EXPECT_EQ(TaskStates(array)[4], "queued");
  EXPECT_EQ(Gpuman({"hold", std::to_string(array)}).exit_code, 0);
  for (const auto& [task, state] : TaskStates(array)) EXPECT_EQ(state, "held") << task;
  EXPECT_EQ(Gpuman({"resume", std::to_string(array)}).exit_code, 0);
  for (const auto& [task, state] : TaskStates(array)) EXPECT_EQ(state, "queued") << task;
  EXPECT_EQ(Gpuman({"cancel", std::to_string(array) + "_9"}).exit_code, 0);
  auto again = Gpuman({"cancel", std::to_string(array) + "_9"});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_EQ(again.err, "gpuman: error: job " + std::to_string(array) + "_9 is already cancelled\n");
  auto missing = Gpuman({"show", std::to_string(array) + "_10"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_EQ(missing.err, "gpuman: error: no job " + std::to_string(array) + "_10\n");
  auto bad = Gpuman({"cancel", "12_x"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_EQ(bad.err, "gpuman: error: '12_x': not a job ID (12, or 12_7 for task 7 of array 12)\n");

  // Another user can neither cancel a task nor the array.
  auto other = EnsureTestUser("gpumanta");
  if (getuid() == 0 && other) {
    std::map<std::string, std::string> env = CleanEnv("");
    env["GPUMAN_SOCKET"] = socket_;
    env["PATH"] = "/usr/bin:/bin";
    for (const std::string& ref : {std::to_string(array), std::to_string(array) + "_1"}) {
      auto theirs = RunAsUser(*other, {kGpuman, "cancel", ref}, env);
      EXPECT_EQ(theirs.exit_code, 5) << ref << ": " << theirs.err;
      EXPECT_NE(theirs.err.find("belongs to another user"), std::string::npos) << theirs.err;
    }
    EXPECT_EQ(TaskStates(array)[1], "queued");
  }

  // Cancelling the array cancels what is left, and the job after it is cancelled too: one
  // task did not succeed.
  EXPECT_EQ(Gpuman({"cancel", std::to_string(array)}).exit_code, 0);
  auto waited = Gpuman({"wait", std::to_string(array)});
  EXPECT_EQ(waited.exit_code, 193) << waited.err;
  EXPECT_EQ(waited.err.rfind("gpuman: job " + std::to_string(array) + "_0 cancelled", 0), 0u) << waited.err;
  EXPECT_EQ(Gpuman({"wait", std::to_string(after)}).exit_code, 193);
  auto nothing_left = Gpuman({"cancel", std::to_string(array)});
  EXPECT_EQ(nothing_left.exit_code, 1);
  EXPECT_EQ(nothing_left.err,
            "gpuman: error: job " + std::to_string(array) + ": every task of the array has ended\n");
  EXPECT_EQ(Gpuman({"cancel", std::to_string(blocker)}).exit_code, 0);
}

TEST_F(JobArrayE2E, AJobAfterAnArrayWaitsForEveryTaskAndBadSpecsAreRefused) {
  const int64_t array = Submit({"--array", "0-3%1", "--", "sleep", "0.2"});
  const int64_t after = Submit({"--after", std::to_string(array), "--", "true"});
  auto waited = Gpuman({"wait", std::to_string(after)});
  EXPECT_EQ(waited.exit_code, 0) << waited.err;
  auto done = Gpuman({"show", std::to_string(after), "--json"});
  auto last = Gpuman({"show", std::to_string(array) + "_3", "--json"});
  ASSERT_EQ(done.exit_code, 0);
  ASSERT_EQ(last.exit_code, 0);
  EXPECT_GE(nlohmann::json::parse(done.out)["started_unix_ms"].get<int64_t>(),
            nlohmann::json::parse(last.out)["ended_unix_ms"].get<int64_t>())
      << "it started after the last task ended, not after the first";

  for (const auto& [spec, message] : std::vector<std::pair<std::string, std::string>>{
           {"5-2", "--array: '5-2': the range is backwards"},
           {"0-20000", "--array: '0-20000': more than 10000 tasks; submit the sweep in parts"},
           {"0-9%0", "--array: '%0': the limit after % is a number of tasks from 1 to 10000"},
           {"a-b", "--array: 'a-b': not a task index or range (0-4000000)"},
       }) {
    auto r = Gpuman({"submit", "--array", spec, "--", "true"});
    EXPECT_EQ(r.exit_code, 2) << spec;
    EXPECT_EQ(r.err, "gpuman: error: " + message + "\n") << spec;
  }
}

}  // namespace
}  // namespace gpuman::e2e
