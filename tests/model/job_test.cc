// Job fields: failure kind names and the submit limits (model::CheckJobFields).
#include "model/job.h"

#include <gtest/gtest.h>

namespace gpuman::model {
namespace {

TEST(JobFailureTest, NamesRoundTrip) {
  for (JobFailure f : {JobFailure::kNone, JobFailure::kCommandNotFound, JobFailure::kCannotExecute,
                       JobFailure::kCannotStart}) {
    EXPECT_EQ(ParseJobFailure(JobFailureName(f)), f);
  }
  EXPECT_STREQ(JobFailureName(JobFailure::kNone), "");
  EXPECT_STREQ(JobFailureName(JobFailure::kCommandNotFound), "command_not_found");
  EXPECT_EQ(ParseJobFailure("exploded"), std::nullopt);
}

TEST(CheckJobFieldsTest, FieldsAtTheLimitPass) {
  std::vector<std::string> argv = {std::string(kMaxJobArgBytes, 'a'), std::string(kMaxJobArgvBytes - kMaxJobArgBytes - 2, 'b')};
  std::map<std::string, std::string> env = {{"K", std::string(kMaxJobEnvBytes - 3, 'v')}};
  EXPECT_EQ(CheckJobFields(std::string(kMaxJobNameBytes, 'n'), argv, env, "/" + std::string(kMaxJobPathBytes - 1, 'd'),
                           "/" + std::string(kMaxJobPathBytes - 1, 'o')),
            std::nullopt);
}

TEST(CheckJobFieldsTest, EachFieldOverItsLimitIsNamed) {
  const std::vector<std::string> argv = {"true"};
  const std::map<std::string, std::string> env;
  EXPECT_EQ(CheckJobFields(std::string(257, 'n'), argv, env, "/", ""), "--name: 257 bytes; the limit is 256 bytes");
  EXPECT_EQ(CheckJobFields("", {"true", std::string(kMaxJobArgBytes + 1, 'a')}, env, "/", ""),
            "command argument 1: 65537 bytes; the limit is 65536 bytes");
  EXPECT_EQ(CheckJobFields("", {"true", std::string(kMaxJobArgBytes, 'a'), std::string(kMaxJobArgBytes, 'b')}, env, "/", ""),
            "command: 131079 bytes; the limit is 131072 bytes");
  EXPECT_EQ(CheckJobFields("", std::vector<std::string>(kMaxJobArgs + 1, "x"), env, "/", ""),
            "command: 4097 arguments; the limit is 4096");
  EXPECT_EQ(CheckJobFields("", argv, {{"K", std::string(kMaxJobEnvBytes, 'v')}}, "/", ""),
            "environment: 262147 bytes; the limit is 262144 bytes");
  EXPECT_EQ(CheckJobFields("", argv, env, std::string(kMaxJobPathBytes + 1, '/'), ""),
            "working directory: 4097 bytes; the limit is 4096 bytes");
  EXPECT_EQ(CheckJobFields("", argv, env, "/", std::string(kMaxJobPathBytes + 1, '/')),
            "--output: 4097 bytes; the limit is 4096 bytes");
}

TEST(CheckJobFieldsTest, WhatExecCannotPassIsRefused) {
  const std::map<std::string, std::string> env;
  EXPECT_EQ(CheckJobFields("", {"true", std::string("a\0b", 3)}, env, "/", ""),
            "command argument 1: holds a NUL byte, which exec cannot pass");
  EXPECT_TRUE(CheckJobFields("", {"true"}, {{"A=B", "c"}}, "/", "").has_value());
  EXPECT_TRUE(CheckJobFields("", {"true"}, {{"", "c"}}, "/", "").has_value());
}

TEST(ExpandOutputPatternTest, SlurmsPatternsAreFilledIn) {
  Job job;
  job.id = 42;
  job.uid = 1001;
  job.user = "ada";
  job.name = "sweep/lr=0.1";
  EXPECT_EQ(ExpandOutputPattern("/logs/%x-%j.log", job), "/logs/sweep_lr=0.1-42.log") << "a '/' in the name makes no directory";
  EXPECT_EQ(ExpandOutputPattern("%u/%j/%j", job), "ada/42/42");
  EXPECT_EQ(ExpandOutputPattern("100%%-%j", job), "100%-42");
  EXPECT_EQ(ExpandOutputPattern("%q%", job), "%q%") << "unknown sequences and a trailing % stay as written";
  EXPECT_EQ(ExpandOutputPattern("plain.log", job), "plain.log");
  job.user.clear();
  EXPECT_EQ(ExpandOutputPattern("%u", job), "1001");
}

TEST(ExpandOutputPatternTest, ArrayPatternsNameTheArrayAndTheTask) {
  Job job;
  job.id = 45;
  job.array_id = 42;
  job.array_task = 3;
  EXPECT_EQ(ExpandOutputPattern("%A_%a-%j", job), "42_3-45");
  Job plain;
  plain.id = 7;
  EXPECT_EQ(ExpandOutputPattern("%A_%a", plain), "7_0") << "as Slurm: a job that is no array task";
}

TEST(ParseArraySpecTest, SlurmsSyntax) {
  auto spec = ParseArraySpec("0-4,7,10-16:3%2");
  ASSERT_TRUE(spec.has_value()) << spec.error().message;
  EXPECT_EQ(spec->tasks, (std::vector<int64_t>{0, 1, 2, 3, 4, 7, 10, 13, 16}));
  EXPECT_EQ(spec->limit, 2);
  auto overlapping = ParseArraySpec("3,1-3");
  ASSERT_TRUE(overlapping.has_value());
  EXPECT_EQ(overlapping->tasks, (std::vector<int64_t>{1, 2, 3})) << "ascending, once each";
  EXPECT_FALSE(overlapping->limit.has_value());
  EXPECT_EQ(ParseArraySpec("0-9999")->tasks.size(), 10000u);
  EXPECT_EQ(ParseArraySpec("4000000")->tasks, std::vector<int64_t>{4000000});
}

TEST(ParseArraySpecTest, EachMistakeIsNamed) {
  const std::pair<const char*, const char*> cases[] = {
      {"", "--array: '': no tasks (give them as 0-99, 1,5,9 or 0-98:2, then %N to run at most N at once)"},
      {"%4", "--array: '%4': no tasks (give them as 0-99, 1,5,9 or 0-98:2, then %N to run at most N at once)"},
      {"5-2", "--array: '5-2': the range is backwards"},
      {"1,,2", "--array: '': not a task index or range (0-4000000)"},
      {"-1", "--array: '-1': not a task index or range (0-4000000)"},
      {"0-9:0", "--array: '0-9:0': the step after : is a number from 1"},
      {"3:2", "--array: '3:2': a step needs a range (0-98:2)"},
      {"4000001", "--array: '4000001': task indices go up to 4000000"},
      {"0-10000", "--array: '0-10000': more than 10000 tasks; submit the sweep in parts"},
      {"0-3%x", "--array: '%x': the limit after % is a number of tasks from 1 to 10000"},
      {"0-3%0", "--array: '%0': the limit after % is a number of tasks from 1 to 10000"},
  };
  for (const auto& [spec, message] : cases) {
    auto r = ParseArraySpec(spec);
    ASSERT_FALSE(r.has_value()) << spec;
    EXPECT_EQ(r.error().message, message) << spec;
  }
}

TEST(JobRefTest, ParsedFormattedAndMatched) {
  EXPECT_EQ(*ParseJobRef("12"), (JobRef{12}));
  EXPECT_EQ(*ParseJobRef("12_7"), (JobRef{12, 7}));
  EXPECT_EQ(FormatJobRef(JobRef{12, 0}), "12_0");
  for (const char* bad : {"", "0", "-3", "12_", "_7", "12_7_1", "12_-1", "a", "12 "}) {
    auto r = ParseJobRef(bad);
    ASSERT_FALSE(r.has_value()) << bad;
    EXPECT_EQ(r.error().message, std::string("'") + bad + "': not a job ID (12, or 12_7 for task 7 of array 12)");
  }
  Job task;
  task.id = 15;
  task.array_id = 12;
  task.array_task = 3;
  EXPECT_EQ(JobName(task), "12_3");
  EXPECT_EQ(RefOf(task), (JobRef{12, 3}));
  EXPECT_TRUE(RefNames(JobRef{12}, task)) << "the array's id names its tasks";
  EXPECT_TRUE(RefNames(JobRef{15}, task));
  EXPECT_TRUE(RefNames(JobRef{12, 3}, task));
  EXPECT_FALSE(RefNames(JobRef{12, 4}, task));
  EXPECT_FALSE(IsArrayHead(task));
  Job plain;
  plain.id = 9;
  EXPECT_EQ(JobName(plain), "9");
  EXPECT_FALSE(RefNames(JobRef{9, 0}, plain));
}

TEST(FormatTaskRangesTest, RunsBecomeRanges) {
  EXPECT_EQ(FormatTaskRanges({0, 1, 2, 5, 7, 8}), "0-2,5,7-8");
  EXPECT_EQ(FormatTaskRanges({}), "");
  EXPECT_EQ(FormatTaskRanges({4}), "4");
}

}  // namespace
}  // namespace gpuman::model
