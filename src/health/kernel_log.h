// Xids from the kernel log. NVML events miss some Xids (79 "fallen off the bus", 119/120
// GSP errors: DCGM#162) and everything from before the watcher registered, so gpuman also
// reads the driver's "NVRM: Xid (PCI:0000:3b:00): 79, pid=..., ..." lines, from /dev/kmsg
// (records "prio,seq,usec,flags;text") or from a text file (dmesg output, "[ 12.34] text",
// or plain lines), chosen by what the path is.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"
#include "model/health.h"

namespace gpuman::health {

/// Parses one line (or /dev/kmsg record). Returns nullopt for lines that are not Xid
/// reports. The bus id is normalised to NVML's form ("00000000:3B:00.0"); at_unix_ms is
/// left 0 (the caller knows the clock). Pure.
std::optional<model::XidEvent> ParseXidLine(std::string_view line);

/// One /dev/kmsg record ("prio,seq,usec,flags;text\n KEY=value..."): its Xid event, with
/// at_unix_ms = boot_unix_ms + usec / 1000 (now_unix_ms when the usec field is missing or
/// negative). Pure.
std::optional<model::XidEvent> ParseKmsgRecord(std::string_view record, int64_t boot_unix_ms,
                                               int64_t now_unix_ms);

/// One line of a text log (dmesg output "[  12.345678] text", or plain): its Xid event, with
/// at_unix_ms from dmesg's seconds since boot when they are a finite number from 0 to 1e10,
/// else now_unix_ms. Pure.
std::optional<model::XidEvent> ParseKernelLogTextLine(std::string_view line, int64_t boot_unix_ms,
                                                      int64_t now_unix_ms);

/// "0000:3b:00" / "0000:3b:00.0" / "00000000:3B:00.0" -> "00000000:3B:00.0"; nullopt if
/// it is not a PCI address.
std::optional<std::string> NormalizeBusId(std::string_view bus);

/// Reads Xid lines incrementally: the first Read returns every Xid still in the log (since
/// boot for /dev/kmsg), later ones only what was added. Not thread safe.
class KernelLogReader {
 public:
  /// Errors: kPermissionDenied (e.g. /dev/kmsg with kernel.dmesg_restrict=1 as a user),
  /// kNotFound, kIo. `boot_unix_ms` converts kmsg's microseconds since boot to wall time.
  static Result<std::unique_ptr<KernelLogReader>> Open(const std::string& path, int64_t boot_unix_ms);
  ~KernelLogReader();
  KernelLogReader(const KernelLogReader&) = delete;
  KernelLogReader& operator=(const KernelLogReader&) = delete;

  /// New Xid events; `now_unix_ms` stamps lines that carry no time. Errors: kIo.
  Result<std::vector<model::XidEvent>> Read(int64_t now_unix_ms);
  const std::string& path() const { return path_; }

 private:
  KernelLogReader() = default;
  std::string path_;
  UniqueFd fd_;
  bool kmsg_ = false;     // record device: one record per read()
  int64_t offset_ = 0;    // text file: bytes consumed
  std::string partial_;   // text file: an unfinished last line
  int64_t boot_unix_ms_ = 0;
};

/// Wall-clock time of boot (now - CLOCK_BOOTTIME), in ms.
int64_t BootTimeUnixMs();

}  // namespace gpuman::health
