// NvmlXidEventSource: devices::XidEventSource over an NVML event set registered for Xid
// critical errors on every GPU that supports them. Create and use it on one thread.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/clock.h"
#include "devices/xid_source.h"
#include "nvml/library.h"

namespace gpuman::nvml {

class NvmlXidEventSource final : public devices::XidEventSource {
 public:
  /// Errors: kUnavailable when the library has no event API or no GPU can be registered
  /// (the daemon then relies on the kernel log and says so).
  static Result<std::unique_ptr<NvmlXidEventSource>> Create(const NvmlLibrary& lib, const Clock& clock);
  ~NvmlXidEventSource() override;

  Result<std::vector<model::XidEvent>> Wait(int timeout_ms) override;
  std::vector<std::string> notes() const override { return notes_; }

 private:
  NvmlXidEventSource(const NvmlLibrary& lib, const Clock& clock) : lib_(lib), clock_(clock) {}
  const NvmlLibrary& lib_;
  const Clock& clock_;
  nvmlEventSet_t set_ = nullptr;
  struct Gpu {
    int index = 0;
    std::string uuid;
  };
  std::map<nvmlDevice_t, Gpu> gpus_;
  std::vector<std::string> notes_;
};

}  // namespace gpuman::nvml
