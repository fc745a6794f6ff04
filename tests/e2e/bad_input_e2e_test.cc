// End-to-end: every documented kind of bad input gets exactly one line on stderr,
// `gpuman: error: ...`, and its documented exit code (docs/cli.md, "Exit codes").
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "e2e/e2e_util.h"

namespace gpuman::e2e {
namespace {

struct BadInput {
  std::vector<std::string> args;  // after `gpuman --simulate a100-4`
  std::string message;            // the whole stderr line, without the newline
  int code = 2;                   // `run` and `wait` exit with a job's code: theirs is 125
};

// Under `timeout`: `status --watch nan` used to be accepted and never return.
testing::RunResult RunBounded(const std::string& state_dir, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"/usr/bin/timeout", "20", kGpuman, "--simulate", "a100-4"};
  argv.insert(argv.end(), args.begin(), args.end());
  return testing::Run(argv, CleanEnv(state_dir));
}

TEST(BadInputE2E, EachIsOneLineAndItsExitCode) {
  const std::vector<BadInput> cases = {
      {{"run", "-n", "abc", "--", "true"}, "gpuman: error: --count: 'abc' is not a whole number", 125},
      {{"select", "--count", "-3"}, "gpuman: error: --count: -3 is not in 0..4096"},
      {{"select", "-n", "1.5"}, "gpuman: error: --count: '1.5' is not a whole number"},
      {{"run", "--frob"}, "gpuman: error: unknown option --frob (see gpuman run --help)", 125},
      {{"run", "-n", "0", "--", "true"}, "gpuman: error: run needs at least one GPU (-n 1 or more)", 125},
      {{"wait", "abc"}, "gpuman: error: 'abc': not a job ID (12, or 12_7 for task 7 of array 12)", 125},
      {{"wait"}, "gpuman: error: ID is required (see gpuman wait --help)", 125},
      {{"--config", "/", "wait", "1"}, "gpuman: error: config /: is a directory, not a file", 125},
      {{"select", "--frob=3"}, "gpuman: error: unknown option --frob (see gpuman select --help)"},
      {{"status", "extra"}, "gpuman: error: unexpected argument 'extra' (see gpuman status --help)"},
      {{"status", "--watch"}, "gpuman: error: --watch needs a value (see gpuman status --help)"},
      {{"status", "--watch", "nan"}, "gpuman: error: --watch: 'nan' is not a number of seconds"},
      {{"status", "--watch", "-1"}, "gpuman: error: --watch: -1 is not in 0.1..86400 seconds"},
      {{"status", "--watch", "0"}, "gpuman: error: --watch: 0 is not in 0.1..86400 seconds"},
      {{"queue", "--watch", "nan"}, "gpuman: error: --watch: 'nan' is not a number of seconds"},
      {{"queue", "--watch=-1"}, "gpuman: error: --watch: -1 is not in 0.1..86400 seconds"},
      {{"queue", "--watch=inf"}, "gpuman: error: --watch: 'inf' is not a number of seconds"},
      {{"status", "--json=x"}, "gpuman: error: --json takes no value ('x' given)"},
      {{"top", "--interval", "inf"}, "gpuman: error: --interval: 'inf' is not a number of seconds"},
      {{"top", "--interval", "nan"}, "gpuman: error: --interval: 'nan' is not a number of seconds"},
      {{"completion", "fish"}, "gpuman: error: shell: 'fish' is not one of bash, zsh"},
      {{"release"}, "gpuman: error: ID is required (see gpuman release --help)"},
      {{"--config", "/", "status"}, "gpuman: error: config /: is a directory, not a file"},
  };
  testing::TempDir state;
  for (const BadInput& c : cases) {
    std::string shown;
    for (const std::string& a : c.args) shown += " " + a;
    const testing::RunResult r = RunBounded(state.path(), c.args);
    EXPECT_EQ(r.exit_code, c.code) << shown << "\n" << r.err;
    EXPECT_EQ(r.err, c.message + "\n") << shown;
    EXPECT_EQ(r.out, "") << shown;
  }
}

TEST(BadInputE2E, HelpAndVersionStillExitZero) {
  testing::TempDir state;
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--help"}, {"run", "--help"}, {"--version"}}) {
    const testing::RunResult r = RunBounded(state.path(), args);
    EXPECT_EQ(r.exit_code, 0) << args.back();
    EXPECT_NE(r.out, "") << args.back();
    EXPECT_EQ(r.err, "") << args.back();
  }
}

TEST(BadInputE2E, ExplainEscapesControlCharactersFromTheEnvironment) {
  testing::TempDir state;
  const testing::RunResult r = RunGpuman(state.path(), {"--simulate", "a100-4", "explain"},
                                         {{"CUDA_VISIBLE_DEVICES", "0,\x1b[2J1\nfake"}});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("CUDA_VISIBLE_DEVICES=\"0,\\x1b[2J1\\nfake\""), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\nfake"), std::string::npos) << "a faked line:\n" << r.out;
}

}  // namespace
}  // namespace gpuman::e2e
