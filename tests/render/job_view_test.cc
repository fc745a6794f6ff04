// `gpuman queue`'s table and `gpuman show`'s text (render/job_view.h): what each line says,
// and that other users' text never reaches the terminal unescaped.
#include "render/job_view.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "render/format.h"

namespace gpuman::render {
namespace {

constexpr int64_t kNow = 1'700'000'000'000;

model::Job RunningJob() {
  model::Job j;
  j.id = 7;
  j.name = "train";
  j.user = "alice";
  j.request.count = 2;
  j.state = model::JobState::kRunning;
  j.submitted_unix_ms = kNow - 600'000;
  j.started_unix_ms = kNow - 90'000;
  return j;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1) {
    lines.push_back(text.substr(start, nl - start));
  }
  EXPECT_EQ(start, text.size()) << "text ends with a newline";
  return lines;
}

TEST(QueueTableTest, NoJobs) { EXPECT_EQ(QueueTable({}, kNow, 80), "no jobs\n"); }

TEST(QueueTableTest, HeaderAndOneLinePerJob) {
  model::Job queued;
  queued.id = 12;
  queued.name = "eval";
  queued.user = "bob";
  queued.submitted_unix_ms = kNow - 120'000;
  model::Job waiting = queued;
  waiting.id = 13;
  waiting.reason = "waiting for 4 GPUs; 2 free";
  const std::vector<std::string> lines = Lines(QueueTable({RunningJob(), queued, waiting}, kNow, 120));
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0], "    ID  STATE       USER        GPUS   NAME              WHY / WHEN");
  EXPECT_EQ(lines[1], "     7  running     alice       2      train             running 1m 30s");
  EXPECT_EQ(lines[2], "    12  queued      bob         1      eval              queued 2m ago");
  EXPECT_EQ(lines[3], "    13  queued      bob         1      eval              waiting for 4 GPUs; 2 free");
}

TEST(QueueTableTest, IdleRunningAndEndedJobs) {
  model::Job idle = RunningJob();
  idle.idle_since_unix_ms = kNow - 30'000;
  model::Job ended = RunningJob();
  ended.state = model::JobState::kSucceeded;
  ended.ended_unix_ms = kNow - 3'600'000;
  const std::vector<std::string> lines = Lines(QueueTable({idle, ended}, kNow, 120));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_TRUE(lines[1].ends_with("running 1m 30s, IDLE 30s")) << lines[1];
  EXPECT_TRUE(lines[2].ends_with("ended 1h ago")) << lines[2];
}

TEST(QueueTableTest, AnArraysWaitingTasksShareOneRowUntilExpanded) {
  std::vector<model::Job> jobs;
  for (int64_t task = 0; task < 6; ++task) {
    model::Job j;
    j.id = 20 + task;
    j.array_id = 20;
    j.array_task = task;
    j.array_limit = 2;
    j.name = "sweep";
    j.user = "bob";
    j.submitted_unix_ms = kNow - 60'000;
    j.reason = "array 20: 2 tasks run (at most 2 at once)";
    if (task < 2) {
      j.state = model::JobState::kRunning;
      j.started_unix_ms = kNow - 30'000;
    }
    if (task == 5) j.state = model::JobState::kHeld;
    jobs.push_back(j);
  }
  const std::vector<std::string> lines = Lines(QueueTable(jobs, kNow, 200));
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(lines[0], "        ID  STATE       USER        GPUS   NAME              WHY / WHEN");
  EXPECT_EQ(lines[1], "      20_0  running     bob         1      sweep             running 30s");
  EXPECT_EQ(lines[2], "      20_1  running     bob         1      sweep             running 30s");
  EXPECT_EQ(lines[3], "20_[2-4%2]  queued      bob         1      sweep             array 20: 2 tasks run (at most 2 at once)");
  EXPECT_EQ(lines[4], "  20_[5%2]  held        bob         1      sweep             array 20: 2 tasks run (at most 2 at once)");
  const std::vector<std::string> expanded = Lines(QueueTable(jobs, kNow, 200, /*cut=*/true, /*expand_arrays=*/true));
  ASSERT_EQ(expanded.size(), 7u);
  EXPECT_EQ(expanded[3], "  20_2  queued      bob         1      sweep             array 20: 2 tasks run (at most 2 at once)");
}

TEST(QueueTableTest, LinesAreCutToTheWidthAndTextIsEscaped) {
  model::Job j = RunningJob();
  j.state = model::JobState::kQueued;
  j.started_unix_ms.reset();
  j.name = "a\x1b[2Jb";
  j.reason = std::string(200, 'x');
  const std::vector<std::string> lines = Lines(QueueTable({j}, kNow, 100));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1].find('\x1b'), std::string::npos);
  EXPECT_NE(lines[1].find("a\\x1b[2Jb"), std::string::npos) << lines[1];
  EXPECT_EQ(DisplayWidth(lines[1]), 100) << lines[1];
  EXPECT_TRUE(lines[1].ends_with("x\u2026")) << "cut with an ellipsis: " << lines[1];
}

TEST(QueueTableTest, NothingIsCutWhenNotATerminal) {
  // To a pipe or a file: the whole reason, the whole name, and columns that stay aligned
  // (USER and NAME grow to the longest, wide characters count two columns).
  model::Job j = RunningJob();
  j.state = model::JobState::kQueued;
  j.started_unix_ms.reset();
  j.reason = "waiting for GPUs: " + std::string(150, 'r');
  j.name = "a-very-long-sweep-name-that-is-longer-than-sixteen";
  model::Job cjk = RunningJob();
  cjk.user = "\xE7\x8E\x8B\xE8\x8A\xB3";  // 王芳
  const std::vector<std::string> lines = Lines(QueueTable({j, cjk}, kNow, 80, /*cut=*/false));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_TRUE(lines[1].ends_with(std::string(150, 'r'))) << lines[1];
  EXPECT_NE(lines[1].find(j.name + "  "), std::string::npos) << lines[1];
  EXPECT_EQ(lines[1].find("\u2026"), std::string::npos) << lines[1];
  // NAME starts at the same display column on every line, after a 2-column-per-character user.
  EXPECT_EQ(DisplayWidth(lines[1].substr(0, lines[1].find(j.name))),
            DisplayWidth(lines[2].substr(0, lines[2].find("train"))))
      << lines[1] << "\n" << lines[2];
  EXPECT_EQ(DisplayWidth(lines[0].substr(0, lines[0].find("NAME"))),
            DisplayWidth(lines[2].substr(0, lines[2].find("train"))))
      << lines[0] << "\n" << lines[2];
  // On a terminal the same rows are cut to its width.
  for (const std::string& line : Lines(QueueTable({j, cjk}, kNow, 80))) EXPECT_LE(DisplayWidth(line), 80) << line;
}

TEST(JobDetailTextTest, EveryKnownField) {
  model::Job j = RunningJob();
  j.argv = {"python", "train.py", "--lr\n1"};
  j.cwd = "/home/alice";
  j.output_path = "/home/alice/gpuman-7.log";
  j.gpu_uuids = {"GPU-aaaa", "GPU-bbbb"};
  j.request.model = "A100";
  j.request.min_free_memory_bytes = int64_t{20} << 30;
  j.priority = 3;
  j.submitted_unix_ms = 0;
  j.started_unix_ms = 1000;
  const std::string text = JobDetailText(j);
  const std::vector<std::string> lines = Lines(text);
  ASSERT_GE(lines.size(), 10u);
  EXPECT_EQ(lines[0], "job 7 (train)");
  EXPECT_EQ(lines[1], "  state:     running");
  EXPECT_EQ(lines[2], "  user:      alice");
  EXPECT_EQ(lines[3], "  gpus:      GPU-aaaa,GPU-bbbb (wants 2)");
  EXPECT_EQ(lines[4], "  asks for:  -n 2 --model A100 --min-free-memory " + FormatBytes(int64_t{20} << 30));
  EXPECT_EQ(lines[5], "  priority:  3");
  EXPECT_EQ(lines[6], "  submitted: 1970-01-01T00:00:00.000Z");
  EXPECT_EQ(lines[7], "  started:   1970-01-01T00:00:01.000Z");
  EXPECT_EQ(lines[8], "  command:   python train.py --lr\\n1");
  EXPECT_EQ(lines[9], "  cwd:       /home/alice");
  EXPECT_EQ(lines[10], "  output:    /home/alice/gpuman-7.log");
}

TEST(JobDetailTextTest, FailureAndReason) {
  model::Job j = RunningJob();
  j.state = model::JobState::kFailed;
  j.reason = "command not found: nope";
  j.failure = model::JobFailure::kCommandNotFound;
  j.exit_code = 127;
  const std::string text = JobDetailText(j);
  EXPECT_NE(text.find("  state:     failed — command not found: nope [command_not_found]\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  exit code: 127\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("  command:"), std::string::npos) << "no argv, no command line";
}

TEST(JobDetailTextTest, NotifySaysWhatRunsAndWhetherItWasSent) {
  model::Job j = RunningJob();
  EXPECT_EQ(JobDetailText(j).find("notify:"), std::string::npos) << "no line without --notify";
  j.notify = model::JobNotify{false, {"/home/alice/bin/tell", "job %j\x1b[2J"}};
  EXPECT_NE(JobDetailText(j).find("  notify:    /home/alice/bin/tell job %j\\x1b[2J (when the job ends)\n"), std::string::npos)
      << JobDetailText(j);
  j.state = model::JobState::kSucceeded;
  EXPECT_NE(JobDetailText(j).find("(not sent yet)"), std::string::npos) << JobDetailText(j);
  j.notified_unix_ms = 2000;
  j.notify_outcome = "exited with status 3";
  EXPECT_NE(JobDetailText(j).find("(sent 1970-01-01T00:00:02.000Z: exited with status 3)\n"), std::string::npos) << JobDetailText(j);
  j.notify->argv.clear();  // what another user is shown
  EXPECT_NE(JobDetailText(j).find("  notify:    a program of its owner's (sent"), std::string::npos) << JobDetailText(j);
  j.notify = model::JobNotify{true, {}};
  EXPECT_NE(JobDetailText(j).find("  notify:    mail to alice (sent"), std::string::npos) << JobDetailText(j);
}

TEST(DescribeRequestTest, AsSubmitFlags) {
  model::GpuRequest r;
  EXPECT_EQ(DescribeRequest(r), "-n 1");
  r.count = 4;
  r.gpus = std::vector<std::string>{};
  r.exclude = {"GPU-1", "GPU-2"};
  r.max_utilization_percent = 10;
  r.min_compute_capability = "8.0";
  r.allow_shared = true;
  EXPECT_EQ(DescribeRequest(r),
            "-n 4 --gpus none --exclude GPU-1,GPU-2 --max-utilization 10 --min-compute-capability 8.0 --allow-shared");
}

}  // namespace
}  // namespace gpuman::render
