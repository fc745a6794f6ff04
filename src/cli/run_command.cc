#include "cli/run_command.h"

#include "confine/cgroup.h"

#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <string.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <set>

#include "base/strings.h"
#include "cli/acquire.h"
#include "cli/exit_codes.h"
#include "cli/lease_commands.h"
#include "cli/rank_output.h"
#include "render/format.h"
#include "sched/child_process.h"
#include "sched/process_group.h"
#include "store/proc_liveness.h"
#include "visibility/child_env.h"

namespace gpuman::cli {
namespace {

// CPUs of `uuids` (the job's GPUs, or one rank's) that this process may use, and their
// common NUMA node. `who` names a rank in the warnings ("rank 2: "), or is "".
void PlanNumaBinding(const Acquired& acquired, const std::vector<std::string>& uuids, const std::string& who,
                     sched::StartInfo& spec, Context& ctx) {
  std::set<int> gpu_cpus;
  std::set<int> nodes;
  for (const auto& uuid : uuids) {
    for (const auto& g : acquired.snapshot.gpus) {
      if (g.uuid != uuid) continue;
      gpu_cpus.insert(g.cpu_affinity.begin(), g.cpu_affinity.end());
      if (g.numa_node) nodes.insert(*g.numa_node);
    }
  }
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  sched_getaffinity(0, sizeof allowed, &allowed);
  for (int cpu : gpu_cpus) {
    if (cpu < CPU_SETSIZE && CPU_ISSET(cpu, &allowed)) spec.cpu_affinity.push_back(cpu);
  }
  if (spec.cpu_affinity.empty()) {
    ctx.err() << "gpuman: warning: --bind-numa: " << who << "none of the GPUs' CPUs ("
              << model::FormatCpuList({gpu_cpus.begin(), gpu_cpus.end()})
              << ") is available to this process; not binding\n";
    return;
  }
  if (nodes.size() == 1) spec.preferred_numa_node = *nodes.begin();
  else if (nodes.size() > 1) ctx.err() << "gpuman: warning: --bind-numa: " << who << "the GPUs span NUMA nodes; binding CPUs only\n";
}

// "exited with 3", "was killed by SIGSEGV (139)".
std::string HowItEnded(int code) {
  if (code > 128 && code < 128 + NSIG) {
    const char* name = sigabbrev_np(code - 128);
    return "was killed by " + (name ? "SIG" + std::string(name) : "signal " + std::to_string(code - 128)) + " (" +
           std::to_string(code) + ")";
  }
  return "exited with " + std::to_string(code);
}

}  // namespace

int RunRun(const RunArgs& args, Context& ctx) {
  // The exit code is the job's, so every failure of gpuman's own is one code no plausible
  // job returns, as under timeout(1) and env(1) (docs/cli.md, the `run`
  // section): 125, with one line saying why; 124 when --wait=DURATION ran out.
  auto fail = [&](const Error& error) { return ctx.Fail(error); };  // ExitPolicy::kJobCode
  if (args.selection.count < 1) return fail(MakeError(ErrorCode::kInvalidArgument, "run needs at least one GPU (-n 1 or more)"));
  if (args.per_gpu && args.selection.allow_shared) {
    return fail(MakeError(ErrorCode::kInvalidArgument,
                          "--per-gpu does not go with --allow-shared: each rank needs a GPU of its own"));
  }
  const int ranks = args.per_gpu ? args.selection.count : 1;
  auto wait = ParseWait(args.wait);
  if (!wait) return fail(wait.error());

  const std::string command_text = Join(args.command, " ");
  auto draft = DraftLease(ctx, getpid(), "run", command_text);
  if (!draft) return fail(draft.error());

  // The job is forked first and waits at a barrier: it goes into the lease in the same
  // transaction that takes the GPUs, and it cannot run before that (if we die, it exits).
  // With --per-gpu, every rank is such a process, all of them in the job's one process group.
  sched::JobSpec spec;
  spec.argv = args.command;
  for (const auto& [k, v] : ctx.env().vars) spec.env.push_back(k + "=" + v);
  spec.foreground_tty = true;
  spec.processes = ranks;
  RankOutput rank_output(ranks, STDOUT_FILENO, STDERR_FILENO);
  if (args.per_gpu) {
    if (auto opened = rank_output.Open(); !opened) return fail(opened.error());
    spec.outputs = rank_output.ChildOutputs();
  }
  auto child = sched::ChildProcess::Fork(spec);
  rank_output.CloseChildEnds();
  if (!child) return fail(child.error());
  for (pid_t pid : (*child)->pids()) {
    auto job = store::CurrentLeaseProcess(pid);
    if (!job) return fail(MakeError(ErrorCode::kInternal, "cannot read the start time of the job's process"));
    draft->processes.push_back(*job);
  }

  AcquireOptions options;
  options.wait_ms = *wait;
  options.waiting_for = std::to_string(args.selection.count) + " GPU(s) for '" +
                        render::TruncateToWidth(command_text, 40) + "'";
  int interrupted = 0;
  options.interrupted_by = &interrupted;
  auto acquired = AcquireLease(ctx, args.selection, *draft, options);
  if (!acquired && interrupted) {
    // Ctrl-C (or timeout(1)'s SIGTERM) while waiting: nothing ran, as a shell's 128 + N.
    ctx.err() << "gpuman: " << acquired.error().message << "\n";
    return 128 + interrupted;
  }
  if (!acquired) {
    // The child sees the barrier close and exits. A wait with a limit that ran out is
    // kBusy ("gave up after 30m: ..."): AcquireWaiting retries every other kBusy.
    const int code = fail(acquired.error());
    const bool ran_out = *wait && **wait >= 0 && acquired.error().code == ErrorCode::kBusy;
    return ran_out ? int{kJobTimedOut} : code;
  }
  const int64_t lease_id = acquired->lease.id;
  const bool nested = acquired->nested;  // inside the caller's own lease: it is not ours to give back
  auto release = [&] {
    if (nested) return;
    if (auto r = ReleaseLease(ctx, lease_id); !r && r.error().code != ErrorCode::kNotFound) {
      ctx.err() << "gpuman: warning: releasing lease " << lease_id << ": " << r.error().message << "\n";
    }
  };

  // What the job gets: its GPUs; each rank all of them, its rank, and its own GPU's CPUs.
  const auto& sel = acquired->selection;
  const auto migs = std::count_if(sel.uuids.begin(), sel.uuids.end(), [](const std::string& u) { return u.starts_with("MIG-"); });
  if (migs > 1 && !args.per_gpu) {
    // CUDA enumerates only the first MIG device of CUDA_VISIBLE_DEVICES in one process.
    ctx.err() << "gpuman: warning: " << migs << " MIG devices for one command: a CUDA process sees only the first "
              << "(one MIG device per CUDA process); start one process per device (--per-gpu)\n";
  }
  visibility::ChildGpuEnvRequest gpu_env;
  gpu_env.uuids = sel.uuids;
  gpu_env.indices = sel.indices;
  gpu_env.numbering = args.index ? visibility::GpuNumbering::kPciIndices : visibility::GpuNumbering::kUuids;
  gpu_env.lease_id = lease_id;
  gpu_env.master_port = acquired->lease.master_port;
  if (ctx.simulation()) gpu_env.simulated_scenario = ctx.simulation()->scenario_path;
  AddSliceEnv(*acquired, gpu_env);
  const std::vector<std::string> cuda_order = visibility::CudaOrder(gpu_env);
  if (args.per_gpu && cuda_order.size() != static_cast<size_t>(ranks)) {
    release();
    return fail(MakeError(ErrorCode::kInternal, "asked for " + std::to_string(ranks) + " GPUs for as many ranks, got " +
                                                    std::to_string(cuda_order.size())));
  }
  if (args.per_gpu && !gpu_env.master_port) {
    ctx.err() << "gpuman: warning: lease " << lease_id
              << " has no rendezvous port ([launch] ports is off, or every port is taken): the ranks get no "
                 "MASTER_ADDR or MASTER_PORT\n";
  }
  std::vector<sched::StartInfo> starts(static_cast<size_t>(ranks));
  for (int rank = 0; rank < ranks; ++rank) {
    sched::StartInfo& start = starts[static_cast<size_t>(rank)];
    for (const auto& var : visibility::ChildGpuEnv(gpu_env)) start.env.push_back(visibility::EnvEntry(var));
    if (!args.per_gpu) {
      if (args.bind_numa) PlanNumaBinding(*acquired, sel.uuids, "", start, ctx);
      continue;
    }
    for (const auto& var : visibility::RankEnv(rank, ranks, gpu_env.master_port)) {
      start.env.push_back(visibility::EnvEntry(var));
    }
    if (args.bind_numa) {
      PlanNumaBinding(*acquired, {cuda_order[static_cast<size_t>(rank)]}, "rank " + std::to_string(rank) + ": ", start,
                      ctx);
    }
  }

  if (!args.quiet && isatty(STDERR_FILENO)) {
    std::vector<std::string> idx;
    for (int i : sel.indices) idx.push_back(std::to_string(i));
    ctx.err() << "gpuman: lease " << lease_id << ": GPU " << Join(idx, ",") << " (" << sel.placement << ")\n";
  }
  if (auto started = (*child)->Start(starts); !started) {
    release();
    ctx.err() << "gpuman: error: " << args.command[0] << ": " << started.error().message << "\n";
    return started.error().code == ErrorCode::kPermissionDenied ? int{kJobCannotExecute} : int{kJobNotFound};
  }
  const pid_t job_pid = (*child)->pid();
  sched::WaitOptions wait_options;
  if (rank_output.Enabled()) wait_options.output = &rank_output;
  const sched::JobEnd end = (*child)->Wait(wait_options);
  const int exit_code = end.exit_code;
  child->reset();
  // One line for the rank that brought the others down (not when a signal was ending
  // them all anyway: Wait did not stop them then).
  if (end.stopped_others && end.failed) {
    ctx.err() << "gpuman: rank " << *end.failed << " " << HowItEnded(end.exit_code) << "; stopped the other ranks\n";
  }
  // Confined by the daemon: whatever the command left in its cgroup (a setsid'ed or
  // double-forked child) ends before the GPUs go back (TERM, 5 s, KILL: the grace the process group gets), as
  // the supervisor does for a job. A nested run shares its enclosing lease's cgroup, which
  // is not its to empty.
  if (!nested && !acquired->cgroup.empty()) {
    if (!confine::EndCgroupProcesses(acquired->cgroup, 5000)) {
      ctx.err() << "gpuman: warning: processes of the command are still running in " << acquired->cgroup
                << "; lease " << lease_id << " ends when they do\n";
    }
  }
  release();

  // Did the GPUs come back? Processes of the job's group that still hold GPU memory: only
  // those that still live (the job itself was reaped; the daemon's sample may predate its end).
  // When nothing of the group lives any more there is nothing to look for, and no read.
  const bool group_left = kill(-job_pid, 0) == 0 || errno != ESRCH;
  if (!group_left) return exit_code;
  if (auto source = ctx.Devices()) {
    devices::SnapshotOptions who_only;
    who_only.processes_only = true;
    if (auto snap = (*source)->Snapshot(who_only)) {
      for (const auto& g : snap->gpus) {
        if (!g.uuid || std::find(sel.uuids.begin(), sel.uuids.end(), *g.uuid) == sel.uuids.end()) continue;
        for (const auto& p : g.processes) {
          auto pgrp = sched::ProcessGroupOf(static_cast<int>(p.pid));
          if (static_cast<pid_t>(p.pid) != job_pid && pgrp && *pgrp == job_pid) {
            ctx.err() << "gpuman: warning: process " << p.pid << " of the job still holds "
                      << (p.used_memory_bytes ? render::FormatBytes(*p.used_memory_bytes) : std::string("memory"))
                      << " on GPU " << g.index << "\n";
          }
        }
      }
    }
  }
  return exit_code;
}

}  // namespace gpuman::cli
