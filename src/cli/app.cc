// gpuman's command table and wiring, in the spirit of mold's main: read it top to bottom
// to see every subcommand and which real implementation backs each seam.
#include "cli/app.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>

#include <CLI/CLI.hpp>

#include "cli/config.h"
#include "cli/context.h"
#include "cli/exit_codes.h"
#include "cli/simulation.h"
#include "cli/health_command.h"
#include "cli/history_commands.h"
#include "cli/inspect_commands.h"
#include "cli/lease_commands.h"
#include "cli/queue_commands.h"
#include "cli/run_command.h"
#include "cli/status_command.h"
#include "cli/top_command.h"
#include "sched/supervisor.h"

#ifndef GPUMAN_VERSION
#define GPUMAN_VERSION "0.0.0"
#endif

namespace gpuman::cli {
namespace {

std::string ExeDir() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.parent_path().string();
}

int Fail(const Error& error) {
  std::cerr << "gpuman: error: " << error.message << "\n";
  return ExitCodeFor(error.code);
}

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

int RunGpuman(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "__supervise") return RunSupervise(argc, argv);
  CLI::App app{"gpuman: GPU resource manager for shared multi-GPU machines", "gpuman"};
  app.set_version_flag("--version", "gpuman " GPUMAN_VERSION);
  app.require_subcommand(1);
  app.fallthrough();  // global options may also follow the subcommand

  std::string simulate;
  std::optional<std::string> config_path;
  std::string nvml_library;
  app.add_option("--simulate", simulate,
                 "Run against a simulated node (scenario name or .json file); also $GPUMAN_SIMULATE");
  app.add_option("--config", config_path, "Config file (default: $GPUMAN_CONFIG, ~/.config/gpuman/config.toml, /etc/gpuman/config.toml)");
  app.add_option("--nvml-library", nvml_library, "NVML library to load (default libnvidia-ml.so.1; also $GPUMAN_NVML_LIBRARY)");

  StatusArgs status_args;
  CLI::App* status = AddStatusCommand(app, status_args);
  TopArgs top_args;
  CLI::App* top = AddTopCommand(app, top_args);
  SelectArgs select_args;
  CLI::App* select = AddSelectCommand(app, select_args);
  RunArgs run_args;
  CLI::App* run = AddRunCommand(app, run_args);
  LeasesArgs leases_args;
  CLI::App* leases = AddLeasesCommand(app, leases_args);
  ReleaseArgs release_args;
  CLI::App* release = AddReleaseCommand(app, release_args);
  TopoArgs topo_args;
  CLI::App* topo = AddTopoCommand(app, topo_args);
  ExplainArgs explain_args;
  CLI::App* explain = AddExplainCommand(app, explain_args);
  HealthArgs health_args;
  CLI::App* health = AddHealthCommand(app, health_args);
  HistoryArgs history_args;
  CLI::App* history = AddHistoryCommand(app, history_args);
  ReportArgs report_args;
  CLI::App* report = AddReportCommand(app, report_args);
  QueueArgs queue_args;
  std::vector<CLI::App*> queue_commands = AddQueueCommands(app, queue_args);
  CLI::App* scenarios = app.add_subcommand("scenarios", "List the simulated nodes usable with --simulate");

  // CLI11 reports an unknown command as "a subcommand is required"; say what was meant.
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--simulate" || arg == "--config" || arg == "--nvml-library") {
      ++i;
      continue;
    }
    if (arg.empty() || arg[0] == '-') continue;
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands({})) known = known || sub->get_name() == arg;
    if (!known) {
      std::string names;
      for (const CLI::App* sub : app.get_subcommands({})) names += (names.empty() ? "" : ", ") + sub->get_name();
      std::cerr << "gpuman: error: unknown command '" << arg << "' (commands: " << names << ")\n";
      return kExitUsage;
    }
    break;
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "gpuman: error: " << e.what() << "\n"
              << "Run 'gpuman --help' for usage.\n";
    return kExitUsage;
  }

  Environment env = Environment::FromProcess();
  auto config = LoadConfig(env, config_path);
  if (!config) return Fail(config.error());
  if (!nvml_library.empty()) config->nvml_library = nvml_library;

  const std::string exe_dir = ExeDir();
  if (simulate.empty()) simulate = env.Get("GPUMAN_SIMULATE").value_or("");
  std::optional<Simulation> sim;
  if (!simulate.empty()) {
    auto resolved = ResolveSimulation(simulate, env, exe_dir);
    if (!resolved) return Fail(resolved.error());
    sim = std::move(*resolved);
    // The stand-in library reads its scenario from here; main is the one place that
    // touches the process environment.
    setenv("GPUMAN_FAKE_NVML_SCENARIO", sim->scenario_path.c_str(), 1);
  }

  Context ctx(std::move(env), std::move(*config), std::move(sim), std::cout, std::cerr);
  if (*status) return RunStatus(status_args, ctx);
  if (*top) return RunTop(top_args, ctx);
  if (*select) return RunSelect(select_args, ctx);
  if (*run) return RunRun(run_args, ctx);
  if (*leases) return RunLeases(leases_args, ctx);
  if (*release) return RunRelease(release_args, ctx);
  if (*topo) return RunTopo(topo_args, ctx);
  if (*explain) return RunExplain(explain_args, ctx);
  if (*health) return RunHealth(health_args, ctx);
  if (*history) return RunHistory(history_args, ctx);
  if (*report) return RunReport(report_args, ctx);
  for (CLI::App* cmd : queue_commands) {
    if (*cmd) return RunQueueCommand(cmd->get_name(), queue_args, ctx);
  }
  if (*scenarios) {
    for (const auto& name : ListScenarios(ctx.env(), exe_dir)) std::cout << name << "\n";
    return kExitOk;
  }
  return kExitUsage;
}

}  // namespace

int Main(int argc, char** argv) {
  try {
    return RunGpuman(argc, argv);
  } catch (const std::exception& e) {
    // Backstop: nothing below should throw, but a user must never see a stack trace.
    std::cerr << "gpuman: internal error: " << e.what() << "\n";
    return kExitError;
  }
}

}  // namespace gpuman::cli
