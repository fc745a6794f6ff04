// Every command's arguments as plain structs, filled by the parser (cli/cli_options.cc, the
// one unit that knows CLI11) and read by the handlers of the command table (cli/commands.h).
// Each command group declares its own struct next to its handler; this gathers them.
// Plain values; one per process, main thread.
#pragma once

#include <optional>
#include <string>

#include "cli/bench_command.h"
#include "cli/health_command.h"
#include "cli/history_commands.h"
#include "cli/inspect_commands.h"
#include "cli/lease_commands.h"
#include "cli/queue_commands.h"
#include "cli/doctor_command.h"
#include "cli/jupyter_command.h"
#include "cli/run_command.h"
#include "cli/slurm_command.h"
#include "cli/status_command.h"
#include "cli/top_command.h"

namespace gpuman::cli {

/// The options every command takes (before or after its name).
struct GlobalArgs {
  std::string simulate;                    // --simulate
  std::optional<std::string> config_path;  // --config
  std::string nvml_library;                // --nvml-library
};

struct CommandArgs {
  /// The command named on the command line ("status", "submit", ...), "" for none: the
  /// row of the command table that runs, and whose exit policy a parse error takes.
  std::string command;
  GlobalArgs global;

  StatusArgs status;
  TopArgs top;
  SelectArgs select;
  RunArgs run;
  DoctorArgs doctor;
  BenchArgs bench;
  JupyterArgs jupyter;
  LeasesArgs leases;
  ReleaseArgs release;
  TopoArgs topo;
  ExplainArgs explain;
  HealthArgs health;
  HistoryArgs history;
  ReportArgs report;
  QueueArgs queue;  // daemon, submit, queue, show, cancel, hold, resume, logs, wait, drain, undrain
  SlurmArgs slurm;
  std::optional<std::string> help_command;  // help [COMMAND]
  std::string completion_shell;             // completion SHELL
};

}  // namespace gpuman::cli
