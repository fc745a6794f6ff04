#include "nvml/late_source.h"

#include <algorithm>

namespace gpuman::nvml {

LateNvmlSource::LateNvmlSource(std::string library_path, const Clock& clock, Error first_error)
    : path_(std::move(library_path)), clock_(clock), error_(std::move(first_error)) {
  error_.code = ErrorCode::kUnavailable;
  next_try_ms_ = clock_.NowUnixMs() + interval_ms_;
}

Result<model::MachineSnapshot> LateNvmlSource::Snapshot(const devices::SnapshotOptions& options) {
  if (source_) return source_->Snapshot(options);
  const int64_t now = clock_.NowUnixMs();
  if (now >= next_try_ms_) {
    auto lib = NvmlLibrary::Load(path_);
    if (lib) {
      lib_ = std::move(*lib);
      source_ = std::make_unique<NvmlDeviceSource>(*lib_, clock_);
      return source_->Snapshot(options);
    }
    error_ = MakeError(ErrorCode::kUnavailable, lib.error().message);
    interval_ms_ = std::min(interval_ms_ * 2, kMaxRetryMs);
    next_try_ms_ = now + interval_ms_;
  }
  return error_;
}

}  // namespace gpuman::nvml
