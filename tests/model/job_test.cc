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

}  // namespace
}  // namespace gpuman::model
