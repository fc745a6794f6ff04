// Prometheus text exposition (format 0.0.4) of the daemon's view: GPUs, processes, health,
// leases and the queue. Pure: the daemon gathers a MetricsInput on its own thread and hands
// the text to metrics::MetricsServer. Every family is documented in docs/metrics.md.
// Histogram is a plain value (not thread-safe); FormatPrometheus is thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "model/device_snapshot.h"
#include "model/health.h"
#include "model/job.h"
#include "model/lease.h"

namespace gpuman::metrics {

/// Cumulative histogram for Prometheus (le buckets in seconds). Not thread-safe: one owner.
class Histogram {
 public:
  /// Bounds are sorted and de-duplicated; NaN and infinities are dropped (+Inf is implicit).
  explicit Histogram(std::vector<double> upper_bounds);

  /// Buckets for queue wait times: 1 s .. 1 day.
  static std::vector<double> DefaultWaitBuckets();

  void Observe(double v);

  const std::vector<double>& upper_bounds() const { return upper_bounds_; }
  /// Cumulative counts, one per upper bound (observations <= bound); +Inf is count().
  std::vector<int64_t> cumulative_counts() const;
  int64_t count() const { return count_; }
  double sum() const { return sum_; }

 private:
  std::vector<double> upper_bounds_;
  std::vector<int64_t> bucket_counts_;  // per bucket, not cumulative
  int64_t count_ = 0;
  double sum_ = 0;
};

struct MetricsInput {
  const model::MachineSnapshot* snapshot = nullptr;  // null when the last NVML read failed
  std::vector<model::Finding> findings;               // model/health.h
  std::vector<std::string> drained_gpus;              // UUIDs quarantined/drained
  std::map<std::pair<std::string, int>, int64_t> xid_totals;  // (gpu uuid, xid) -> count since daemon start
  std::vector<model::Lease> leases;                   // live leases, idle_since_unix_ms may be set
  /// Active jobs (queued, held, starting, running); idle_since_unix_ms may be set. A view:
  /// a sweep's 10,000 jobs are not copied once more every sample.
  std::span<const model::Job> jobs;
  const Histogram* job_wait_seconds = nullptr;        // waits of jobs started since daemon start
  int64_t now_unix_ms = 0;
  std::string hostname;
};

/// The text exposition format 0.0.4 (Content-Type `text/plain; version=0.0.4`). Unknown
/// values (std::nullopt) produce no sample; a family without samples is left out entirely.
/// Label values are escaped and made valid UTF-8, so one odd user name cannot fail a scrape.
std::string FormatPrometheus(const MetricsInput& in);

/// The value of a label, escaped for the exposition format (\\, \", \n), with invalid
/// UTF-8 bytes replaced by U+FFFD. Exposed for tests.
std::string EscapeLabelValue(const std::string& value);

/// A sample value as Prometheus parses it: integers exactly, doubles in shortest
/// round-trip form, "NaN", "+Inf", "-Inf".
std::string FormatValue(double v);
std::string FormatValue(int64_t v);

}  // namespace gpuman::metrics
