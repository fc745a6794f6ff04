#pragma once
// A device source for a daemon started before the NVIDIA driver (boot order, a driver
// upgrade, a container without the GPUs yet): every snapshot it cannot take is an error
// naming why (health turns it into the fatal "driver" finding, status shows it), and it
// tries to load NVML again, at growing intervals, until it can (issue 23, "No driver is a
// finding"). Once loaded it is the NVML source, as if the driver had been there at start.

#include <memory>
#include <string>

#include "base/clock.h"
#include "devices/device_source.h"
#include "nvml/library.h"
#include "nvml/nvml_device_source.h"

namespace gpuman::nvml {

class LateNvmlSource final : public devices::DeviceSource {
 public:
  /// `first_error`: why the first load (the caller's) failed.
  LateNvmlSource(std::string library_path, const Clock& clock, Error first_error);

  using devices::DeviceSource::Snapshot;
  Result<model::MachineSnapshot> Snapshot(const devices::SnapshotOptions& options) override;
  Status LimitCgroupMemory(const std::string& uuid, const std::string& cgroup, int64_t bytes) override {
    if (!source_) return error_;
    return source_->LimitCgroupMemory(uuid, cgroup, bytes);
  }

  /// Whether NVML has been loaded since.
  bool loaded() const { return source_ != nullptr; }

  /// Tries again 1 s after the first failure, then at twice the last interval, at most 60 s.
  static constexpr int64_t kFirstRetryMs = 1000;
  static constexpr int64_t kMaxRetryMs = 60000;

 private:
  std::string path_;
  const Clock& clock_;
  Error error_;
  int64_t next_try_ms_ = 0;
  int64_t interval_ms_ = kFirstRetryMs;
  std::unique_ptr<NvmlLibrary> lib_;
  std::unique_ptr<NvmlDeviceSource> source_;
};

}  // namespace gpuman::nvml
