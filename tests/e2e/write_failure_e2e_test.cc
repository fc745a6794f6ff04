// Output that cannot be written (issue 26): a full disk and a closed stdout fail every
// command with one line and exit 1 (the command's own code when it failed already); a
// reader that went away (`| head`) ends gpuman quietly: killed by SIGPIPE as other tools
// are, or, where SIGPIPE is ignored, exit 1 without a word ("Broken pipe" never shows).
// One command of each kind: views of NVML, the lease table, the parser's own help, the
// history db, and the daemon's queue.
#include <signal.h>

#include <chrono>
#include <thread>

#include "e2e/e2e_util.h"
#include "store/history_store.h"

namespace gpuman::e2e {
namespace {

using testing::TempDir;

enum class Stdout { kFull, kClosed, kReaderGone, kReaderGoneSigpipeIgnored };

const char* Name(Stdout mode) {
  switch (mode) {
    case Stdout::kFull: return ">/dev/full";
    case Stdout::kClosed: return ">&-";
    case Stdout::kReaderGone: return "| (reader gone)";
    case Stdout::kReaderGoneSigpipeIgnored: return "| (reader gone, SIGPIPE ignored)";
  }
  return "?";
}

// Runs gpuman with `args` and its stdout as `mode` says; stderr captured.
testing::RunResult RunWithStdout(const std::vector<std::string>& args, const std::map<std::string, std::string>& env,
                                 Stdout mode) {
  TempDir dir;
  const std::string err_path = dir.Join("err");
  std::vector<std::string> strings = {kGpuman};
  strings.insert(strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::map<std::string, std::string> vars;
  for (char** e = environ; *e; ++e) {
    const std::string kv(*e);
    if (const size_t eq = kv.find('='); eq != std::string::npos) vars[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& [k, v] : env) {
    if (v.empty()) vars.erase(k);
    else vars[k] = v;
  }
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : vars) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);

  const pid_t pid = fork();
  if (pid == 0) {
    const int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(err, 2);
    const int in = open("/dev/null", O_RDONLY);
    dup2(in, 0);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    signal(SIGPIPE, mode == Stdout::kReaderGoneSigpipeIgnored ? SIG_IGN : SIG_DFL);
    if (mode == Stdout::kFull) {
      dup2(open("/dev/full", O_WRONLY), 1);
    } else if (mode == Stdout::kClosed) {
      close(1);
    } else {
      int p[2];
      if (pipe(p) != 0) _exit(126);
      close(p[0]);  // nobody will ever read
      dup2(p[1], 1);
      close(p[1]);
    }
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  testing::RunResult result;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.err = Slurp(err_path);
  return result;
}

// Every way stdout can fail, for one command whose normal exit code is `normal`.
void ExpectEveryFailure(const std::vector<std::string>& args, const std::map<std::string, std::string>& env) {
  std::string shown;
  for (const auto& a : args) shown += " " + a;
  const testing::RunResult normal = RunGpuman(env.at("GPUMAN_STATE_DIR"), args, env);
  ASSERT_FALSE(normal.out.empty()) << "gpuman" << shown << " prints something: " << normal.err;
  const int failed = normal.exit_code != 0 ? normal.exit_code : 1;
  for (Stdout mode : {Stdout::kFull, Stdout::kClosed, Stdout::kReaderGone, Stdout::kReaderGoneSigpipeIgnored}) {
    const testing::RunResult r = RunWithStdout(args, env, mode);
    const std::string where = "gpuman" + shown + " " + Name(mode);
    switch (mode) {
      case Stdout::kFull:
        EXPECT_EQ(r.exit_code, failed) << where;
        EXPECT_EQ(r.err, normal.err + "gpuman: error: write standard output: no space left on device\n") << where;
        break;
      case Stdout::kClosed:
        EXPECT_EQ(r.exit_code, failed) << where;
        EXPECT_EQ(r.err, normal.err + "gpuman: error: write standard output: bad file descriptor\n") << where;
        break;
      case Stdout::kReaderGone:
        EXPECT_EQ(r.exit_code, 128 + SIGPIPE) << where;
        EXPECT_EQ(r.err, normal.err) << where;
        break;
      case Stdout::kReaderGoneSigpipeIgnored:
        EXPECT_EQ(r.exit_code, failed) << where;
        EXPECT_EQ(r.err, normal.err) << where << ": nothing about a broken pipe";
        break;
    }
  }
}

TEST(WriteFailureE2E, ViewsOfTheGpusTheLeaseTableAndHelp) {
  TempDir dir;
  auto env = CleanEnv(dir.Join("state"));
  env["GPUMAN_LEASE_DIR"] = dir.Join("leases");
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"--simulate", "h100-8", "status"},
           {"--simulate", "h100-8", "status", "--compact"},
           {"--simulate", "h100-8", "status", "--json"},
           {"--simulate", "h100-8", "list"},
           {"--simulate", "h100-8", "topo"},
           {"--simulate", "h100-8", "explain"},
           {"--simulate", "lost-gpu", "health"},  // exits 6: keeps it
           {"--simulate", "h100-8", "leases"},
           {"--help"},
           {"help", "status"},
       }) {
    ExpectEveryFailure(args, env);
  }
}

TEST(WriteFailureE2E, History) {
  TempDir dir;
  const std::string db = dir.Join("history.db");
  {
    auto store = store::HistoryStore::Open(db, false);
    ASSERT_TRUE(store.has_value()) << store.error().message;
    const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
    for (int i = 0; i < 60; ++i) {
      model::GpuSample s;
      s.t_unix_ms = now - (60 - i) * 1000;
      s.gpu_uuid = "GPU-0aaa1111-2222-3333-4444-555566667777";
      s.utilization_percent = 50;
      s.user = "alice";
      s.holder_kind = model::HolderKind::kLease;
      ASSERT_TRUE((*store)->Record({s}).has_value());
    }
  }
  auto env = CleanEnv(dir.Join("state"));
  ExpectEveryFailure({"history", "--db", db, "--since", "5m"}, env);
}

TEST(WriteFailureE2E, TheDaemonsQueue) {
  TempDir dir;
  const std::string socket = dir.Join("gpuman.sock");
  PrivateDaemon daemon;
  ASSERT_TRUE(daemon.Start({.scenario = IdleScenario(dir, "a100-4"),
                            .socket = socket,
                            .state_dir = dir.Join("daemon"),
                            .env = CleanEnv(dir.Join("leases")),
                            .stderr_path = dir.Join("daemon.log")}));
  auto env = CleanEnv(dir.Join("state"));
  env["GPUMAN_SOCKET"] = socket;
  auto job = RunGpuman(dir.Join("state"),
                       {"submit", "--output", dir.Join("job.log"), "--", "sh", "-c", "seq 1 20000"}, env);
  ASSERT_EQ(job.exit_code, 0) << job.err;
  auto waited = RunGpuman(dir.Join("state"), {"wait", "1"}, env);
  ASSERT_EQ(waited.exit_code, 0) << waited.err;
  ExpectEveryFailure({"queue", "--all"}, env);
  ExpectEveryFailure({"show", "1"}, env);
  ExpectEveryFailure({"logs", "1"}, env);  // 108,894 bytes: more than a pipe holds
  ExpectEveryFailure({"logs", "-f", "1"}, env);
}

}  // namespace
}  // namespace gpuman::e2e
