// Health findings: what is wrong (or worth a look) with a GPU or the driver, with a
// severity, as `gpuman health`, the daemon's watch, metrics and alerts report them.
// Plain values; produced by health/ from snapshots, NVML events and the kernel log.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpuman::model {

/// DCGM's two classes: a fatal finding makes the GPU unfit for new work (the daemon
/// drains it); a warning is shown and exported but changes nothing.
enum class Severity { kWarning, kFatal };
const char* SeverityName(Severity s);  // "warning" / "fatal"

/// One Xid error, from an NVML event or a kernel log line.
struct XidEvent {
  std::string gpu_uuid;              // "" when only the PCI bus id is known and unmatched
  std::optional<int> gpu_index;
  std::optional<std::string> pci_bus_id;  // NVML form "00000000:3B:00.0"
  int xid = 0;
  int64_t at_unix_ms = 0;
  std::string source;                // "nvml_event" or "kernel_log"
  std::string text;                  // the kernel log line, or "" for NVML events
};

struct Finding {
  std::string code;       // stable id: "xid", "ecc_volatile_uncorrected", "gpu_lost", ...
  Severity severity = Severity::kWarning;
  std::string gpu_uuid;   // "" for driver-wide findings
  std::optional<int> gpu_index;
  std::string message;    // one line for people
  std::optional<int> xid; // for code "xid"
  int count = 1;          // how many times seen in the window (Xids)
  std::optional<int64_t> first_seen_unix_ms;
  std::optional<int64_t> last_seen_unix_ms;
  std::string source;     // "nvml", "nvml_event", "kernel_log", "driver"
};

struct HealthReport {
  int64_t taken_at_unix_ms = 0;
  std::vector<Finding> findings;
  /// GPUs (UUIDs) the daemon has drained because of a fatal finding.
  std::vector<std::string> quarantined;
  /// Where Xids came from: "nvml_events" (daemon running), "kernel_log", and notes such
  /// as "kernel log not readable: permission denied".
  std::vector<std::string> xid_sources;
  std::vector<std::string> notes;
  bool has_fatal() const;
};

}  // namespace gpuman::model
