// gpuman's command table and wiring, in the spirit of mold's main and ninja's kTools: read
// it top to bottom to see every command, its handler and exit policy, and which real
// implementation backs each seam. Parsing is cli/cli_options.cc's (the one unit that knows
// CLI11); nothing here sees CLI11's types.
#include "cli/app.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>

#include "base/unique_fd.h"
#include "cli/cli_options.h"
#include "cli/command_tree.h"
#include "cli/config.h"
#include "cli/context.h"
#include "cli/daemon_command.h"
#include "cli/help_docs.h"
#include "cli/installed_layout.h"
#include "cli/simulation.h"
#include "cli/stdout_buffer.h"
#include "sched/supervisor.h"

namespace gpuman::cli {
namespace {

int RunQueue(const CommandArgs& a, Context& ctx) { return RunQueueCommand(a.command, a.queue, ctx); }

int RunScenarios(const CommandArgs&, Context& ctx) {
  for (const auto& name : ListScenarios(ctx.env(), ctx.layout())) ctx.out() << name << "\n";
  return kExitOk;
}

int RunHelpCommand(const CommandArgs& a, Context& ctx) {
  CommandTree tree;
  return RunHelp(tree.app(), a.help_command, ctx.out(), ctx.err());
}

int RunCompletionCommand(const CommandArgs& a, Context& ctx) {
  CommandTree tree;
  return RunCompletion(tree.app(), a.completion_shell, ctx.out());
}

using P = ExitPolicy;

// Every command, in the order --help lists them: {name, handler, exit policy, needs config}.
// `run` and `wait` exit with a job's code, so every failure of gpuman's own before the job
// (argument errors and a broken config included) is 125 there (docs/cli.md, "Exit codes").
constexpr Command kCommands[] = {
    {"status", [](const CommandArgs& a, Context& c) { return RunStatus(a.status, c); }},
    {"top", [](const CommandArgs& a, Context& c) { return RunTop(a.top, c); }},
    {"select", [](const CommandArgs& a, Context& c) { return RunSelect(a.select, c); }, P::kLease},
    {"run", [](const CommandArgs& a, Context& c) { return RunRun(a.run, c); }, P::kJobCode},
    {"leases", [](const CommandArgs& a, Context& c) { return RunLeases(a.leases, c); }, P::kLease},
    {"jupyter", [](const CommandArgs& a, Context& c) { return RunJupyterInstallKernel(a.jupyter, c); }},
    {"release", [](const CommandArgs& a, Context& c) { return RunRelease(a.release, c); }, P::kLease},
    {"topo", [](const CommandArgs& a, Context& c) { return RunTopo(a.topo, c); }},
    {"list", [](const CommandArgs&, Context& c) { return RunList(c); }},
    {"explain", [](const CommandArgs& a, Context& c) { return RunExplain(a.explain, c); }},
    {"health", [](const CommandArgs& a, Context& c) { return RunHealth(a.health, c); }},
    {"doctor", [](const CommandArgs& a, Context& c) { return RunDoctor(a.doctor, c); }},
    {"bench", [](const CommandArgs& a, Context& c) { return RunBench(a.bench, c); }, P::kLease},
    {"history", [](const CommandArgs& a, Context& c) { return RunHistory(a.history, c); }, P::kHistory},
    {"report", [](const CommandArgs& a, Context& c) { return RunReport(a.report, c); }, P::kHistory},
    {"daemon", [](const CommandArgs& a, Context& c) { return RunDaemon(a.queue, c); }},
    {"submit", RunQueue},
    {"queue", RunQueue},
    {"show", RunQueue},
    {"cancel", RunQueue},
    {"hold", RunQueue},
    {"resume", RunQueue},
    {"update", RunQueue},
    {"logs", RunQueue},
    {"wait", RunQueue, P::kJobCode},
    {"drain", RunQueue},
    {"undrain", RunQueue},
    {"slurm", [](const CommandArgs& a, Context& c) { return RunSlurm(a.slurm, c); }},
    {"scenarios", RunScenarios},
    {"help", RunHelpCommand, P::kPlain, /*needs_config=*/false},
    {"completion", RunCompletionCommand, P::kPlain, /*needs_config=*/false},
};

// `gpuman __supervise --db PATH --job ID --grace-ms MS --go-fd FD [--env K=V]...`: the
// detached per-job supervisor the daemon starts (sched/supervisor.cc). Not for people.
int RunSupervise(int argc, char** argv) {
  std::string db;
  int64_t job = 0;
  int grace_ms = 10000, go_fd = -1;
  std::vector<std::string> env;
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--db") db = value;
    else if (flag == "--job") job = std::atoll(value.c_str());
    else if (flag == "--grace-ms") grace_ms = std::atoi(value.c_str());
    else if (flag == "--go-fd") go_fd = std::atoi(value.c_str());
    else if (flag == "--env") env.push_back(value);
  }
  if (db.empty() || job <= 0 || go_fd < 0) return kExitUsage;
  return sched::RunSupervisor(db, job, go_fd, std::move(env), grace_ms);
}

// `gpuman __man DIR [DOC_DIR]`: writes the man pages, naming DOC_DIR as where the documents
// are (default: this gpuman's, found from its path). cmake/man.cmake runs it at build time
// for build/man/, and at install time with PREFIX/share/doc/gpuman. Hidden.
int RunMan(int argc, char** argv) {
  if (argc != 3 && argc != 4) {
    std::cerr << "gpuman: error: usage: gpuman __man DIR [DOC_DIR]\n";
    return kExitUsage;
  }
  const std::string doc_dir = argc == 4 ? std::string(argv[3]) : ThisInstallation().FindDocDir();
  CommandTree tree;
  if (auto st = WriteManPages(tree.app(), argv[2], doc_dir); !st) {
    return ReportError(std::cerr, st.error(), ExitPolicy::kPlain);
  }
  return kExitOk;
}

// Runs `command` with the arguments the parser filled: reads the config, resolves
// --simulate, builds the Context, and calls the handler.
int Dispatch(const Command& command, const CommandArgs& args) {
  Environment env = Environment::FromProcess();
  if (!command.needs_config) {
    Context ctx(std::move(env), Config{}, std::nullopt, std::cout, std::cerr, ThisInstallation());
    ctx.set_exit_policy(command.exit_policy);
    return command.run(args, ctx);
  }
  auto fail = [&](const Error& e) { return ReportError(std::cerr, e, command.exit_policy); };
  auto config = LoadConfig(env, args.global.config_path);
  if (!config) return fail(config.error());
  for (const auto& line : config->warnings) std::cerr << "gpuman: warning: " << line << "\n";
  if (!args.global.nvml_library.empty()) config->nvml_library = args.global.nvml_library;

  InstalledLayout layout = ThisInstallation();
  std::string simulate = args.global.simulate;
  if (simulate.empty()) simulate = env.Get("GPUMAN_SIMULATE").value_or("");
  std::optional<Simulation> sim;
  if (!simulate.empty()) {
    auto resolved = ResolveSimulation(simulate, env, layout);
    if (!resolved) return fail(resolved.error());
    sim = std::move(*resolved);
    // The stand-in library reads its scenario from here; main is the one place that
    // touches the process environment.
    setenv("GPUMAN_FAKE_NVML_SCENARIO", sim->scenario_path.c_str(), 1);
  }

  Context ctx(std::move(env), std::move(*config), std::move(sim), std::cout, std::cerr, std::move(layout));
  ctx.set_exit_policy(command.exit_policy);
  return command.run(args, ctx);
}

// `policy`: set to the exit policy of the command named, for what Main adds at the end.
int RunGpuman(int argc, char** argv, ExitPolicy& policy) {
  if (argc > 1 && std::string(argv[1]) == "__man") return RunMan(argc, argv);
  ParsedCommandLine parsed = ParseCommandLine(argc, argv);
  policy = ExitPolicyOf(parsed.args.command);
  if (parsed.exit_code) return *parsed.exit_code;
  if (parsed.error) return ReportError(std::cerr, *parsed.error, policy);
  const Command* command = FindCommand(parsed.args.command);
  if (command == nullptr) return kExitUsage;  // the parser knows every command
  return Dispatch(*command, parsed.args);
}

// A standard descriptor the caller closed is /dev/null from here on, so that no file this
// process opens (a database, a library) becomes its stdout or stderr. Returns EBADF when
// stdout was closed (its first write then fails as it would have), else 0.
int ReserveStandardFds() {
  int stdout_error = 0;
  for (int fd = 0; fd <= 2; ++fd) {
    if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF) continue;
    if (fd == STDOUT_FILENO) stdout_error = EBADF;
    UniqueFd null_fd(open("/dev/null", (fd == 0 ? O_RDONLY : O_WRONLY) | O_CLOEXEC));
    const int opened = null_fd.get();
    if (opened >= 0 && opened != fd) {  // the lower ones are open, so this is rare
      dup2(opened, fd);  // null_fd closes its own descriptor
    } else if (opened == fd) {
      (void)null_fd.release();  // it is the standard descriptor now: kept open
      fcntl(fd, F_SETFD, 0);  // a child inherits it as the closed descriptor's stand-in
    }
  }
  return stdout_error;
}

}  // namespace

std::span<const Command> Commands() { return kCommands; }

const Command* FindCommand(std::string_view name) {
  for (const Command& command : kCommands) {
    if (command.name == name) return &command;
  }
  return nullptr;
}

ExitPolicy ExitPolicyOf(std::string_view name) {
  const Command* command = FindCommand(name);
  return command != nullptr ? command->exit_policy : ExitPolicy::kPlain;
}

int Main(int argc, char** argv) {
  // The daemon's per-job helper: its descriptors are the daemon's choice, its output none.
  if (argc > 1 && std::string(argv[1]) == "__supervise") return RunSupervise(argc, argv);
  // Everything printed to stdout goes through one buffer that remembers a failed write, and
  // is checked once at the end (docs/cli.md, "Output: terminals, pipes and files").
  const int stdout_error = ReserveStandardFds();
  StdoutBuffer buffer(STDOUT_FILENO, stdout_error == 0 && isatty(STDOUT_FILENO) == 1, stdout_error);
  std::streambuf* const previous = std::cout.rdbuf(&buffer);
  ExitPolicy policy = ExitPolicy::kPlain;
  int rc = kExitError;
  try {
    rc = RunGpuman(argc, argv, policy);
  } catch (const std::exception& e) {
    // Backstop: nothing below should throw, but a user must never see a stack trace.
    std::cerr << "gpuman: internal error: " << e.what() << "\n";
  }
  rc = FinishStdout(std::cout, buffer, rc, std::cerr, policy);
  std::cout.rdbuf(previous);
  return rc;
}

}  // namespace gpuman::cli
