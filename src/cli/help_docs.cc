#include "cli/help_docs.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <ostream>

#include "base/posix_error.h"
#include "cli/exit_codes.h"
#include "render/completion_script.h"
#include "render/man_page.h"

namespace gpuman::cli {
namespace {

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

}  // namespace

const std::vector<render::TableRow>& FilesTable() {
  static const std::vector<render::TableRow> rows = {
      {"/etc/gpuman/config.toml", "the machine's config file (docs/cli.md, Configuration)"},
      {"~/.config/gpuman/config.toml", "a user's config file ($XDG_CONFIG_HOME/gpuman/config.toml)"},
      {"/run/gpuman/leases", "the machine lease table used when no daemon runs"},
      {"/run/gpuman/gpuman.sock", "the daemon's socket when it runs as root"},
      {"/var/lib/gpuman", "the daemon's state (job queue, leases, history) when it runs as root"},
      {"/var/lib/gpuman/bench.json", "what gpuman bench measured as root; ~/.cache/gpuman/bench.json for a user"},
  };
  return rows;
}

const std::vector<render::TableRow>& ExitCodeTable() {
  static const std::vector<render::TableRow> rows = {
      {std::to_string(kExitOk), "success"},
      {std::to_string(kExitError), "other error (I/O, internal; a state file that is not gpuman's, corrupt, truncated or newer; a full disk; output that cannot be written)"},
      {std::to_string(kExitUsage), "invalid arguments, unknown GPU id or scenario, broken config file"},
      {std::to_string(kExitNoDriver),
       "NVML or the NVIDIA driver could not be loaded or initialised (one line names the library and the reason); bench: no CUDA driver library"},
      {std::to_string(kExitNotEnoughGpus), "not enough GPUs fit the request (select, bench; run says 125)"},
      {std::to_string(kExitPermission), "permission denied"},
      {std::to_string(kExitUnhealthy), "health: at least one fatal finding; slurm gres-conf: a GPU would be left out (without --allow-missing); slurm gres-conf --check: a mismatch; slurm healthcheck: a fatal finding; slurm prolog: job refused; slurm epilog: something left on the job's GPUs"},
      {std::to_string(kExitHealthWarnings), "health: warnings only"},
  };
  return rows;
}

const std::vector<render::TableRow>& EnvironmentTable() {
  static const std::vector<render::TableRow> rows = {
      {"GPUMAN_SIMULATE", "as --simulate"},
      {"GPUMAN_NVML_LIBRARY", "NVML library path or soname"},
      {"GPUMAN_CUDA_LIBRARY", "the CUDA driver library bench loads (default libcuda.so.1)"},
      {"GPUMAN_BENCH_FILE", "the one file bench stores its figures in and --prefer fastest reads them from"},
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

int RunCompletion(const CLI::App& app, const std::string& shell, std::ostream& out) {
  const render::ProgramDoc doc = DescribeCommandLine(app);
  out << (shell == "zsh" ? render::RenderZshCompletion(doc) : render::RenderBashCompletion(doc));
  return kExitOk;
}

Status WriteManPages(const CLI::App& app, const std::string& dir, const std::string& doc_dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return MakeError(ErrorCode::kIo, "create " + dir + ": " + ec.message());
  render::ProgramDoc doc = DescribeCommandLine(app);
  doc.doc_dir = doc_dir;
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
