#include "cli/help_docs.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <ostream>

#include <CLI/CLI.hpp>

#include "base/posix_error.h"
#include "cli/exit_codes.h"
#include "render/completion_script.h"
#include "render/man_page.h"

#ifndef GPUMAN_VERSION
#define GPUMAN_VERSION "0.0.0"
#endif

namespace gpuman::cli {
namespace {

using render::ValueKind;

// What option values are, for completion. Keyed by long name: an option means the same
// thing in every command that has it.
const std::map<std::string, ValueKind>& OptionKinds() {
  static const std::map<std::string, ValueKind> kinds = {
      {"--simulate", ValueKind::kScenario}, {"--config", ValueKind::kFile},
      {"--nvml-library", ValueKind::kFile}, {"--output", ValueKind::kFile},
      {"--html", ValueKind::kFile},         {"--db", ValueKind::kFile},
      {"--socket", ValueKind::kFile},       {"--state-dir", ValueKind::kFile},
      {"--gpus", ValueKind::kGpu},          {"--exclude", ValueKind::kGpu},
      {"--gpu", ValueKind::kGpu},
  };
  return kinds;
}

// Positionals by (command, name).
ValueKind PositionalKind(const std::string& command, const std::string& name) {
  if (name == "GPU") return ValueKind::kGpu;
  if ((command == "run" || command == "submit") && name == "command") return ValueKind::kCommand;
  if (command == "help" || command == "completion") return ValueKind::kChoice;
  return ValueKind::kText;
}

bool Visible(const CLI::App* sub) { return !sub->get_group().empty(); }

render::OptionDoc DescribeOption(const CLI::Option& opt) {
  render::OptionDoc doc;
  if (opt.nonpositional()) {
    for (const auto& s : opt.get_snames()) doc.names.push_back("-" + s);
    for (const auto& l : opt.get_lnames()) doc.names.push_back("--" + l);
  } else {
    doc.names.push_back(opt.get_name(true, false));
  }
  doc.description = opt.get_description();
  doc.default_value = opt.get_default_str();
  doc.required = opt.get_required();
  if (opt.get_type_size() == 0 || opt.get_expected_max() == 0) {  // a flag
    doc.kind = ValueKind::kNone;
    return doc;
  }
  // "INT:INT in [0 - 4096]" -> "INT": the check is in the description's words already.
  doc.value_name = opt.get_type_name().substr(0, opt.get_type_name().find(':'));
  if (doc.value_name.empty()) doc.value_name = "VALUE";
  doc.value_optional = opt.get_expected_min() == 0;
  doc.repeatable = opt.get_expected_max() >= CLI::detail::expected_max_vector_size;
  doc.kind = ValueKind::kText;
  for (const auto& name : doc.names) {
    auto it = OptionKinds().find(name);
    if (it != OptionKinds().end()) doc.kind = it->second;
  }
  return doc;
}

render::CommandDoc DescribeCommand(const CLI::App& sub, const std::vector<std::string>& command_names) {
  render::CommandDoc doc;
  doc.name = sub.get_name();
  doc.summary = sub.get_description();
  doc.footer = sub.get_footer();
  for (const CLI::Option* opt : sub.get_options()) {
    if (opt->get_group().empty()) continue;  // hidden
    render::OptionDoc o = DescribeOption(*opt);
    if (opt->nonpositional()) {
      doc.options.push_back(std::move(o));
    } else {
      o.kind = PositionalKind(doc.name, o.names.front());
      if (doc.name == "help") o.choices = command_names;
      if (doc.name == "completion") o.choices = {"bash", "zsh"};
      doc.positionals.push_back(std::move(o));
    }
  }
  for (const CLI::App* child : sub.get_subcommands(Visible)) {
    render::CommandDoc child_doc = DescribeCommand(*child, {});
    child_doc.parent = doc.parent.empty() ? doc.name : doc.parent + " " + doc.name;
    for (render::CommandDoc& grandchild : child_doc.subcommands) grandchild.parent = child_doc.parent + " " + child_doc.name;
    doc.subcommands.push_back(std::move(child_doc));
  }
  return doc;
}

// Writes the page of `cmd` and of each of its subcommands.
Status WriteCommandPages(const render::ProgramDoc& doc, const render::CommandDoc& cmd,
                         const std::function<Status(const std::string&, const std::string&)>& write) {
  if (auto st = write(render::ManPageFileName(doc, render::ManPageStem(cmd)), render::RenderCommandManPage(doc, cmd)); !st) {
    return st;
  }
  for (const render::CommandDoc& sub : cmd.subcommands) {
    if (auto st = WriteCommandPages(doc, sub, write); !st) return st;
  }
  return {};
}

const std::vector<render::TableRow>& FilesTable() {
  static const std::vector<render::TableRow> rows = {
      {"/etc/gpuman/config.toml", "the machine's config file (docs/cli.md, Configuration)"},
      {"~/.config/gpuman/config.toml", "a user's config file ($XDG_CONFIG_HOME/gpuman/config.toml)"},
      {"/run/gpuman/leases", "the machine lease table used when no daemon runs"},
      {"/run/gpuman/gpuman.sock", "the daemon's socket when it runs as root"},
      {"/var/lib/gpuman", "the daemon's state (job queue, leases, history) when it runs as root"},
  };
  return rows;
}

}  // namespace

const std::vector<render::TableRow>& ExitCodeTable() {
  static const std::vector<render::TableRow> rows = {
      {std::to_string(kExitOk), "success"},
      {std::to_string(kExitError), "other error (I/O, internal; a state file that is not gpuman's, corrupt, truncated or newer; a full disk)"},
      {std::to_string(kExitUsage), "invalid arguments, unknown GPU id or scenario, broken config file"},
      {std::to_string(kExitNoDriver),
       "NVML or the NVIDIA driver could not be loaded or initialised (one line names the library and the reason)"},
      {std::to_string(kExitNotEnoughGpus), "not enough GPUs fit the request (select; run says 125)"},
      {std::to_string(kExitPermission), "permission denied"},
      {std::to_string(kExitUnhealthy), "health: at least one fatal finding; slurm gres-conf --check: a mismatch; slurm healthcheck: a fatal finding; slurm prolog: job refused; slurm epilog: something left on the job's GPUs"},
      {std::to_string(kExitHealthWarnings), "health: warnings only"},
  };
  return rows;
}

const std::vector<render::TableRow>& EnvironmentTable() {
  static const std::vector<render::TableRow> rows = {
      {"GPUMAN_SIMULATE", "as --simulate"},
      {"GPUMAN_NVML_LIBRARY", "NVML library path or soname"},
      {"GPUMAN_CONFIG", "config file"},
      {"GPUMAN_SCENARIO_DIR", "extra directory searched first for scenario names"},
      {"GPUMAN_SIM_LIBRARY", "the stand-in library used by --simulate (default: the one shipped with gpuman)"},
      {"GPUMAN_SQLITE_LIBRARY", "the SQLite library commands load when they open a database (default libsqlite3.so.0)"},
      {"GPUMAN_LEASE_DIR", "the machine lease table's directory (default: config lease_dir, else $GPUMAN_STATE_DIR, else /run/gpuman/leases)"},
      {"GPUMAN_STATE_DIR", "moves the machine lease table too, when GPUMAN_LEASE_DIR and lease_dir are not set"},
      {"GPUMAN_LEASE_ID", "the lease this shell or job holds: nested run and select --lease stay inside it"},
      {"GPUMAN_SOCKET", "the daemon's socket, for clients and for gpuman daemon"},
      {"GPUMAN_KERNEL_LOG", "where Xid lines are read from (default /dev/kmsg)"},
      {"GPUMAN_RECONNECT_TIMEOUT", "how long wait, logs -f, queue --watch, top and run --wait reconnect to a restarting daemon (config [client] reconnect_timeout, default 60s)"},
      {"GPUMAN_HISTORY_DB", "the history db history and report read"},
      {"GPUMAN_SLURM_DIR", "the Slurm job record directory (default /run/gpuman/slurm)"},
      {"NO_COLOR", "never use colour"},
      {"COLUMNS", "terminal width"},
      {"TERM", "terminal type"},
  };
  return rows;
}

render::ProgramDoc DescribeCommandLine(const CLI::App& app) {
  render::ProgramDoc doc;
  doc.name = app.get_name();
  doc.version = GPUMAN_VERSION;
  doc.summary = "GPU resource manager for shared multi-GPU machines";
  doc.description = {
      "gpuman shows every GPU of a Linux machine and who holds it, picks free GPUs correctly, "
      "leases them race-free and runs jobs on them, and queues jobs through a per-machine daemon.",
      "It talks to the NVIDIA driver only through NVML, loaded at run time; --simulate runs "
      "against a simulated node instead.",
      "Run gpuman help COMMAND, or read gpuman-COMMAND(1), for each command.",
  };
  std::vector<const CLI::App*> subs = app.get_subcommands(Visible);
  std::vector<std::string> names;
  for (const CLI::App* sub : subs) names.push_back(sub->get_name());
  for (const CLI::Option* opt : app.get_options()) {
    if (!opt->get_group().empty() && opt->nonpositional()) doc.global_options.push_back(DescribeOption(*opt));
  }
  for (const CLI::App* sub : subs) doc.commands.push_back(DescribeCommand(*sub, names));
  doc.exit_codes = ExitCodeTable();
  doc.environment = EnvironmentTable();
  doc.files = FilesTable();
  return doc;
}

int RunHelp(const CLI::App& app, const std::optional<std::string>& command, std::ostream& out,
            std::ostream& err) {
  // The same formatter calls CLI11 makes for `--help`, so the two cannot differ.
  if (!command) {
    out << app.get_formatter()->make_help(&app, app.get_name(), CLI::AppFormatMode::Normal);
    return kExitOk;
  }
  for (const CLI::App* sub : app.get_subcommands(Visible)) {
    if (sub->get_name() == *command) {
      out << sub->get_formatter()->make_help(sub, app.get_name() + " " + sub->get_name(),
                                             CLI::AppFormatMode::Normal);
      return kExitOk;
    }
  }
  err << "gpuman: error: help: no command '" << *command << "' (see gpuman --help)\n";
  return kExitUsage;
}

int RunCompletion(const CLI::App& app, const std::string& shell, std::ostream& out) {
  const render::ProgramDoc doc = DescribeCommandLine(app);
  out << (shell == "zsh" ? render::RenderZshCompletion(doc) : render::RenderBashCompletion(doc));
  return kExitOk;
}

Status WriteManPages(const CLI::App& app, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return MakeError(ErrorCode::kIo, "create " + dir + ": " + ec.message());
  const render::ProgramDoc doc = DescribeCommandLine(app);
  auto write = [&](const std::string& name, const std::string& text) -> Status {
    const std::string path = (std::filesystem::path(dir) / name).string();
    std::ofstream file(path, std::ios::binary | std::ios::trunc);
    file << text;
    file.close();
    if (!file) return MakeError(ErrorCode::kIo, "write " + path + ": " + ErrnoDescription(errno));
    return {};
  };
  if (auto st = write(render::ManPageFileName(doc, ""), render::RenderProgramManPage(doc)); !st) return st;
  for (const auto& cmd : doc.commands) {
    if (auto st = WriteCommandPages(doc, cmd, write); !st) return st;
  }
  return {};
}

}  // namespace gpuman::cli
