// The command table (cli/app.h) against the CLI11 tree (cli/cli_options.cc): every command
// the parser knows has a row, in the same order; the exit policies map error codes as
// docs/cli.md says; ParseCommandLine fills the argument structs and words errors in one line.
#include "cli/app.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "cli/cli_options.h"
#include "cli/command_tree.h"
#include "cli/exit_codes.h"

namespace gpuman::cli {
namespace {

// Parses `gpuman <words>`.
ParsedCommandLine Parse(std::vector<std::string> words) {
  words.insert(words.begin(), "gpuman");
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  return ParseCommandLine(static_cast<int>(words.size()), argv.data());
}

TEST(CommandTableTest, EveryCommandOfTheTreeHasARowInTheSameOrder) {
  CommandTree tree;
  std::vector<std::string> rows;
  for (const Command& command : Commands()) rows.emplace_back(command.name);
  EXPECT_EQ(rows, tree.CommandNames());
  for (const Command& command : Commands()) EXPECT_EQ(FindCommand(command.name), &command);
  EXPECT_EQ(FindCommand("frobnicate"), nullptr);
  EXPECT_EQ(FindCommand(""), nullptr);
}

TEST(CommandTableTest, OnlyHelpAndCompletionRunWithoutTheConfig) {
  for (const Command& command : Commands()) {
    const bool without = command.name == "help" || command.name == "completion";
    EXPECT_EQ(command.needs_config, !without) << command.name;
  }
}

TEST(CommandTableTest, ExitPoliciesOfTheCommands) {
  EXPECT_EQ(ExitPolicyOf("run"), ExitPolicy::kJobCode);
  EXPECT_EQ(ExitPolicyOf("wait"), ExitPolicy::kJobCode);
  EXPECT_EQ(ExitPolicyOf("select"), ExitPolicy::kLease);
  EXPECT_EQ(ExitPolicyOf("leases"), ExitPolicy::kLease);
  EXPECT_EQ(ExitPolicyOf("release"), ExitPolicy::kLease);
  EXPECT_EQ(ExitPolicyOf("history"), ExitPolicy::kHistory);
  EXPECT_EQ(ExitPolicyOf("report"), ExitPolicy::kHistory);
  for (const char* plain : {"status", "top", "submit", "queue", "logs", "daemon", "slurm", "help", "frobnicate", ""}) {
    EXPECT_EQ(ExitPolicyOf(plain), ExitPolicy::kPlain) << plain;
  }
}

TEST(ExitPolicyTest, MapsErrorCodesAsDocumented) {
  struct Case {
    ErrorCode code;
    ExitPolicy policy;
    int exit;
  };
  const Case cases[] = {
      {ErrorCode::kInvalidArgument, ExitPolicy::kPlain, kExitUsage},
      {ErrorCode::kNotFound, ExitPolicy::kPlain, kExitUsage},
      {ErrorCode::kUnavailable, ExitPolicy::kPlain, kExitNoDriver},
      {ErrorCode::kPermissionDenied, ExitPolicy::kPlain, kExitPermission},
      {ErrorCode::kBusy, ExitPolicy::kPlain, kExitError},
      {ErrorCode::kIo, ExitPolicy::kPlain, kExitError},
      {ErrorCode::kBusy, ExitPolicy::kLease, kExitNotEnoughGpus},
      {ErrorCode::kNotFound, ExitPolicy::kLease, kExitNotEnoughGpus},
      {ErrorCode::kInvalidArgument, ExitPolicy::kLease, kExitUsage},
      {ErrorCode::kPermissionDenied, ExitPolicy::kLease, kExitPermission},
      {ErrorCode::kNotFound, ExitPolicy::kHistory, kExitError},
      {ErrorCode::kInvalidArgument, ExitPolicy::kHistory, kExitUsage},
      {ErrorCode::kUnavailable, ExitPolicy::kHistory, kExitNoDriver},
      {ErrorCode::kInvalidArgument, ExitPolicy::kJobCode, kJobGpumanFailed},
      {ErrorCode::kUnavailable, ExitPolicy::kJobCode, kJobGpumanFailed},
      {ErrorCode::kBusy, ExitPolicy::kJobCode, kJobGpumanFailed},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(ExitCodeFor(c.code, c.policy), c.exit)
        << "code " << static_cast<int>(c.code) << " policy " << static_cast<int>(c.policy);
  }
}

TEST(ExitPolicyTest, ReportErrorPrintsOneLineAndReturnsTheCode) {
  std::ostringstream err;
  EXPECT_EQ(ReportError(err, MakeError(ErrorCode::kBusy, "2 GPUs wanted, 1 free"), ExitPolicy::kLease), kExitNotEnoughGpus);
  EXPECT_EQ(err.str(), "gpuman: error: 2 GPUs wanted, 1 free\n");
}

TEST(ParseCommandLineTest, FillsTheCommandsArguments) {
  ParsedCommandLine p = Parse({"--simulate", "dgx-a100", "status", "--json", "--gpus", "0,1"});
  ASSERT_FALSE(p.error) << p.error->message;
  ASSERT_FALSE(p.exit_code);
  EXPECT_EQ(p.args.command, "status");
  EXPECT_EQ(p.args.global.simulate, "dgx-a100");
  EXPECT_TRUE(p.args.status.json);
  EXPECT_EQ(p.args.status.gpus, std::optional<std::string>("0,1"));
}

TEST(ParseCommandLineTest, GlobalOptionsMayFollowTheCommand) {
  ParsedCommandLine p = Parse({"leases", "--config", "/tmp/x.toml"});
  ASSERT_FALSE(p.error) << p.error->message;
  EXPECT_EQ(p.args.command, "leases");
  EXPECT_EQ(p.args.global.config_path, std::optional<std::string>("/tmp/x.toml"));
}

TEST(ParseCommandLineTest, QueueCommandsAndSlurmIds) {
  ParsedCommandLine p = Parse({"wait", "slurm:42", "--json"});
  ASSERT_FALSE(p.error) << p.error->message;
  EXPECT_EQ(p.args.command, "wait");
  EXPECT_EQ(p.args.queue.ids, std::vector<std::string>{"42"});
  EXPECT_EQ(p.args.queue.slurm_ids, 1);
  EXPECT_TRUE(p.args.queue.json);
}

TEST(ParseCommandLineTest, SlurmSubcommandIsNamed) {
  ParsedCommandLine p = Parse({"slurm", "epilog", "--grace", "3s"});
  ASSERT_FALSE(p.error) << p.error->message;
  EXPECT_EQ(p.args.command, "slurm");
  EXPECT_EQ(p.args.slurm.subcommand, "epilog");
  EXPECT_EQ(p.args.slurm.hooks.grace, "3s");
  EXPECT_EQ(Parse({"slurm", "job-summary", "17"}).args.slurm.summary_job_id, "17");
}

TEST(ParseCommandLineTest, ErrorsAreOneLineForTheCommandsPolicy) {
  ParsedCommandLine p = Parse({"run", "--frob", "--", "true"});
  ASSERT_TRUE(p.error);
  EXPECT_EQ(p.error->code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(p.error->message, "unknown option --frob (see gpuman run --help)");
  EXPECT_EQ(p.args.command, "run");
  EXPECT_EQ(ExitCodeFor(p.error->code, ExitPolicyOf(p.args.command)), kJobGpumanFailed);

  p = Parse({"status", "--watch", "nan"});
  ASSERT_TRUE(p.error);
  EXPECT_EQ(p.error->message, "--watch: 'nan' is not a number of seconds");
  EXPECT_EQ(ExitCodeFor(p.error->code, ExitPolicyOf(p.args.command)), kExitUsage);

  p = Parse({"frobnicate"});
  ASSERT_TRUE(p.error);
  EXPECT_EQ(p.error->message.rfind("unknown command 'frobnicate' (commands: status, top, select, run,", 0), 0u)
      << p.error->message;
}

// Typos get "did you mean" (issue 26), and CLI11's own wording does not leak.
TEST(ParseCommandLineTest, TyposGetTheClosestNameAndCountsArePlain) {
  ParsedCommandLine p = Parse({"stauts"});
  ASSERT_TRUE(p.error);
  EXPECT_EQ(p.error->message, "unknown command 'stauts' (did you mean 'status'?)");
  p = Parse({"status", "--gpu", "1"});
  ASSERT_TRUE(p.error);
  EXPECT_EQ(p.error->message, "unknown option --gpu (did you mean --gpus?) (see gpuman status --help)");
  p = Parse({"show", "1", "2"});
  ASSERT_TRUE(p.error);
  EXPECT_EQ(p.error->message, "gpuman show takes one ID (2 given) (see gpuman show --help)");
  EXPECT_EQ(p.error->message.find("At Most"), std::string::npos);
}

}  // namespace
}  // namespace gpuman::cli
