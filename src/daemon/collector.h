// Collector: the daemon's monitoring side. Once per sample period it is handed the daemon's
// sample of the devices (the daemon reads them once per tick, daemon.h) and feeds the health watch (drains and lifts), the idle-lease watch, the alert rules, the
// history db and the Prometheus text. A helper thread owns the NVML event set and hands
// Xid events over through a queue and a wake-up fd; the kernel log is read non-blocking on
// the loop thread. The metrics HTTP server runs on its own thread and only ever sees the
// last rendered text. Everything else runs on the daemon's loop thread.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/installed_layout.h"
#include "base/unique_fd.h"
#include "devices/device_source.h"
#include "devices/process_inspector.h"
#include "devices/xid_source.h"
#include "health/kernel_log.h"
#include "health/watch.h"
#include "metrics/prometheus.h"
#include "metrics/server.h"
#include "model/history.h"
#include "monitor/alerts.h"
#include "monitor/hook_runner.h"
#include "monitor/idle.h"
#include "monitor/intruders.h"
#include "monitor/slice_watch.h"
#include "slurm/job_record.h"
#include "store/history_store.h"
#include "store/job_store.h"
#include "store/lease_store.h"

namespace gpuman::daemon {

struct CollectorOptions {
  int64_t sample_interval_ms = 1000;
  std::string kernel_log = "/dev/kmsg";          // "" = do not read it
  health::HealthPolicy health;
  std::optional<std::string> metrics_address;    // Prometheus /metrics; off when unset
  InstalledLayout layout;                        // where the metrics module is (metrics_address)
  std::string history_path;                      // "" = no history
  store::HistoryRetention retention;
  monitor::IdlePolicy idle;
  monitor::IntruderPolicy intruders;  // [enforce] foreign_processes, grace (docs/enforce.md)
  monitor::SlicePolicy slices;        // [share] over_limit, over_limit_grace (docs/share.md)
  std::vector<monitor::AlertRule> alerts;
  /// Creates the Xid event source on the event thread; unset = no NVML events.
  std::function<Result<std::unique_ptr<devices::XidEventSource>>()> xid_source_factory;
  devices::ProcessInspector* inspector = nullptr;  // users of GPU processes (the daemon fills them in)
  std::string hostname;
  /// The Slurm job records (slurm/job_record.h) whose jobs tag the history samples of
  /// their GPUs; "" = no tagging.
  std::string slurm_state_dir;
  /// Asked when a per-GPU drain or an idle-lease release is due: why this host is a Slurm
  /// node ("slurmd runs (pid 812)"), where both step aside (Slurm drains whole nodes and
  /// ends jobs itself; docs/slurm.md); nullopt, or unset, where it is not. The drain op
  /// asks it too.
  std::function<std::optional<std::string>()> slurm_node;
};

class Collector {
 public:
  Collector(CollectorOptions options, store::JobStore& jobs, store::LeaseStore& leases, const Clock& clock);
  ~Collector();  // stops the event thread
  Collector(const Collector&) = delete;
  Collector& operator=(const Collector&) = delete;

  /// Opens the history db, binds the metrics address, opens the kernel log, restores
  /// health drains left by an earlier daemon, and starts the event thread.
  /// Errors: kUnavailable/kIo for the metrics address or the history db (the daemon
  /// refuses to start rather than run without what was asked for).
  Status Start();

  /// Readable when Xid events are waiting (poll it with the daemon's fds); -1 if none.
  int wake_fd() const { return wake_.read.get(); }
  /// Reads the wake fd dry.
  void DrainWake();

  /// Milliseconds until the next sample is due (0 = now: the period is over, or Xid events wait).
  int64_t MsUntilDue(int64_t now_unix_ms) const;
  /// The Xids that arrived since the last call (NVML events, new kernel log lines), handed
  /// to the health watch. Returns true when there were any: the daemon then reads health
  /// fields now rather than from its cache. Call before each Tick.
  bool GatherXids(int64_t now_unix_ms);
  /// One sample: `snapshot` as the daemon read it (owners of processes filled in), or
  /// nullptr and why the devices could not be read. Returns true when drains or leases
  /// changed (run a scheduling pass).
  bool Tick(int64_t now_unix_ms, const model::MachineSnapshot* snapshot, const std::string& error);

  /// The report for `gpuman health` (with "gpu_count").
  nlohmann::json HealthJson() const;
  /// Sets idle_since on copies sent to clients.
  void Annotate(std::vector<model::Lease>& leases) const { idle_.Annotate(leases); }
  void Annotate(std::vector<model::Job>& jobs) const { idle_.Annotate(jobs); }
  /// A queue job just started: its wait goes to the history and the metrics histogram.
  void OnJobStarted(const model::Job& job, int64_t started_unix_ms);

  const health::HealthWatch& health() const { return health_; }
  /// options.slurm_node(), nullopt when unset.
  std::optional<std::string> SlurmNode() const;
  std::optional<int> metrics_port() const;
  /// The address /metrics is served on, as bound (a port 0 request shows the real port).
  std::optional<std::string> metrics_address() const;

 private:
  void WatchIntruders(const model::MachineSnapshot& snap, const std::vector<model::Lease>& leases, int64_t now);
  void WatchSlices(const model::MachineSnapshot& snap, const std::vector<model::Lease>& leases, int64_t now);
  void EventThread();
  void RunHook(const std::vector<std::string>& argv, const nlohmann::json& payload, const std::string& what);
  std::vector<model::GpuSample> Samples(const model::MachineSnapshot& snap, const std::vector<model::Lease>& leases,
                                        const std::vector<model::Job>& jobs, int64_t now) const;

  CollectorOptions options_;
  store::JobStore& jobs_;
  store::LeaseStore& leases_;
  const Clock& clock_;

  health::HealthWatch health_;
  monitor::IdleWatch idle_;
  monitor::AlertEngine alerts_;
  monitor::IntruderWatch intruders_;
  monitor::SliceWatch slices_;
  monitor::HookRunner hooks_;
  metrics::Histogram job_waits_;
  std::unique_ptr<metrics::MetricsServer> metrics_;
  std::unique_ptr<store::HistoryStore> history_;
  std::optional<slurm::JobRecordCache> slurm_jobs_;  // set when options_.slurm_state_dir is
  std::unique_ptr<health::KernelLogReader> kernel_log_;
  std::vector<std::string> xid_sources_, xid_notes_;
  uint64_t jobs_generation_ = 0;  // JobStore::summaries_generation() jobs_copy_ was copied at
  std::vector<model::Job> jobs_copy_;                         // annotated each sample
  std::vector<model::Job> held_;                              // its jobs with a lease
  std::vector<size_t> held_at_;                               // where they are in jobs_copy_
  int gpu_count_ = 0;
  std::map<int, std::string> uuid_by_index_;  // last UUID each NVML index reported
  int64_t next_due_ms_ = 0;
  bool history_failed_ = false;  // log one line per failure streak, not one per second

  // Event thread.
  std::thread thread_;
  std::atomic<bool> stop_{false};
  mutable std::mutex mu_;
  std::vector<model::XidEvent> pending_;  // guarded by mu_
  std::vector<std::string> event_notes_;  // guarded by mu_
  bool events_ok_ = false;                // guarded by mu_
  Pipe wake_;  // the event thread wakes the loop (non-blocking); closed after the thread is joined
};

}  // namespace gpuman::daemon
