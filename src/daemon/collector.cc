#include "daemon/collector.h"

#include "devices/process_inspector.h"
#include "policy/byte_size.h"

#include <signal.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <set>

#include "protocol/model_json.h"
#include "store/proc_liveness.h"

namespace gpuman::daemon {
namespace {

constexpr const char* kHealthDrainPrefix = "health:";

void Log(const std::string& line) { std::cerr << "gpuman daemon: " << line << "\n"; }

}  // namespace

Collector::Collector(CollectorOptions options, store::JobStore& jobs, store::LeaseStore& leases, const Clock& clock)
    : options_(std::move(options)),
      jobs_(jobs),
      leases_(leases),
      clock_(clock),
      health_(options_.health),
      idle_(options_.idle, options_.hostname),
      alerts_(options_.alerts, options_.hostname),
      intruders_(options_.intruders),
      slices_(options_.slices),
      job_waits_(metrics::Histogram::DefaultWaitBuckets()) {}

Collector::~Collector() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

Status Collector::Start() {
  if (options_.metrics_address) {
    auto server = metrics::MetricsServer::Start(*options_.metrics_address, options_.layout);
    if (server) {
      metrics_ = std::move(*server);
    } else if (server.error().code == ErrorCode::kUnavailable) {
      // The module or the library it links is not installed (a Recommends of the .deb,
      // docs/install.md): the daemon, the machine's lease authority, runs without /metrics.
      Log(server.error().message + "; serving no /metrics, everything else runs");
    } else {
      return server.error();  // the address: bad, taken, privileged
    }
  }
  if (!options_.history_path.empty()) {
    auto store = store::HistoryStore::Open(options_.history_path, /*read_only=*/false, options_.retention);
    if (!store) return store.error();
    history_ = std::move(*store);
    if (!options_.slurm_state_dir.empty()) slurm_jobs_.emplace(options_.slurm_state_dir);
  }
  if (!options_.kernel_log.empty()) {
    auto reader = health::KernelLogReader::Open(options_.kernel_log, health::BootTimeUnixMs());
    if (reader) {
      kernel_log_ = std::move(*reader);
      xid_sources_.push_back("kernel log " + options_.kernel_log);
    } else {
      xid_notes_.push_back(reader.error().message + ": Xids NVML cannot deliver (79, 119, 120) are missed");
      Log(xid_notes_.back());
    }
  }
  const int64_t now = clock_.NowUnixMs();
  if (auto drained = jobs_.Drained()) {
    for (const auto& [uuid, reason] : *drained) {
      if (reason.rfind(kHealthDrainPrefix, 0) == 0) health_.RestoreQuarantine(uuid, now);
    }
  }
  if (const auto slurm = SlurmNode()) {
    Log("Slurm node (" + *slurm + "): per-GPU drains and idle-lease releases step aside");
  }
  if (auto wake = MakePipe(O_NONBLOCK)) wake_ = std::move(*wake);
  if (options_.xid_source_factory) thread_ = std::thread([this] { EventThread(); });
  return {};
}

void Collector::EventThread() {
  // Owns the event set (NVML event sets are not thread safe). A broken set is recreated.
  while (!stop_) {
    auto source = options_.xid_source_factory();
    if (!source) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        events_ok_ = false;
        event_notes_ = {"NVML Xid events unavailable: " + source.error().message};
      }
      for (int i = 0; i < 50 && !stop_; ++i) usleep(100 * 1000);  // retry in 5 s
      continue;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      events_ok_ = true;
      event_notes_ = (*source)->notes();
    }
    while (!stop_) {
      auto events = (*source)->Wait(200);
      if (!events) {
        std::lock_guard<std::mutex> lock(mu_);
        events_ok_ = false;
        event_notes_ = {events.error().message};
        break;
      }
      if (events->empty()) continue;
      {
        std::lock_guard<std::mutex> lock(mu_);
        for (auto& ev : *events) pending_.push_back(std::move(ev));
      }
      if (wake_.write.get() >= 0) {
        char b = 1;
        (void)!write(wake_.write.get(), &b, 1);
      }
    }
  }
}

void Collector::DrainWake() {
  char buf[64];
  while (wake_.read.get() >= 0 && read(wake_.read.get(), buf, sizeof buf) > 0) {
  }
}

int64_t Collector::MsUntilDue(int64_t now) const {
  if (wake_.read.get() >= 0) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!pending_.empty()) return 0;
  }
  return std::max<int64_t>(0, next_due_ms_ - now);
}

void Collector::RunHook(const std::vector<std::string>& argv, const nlohmann::json& payload, const std::string& what) {
  if (argv.empty()) return;
  if (auto ran = hooks_.Run(argv, monitor::SerializePayload(payload)); !ran) Log(what + ": " + ran.error().message);
}

std::vector<model::GpuSample> Collector::Samples(const model::MachineSnapshot& snap,
                                                 const std::vector<model::Lease>& leases,
                                                 const std::vector<model::Job>& jobs, int64_t now) const {
  std::vector<model::GpuSample> out;
  for (const auto& dev : snap.gpus) {
    if (!dev.uuid) continue;
    model::GpuSample s;
    s.t_unix_ms = now;
    s.gpu_uuid = *dev.uuid;
    s.gpu_index = dev.index;
    if (dev.gpu_utilization_percent) s.utilization_percent = *dev.gpu_utilization_percent;
    if (dev.memory_utilization_percent) s.memory_utilization_percent = *dev.memory_utilization_percent;
    s.memory_used_bytes = dev.memory_used_bytes;
    s.memory_total_bytes = dev.memory_total_bytes;
    if (dev.temperature_c) s.temperature_c = *dev.temperature_c;
    s.power_w = dev.power_usage_w;
    // The lease or job holding it; else the users of its processes, outside gpuman.
    auto holder = model::AttributeHolder(dev, leases, jobs);
    s.holder_kind = holder.kind;
    s.user = std::move(holder.user);
    s.job_id = holder.job_id;
    s.holders = std::move(holder.holders);
    out.push_back(std::move(s));
  }
  return out;
}

// The intruder watch's steps (monitor/intruders.h): a log line for each, and the signals
// of `[enforce] foreign_processes = "kill"`. A signal goes only to a process that is still
// the one reported: the same owner in /proc now (a pid reused meanwhile, or one the
// stand-in made up, is left alone).
void Collector::WatchIntruders(const model::MachineSnapshot& snap, const std::vector<model::Lease>& leases, int64_t now) {
  for (const auto& step : intruders_.Update(snap, leases, now)) {
    // The history keeps what happened: a signal only once it was sent.
    auto record = [&](const char* event) {
      if (!history_) return;
      model::IntruderEvent e{now,          event,         step.gpu_uuid, step.gpu_index, step.pid, step.user,
                             step.command, step.lease_id, step.lease_user};
      if (auto r = history_->RecordIntruder(e); !r) Log("history: " + r.error().message);
    };
    const std::string who = "process " + std::to_string(step.pid) + (step.user.empty() ? "" : " of " + step.user) +
                            (step.command.empty() ? "" : " (" + step.command + ")");
    // lease_id 0: a process on a GPU no lease holds ([enforce] unleased_processes).
    const bool unleased = step.lease_id == 0;
    const std::string where = unleased ? "GPU " + std::to_string(step.gpu_index) + ", which no lease holds"
                                       : "GPU " + std::to_string(step.gpu_index) + ", leased to " + step.lease_user +
                                             " (lease " + std::to_string(step.lease_id) + ")";
    const std::string what = unleased ? "unleased process" : "intruder";
    switch (step.kind) {
      case monitor::IntruderStep::kSeen:
        Log((unleased ? "unleased GPU use: " : "intruder: ") + who + " on " + where +
            (step.spared.empty() ? "" : "; not ended: " + step.spared));
        record("seen");
        break;
      case monitor::IntruderStep::kTerm:
      case monitor::IntruderStep::kKill: {
        const int sig = step.kind == monitor::IntruderStep::kTerm ? SIGTERM : SIGKILL;
        devices::ProcfsInspector procfs;  // the real /proc, also under --simulate
        const auto details = procfs.Inspect(step.pid);
        if (!details || details->user != step.user) break;
        if (kill(static_cast<pid_t>(step.pid), sig) == 0) {
          Log(std::string(sig == SIGTERM ? "sent SIGTERM to " : "sent SIGKILL to ") + (unleased ? "unleased " : "intruder ") +
              who + " on " + where);
          record(sig == SIGTERM ? "term" : "kill");
        }
        break;
      }
      case monitor::IntruderStep::kGone:
        Log(what + " gone: " + who + " from " + where);
        record("gone");
        break;
    }
  }
}

// The slice watch's steps (monitor/slice_watch.h): a log line for each, and under
// `[share] over_limit = "kill"` the signals to the holder's processes on that GPU, each only
// while /proc still says it is the holder's (a pid reused meanwhile is left alone).
//
// Every step is also a history row (`history --slices`), and the first signal to a job's
// processes becomes the running job's reason, which its supervisor keeps in the job's final
// reason (`show`: "over its memory slice ...; killed by signal 15 (TERM)").
void Collector::WatchSlices(const model::MachineSnapshot& snap, const std::vector<model::Lease>& leases, int64_t now) {
  for (const auto& step : slices_.Update(snap, leases, now)) {
    std::optional<int64_t> job_id;
    for (const auto& job : held_) {
      if (job.lease_id && *job.lease_id == step.lease_id) job_id = job.id;
    }
    if (history_) {
      static constexpr const char* kEvent[] = {"over", "term", "kill", "within"};
      model::SliceEvent e{now, kEvent[step.kind], step.gpu_uuid, step.gpu_index, step.user, step.lease_id, job_id,
                          step.used_bytes, step.declared_bytes, {}};
      if (step.kind == monitor::SliceStep::kTerm || step.kind == monitor::SliceStep::kKill) e.pids = step.pids;
      if (auto r = history_->RecordSlice(e); !r) Log("history: " + r.error().message);
    }
    if (step.kind == monitor::SliceStep::kTerm && job_id) {
      store::JobStore::Update why;
      why.reason = "over its GPU memory slice: its processes on GPU " + std::to_string(step.gpu_index) + " used " +
                   policy::FormatByteSize(step.used_bytes) + " of the " + policy::FormatByteSize(step.declared_bytes) +
                   " declared, and the machine's [share] over_limit is \"kill\"";
      if (auto r = jobs_.Transition(*job_id, model::JobState::kRunning, model::JobState::kRunning, why); !r) {
        Log("job " + std::to_string(*job_id) + ": could not record why it is ended: " + r.error().message);
      }
    }
    const std::string what = step.user + "'s processes on GPU " + std::to_string(step.gpu_index) + " use " +
                             std::to_string(step.used_bytes >> 20) + " MiB, their slices declare " +
                             std::to_string(step.declared_bytes >> 20) + " MiB (lease " + std::to_string(step.lease_id) + ")";
    switch (step.kind) {
      case monitor::SliceStep::kOver:
        Log("slice over its memory: " + what);
        break;
      case monitor::SliceStep::kTerm:
      case monitor::SliceStep::kKill: {
        const int sig = step.kind == monitor::SliceStep::kTerm ? SIGTERM : SIGKILL;
        devices::ProcfsInspector procfs;
        for (uint32_t pid : step.pids) {
          const auto details = procfs.Inspect(pid);
          if (!details || details->uid != step.uid) continue;
          if (kill(static_cast<pid_t>(pid), sig) == 0) {
            Log(std::string(sig == SIGTERM ? "sent SIGTERM to " : "sent SIGKILL to ") + "process " + std::to_string(pid) +
                " over its slice: " + what);
          }
        }
        break;
      }
      case monitor::SliceStep::kWithin:
        Log("slice within its memory again: lease " + std::to_string(step.lease_id) + " of " + step.user + " on GPU " +
            std::to_string(step.gpu_index));
        break;
    }
  }
}

bool Collector::GatherXids(int64_t now) {
  // Xids: NVML events from the event thread, then new kernel log lines.
  std::vector<model::XidEvent> events;
  std::vector<std::string> sources = xid_sources_, notes = xid_notes_;
  {
    std::lock_guard<std::mutex> lock(mu_);
    events.swap(pending_);
    if (options_.xid_source_factory) {
      if (events_ok_) sources.insert(sources.begin(), "nvml events");
      notes.insert(notes.end(), event_notes_.begin(), event_notes_.end());
    }
  }
  DrainWake();
  if (kernel_log_) {
    if (auto lines = kernel_log_->Read(now)) {
      for (auto& ev : *lines) events.push_back(std::move(ev));
    } else {
      notes.push_back(lines.error().message);
    }
  }
  const bool any = !events.empty();
  for (auto& ev : events) {
    Log("Xid " + std::to_string(ev.xid) + " on " + (ev.gpu_uuid.empty() ? ev.pci_bus_id.value_or("?") : ev.gpu_uuid) +
        " (" + ev.source + ")");
    health_.AddXid(std::move(ev));
  }
  health_.SetXidSources(sources, notes);
  return any;
}

bool Collector::Tick(int64_t now, const model::MachineSnapshot* sample, const std::string& error) {
  bool changed = false;
  next_due_ms_ = now + options_.sample_interval_ms;

  std::optional<model::MachineSnapshot> snap;
  if (sample) {
    gpu_count_ = static_cast<int>(sample->gpus.size());
    // A lost GPU often cannot even say its UUID: name it by what it said last, so the
    // health watch can drain it and later lift the drain. (On a copy: clients of the
    // snapshot op see what the driver said.)
    bool any_nameless = false;
    for (const auto& dev : sample->gpus) {
      if (dev.uuid) uuid_by_index_[dev.index] = *dev.uuid;
      else any_nameless = true;
    }
    if (any_nameless) {
      snap = *sample;
      for (auto& dev : snap->gpus) {
        if (auto known = uuid_by_index_.find(dev.index); !dev.uuid && known != uuid_by_index_.end()) dev.uuid = known->second;
      }
    }
  }
  const model::MachineSnapshot* current = snap ? &*snap : sample;

  // Health: drain on fatal findings, lift after a passing recheck.
  auto health_changes = health_.Update(current, current ? "" : error, now);
  const auto slurm = health_changes.drain.empty() ? std::nullopt : SlurmNode();
  for (const auto& [uuid, reason] : health_changes.drain) {
    if (slurm) {
      Log("not draining " + uuid + " (" + reason + "): Slurm node (" + *slurm +
          "); Slurm cannot drain one GPU, its HealthCheckProgram drains the node");
      continue;
    }
    if (auto done = jobs_.Drain(uuid, reason, 0, now); done) {
      Log("drained " + uuid + ": " + reason);
      changed = true;
    } else {
      Log("could not drain " + uuid + ": " + done.error().message);
    }
  }
  if (!health_changes.lift.empty()) {
    auto drained = jobs_.Drained();
    for (const auto& uuid : health_changes.lift) {
      // Only the watch's own drains; an admin's drain stays until an admin lifts it.
      if (!drained || !drained->count(uuid) || drained->at(uuid).rfind(kHealthDrainPrefix, 0) != 0) continue;
      if (jobs_.Undrain(uuid)) {
        Log("recheck passed, drain lifted: " + uuid);
        changed = true;
      }
    }
  }

  // Leases and jobs: idle watch, then alerts over the annotated copies.
  std::vector<model::Lease> leases;
  if (auto live = leases_.List(store::ProcLivenessCheck())) leases = std::move(*live);
  // Summaries (the environments stay on disk), copied only when they changed: a sweep's
  // 10,000 queued jobs are not copied every sample.
  if (auto active = jobs_.ActiveSummaries(); active && jobs_.summaries_generation() != jobs_generation_) {
    jobs_generation_ = jobs_.summaries_generation();
    jobs_copy_ = **active;
    held_.clear();
    held_at_.clear();
    for (size_t i = 0; i < jobs_copy_.size(); ++i) {
      if (!jobs_copy_[i].lease_id) continue;
      held_.push_back(jobs_copy_[i]);
      held_at_.push_back(i);
    }
  }
  std::vector<model::Job>& jobs = jobs_copy_;  // every active job: alerts and metrics
  if (current && options_.idle.enabled) {
    for (auto& action : idle_.Update(*current, leases, held_, now)) {
      if (action.kind == monitor::IdleAction::kRelease) {
        if (const auto slurm_node = SlurmNode()) {
          Log("not releasing idle lease " + std::to_string(action.lease.id) + " of " + action.lease.user +
              ": Slurm node (" + *slurm_node + "); Slurm ends jobs, not gpuman");
          continue;  // nothing released: no hook
        }
        if (auto released = leases_.Release(action.lease.id); released) {
          Log("released idle lease " + std::to_string(action.lease.id) + " of " + action.lease.user);
          changed = true;
        } else {
          Log("could not release idle lease " + std::to_string(action.lease.id) + ": " + released.error().message);
        }
      }
      RunHook(options_.idle.notify_command, action.payload, "idle hook");
    }
  }
  idle_.Annotate(leases);
  idle_.Annotate(held_);
  for (size_t i = 0; i < held_.size(); ++i) jobs[held_at_[i]].idle_since_unix_ms = held_[i].idle_since_unix_ms;
  if (current) WatchIntruders(*current, leases, now);
  if (current) WatchSlices(*current, leases, now);
  const model::HealthReport report = health_.Report();
  // Intruders are findings for the alert rules only (`code = "intruder"`), not for health.
  std::vector<model::Finding> alerting = report.findings;
  for (auto& f : intruders_.Findings()) alerting.push_back(std::move(f));
  for (auto& f : slices_.Findings()) alerting.push_back(std::move(f));
  for (const auto& ev : alerts_.Evaluate(current, alerting, leases, jobs, now)) {
    RunHook(ev.command, ev.payload, "alert '" + ev.rule + "'");
  }

  if (history_ && current) {
    std::vector<model::GpuSample> samples = Samples(*current, leases, held_, now);
    if (slurm_jobs_) {  // the Slurm job holding each GPU now, from the prolog's records
      std::vector<std::string> problems;
      const auto& records = slurm_jobs_->Get(now, &problems);
      for (const auto& p : problems) Log("slurm job records: " + p);
      for (auto& s : samples) {
        if (const auto* rec = slurm::JobHoldingGpu(records, s.gpu_uuid, now)) {
          s.slurm_job_id = rec->job_id;
          s.slurm_user = rec->user;
        }
      }
    }
    if (auto recorded = history_->Record(samples); !recorded) {
      if (!history_failed_) Log("history: " + recorded.error().message);
      history_failed_ = true;
    } else {
      history_failed_ = false;
    }
  }

  if (metrics_) {
    metrics::MetricsInput in;
    in.snapshot = current;
    in.findings = report.findings;
    if (auto drained = jobs_.Drained()) {
      for (const auto& [uuid, reason] : *drained) in.drained_gpus.push_back(uuid);
    }
    in.xid_totals = health_.xid_totals();
    in.leases = leases;
    in.jobs = jobs;
    in.job_wait_seconds = &job_waits_;
    in.now_unix_ms = now;
    in.hostname = options_.hostname;
    metrics_->SetText(metrics::FormatPrometheus(in));
  }

  for (const auto& outcome : hooks_.Reap()) {
    if (!outcome.ok) Log(outcome.message);
  }
  return changed;
}

std::optional<std::string> Collector::SlurmNode() const {
  return options_.slurm_node ? options_.slurm_node() : std::nullopt;
}

nlohmann::json Collector::HealthJson() const {
  auto j = protocol::HealthReportToJson(health_.Report());
  j["gpu_count"] = gpu_count_;
  return j;
}

void Collector::OnJobStarted(const model::Job& job, int64_t started_unix_ms) {
  double wait_s = std::max<int64_t>(0, started_unix_ms - job.submitted_unix_ms) / 1000.0;
  job_waits_.Observe(wait_s);
  if (history_) {
    model::JobWait w;
    w.job_id = job.id;
    w.user = job.user;
    w.submitted_unix_ms = job.submitted_unix_ms;
    w.started_unix_ms = started_unix_ms;
    w.gpus = static_cast<int>(job.gpu_uuids.empty() ? job.request.count : job.gpu_uuids.size());
    if (auto r = history_->RecordJobWait(w); !r) Log("history: " + r.error().message);
  }
}

std::optional<std::string> Collector::metrics_address() const {
  if (!metrics_) return std::nullopt;
  return metrics_->address();
}

std::optional<int> Collector::metrics_port() const {
  if (!metrics_) return std::nullopt;
  return metrics_->port();
}

}  // namespace gpuman::daemon
