// Per-GPU findings of the lease watches (intruders, memory slices): one warning per GPU
// whose message names each case, for the alert rules (docs/alerts.md). One thread.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "model/health.h"

namespace gpuman::monitor {

class GpuFindings {
 public:
  explicit GpuFindings(std::string code) : code_(std::move(code)) {}

  /// One case on a GPU: the GPU's finding counts it and its message gains `text`.
  void Add(const std::string& gpu_uuid, int gpu_index, int64_t first_seen_unix_ms, const std::string& text) {
    model::Finding& f = by_gpu_[gpu_uuid];
    if (f.code.empty()) {
      f.code = code_;
      f.severity = model::Severity::kWarning;
      f.gpu_uuid = gpu_uuid;
      f.gpu_index = gpu_index;
      f.first_seen_unix_ms = first_seen_unix_ms;
      f.source = "leases";
      f.count = 0;
    }
    ++f.count;
    if (!f.message.empty()) f.message += "; ";
    f.message += text;
  }

  /// The findings, by GPU UUID.
  std::vector<model::Finding> Take() {
    std::vector<model::Finding> out;
    for (auto& [uuid, f] : by_gpu_) out.push_back(std::move(f));
    return out;
  }

 private:
  std::string code_;
  std::map<std::string, model::Finding> by_gpu_;
};

}  // namespace gpuman::monitor
