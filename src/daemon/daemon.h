// The gpuman daemon: one lease table and one job queue for the whole machine. A single
// event-loop thread owns everything here: the socket server (server.h), the state db (jobs
// and leases), the device source, and scheduling passes. Requests go through one command
// table {operation, who may call it, what it names, handler} (commands.cc), checked once
// before any handler runs; the handlers live by family in *_handlers.cc. Jobs run
// under detached supervisors (sched/supervisor.h, started through sched/job_launcher.h), so the daemon can stop or crash
// without taking them along; on start it reconciles the db with what is still running.
#pragma once

#include <csignal>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/result.h"
#include "base/unique_fd.h"
#include "daemon/access.h"
#include "daemon/collector.h"
#include "daemon/mps_control.h"
#include "daemon/notifier.h"
#include "daemon/proc_visibility.h"
#include "confine/cgroup.h"
#include "devices/device_source.h"
#include "lease/acquire_step.h"
#include "policy/lease_rules.h"
#include "protocol/envelope.h"
#include "sched/job_launcher.h"
#include "sched/scheduler.h"
#include "store/job_store.h"
#include "store/lease_store.h"

namespace gpuman::daemon {

struct DaemonOptions {
  std::string socket_path;
  std::string state_dir;
  bool system_mode = false;          // root: jobs run as their submitters
  std::optional<uint32_t> admin_gid; // members may act on anyone's jobs and drain GPUs
  sched::SchedulerConfig scheduler;
  std::optional<policy::PortRange> launch_ports = policy::PortRange{};  // [launch] ports
  policy::ShareRules share;  // [share]: memory slices (docs/share.md)
  /// Where a bare [share] mps_control is looked up (the daemon's PATH); unset: /bin:/usr/bin.
  std::optional<std::string> mps_search_path;
  int grace_ms = 10000;              // SIGTERM -> SIGKILL for cancelled / over-time jobs
  CollectorOptions monitor;          // health, idle leases, alerts, history, metrics
  NotifierOptions notify;            // end-of-job notifications ([notify])
  /// The machine lease table (leases taken while no daemon ran): its live leases are
  /// respected by every acquire and scheduling pass. Empty: none.
  std::string machine_lease_dir;
  /// The scenario's name when the devices are the stand-in NVML (`--simulate`): clients of
  /// the snapshot op mark their output as simulated. Unset: real devices.
  std::optional<std::string> scenario;
  /// Its file, given to every job as GPUMAN_SIMULATE (visibility/child_env.h), so that a
  /// gpuman inside a job sees the GPUs its lease names.
  std::optional<std::string> scenario_path;
  /// Connection caps (server.h, ServerLimits): everyone's together, of which the last
  /// `admin_connection_reserve` only root and the admin group may take, and one user's.
  size_t max_connections = 1024;
  size_t admin_connection_reserve = 64;
  size_t max_connections_per_user = 64;
  /// Device confinement (confine/cgroup.h, docs/enforce.md): `[enforce] devices`, prepared
  /// by Start() once the socket is bound; it takes effect only when the daemon is root and
  /// the host allows it. Off here by default (tests that build a Daemon).
  confine::DevicesSetting devices = confine::DevicesSetting::kOff;
  /// A user's daemon only: says so ("the machine's daemon serves at PATH") while root's
  /// daemon serves the machine, and this daemon then grants no lease and starts no job
  /// (docs/cli.md, "User mode"). Asked at most every 2 s. Unset: never asked.
  std::function<std::optional<std::string>()> machine_daemon;
};

class Server;

class Daemon {
 public:
  /// Queued jobs are started through `launcher` (sched/job_launcher.h): the real one is
  /// a sched::SupervisorLauncher; tests pass a recording fake.
  Daemon(DaemonOptions options, devices::DeviceSource& devices, const Clock& clock, sched::JobLauncher& launcher);
  ~Daemon();

  /// Opens the state db, reconciles jobs left by an earlier daemon, and binds the socket
  /// (refusing to replace the socket of a daemon that still answers).
  /// Errors: kConflict (another daemon runs), kIo, kPermissionDenied.
  Status Start();

  /// Only the first step of Start(): creates the state directory and opens the state db.
  /// Handle() works after this alone (tests: no socket, no monitoring).
  /// Errors: those of JobStore::Open and LeaseStore::Open.
  Status OpenState();

  /// Serves until *stop becomes non-zero. Returns 0.
  int Run(const volatile std::sig_atomic_t* stop);

  /// One request from `peer`, through the command table: the access check of the op's
  /// row, then its handler. Never throws. Public for tests.
  protocol::Reply Handle(const Peer& peer, const protocol::Request& request);

  /// What a handler gets: the request, its caller, and the object(s) the row's Target
  /// names, already resolved and (for kOwner rows) checked.
  struct Call;
  /// One row of the command table.
  struct Command {
    protocol::Op op;
    Access who;
    Target target;
    const char* action;  // for the refusal: "only root or the admin group may <action>"
    protocol::Reply (Daemon::*handler)(const Call& call);
  };
  /// The command table, one row per operation (commands.cc).
  static std::span<const Command> Commands();

  /// The loop's timed work, after the sockets were served: when a sample is due (the
  /// collector's period, or Xid events waiting), the one device read of this tick, which
  /// feeds the collector, the running-job watch, the placement and the snapshot op; then a
  /// scheduling pass when something changed or a second went by. Public for tests.
  void Tick(int64_t now_unix_ms);
  /// Milliseconds until Tick has a sample to take (0 = now).
  int64_t MsUntilSample(int64_t now_unix_ms) const;

  /// One scheduling pass (also run after every change and once a second), on the latest
  /// sample. Before it starts a job it reads the devices again and places on that read
  /// (the pre-start check), so a GPU lost since the sample never gets a job. The placement
  /// itself is skipped while nothing it reads has changed (docs/scheduling.md).
  void SchedulePass();
  /// How many passes placed jobs (ran sched::Schedule) so far. For tests.
  int64_t full_passes() const { return full_passes_; }

  /// The monitoring side, once Start() succeeded.
  const Collector* collector() const { return collector_.get(); }
  /// Where jobs and `run` leases are confined, or why not (status).
  const confine::Confinement& confinement() const { return confinement_; }

  /// Fills user name and admin flag for a uid/gid/pid triple from the kernel.
  Peer MakePeer(uint32_t uid, uint32_t gid, int32_t pid) const;

  /// Cancel of a starting or running job, `by_user`: with a live supervisor, SIGTERM to it
  /// (it ends the job and records "cancelled"). Without one, a starting job nothing of
  /// which lives is cancelled at once, and a running (adopted) job's process groups get
  /// SIGTERM, SIGKILL after the grace period; the daemon records "cancelled" once none of
  /// its processes lives, and only then releases its GPUs. Errors: kConflict (starting and
  /// still being set up: "job N is starting; try again"; not starting or running); kBusy,
  /// kIo from the state db.
  Status EndOrphanedJob(const model::Job& job, const std::string& by_user);

 private:
  // A running job whose supervisor died while processes of the job live on: the daemon
  // adopts it. It stays running with its lease (which names the job's processes), the
  // daemon watches its process groups every pass, enforces its time limit, ends it on
  // cancel or GPU loss, and records the end (exit status unknown) only once none of the
  // job's processes lives; then it releases the lease.
  struct Orphan {
    int64_t last_seen_alive_ms = 0;            // 0: never seen alive by this daemon
    std::optional<model::JobState> ending_as;  // set once the daemon began to end it
    std::string ending_reason;
    int64_t kill_at_ms = 0;                    // SIGKILL from then on
  };
  // The active jobs (JobStore::ActiveSummaries) and what every pass asks of them, worked
  // out once per change of the list, not once per look: a sweep queues 10,000 of them.
  struct ActiveJobs {
    std::shared_ptr<const std::vector<model::Job>> all;  // held by the caller while in use only
    std::vector<size_t> held;  // positions in `all` of the starting and running jobs
    bool any_queued = false;
    bool momentary = false;  // sched::AnyMomentaryFilters
    uint64_t generation = 0;  // JobStore::summaries_generation() it was worked out at
  };
  /// nullopt when the state db cannot be read. The daemon keeps what it worked out, not
  /// the list: a list kept alive would be copied on every submit.
  std::optional<ActiveJobs> CurrentJobs();
  void Reconcile();
  void WatchOrphan(const model::Job& job, int64_t now);
  void BeginEnding(const model::Job& job, model::JobState as, const std::string& reason, int64_t now);
  // The latest device read: an enriched snapshot (owners of processes filled in, no
  // topology), or why there is none.
  struct Sample {
    std::optional<model::MachineSnapshot> snapshot;
    std::string error;
    int64_t at_unix_ms = 0;
  };
  // The snapshot op's "snapshot" member for the latest sample, encoded once per caller
  // view (with the sample, the view is all that decides what a caller is shown), so that
  // status and top calls between two samples do not encode it again. A new sample empties it.
  struct EncodedSnapshot {
    bool processes = false;
    bool topology = false;
    std::optional<CallerView> view;  // set when processes
    std::string text;
  };
  const std::string& EncodedSnapshotFor(bool processes, bool topology, const std::optional<CallerView>& view);
  std::vector<EncodedSnapshot> encoded_snapshots_;  // of latest_; TakeSample empties it
  // Reads the devices once (topology too the first time) and makes it the latest sample.
  // `fresh`: the slow field groups (health, settings) read now, not from the source's cache.
  const Sample& TakeSample(int64_t now, bool fresh);
  void WatchRunningJobs();  // a GPU of a running job failed in the latest sample: tell its supervisor
  Status StartJob(const model::Job& job, const std::vector<std::string>& gpus);
  // Device confinement (docs/enforce.md). The cgroup of lease `lease_id`, made with the
  // device rule of `gpus` (their minor numbers from the latest sample).
  /// `slice_bytes`: a memory slice's size per GPU, which the driver is asked to hold the
  /// cgroup to where it can (LimitCgroupMemory; docs/share.md).
  Result<std::string> ConfineLease(int64_t lease_id, const std::vector<std::string>& gpus,
                                   std::optional<int64_t> slice_bytes = std::nullopt);
  std::string memory_limit_said_;  // the last word on driver memory limits, said once
  // The processes a `run` adds to `lease` (its command, at its start barrier; not the caller
  // itself) moved into the lease's cgroup, made when missing. Returns that cgroup, or
  // nullopt when nothing is confined (off, or a job's lease: what joins it is inside already).
  Result<std::optional<std::string>> ConfineRunProcesses(const model::Lease& lease,
                                                         const std::vector<model::LeaseProcess>& processes,
                                                         int32_t caller_pid);
  // The processes in a confined lease's cgroup (none when unconfined).
  std::vector<pid_t> LeaseCgroupProcesses(int64_t lease_id) const;
  // Removes the cgroups of leases that are gone and empty (after a release, a reclaim, a
  // job's end); at most every few seconds.
  void SweepLeaseCgroups(int64_t now);
  confine::Confinement confinement_;  // Start() prepares it
  int64_t next_cgroup_sweep_ms_ = 0;
  // The machine's rules (policy/lease_rules.h) as the daemon applies them.
  policy::MachineRules Rules() const;
  static policy::Caller CallerOf(const Peer& peer);
  // Every live lease the daemon must respect: its own table and the machine lease table.
  Result<std::vector<model::Lease>> AllLiveLeases();
  // The machine lease table's live leases (taken while no daemon ran), read only, with
  // negative ids; none when there is no such table or it cannot be read.
  std::vector<model::Lease> MachineTableLeases();
  /// options_.machine_daemon's answer, kept for 2 s, turned into the refusal's text.
  std::optional<std::string> Superseded();
  // The acquire step (lease/acquire_step.h) with this daemon's devices, table and rules.
  Result<lease::Grant> AcquireStepFor(const Peer& peer, const lease::AcquireAsk& ask);
  // With AcquireArgs::describe: the GPUs' indices and names and the child's environment.
  void DescribeAcquired(protocol::AcquireResult& result, const model::GpuRequest& request);
  Result<protocol::AcquireResult> AcquireFor(const Peer& peer, const protocol::AcquireArgs& args);
  Status CheckReleaseFor(const Peer& peer, const model::Lease& lease);
  /// One step of `release --force` (lease/force_release.h): how many of its processes
  /// still live (0: free it now). Errors: those of policy::CheckForceRelease.
  Result<int64_t> ForceEndFor(const Peer& peer, const model::Lease& lease);
  std::optional<policy::LeaseJob> JobOfLease(const model::Lease& lease);
  /// What still runs on `lease`: its live processes and its cgroup's, the caller's left out.
  std::vector<model::LeaseProcess> LiveProcessesOf(const model::Lease& lease, const Peer& peer);
  Status CheckSubmitFor(const Peer& peer, const protocol::SubmitArgs& args);
  model::Job WithWaitInfo(model::Job job) const;
  DaemonIdentity identity() const;
  /// Resolves and checks what `row` names; an error reply (or, for kJobs, per-id
  /// outcomes inside `call`) when the caller may not act on it.
  std::optional<protocol::Reply> Resolve(const Command& row, Call& call);

  // Handlers, one per row of the command table, by family.
  // info_handlers.cc
  protocol::Reply OnHello(const Call& call);
  protocol::Reply OnStatus(const Call& call);
  protocol::Reply OnHealth(const Call& call);
  protocol::Reply OnSnapshot(const Call& call);
  // job_handlers.cc
  protocol::Reply OnSubmit(const Call& call);
  protocol::Reply OnQueue(const Call& call);
  protocol::Reply OnShow(const Call& call);
  protocol::Reply OnWait(const Call& call);
  protocol::Reply OnCancelHoldResume(const Call& call);
  protocol::Reply OnUpdate(const Call& call);
  std::optional<Result<model::Job>> ChangeJob(protocol::Op op, const model::Job& job, const Peer& peer, bool in_array);
  protocol::Reply OnLogs(const Call& call);
  // gpu_handlers.cc
  protocol::Reply OnDrainUndrain(const Call& call);
  protocol::Reply OnDrains(const Call& call);
  // lease_handlers.cc
  protocol::Reply OnLeases(const Call& call);
  protocol::Reply OnAcquire(const Call& call);
  protocol::Reply OnAddProcesses(const Call& call);
  protocol::Reply OnRelease(const Call& call);
  protocol::Reply OnPreview(const Call& call);

  // The state directory cannot be written (its file system is full): an "episode" from
  // the first failed write (or the free space check) until a probe write succeeds again.
  // Meanwhile submits and acquires are refused with the reason and no job is started, but
  // running jobs stay supervised. One log line when it begins and one when it ends.
  void NoteStoreError(const Error& e);
  void CheckWritable(int64_t now);
  /// The refusal of new work while the state cannot be written; nullopt when it can.
  std::optional<Error> RefusingNewWork() const;

  DaemonOptions options_;
  devices::DeviceSource& devices_;
  const Clock& clock_;
  sched::JobLauncher& launcher_;
  std::unique_ptr<store::JobStore> jobs_;
  std::unique_ptr<store::LeaseStore> leases_;
  std::unique_ptr<store::LeaseStore> machine_leases_;  // read only; may be absent
  std::optional<std::string> superseded_;              // Superseded()'s last answer
  std::map<int64_t, int64_t> force_ending_;            // lease::ForceEnding of `release --force`
  int64_t superseded_at_ms_ = -1;
  std::optional<model::Topology> topology_;
  std::map<int64_t, sched::WaitReason> waiting_;  // from the last pass, for `queue`
  std::unique_ptr<Server> server_;
  UniqueFd inotify_fd_;
  bool dirty_ = true;  // something changed: run a scheduling pass
  std::optional<Sample> latest_;
  int64_t next_sample_ms_ = 0;  // without a collector (tests): when Tick samples next
  int64_t last_pass_ms_ = 0;
  // What the last full pass read (SchedulePass skips a pass whose inputs are the same).
  struct PassInputs {
    store::JobStore::Version state;   // jobs, leases, drains, usage
    std::vector<int64_t> live_leases;  // ids, with the machine table's (negative)
    uint64_t snapshot = 0;             // sched::SnapshotKey of the sample
    bool operator==(const PassInputs&) const = default;
  };
  static constexpr int64_t kFullPassEveryMs = 10'000;
  std::optional<PassInputs> last_pass_inputs_;
  ActiveJobs active_jobs_;  // without `all` (CurrentJobs)
  bool active_jobs_known_ = false;
  int64_t last_full_pass_ms_ = 0;
  int64_t next_pass_ms_ = 0;
  int64_t full_passes_ = 0;  // passes that ran Schedule (tests)  // passes asked for by changes wait until then (Tick)
  std::map<int, std::string> uuid_by_index_;  // last known; a lost GPU may not say its UUID
  std::set<int64_t> told_gpu_lost_;           // jobs whose supervisor got SIGUSR1
  std::map<int64_t, Orphan> orphans_;         // adopted jobs, by id (rebuilt after a restart)
  std::optional<std::string> unwritable_;     // why the state cannot be written now
  int64_t next_write_check_ms_ = 0;
  std::unique_ptr<Collector> collector_;
  std::unique_ptr<Notifier> notifier_;  // Start() makes it
  // MPS (docs/share.md): the control daemons of GPUs with MPS leases. OpenState makes it.
  std::unique_ptr<MpsControls> mps_;
  int64_t next_mps_check_ms_ = 0;
  // Free heap memory goes back to the kernel once requests stop (Tick; Start says why).
  bool heap_used_since_trim_ = false;
  int64_t last_request_ms_ = 0;
  // Whether `request` will be an MPS lease here (--mps, or [share] mps = "on" for a slice).
  bool WantsMps(const model::GpuRequest& request) const;
  // The MPS control of `lease`'s GPU for its user, started when missing (Ensure).
  Result<visibility::MpsClient> MpsFor(const model::Lease& lease);
};

/// The default socket and state locations: /run/gpuman/gpuman.sock and /var/lib/gpuman
/// for root; $XDG_RUNTIME_DIR/gpuman/gpuman.sock and $XDG_STATE_HOME/gpuman/daemon otherwise
/// (~/.local/state/gpuman/daemon; "" when neither XDG_STATE_HOME nor an absolute HOME is set).
std::string DefaultSocketPath(bool system_mode, const std::map<std::string, std::string>& env);
std::string DefaultDaemonStateDir(bool system_mode, const std::map<std::string, std::string>& env);

}  // namespace gpuman::daemon
