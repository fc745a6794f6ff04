// Prometheus exposition of the daemon's view.
//
// Conventions (https://prometheus.io/docs/practices/naming/): base units (bytes, seconds,
// watts, hertz, ratios 0..1), `_total` only on counters, HELP and TYPE once per family and
// all samples of a family together. What we do beyond the format, from what went wrong for
// dcgm-exporter (shared/reference/peers.md):
// - Unknown is absent, never a sentinel: a std::nullopt produces no sample.
// - Xid counts are real counters since daemon start (Prometheus handles resets), so
//   `increase(gpuman_gpu_xid_errors_total[5m])` is a window and nothing "never resets".
// - Queue job and lease ids are labels `job_id` and `lease_id`: `job` and `instance` belong
//   to Prometheus, which would rename ours to `exported_job`.
// - One scrape must not fail on one odd value: label values are escaped and turned into
//   valid UTF-8 (Prometheus rejects a whole scrape over one invalid byte), and a duplicate
//   series is dropped (Prometheus rejects a whole scrape over one duplicate).
#include "metrics/prometheus.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <memory>
#include <set>
#include <string_view>

#include "model/health_judge.h"
#include "model/intruders.h"

namespace gpuman::metrics {
namespace {

using Labels = std::vector<std::pair<std::string, std::string>>;

std::string EscapeHelp(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

// One metric family: HELP, TYPE, then its samples. Samples with a label set already seen
// are dropped (the first wins).
class Family {
 public:
  Family(std::string name, std::string_view help, std::string_view type)
      : name_(std::move(name)) {
    header_ = "# HELP " + name_ + " " + EscapeHelp(help) + "\n# TYPE " + name_ + " " +
              std::string(type) + "\n";
  }

  void Add(const Labels& labels, const std::string& value, std::string_view suffix = "") {
    std::string series = name_ + std::string(suffix);
    if (!labels.empty()) {
      series += '{';
      for (size_t i = 0; i < labels.size(); ++i) {
        if (i) series += ',';
        series += labels[i].first + "=\"" + EscapeLabelValue(labels[i].second) + "\"";
      }
      series += '}';
    }
    if (!seen_.insert(series).second) return;
    body_ += series + " " + value + "\n";
  }
  void Add(const Labels& labels, double v) { Add(labels, FormatValue(v)); }
  void Add(const Labels& labels, int64_t v) { Add(labels, FormatValue(v)); }
  void Add(const Labels& labels, int v) { Add(labels, FormatValue(static_cast<int64_t>(v))); }
  void Add(const Labels& labels, bool v) { Add(labels, FormatValue(static_cast<int64_t>(v))); }

  template <typename T>
  void AddIf(const Labels& labels, const std::optional<T>& v) {
    if (v) Add(labels, *v);
  }

  void AppendTo(std::string& out) const {
    if (body_.empty()) return;
    out += header_;
    out += body_;
  }

 private:
  std::string name_;
  std::string header_;
  std::string body_;
  std::set<std::string> seen_;
};

// Families in output order.
class Exposition {
 public:
  Family& Gauge(const std::string& name, std::string_view help) { return Make(name, help, "gauge"); }
  Family& Counter(const std::string& name, std::string_view help) { return Make(name, help, "counter"); }
  Family& Histogram(const std::string& name, std::string_view help) {
    return Make(name, help, "histogram");
  }
  std::string Text() const {
    std::string out;
    for (const auto& f : families_) f->AppendTo(out);
    return out;
  }

 private:
  Family& Make(const std::string& name, std::string_view help, std::string_view type) {
    families_.push_back(std::make_unique<Family>(name, help, type));
    return *families_.back();
  }
  std::vector<std::unique_ptr<Family>> families_;
};

Labels With(Labels labels, std::initializer_list<std::pair<std::string, std::string>> more) {
  labels.insert(labels.end(), more.begin(), more.end());
  return labels;
}

double Seconds(int64_t ms) { return static_cast<double>(ms) / 1000.0; }
double Ratio(int percent) { return percent / 100.0; }

// Labels of a GPU: `gpu` (NVML index), `uuid`, `name` (model). Looks the GPU up in the
// snapshot by UUID (or by index when the UUID is unknown) so every family names a GPU the
// same way; a GPU the snapshot does not have keeps what is known, "" for the rest.
class GpuLabeler {
 public:
  explicit GpuLabeler(const model::MachineSnapshot* snapshot) : snapshot_(snapshot) {}

  static Labels Of(const model::DeviceSnapshot& d) {
    return {{"gpu", std::to_string(d.index)}, {"uuid", d.uuid.value_or("")}, {"name", d.name.value_or("")}};
  }
  Labels For(const std::string& uuid, std::optional<int> index = std::nullopt) const {
    if (snapshot_) {
      for (const auto& d : snapshot_->gpus) {
        if (!uuid.empty() ? d.uuid == uuid : (index && d.index == *index)) return Of(d);
      }
    }
    return {{"gpu", index ? std::to_string(*index) : ""}, {"uuid", uuid}, {"name", ""}};
  }

 private:
  const model::MachineSnapshot* snapshot_;
};

// Who holds a GPU: a lease, and the queue job behind it if any.
struct Holder {
  uint32_t uid = 0;
  std::string user;
  std::optional<int64_t> lease_id;
  std::optional<int64_t> job_id;
  std::vector<int32_t> pids;  // the lease's own processes
};

std::map<std::string, std::vector<Holder>> HoldersByGpu(const MetricsInput& in) {
  std::map<std::string, std::vector<Holder>> by_gpu;
  std::set<int64_t> lease_ids;
  for (const auto& l : in.leases) {
    lease_ids.insert(l.id);
    std::optional<int64_t> job;
    for (const auto& j : in.jobs) {
      if (j.lease_id == l.id) job = j.id;
    }
    Holder h{l.uid, l.user, l.id, job, {}};
    for (const auto& p : l.processes) h.pids.push_back(p.pid);
    for (const auto& g : l.gpu_uuids) by_gpu[g].push_back(h);
  }
  // A starting job may hold GPUs before its lease shows up in the lease list.
  for (const auto& j : in.jobs) {
    if (j.state != model::JobState::kStarting && j.state != model::JobState::kRunning) continue;
    if (j.lease_id && lease_ids.count(*j.lease_id)) continue;
    for (const auto& g : j.gpu_uuids) by_gpu[g].push_back(Holder{j.uid, j.user, j.lease_id, j.id, {}});
  }
  return by_gpu;
}

// The holder a process belongs to: the lease that lists its pid, else the only holder of
// that GPU with the process's owner. A process of someone else (squatting on a leased GPU)
// or of an unknown owner is attributed to nobody.
const Holder* HolderOf(const model::GpuProcess& p, const std::vector<Holder>& holders) {
  for (const auto& h : holders) {
    if (std::find(h.pids.begin(), h.pids.end(), static_cast<int32_t>(p.pid)) != h.pids.end()) return &h;
  }
  const Holder* match = nullptr;
  for (const auto& h : holders) {
    bool same = p.uid ? *p.uid == h.uid : (p.user && *p.user == h.user);
    if (!same) continue;
    if (match && (match->lease_id != h.lease_id || match->job_id != h.job_id)) return nullptr;  // ambiguous
    match = &h;
  }
  return match;
}

std::string IdText(const std::optional<int64_t>& id) { return id ? std::to_string(*id) : ""; }

void GpuFamilies(const MetricsInput& in, Exposition& x) {
  const model::MachineSnapshot* snap = in.snapshot;
  GpuLabeler labeler(snap);

  auto& info = x.Gauge("gpuman_gpu_info", "GPU identity; always 1.");
  auto& util = x.Gauge("gpuman_gpu_utilization_ratio",
                       "Fraction of the last sample period a kernel ran on the GPU (0-1).");
  auto& mem_bw = x.Gauge("gpuman_gpu_memory_bandwidth_utilization_ratio",
                         "Fraction of the last sample period device memory was read or written (0-1).");
  auto& mem_total = x.Gauge("gpuman_gpu_memory_total_bytes", "Total device memory.");
  auto& mem_used = x.Gauge("gpuman_gpu_memory_used_bytes", "Device memory in use by processes and the driver, without reserved memory.");
  auto& mem_free = x.Gauge("gpuman_gpu_memory_free_bytes", "Device memory free for allocation.");
  auto& mem_reserved = x.Gauge("gpuman_gpu_memory_reserved_bytes", "Device memory reserved by the driver and firmware.");
  auto& temp = x.Gauge("gpuman_gpu_temperature_celsius", "GPU core temperature.");
  auto& power = x.Gauge("gpuman_gpu_power_watts", "Power draw.");
  auto& power_limit = x.Gauge("gpuman_gpu_power_limit_watts", "Enforced power limit.");
  auto& fan = x.Gauge("gpuman_gpu_fan_speed_ratio", "Fan speed as a fraction of its maximum (0-1).");
  auto& sm_clock = x.Gauge("gpuman_gpu_sm_clock_hertz", "Current SM clock.");
  auto& mem_clock = x.Gauge("gpuman_gpu_memory_clock_hertz", "Current memory clock.");
  auto& pstate = x.Gauge("gpuman_gpu_performance_state", "Performance state: 0 (P0, fastest) to 15.");
  auto& clock_reason = x.Gauge("gpuman_gpu_clock_event_reason",
                               "1 when this reason is currently holding clocks down (gpu_idle is normal).");
  auto& healthy = x.Gauge("gpuman_gpu_healthy", "1 when the driver answers for the GPU and reports no problem.");
  auto& drained = x.Gauge("gpuman_gpu_drained", "1 when the daemon drained the GPU (no new work) after a fatal finding.");
  auto& ecc = x.Counter("gpuman_gpu_ecc_errors_total",
                        "ECC errors; counter=volatile resets when the driver loads, counter=aggregate persists across reboots.");
  auto& retired = x.Gauge("gpuman_gpu_retired_pages_pending", "1 when retired pages wait for a GPU reset.");
  auto& remap_pending = x.Gauge("gpuman_gpu_remapped_rows_pending", "1 when remapped rows wait for a GPU reset.");
  auto& remap_failure = x.Gauge("gpuman_gpu_remapped_rows_failure", "1 when a row remap has failed.");
  auto& findings = x.Gauge("gpuman_gpu_health_findings", "Current health findings of the GPU, by severity.");
  auto& xid = x.Counter("gpuman_gpu_xid_errors_total", "Xid errors seen since the daemon started.");
  auto& xid_last = x.Gauge("gpuman_gpu_xid_last_seen_timestamp_seconds",
                           "When an Xid still in the health window was last seen (Unix time).");
  auto& proc_mem = x.Gauge("gpuman_process_gpu_memory_bytes", "GPU memory used by a process.");
  auto& proc_sm = x.Gauge("gpuman_process_sm_utilization_ratio",
                          "Fraction of the last sample period the process ran on the GPU's SMs (0-1).");

  // MIG devices (docs/share.md, "MIG"): labelled with their parent GPU (gpu, uuid) and their
  // own mig_uuid and profile; no MIG device, no series (the families are left out).
  auto& mig_info = x.Gauge("gpuman_mig_device_info", "A MIG device of a GPU in MIG mode; always 1.");
  auto& mig_total = x.Gauge("gpuman_mig_device_memory_total_bytes", "Memory of the MIG device's GPU instance.");
  auto& mig_used = x.Gauge("gpuman_mig_device_memory_used_bytes", "Memory in use on the MIG device.");
  auto& mig_leased = x.Gauge("gpuman_mig_device_leased", "1 when a lease or job holds the MIG device.");

  static const std::vector<std::string> kReasons = model::ClockEventReasonNames(~uint64_t{0});
  std::set<std::string> drained_set(in.drained_gpus.begin(), in.drained_gpus.end());
  auto holders = HoldersByGpu(in);

  // Findings per GPU, both severities (0 when none) for every GPU, so `> 0` alerts work.
  std::map<Labels, std::map<model::Severity, int64_t>> per_gpu;
  if (snap) {
    for (const auto& d : snap->gpus) {
      auto& counts = per_gpu[GpuLabeler::Of(d)];
      counts[model::Severity::kWarning];
      counts[model::Severity::kFatal];
    }
  }
  for (const auto& f : in.findings) {
    if (f.gpu_uuid.empty() && !f.gpu_index) continue;  // driver-wide
    auto& counts = per_gpu[labeler.For(f.gpu_uuid, f.gpu_index)];
    counts[model::Severity::kWarning];
    counts[model::Severity::kFatal];
    counts[f.severity]++;
  }

  if (snap) {
    for (const auto& d : snap->gpus) {
      Labels g = GpuLabeler::Of(d);
      info.Add(With(g, {{"pci_bus_id", d.pci_bus_id.value_or("")},
                        {"compute_capability", d.compute_capability.value_or("")}}),
               int64_t{1});
      if (d.gpu_utilization_percent) util.Add(g, Ratio(*d.gpu_utilization_percent));
      if (d.memory_utilization_percent) mem_bw.Add(g, Ratio(*d.memory_utilization_percent));
      mem_total.AddIf(g, d.memory_total_bytes);
      mem_used.AddIf(g, d.memory_used_bytes);
      mem_free.AddIf(g, d.memory_free_bytes);
      mem_reserved.AddIf(g, d.memory_reserved_bytes);
      temp.AddIf(g, d.temperature_c);
      power.AddIf(g, d.power_usage_w);
      power_limit.AddIf(g, d.power_limit_w);
      if (d.fan_percent) fan.Add(g, Ratio(*d.fan_percent));
      if (d.clocks.sm_mhz) sm_clock.Add(g, *d.clocks.sm_mhz * int64_t{1000000});
      if (d.clocks.memory_mhz) mem_clock.Add(g, *d.clocks.memory_mhz * int64_t{1000000});
      pstate.AddIf(g, d.performance_state);
      if (d.clock_event_reasons) {
        auto set = model::ClockEventReasonNames(*d.clock_event_reasons);
        for (const auto& r : kReasons) {
          clock_reason.Add(With(g, {{"reason", r}}), std::find(set.begin(), set.end(), r) != set.end());
        }
      }
      healthy.Add(g, model::JudgeGpuHealth(d).is_healthy);
      drained.Add(g, d.uuid && drained_set.count(*d.uuid) > 0);
      ecc.AddIf(With(g, {{"type", "corrected"}, {"counter", "volatile"}}), d.ecc_volatile_corrected);
      ecc.AddIf(With(g, {{"type", "uncorrected"}, {"counter", "volatile"}}), d.ecc_volatile_uncorrected);
      ecc.AddIf(With(g, {{"type", "corrected"}, {"counter", "aggregate"}}), d.ecc_aggregate_corrected);
      ecc.AddIf(With(g, {{"type", "uncorrected"}, {"counter", "aggregate"}}), d.ecc_aggregate_uncorrected);
      retired.AddIf(g, d.retired_pages_pending);
      remap_pending.AddIf(g, d.remapped_rows_pending);
      remap_failure.AddIf(g, d.remapped_rows_failure);

      for (const auto& m : d.mig_devices) {
        Labels ml = With(Labels{{"gpu", std::to_string(d.index)}, {"uuid", d.uuid.value_or("")}},
                         {{"mig_uuid", m.uuid.value_or("")}, {"profile", m.profile.value_or("")}});
        auto id = [](const std::optional<uint32_t>& v) { return v ? std::to_string(*v) : std::string(); };
        mig_info.Add(With(ml, {{"gpu_instance_id", id(m.gpu_instance_id)}, {"compute_instance_id", id(m.compute_instance_id)}}),
                     int64_t{1});
        mig_total.AddIf(ml, m.memory_total_bytes);
        mig_used.AddIf(ml, m.memory_used_bytes);
        mig_leased.Add(ml, m.uuid && holders.count(*m.uuid) > 0);
      }

      // Per process: one series per (GPU, pid); MIG slices of one pid are summed.
      std::map<uint32_t, std::pair<Labels, int64_t>> mem_by_pid;
      for (const auto& p : d.processes) {
        const Holder* h = d.uuid && holders.count(*d.uuid) ? HolderOf(p, holders[*d.uuid]) : nullptr;
        std::string user = p.user ? *p.user : p.uid ? std::to_string(*p.uid) : "";
        Labels pl = {{"gpu", std::to_string(d.index)}, {"uuid", d.uuid.value_or("")},
                     {"pid", std::to_string(p.pid)},   {"user", user},
                     {"job_id", h ? IdText(h->job_id) : ""}, {"lease_id", h ? IdText(h->lease_id) : ""}};
        if (p.used_memory_bytes) {
          auto [it, fresh] = mem_by_pid.try_emplace(p.pid, pl, 0);
          it->second.second += *p.used_memory_bytes;
        }
        if (p.sm_util_percent) proc_sm.Add(pl, Ratio(*p.sm_util_percent));
      }
      for (const auto& [pid, entry] : mem_by_pid) proc_mem.Add(entry.first, entry.second);
    }
  }
  // Drained GPUs the snapshot does not show (lost, or NVML down) are still reported.
  for (const auto& uuid : in.drained_gpus) drained.Add(labeler.For(uuid), true);

  for (const auto& [labels, counts] : per_gpu) {
    for (const auto& [severity, n] : counts) {
      findings.Add(With(labels, {{"severity", model::SeverityName(severity)}}), n);
    }
  }
  for (const auto& [key, n] : in.xid_totals) {
    xid.Add(With(labeler.For(key.first), {{"xid", std::to_string(key.second)}}), n);
  }
  std::map<std::pair<std::string, int>, int64_t> last_seen;
  for (const auto& f : in.findings) {
    if (f.code != "xid" || !f.xid || !f.last_seen_unix_ms) continue;
    auto& t = last_seen[{f.gpu_uuid, *f.xid}];
    t = std::max(t, *f.last_seen_unix_ms);
  }
  for (const auto& [key, t] : last_seen) {
    xid_last.Add(With(labeler.For(key.first), {{"xid", std::to_string(key.second)}}), Seconds(t));
  }
}

void QueueFamilies(const MetricsInput& in, Exposition& x) {
  auto& leases = x.Gauge("gpuman_leases", "Live leases.");
  auto& held = x.Gauge("gpuman_gpus_held", "GPUs held by a user's leases and jobs.");
  auto& lease_age = x.Gauge("gpuman_lease_age_seconds", "How long a live lease has been held.");
  auto& lease_idle = x.Gauge("gpuman_lease_idle_seconds",
                             "How long every GPU of a lease has stayed below the idle threshold.");
  auto& jobs = x.Gauge("gpuman_jobs", "Jobs in the queue by state.");
  auto& job_idle = x.Gauge("gpuman_job_idle_seconds", "How long a running job's GPUs have stayed idle.");
  auto& oldest = x.Gauge("gpuman_queue_oldest_wait_seconds",
                         "How long the oldest queued job has waited; 0 when none waits.");
  auto& requested = x.Gauge("gpuman_queue_requested_gpus", "GPUs asked for by queued jobs.");
  auto& wait = x.Histogram("gpuman_job_wait_seconds",
                           "Time from submit to start of the jobs started since the daemon started.");
  auto& lease_slice = x.Gauge("gpuman_lease_gpu_memory_bytes",
                              "A memory slice lease's declared GPU memory, on each of its GPUs.");
  auto& declared = x.Gauge("gpuman_gpu_declared_memory_bytes",
                           "GPU memory the memory slices of a GPU declare together (0: not sliced).");
  auto& over_used = x.Gauge("gpuman_slice_over_used_bytes",
                            "GPU memory a slice holder uses on a GPU while over what their slices declare.");
  auto& over_declared = x.Gauge("gpuman_slice_over_declared_bytes",
                                "What the slices of a holder over their declaration declare on that GPU.");

  auto since = [&](int64_t t_ms) { return Seconds(std::max<int64_t>(0, in.now_unix_ms - t_ms)); };

  leases.Add({}, static_cast<int64_t>(in.leases.size()));
  std::map<std::string, std::set<std::string>> gpus_by_user;
  std::map<int64_t, int64_t> job_of_lease;
  for (const auto& j : in.jobs) {
    if (j.lease_id) job_of_lease[*j.lease_id] = j.id;
  }
  for (const auto& l : in.leases) {
    for (const auto& g : l.gpu_uuids) gpus_by_user[l.user].insert(g);
    std::optional<int64_t> job;
    if (auto it = job_of_lease.find(l.id); it != job_of_lease.end()) job = it->second;
    Labels ll = {{"lease_id", std::to_string(l.id)}, {"user", l.user}, {"kind", l.kind}, {"job_id", IdText(job)}};
    lease_age.Add(ll, since(l.created_unix_ms));
    if (l.idle_since_unix_ms) lease_idle.Add(ll, since(*l.idle_since_unix_ms));
    if (l.gpu_memory_bytes) lease_slice.Add(ll, *l.gpu_memory_bytes);
  }
  // Memory slices per GPU (docs/share.md), and the holders over theirs: the same rule as
  // status and the daemon's slice watch (model::SliceOverruns).
  if (in.snapshot) {
    for (const auto& d : in.snapshot->gpus) {
      if (!d.uuid) continue;
      int64_t sum = 0;
      for (const auto& l : in.leases) {
        if (l.gpu_memory_bytes && std::find(l.gpu_uuids.begin(), l.gpu_uuids.end(), *d.uuid) != l.gpu_uuids.end()) {
          sum += *l.gpu_memory_bytes;
        }
      }
      const Labels g = GpuLabeler::Of(d);
      declared.Add(g, sum);
      for (const auto& o : model::SliceOverruns(d, in.leases)) {
        std::string user;
        for (const auto& l : in.leases) {
          if (l.id == o.lease_id) user = l.user;
        }
        const Labels h = With(g, {{"user", user}, {"lease_id", std::to_string(o.lease_id)}});
        over_used.Add(h, o.used_bytes);
        over_declared.Add(h, o.declared_bytes);
      }
    }
  }

  std::map<std::string, int64_t> by_state;
  for (auto s : {model::JobState::kQueued, model::JobState::kHeld, model::JobState::kStarting,
                 model::JobState::kRunning}) {
    by_state[model::JobStateName(s)] = 0;
  }
  std::optional<int64_t> oldest_submit;
  int64_t requested_gpus = 0;
  for (const auto& j : in.jobs) {
    by_state[model::JobStateName(j.state)]++;
    if (j.state == model::JobState::kStarting || j.state == model::JobState::kRunning) {
      for (const auto& g : j.gpu_uuids) gpus_by_user[j.user].insert(g);
    }
    if (j.state == model::JobState::kQueued) {
      oldest_submit = std::min(oldest_submit.value_or(j.submitted_unix_ms), j.submitted_unix_ms);
      requested_gpus += j.request.count;
    }
    if (j.idle_since_unix_ms) {
      job_idle.Add({{"job_id", std::to_string(j.id)}, {"user", j.user}}, since(*j.idle_since_unix_ms));
    }
  }
  for (const auto& [user, gpus] : gpus_by_user) held.Add({{"user", user}}, static_cast<int64_t>(gpus.size()));
  for (const auto& [state, n] : by_state) jobs.Add({{"state", state}}, n);
  oldest.Add({}, oldest_submit ? since(*oldest_submit) : 0.0);
  requested.Add({}, requested_gpus);

  if (const Histogram* h = in.job_wait_seconds) {
    auto cumulative = h->cumulative_counts();
    for (size_t i = 0; i < h->upper_bounds().size(); ++i) {
      wait.Add({{"le", FormatValue(h->upper_bounds()[i])}}, FormatValue(cumulative[i]), "_bucket");
    }
    wait.Add({{"le", "+Inf"}}, FormatValue(h->count()), "_bucket");
    wait.Add({}, FormatValue(h->sum()), "_sum");
    wait.Add({}, FormatValue(h->count()), "_count");
  }
}

// Appends U+FFFD for each byte that does not start a valid UTF-8 sequence (RFC 3629: no
// overlong forms, no surrogates, nothing above U+10FFFF).
std::string ValidUtf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    auto b = static_cast<unsigned char>(s[i]);
    size_t len = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
    bool ok = len > 0 && i + len <= s.size();
    uint32_t cp = len == 1 ? b : len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
    for (size_t k = 1; ok && k < len; ++k) {
      auto c = static_cast<unsigned char>(s[i + k]);
      ok = (c & 0xC0) == 0x80;
      cp = (cp << 6) | (c & 0x3F);
    }
    if (ok) {
      static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
      ok = cp >= kMin[len] && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
    }
    if (ok) {
      out.append(s.substr(i, len));
      i += len;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds) {
  std::erase_if(upper_bounds, [](double b) { return !std::isfinite(b); });
  std::sort(upper_bounds.begin(), upper_bounds.end());
  upper_bounds.erase(std::unique(upper_bounds.begin(), upper_bounds.end()), upper_bounds.end());
  upper_bounds_ = std::move(upper_bounds);
  bucket_counts_.assign(upper_bounds_.size() + 1, 0);  // the last one is +Inf
}

std::vector<double> Histogram::DefaultWaitBuckets() {
  return {1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 28800, 86400};
}

void Histogram::Observe(double v) {
  // The first bucket whose bound is >= v ("le" is inclusive); NaN lands in +Inf only.
  size_t i = std::lower_bound(upper_bounds_.begin(), upper_bounds_.end(), v) - upper_bounds_.begin();
  if (std::isnan(v)) i = upper_bounds_.size();
  bucket_counts_[i]++;
  count_++;
  sum_ += v;
}

std::vector<int64_t> Histogram::cumulative_counts() const {
  std::vector<int64_t> out(upper_bounds_.size());
  int64_t running = 0;
  for (size_t i = 0; i < upper_bounds_.size(); ++i) out[i] = running += bucket_counts_[i];
  return out;
}

std::string EscapeLabelValue(const std::string& value) {
  std::string out;
  for (char c : ValidUtf8(value)) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc() ? std::string(buf, end) : "NaN";
}

std::string FormatValue(int64_t v) { return std::to_string(v); }

std::string FormatPrometheus(const MetricsInput& in) {
  Exposition x;
  auto& up = x.Gauge("gpuman_up", "1 while the gpuman daemon serves metrics.");
  auto& daemon_info = x.Gauge("gpuman_daemon_info", "The daemon's host; always 1.");
  auto& nvml_up = x.Gauge("gpuman_nvml_up", "1 when the last read of the GPUs through NVML succeeded.");
  auto& driver = x.Gauge("gpuman_driver_info", "Driver versions; always 1.");
  auto& taken = x.Gauge("gpuman_snapshot_timestamp_seconds", "When the GPUs were last read (Unix time).");
  auto& gpus = x.Gauge("gpuman_gpus", "GPUs the driver reports, lost ones included.");
  auto& findings = x.Gauge("gpuman_health_findings", "Current health findings on the machine, by severity.");

  up.Add({}, int64_t{1});
  daemon_info.Add({{"hostname", in.hostname}}, int64_t{1});
  nvml_up.Add({}, in.snapshot != nullptr);
  if (const model::MachineSnapshot* s = in.snapshot) {
    driver.Add({{"driver_version", s->system.driver_version.value_or("")},
                {"nvml_version", s->system.nvml_version.value_or("")},
                {"cuda_driver_version", s->system.cuda_driver_version.value_or("")}},
               int64_t{1});
    taken.Add({}, Seconds(s->taken_at_unix_ms));
    gpus.Add({}, static_cast<int64_t>(s->gpus.size()));
  }
  int64_t by_severity[2] = {0, 0};
  for (const auto& f : in.findings) by_severity[f.severity == model::Severity::kFatal]++;
  findings.Add({{"severity", model::SeverityName(model::Severity::kWarning)}}, by_severity[0]);
  findings.Add({{"severity", model::SeverityName(model::Severity::kFatal)}}, by_severity[1]);

  GpuFamilies(in, x);
  QueueFamilies(in, x);
  return x.Text();
}

}  // namespace gpuman::metrics
