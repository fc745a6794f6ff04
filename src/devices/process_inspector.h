// ProcessInspector: who a GPU process belongs to (user, command line, start time).
// NVML only gives host pids; this seam fills in the rest from /proc (ProcfsInspector) or,
// in `--simulate` mode, from the scenario's stand-in process table (StaticProcessTable).
// Implementations are cheap to construct and used from one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "model/device_snapshot.h"

namespace gpuman::devices {

struct ProcessDetails {
  uint32_t uid = 0;
  std::string user;     // login name, or the uid as text when it has no passwd entry
  std::string command;  // argv joined by spaces; "[comm]" for kernel threads / zombies
  std::optional<int64_t> start_time_unix;
};

class ProcessInspector {
 public:
  virtual ~ProcessInspector() = default;
  /// nullopt when the pid does not exist in this PID namespace (or vanished meanwhile).
  virtual std::optional<ProcessDetails> Inspect(uint32_t pid) = 0;
};

/// Reads <proc_root>/<pid>/{cmdline,stat,status} and <proc_root>/stat (boot time).
class ProcfsInspector final : public ProcessInspector {
 public:
  explicit ProcfsInspector(std::string proc_root = "/proc");
  std::optional<ProcessDetails> Inspect(uint32_t pid) override;

 private:
  std::string root_;
  std::optional<int64_t> boot_time_unix_;
  bool boot_time_read_ = false;
};

/// A fixed table of pids (the simulated host), falling back to another inspector.
class StaticProcessTable final : public ProcessInspector {
 public:
  using Table = std::map<uint32_t, ProcessDetails>;
  StaticProcessTable(Table table, ProcessInspector* fallback)
      : table_(std::move(table)), fallback_(fallback) {}
  /// The table is built by `load` when the first pid is looked up (gpuman --simulate takes
  /// it from the stand-in NVML, loaded by then), once per process.
  StaticProcessTable(std::function<Table()> load, ProcessInspector* fallback)
      : load_(std::move(load)), fallback_(fallback) {}
  std::optional<ProcessDetails> Inspect(uint32_t pid) override;

 private:
  std::function<Table()> load_;
  Table table_;
  ProcessInspector* fallback_;
};

/// Fills user/command/start time of every process in `snap`; marks unknown pids as not
/// visible (is_visible == false) rather than dropping them.
void EnrichProcesses(model::MachineSnapshot& snap, ProcessInspector& inspector);

}  // namespace gpuman::devices
