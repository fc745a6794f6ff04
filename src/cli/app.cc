// gpuman's command table and wiring, in the spirit of mold's main: read it top to bottom
// to see every subcommand and which real implementation backs each seam.
#include "cli/app.h"

#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <regex>
#include <string_view>

#include <CLI/CLI.hpp>

#include "base/strings.h"
#include "cli/config.h"
#include "cli/context.h"
#include "cli/command_tree.h"
#include "cli/exit_codes.h"
#include "cli/help_docs.h"
#include "cli/installed_layout.h"
#include "cli/simulation.h"
#include "cli/health_command.h"
#include "cli/history_commands.h"
#include "cli/inspect_commands.h"
#include "cli/lease_commands.h"
#include "cli/queue_commands.h"
#include "cli/run_command.h"
#include "cli/slurm_command.h"
#include "cli/status_command.h"
#include "cli/top_command.h"
#include "sched/supervisor.h"

#ifndef GPUMAN_VERSION
#define GPUMAN_VERSION "0.0.0"
#endif

namespace gpuman::cli {
namespace {

int Fail(const Error& error) {
  std::cerr << "gpuman: error: " << error.message << "\n";
  return ExitCodeFor(error.code);
}

// "0.100000" -> "0.1", "4096" -> "4096": CLI11 prints Range bounds with std::to_string.
std::string TrimNumber(std::string n) {
  if (n.find('.') == std::string::npos) return n;
  while (!n.empty() && n.back() == '0') n.pop_back();
  if (!n.empty() && n.back() == '.') n.pop_back();
  return n;
}

bool StartsWith(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

// CLI11's own message on one line: newlines (and the runs of spaces after them) folded.
std::string Fold(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '\n' || c == '\r') c = ' ';
    if (c == ' ' && (out.empty() || out.back() == ' ')) continue;
    out += c;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

// One readable line for a CLI11 parse error (without "gpuman: error: "). `app` is the
// root; the deepest command the parse entered names the --help to point at.
std::string DescribeParseError(CLI::App& app, const CLI::ParseError& e) {
  std::string command = "gpuman";
  CLI::App* deepest = &app;
  for (std::vector<CLI::App*> subs = app.get_subcommands(); !subs.empty(); subs = deepest->get_subcommands()) {
    deepest = subs.front();
    command += " " + deepest->get_name();
  }
  const std::string hint = " (see " + command + " --help)";
  // An unknown option is the first thing to say, even when CLI11 stopped at something it
  // checks earlier (`run --frob` is "command is required" to CLI11).
  std::vector<std::string> extras = app.remaining(true);
  for (const std::string& arg : extras) {
    if (arg.size() > 1 && arg[0] == '-' && arg != "--") return "unknown option " + arg.substr(0, arg.find('=')) + hint;
  }
  const std::string what = e.what();
  const size_t colon = what.find(": ");
  const std::string name = colon == std::string::npos ? std::string() : what.substr(0, colon);
  const std::string detail = colon == std::string::npos ? what : what.substr(colon + 2);

  if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) {
    if (!extras.empty()) return "unexpected argument '" + extras.front() + "'" + hint;
    return Fold(what) + hint;
  }
  if (dynamic_cast<const CLI::ValidationError*>(&e) != nullptr && !name.empty()) {
    // CLI::Range: "Value V not in range A to B" (also when V is no number at all).
    static const std::regex range(R"(Value (.*) not in range (\S+) to (\S+))");
    // CLI::IsMember: "V not in {a,b}".
    static const std::regex member(R"((.*) not in \{(.*)\})");
    std::smatch m;
    if (std::regex_match(detail, m, range)) {
      const std::string value = m[1], lo = m[2], hi = m[3];
      const bool whole = lo.find('.') == std::string::npos && hi.find('.') == std::string::npos;
      const bool numeric = whole ? ParseInt(value[0] == '-' ? value.substr(1) : value).has_value()
                                 : ParseFiniteDouble(value).has_value();
      if (!numeric) return name + ": '" + value + "' is not a " + (whole ? "whole number" : "number");
      return name + ": " + value + " is not in " + TrimNumber(lo) + ".." + TrimNumber(hi);
    }
    if (std::regex_match(detail, m, member)) {
      std::string choices = m[2];
      for (size_t i = 0; (i = choices.find(',', i)) != std::string::npos; i += 2) choices.replace(i, 1, ", ");
      return name + ": '" + std::string(m[1]) + "' is not one of " + choices;
    }
    return Fold(what);
  }
  if (dynamic_cast<const CLI::ConversionError*>(&e) != nullptr) {
    static const std::regex convert(R"(Could not convert: (\S+) = (.*))");
    std::smatch m;
    if (std::regex_match(what, m, convert)) {
      const std::string option = m[1], value = m[2];
      const CLI::Option* opt = deepest->get_option_no_throw(option);
      const std::string type = opt != nullptr ? opt->get_type_name() : "";
      if (StartsWith(type, "INT") || StartsWith(type, "UINT")) return option + ": '" + value + "' is not a whole number";
      if (StartsWith(type, "FLOAT")) return option + ": '" + value + "' is not a number";
      if (opt != nullptr && opt->get_expected_min() == 0) return option + " takes no value ('" + value + "' given)";
      return option + ": '" + value + "' is not a valid value" + hint;
    }
    return Fold(what) + hint;
  }
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&e) != nullptr) {
    // e.g. "--watch: 1 required FLOAT:FLOAT in [0.1 - 86400] missing"
    if (!name.empty() && detail.find(" required ") != std::string::npos && detail.ends_with(" missing")) {
      return name + " needs a value" + hint;
    }
    return Fold(what) + hint;
  }
  if (dynamic_cast<const CLI::RequiredError*>(&e) != nullptr) {
    std::string text = Fold(what);
    if (text.size() > 1 && std::islower(static_cast<unsigned char>(text[1]))) {  // "A subcommand", not "ID"
      text[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(text[0])));
    }
    return text + hint;
  }
  return Fold(what);
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

}  // namespace

// Every command's App and argument struct; RunGpuman dispatches on which one was parsed.
struct CommandTree::Parts {
  CLI::App app{"gpuman: GPU resource manager for shared multi-GPU machines", "gpuman"};
  std::string simulate;
  std::optional<std::string> config_path;
  std::string nvml_library;

  StatusArgs status_args;
  CLI::App* status = nullptr;
  TopArgs top_args;
  CLI::App* top = nullptr;
  SelectArgs select_args;
  CLI::App* select = nullptr;
  RunArgs run_args;
  CLI::App* run = nullptr;
  LeasesArgs leases_args;
  CLI::App* leases = nullptr;
  ReleaseArgs release_args;
  CLI::App* release = nullptr;
  TopoArgs topo_args;
  CLI::App* topo = nullptr;
  ExplainArgs explain_args;
  CLI::App* explain = nullptr;
  HealthArgs health_args;
  CLI::App* health = nullptr;
  HistoryArgs history_args;
  CLI::App* history = nullptr;
  ReportArgs report_args;
  CLI::App* report = nullptr;
  QueueArgs queue_args;
  std::vector<CLI::App*> queue_commands;
  SlurmArgs slurm_args;
  CLI::App* slurm = nullptr;
  CLI::App* scenarios = nullptr;
  std::optional<std::string> help_command;
  CLI::App* help = nullptr;
  std::string completion_shell;
  CLI::App* completion = nullptr;
};

namespace {

using Parts = CommandTree::Parts;

// Every command, in the order --help lists them, and how it is registered. The queue
// commands (daemon, submit, queue, show, cancel, ...) are registered together: the entry
// without a name, which a tree for one command falls back to for any name not listed.
struct CommandEntry {
  std::string_view name;
  void (*add)(Parts&);
};
constexpr CommandEntry kCommands[] = {
    {"status", [](Parts& p) { p.status = AddStatusCommand(p.app, p.status_args); }},
    {"top", [](Parts& p) { p.top = AddTopCommand(p.app, p.top_args); }},
    {"select", [](Parts& p) { p.select = AddSelectCommand(p.app, p.select_args); }},
    {"run", [](Parts& p) { p.run = AddRunCommand(p.app, p.run_args); }},
    {"leases", [](Parts& p) { p.leases = AddLeasesCommand(p.app, p.leases_args); }},
    {"release", [](Parts& p) { p.release = AddReleaseCommand(p.app, p.release_args); }},
    {"topo", [](Parts& p) { p.topo = AddTopoCommand(p.app, p.topo_args); }},
    {"explain", [](Parts& p) { p.explain = AddExplainCommand(p.app, p.explain_args); }},
    {"health", [](Parts& p) { p.health = AddHealthCommand(p.app, p.health_args); }},
    {"history", [](Parts& p) { p.history = AddHistoryCommand(p.app, p.history_args); }},
    {"report", [](Parts& p) { p.report = AddReportCommand(p.app, p.report_args); }},
    {"", [](Parts& p) { p.queue_commands = AddQueueCommands(p.app, p.queue_args); }},
    {"slurm", [](Parts& p) { p.slurm = AddSlurmCommand(p.app, p.slurm_args); }},
    {"scenarios",
     [](Parts& p) { p.scenarios = p.app.add_subcommand("scenarios", "List the simulated nodes usable with --simulate"); }},
    {"help",
     [](Parts& p) {
       p.help = p.app.add_subcommand("help", "Show the help of gpuman or of one command (as COMMAND --help does)");
       p.help->add_option("command", p.help_command, "The command to describe");
     }},
    {"completion",
     [](Parts& p) {
       p.completion = p.app.add_subcommand("completion", "Print a shell completion script: source <(gpuman completion bash)");
       p.completion->add_option("shell", p.completion_shell, "The shell")
           ->required()
           ->check(CLI::IsMember({"bash", "zsh"}));
     }},
};

// The root: version, global options, one subcommand required.
void AddRoot(Parts& p) {
  CLI::App& app = p.app;
  app.set_version_flag("--version", "gpuman " GPUMAN_VERSION);
  app.require_subcommand(1);
  app.fallthrough();  // global options may also follow the subcommand

  app.add_option("--simulate", p.simulate,
                 "Run against a simulated node (scenario name or .json file); also $GPUMAN_SIMULATE");
  app.add_option("--config", p.config_path, "Config file (default: $GPUMAN_CONFIG, ~/.config/gpuman/config.toml, /etc/gpuman/config.toml)");
  app.add_option("--nvml-library", p.nvml_library, "NVML library to load (default libnvidia-ml.so.1; also $GPUMAN_NVML_LIBRARY)");
}

}  // namespace

CommandTree::CommandTree() : parts_(std::make_unique<Parts>()) {
  AddRoot(*parts_);
  for (const CommandEntry& entry : kCommands) entry.add(*parts_);
}

CommandTree::CommandTree(std::string_view command) : parts_(std::make_unique<Parts>()) {
  AddRoot(*parts_);
  if (command.empty()) return;
  const CommandEntry* named = nullptr;
  const CommandEntry* queue = nullptr;
  for (const CommandEntry& entry : kCommands) {
    if (entry.name.empty()) queue = &entry;
    else if (entry.name == command) named = &entry;
  }
  (named != nullptr ? named : queue)->add(*parts_);
}

bool CommandTree::Has(std::string_view command) {
  for (const CLI::App* sub : parts_->app.get_subcommands({})) {
    if (sub->get_name() == command) return true;
  }
  return false;
}

CommandTree::~CommandTree() = default;

CLI::App& CommandTree::app() { return parts_->app; }

namespace {

// `gpuman __man DIR`: writes the man pages (cmake/man.cmake runs it at build time). Hidden.
int RunMan(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "gpuman: error: usage: gpuman __man DIR\n";
    return kExitUsage;
  }
  CommandTree tree;
  if (auto st = WriteManPages(tree.app(), argv[2]); !st) return Fail(st.error());
  return kExitOk;
}

// The command named on the command line (the first word that is neither an option nor the
// value of a global option), or "" when there is none.
std::string_view CommandName(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--simulate" || arg == "--config" || arg == "--nvml-library") {
      ++i;
      continue;
    }
    if (arg.empty() || arg[0] == '-') continue;
    return arg;
  }
  return {};
}

bool Chosen(const CLI::App* command) { return command != nullptr && command->parsed(); }

// Runs the command `p` parsed. `p` may hold only that command (CommandTree(name)).
// `command` is the one named: `run` and `wait` exit 125 for every failure of gpuman's own
// before they start, argument errors included (a job's own 2 is never mistaken for one).
int RunParsed(CommandTree::Parts& p, std::string_view command) {
  auto fail = [&](const Error& e) { return GpumanFailureExit(command, Fail(e)); };
  Environment env = Environment::FromProcess();
  auto config = LoadConfig(env, p.config_path);
  if (!config) return fail(config.error());
  if (!p.nvml_library.empty()) config->nvml_library = p.nvml_library;

  InstalledLayout layout = ThisInstallation();
  std::string simulate = p.simulate;
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
  if (Chosen(p.status)) return RunStatus(p.status_args, ctx);
  if (Chosen(p.top)) return RunTop(p.top_args, ctx);
  if (Chosen(p.select)) return RunSelect(p.select_args, ctx);
  if (Chosen(p.run)) return RunRun(p.run_args, ctx);
  if (Chosen(p.leases)) return RunLeases(p.leases_args, ctx);
  if (Chosen(p.release)) return RunRelease(p.release_args, ctx);
  if (Chosen(p.topo)) return RunTopo(p.topo_args, ctx);
  if (Chosen(p.explain)) return RunExplain(p.explain_args, ctx);
  if (Chosen(p.health)) return RunHealth(p.health_args, ctx);
  if (Chosen(p.history)) return RunHistory(p.history_args, ctx);
  if (Chosen(p.report)) return RunReport(p.report_args, ctx);
  for (CLI::App* cmd : p.queue_commands) {
    if (Chosen(cmd)) return RunQueueCommand(cmd->get_name(), p.queue_args, ctx);
  }
  if (Chosen(p.slurm)) return RunSlurm(p.slurm_args, ctx);
  if (Chosen(p.scenarios)) {
    for (const auto& name : ListScenarios(ctx.env(), ctx.layout())) std::cout << name << "\n";
    return kExitOk;
  }
  return kExitUsage;
}

// The fast path: a tree of the root and the named command only (or the root alone for
// `gpuman --version`). Only a clean parse is taken; anything else (help, completion, a
// parse error, a name that is no command) returns nullopt, and the whole tree parses the
// command line again, so every message and help text is the whole tree's. A clean parse
// here is one there too: the trees differ only in the other commands' Apps, and a word
// that names one is a subcommand to CLI11 only before any subcommand was parsed, which is
// where CommandName looked.
std::optional<int> RunOneCommand(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "-h" || arg == "--help" || arg == "--help-all") return std::nullopt;
  }
  const std::string_view name = CommandName(argc, argv);
  if (name == "help" || name == "completion") return std::nullopt;
  CommandTree tree(name);
  if (!name.empty() && !tree.Has(name)) return std::nullopt;
  CommandTree::Parts& p = tree.parts();
  try {
    p.app.parse(argc, argv);
  } catch (const CLI::CallForVersion& e) {
    return p.app.exit(e);
  } catch (const CLI::Error&) {
    return std::nullopt;
  }
  if (name.empty()) return std::nullopt;
  return RunParsed(p, name);
}

int RunGpuman(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "__supervise") return RunSupervise(argc, argv);
  if (argc > 1 && std::string(argv[1]) == "__man") return RunMan(argc, argv);
  if (auto done = RunOneCommand(argc, argv)) return *done;
  CommandTree tree;
  CommandTree::Parts& p = tree.parts();
  CLI::App& app = p.app;

  // CLI11 reports an unknown command as "a subcommand is required"; say what was meant.
  if (const std::string_view arg = CommandName(argc, argv); !arg.empty() && !tree.Has(arg)) {
    std::string names;
    for (const CLI::App* sub : app.get_subcommands({})) names += (names.empty() ? "" : ", ") + sub->get_name();
    std::cerr << "gpuman: error: unknown command '" << arg << "' (commands: " << names << ")\n";
    return kExitUsage;
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
    std::cerr << "gpuman: error: " << DescribeParseError(app, e) << "\n";
    return GpumanFailureExit(CommandName(argc, argv), kExitUsage);
  }
  // Neither needs the config or a driver: they work on a machine with a broken config too.
  if (*p.help) return RunHelp(app, p.help_command, std::cout, std::cerr);
  if (*p.completion) return RunCompletion(app, p.completion_shell, std::cout);
  return RunParsed(p, CommandName(argc, argv));
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
