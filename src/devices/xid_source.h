// XidEventSource: the seam for Xid error events (NVML event sets, or a fake in tests).
// One thread owns a source and calls Wait in a loop (NVML event sets are not thread safe).
#pragma once

#include <string>
#include <vector>

#include "base/result.h"
#include "model/health.h"

namespace gpuman::devices {

class XidEventSource {
 public:
  virtual ~XidEventSource() = default;
  /// Waits up to `timeout_ms` and returns the Xids that arrived (often none).
  /// Errors: kUnavailable when the event set broke (the caller should recreate it).
  virtual Result<std::vector<model::XidEvent>> Wait(int timeout_ms) = 0;
  /// GPUs that could not be registered, and why ("GPU-…: events not supported").
  virtual std::vector<std::string> notes() const = 0;
};

}  // namespace gpuman::devices
