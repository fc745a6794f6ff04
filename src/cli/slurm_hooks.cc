#include "cli/slurm_hooks.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <future>
#include <thread>


#include "base/duration.h"
#include "base/installed_layout.h"
#include "base/strings.h"
#include "cli/exit_codes.h"
#include "cli/health_command.h"
#include "cli/slurm_accounting.h"
#include "devices/process_inspector.h"
#include "health/findings.h"
#include "policy/byte_size.h"
#include "slurm/healthcheck.h"
#include "slurm/job_gpus.h"
#include "slurm/job_record.h"
#include "slurm/node_control.h"
#include "slurm/node_facts.h"
#include "visibility/slurm_gpus.h"

namespace gpuman::cli {
namespace {

std::string NodeName(const SlurmHookArgs& args, const Context& ctx) {
  if (args.node && !args.node->empty()) return *args.node;
  if (auto n = ctx.env().Get("SLURMD_NODENAME"); n && !n->empty()) return *n;
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) return "localhost";
  std::string name = host;
  if (const size_t dot = name.find('.'); dot != std::string::npos) name.resize(dot);
  return name;
}

// Runs `fn` on a worker thread and waits at most `ms`. nullopt on timeout: the worker is
// then left behind (stuck in NVML), and the caller must end the process with EndNow.
template <typename T>
std::optional<T> WithinDeadline(int64_t ms, std::function<T()> fn) {
  // Shared: a worker left behind must not set a promise that is gone.
  auto promise = std::make_shared<std::promise<T>>();
  std::future<T> future = promise->get_future();
  std::thread worker([promise, fn = std::move(fn)] { promise->set_value(fn()); });
  if (future.wait_for(std::chrono::milliseconds(ms)) == std::future_status::ready) {
    worker.join();
    return future.get();
  }
  worker.detach();
  return std::nullopt;
}

// Ends the process without running destructors: a worker may still be inside NVML.
[[noreturn]] void EndNow(Context& ctx, int code) {
  ctx.out().flush();
  ctx.err().flush();
  std::_Exit(code);
}

model::Finding TimeoutFinding(int64_t ms) {
  model::Finding f;
  f.code = "nvml_timeout";
  f.severity = model::Severity::kFatal;
  f.message = "NVML did not answer within " + FormatDurationMs(ms);
  f.source = "driver";
  return f;
}

std::string StateDir(const Context& ctx) { return SlurmStateDirOf(ctx); }

int64_t MonotonicMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

Result<model::MachineSnapshot> EnrichedSnapshot(Context& ctx) {
  auto source = ctx.Devices();
  if (!source) return source.error();
  auto snap = (*source)->Snapshot();
  if (!snap) return snap.error();
  devices::EnrichProcesses(*snap, ctx.Inspector());
  return snap;
}

// The job's GPUs (UUIDs) from SLURM_JOB_GPUS through gres.conf and minor numbers, and the
// Slurm indices that lead to no GPU.
struct JobGpus {
  std::vector<std::string> uuids;
  std::vector<std::string> problems;
};
JobGpus MapJobGpus(const Context& ctx, const model::MachineSnapshot& snap, const std::string& node) {
  JobGpus out;
  visibility::Environment env = ctx.env().vars;
  env.erase("SLURM_STEP_GPUS");  // the prolog/epilog judge the job's GPUs
  const visibility::SlurmNode facts = slurm::ReadSlurmNode(env, node);
  const auto gpus = visibility::ParseSlurmGpus(env, snap.gpus, &facts);
  if (!gpus) return out;
  for (const visibility::PhysicalIndex& index : gpus->devices) {
    for (const model::DeviceSnapshot& g : snap.gpus) {
      if (g.index == index.value && g.uuid) out.uuids.push_back(*g.uuid);
    }
  }
  for (const std::string& p : gpus->problems) out.problems.push_back(gpus->variable + ": " + p);
  return out;
}

std::optional<std::string> RequiredJobId(const std::string& what, Context& ctx) {
  auto id = ctx.env().Get("SLURM_JOB_ID");
  if (!id || id->empty()) {
    ctx.err() << "gpuman: error: slurm " << what << ": SLURM_JOB_ID is not set (run it as Slurm's " << what
              << ", " << PointDocReferencesAt("docs/slurm.md", ctx.layout().FindDocDir()) << ")\n";
    return std::nullopt;
  }
  if (!slurm::IsValidJobId(*id)) {
    ctx.err() << "gpuman: error: slurm " << what << ": SLURM_JOB_ID '" << EscapeControl(*id)
              << "' is not a Slurm job id\n";
    return std::nullopt;
  }
  return id;
}

// Drains `node` for a prolog/epilog; one stderr line either way. A node that is drained
// already keeps its reason (the first cause, an admin's word): `scontrol update
// state=drain` would overwrite it. True when the node is drained afterwards.
bool DrainFor(const std::string& what, const std::string& node, const std::string& reason, Context& ctx) {
  slurm::ScontrolNodeControl control(kScontrolTimeoutMs);
  if (auto state = control.Get(node); state && state->drained) {
    ctx.err() << "gpuman: slurm " << what << ": node " << node << " stays drained (" << EscapeControl(state->reason)
              << "); not drained again for: " << reason << "\n";
    return true;
  }
  if (auto done = control.Drain(node, reason); !done) {
    ctx.err() << "gpuman: error: slurm " << what << ": draining node " << node << ": " << done.error().message << "\n";
    return false;
  }
  ctx.err() << "gpuman: slurm " << what << ": node " << node << " drained: " << reason << "\n";
  return true;
}

int RunHealthcheck(const SlurmHookArgs& args, Context& ctx) {
  const std::string node = NodeName(args, ctx);
  HealthArgs health;
  health.local = args.local;
  const int64_t now = ctx.clock().NowUnixMs();
  auto outcome = WithinDeadline<Result<HealthOutcome>>(kNvmlDeadlineMs, [&] { return CollectHealth(health, ctx); });
  std::vector<model::Finding> findings;
  if (!outcome) {
    findings.push_back(TimeoutFinding(kNvmlDeadlineMs));
  } else if (!*outcome) {
    // No snapshot at all (driver not loaded, NVML failing): the node cannot run GPU jobs.
    findings.push_back(health::DriverFinding(outcome->error().message, now));
  } else {
    findings = (*outcome)->report.findings;
  }
  slurm::ScontrolNodeControl control(kScontrolTimeoutMs);
  const slurm::HealthcheckResult result = slurm::RunHealthcheck(findings, node, control);
  for (const std::string& line : result.lines) ctx.err() << line << "\n";
  int code = result.unhealthy ? kExitUnhealthy : kExitOk;
  if (result.error) {
    ctx.err() << "gpuman: error: slurm healthcheck: " << result.error->message << "\n";
    code = kExitError;
  }
  if (!outcome) EndNow(ctx, code);
  return code;
}

Result<int64_t> IdleMemory(const SlurmHookArgs& args) {
  auto bytes = policy::ParseByteSize(args.idle_memory);
  if (!bytes) return bytes.error().WithContext("--idle-memory");
  return bytes;
}

int JudgeJobGpus(const SlurmHookArgs& args, const std::string& job_id_value, const std::string& node, Context& ctx,
                    std::vector<std::string>* uuids);

int RunProlog(const SlurmHookArgs& args, Context& ctx) {
  const auto job_id = RequiredJobId("prolog", ctx);
  if (!job_id) return kExitUsage;
  auto idle = IdleMemory(args);
  if (!idle) {
    ctx.err() << "gpuman: error: " << idle.error().message << "\n";
    return kExitUsage;
  }
  const std::string node = NodeName(args, ctx);
  slurm::SlurmJobRecord rec;
  rec.job_id = *job_id;
  rec.user = ctx.env().Get("SLURM_JOB_USER").value_or("");
  if (auto uid = ctx.env().Get("SLURM_JOB_UID")) rec.uid = static_cast<uint32_t>(std::strtoul(uid->c_str(), nullptr, 10));
  rec.host = node;
  const auto job_gpus = ctx.env().Get("SLURM_JOB_GPUS");
  if (job_gpus && !job_gpus->empty()) {
    const int refused = JudgeJobGpus(args, *job_id, node, ctx, &rec.gpu_uuids);
    if (refused != kExitOk) return refused;
  }  // a job without GPUs: nothing to check, NVML is not asked
  rec.started_unix_ms = ctx.clock().NowUnixMs();
  if (auto written = slurm::WriteJobRecord(StateDir(ctx), rec); !written) {
    // Accounting is lost for this job, but the job itself is fine: it runs.
    ctx.err() << "gpuman: warning: slurm prolog: job " << *job_id << ": " << written.error().message << "\n";
  }
  return kExitOk;
}

// The prolog's check of the job's GPUs; fills `uuids`. kExitOk, or the exit code that
// refuses the job (the node then drained).
int JudgeJobGpus(const SlurmHookArgs& args, const std::string& job_id_value, const std::string& node, Context& ctx,
                    std::vector<std::string>* uuids) {
  const std::optional<std::string> job_id = job_id_value;
  auto idle = IdleMemory(args);
  struct Seen {
    Result<model::MachineSnapshot> snap;
    Result<HealthOutcome> health;
  };
  auto seen = WithinDeadline<Seen>(kNvmlDeadlineMs, [&] {
    auto snap = EnrichedSnapshot(ctx);
    HealthArgs health;
    auto report = snap ? CollectHealth(health, ctx) : Result<HealthOutcome>(snap.error());
    return Seen{std::move(snap), std::move(report)};
  });
  if (!seen || !seen->snap || !seen->health) {
    const std::string why = !seen ? TimeoutFinding(kNvmlDeadlineMs).message
                                  : (!seen->snap ? seen->snap.error().message : seen->health.error().message);
    ctx.err() << "gpuman: slurm prolog: job " << *job_id << " refused: " << why << "\n";
    DrainFor("prolog", node, std::string(slurm::kPrologPrefix) + "job " + *job_id + " " + EscapeControl(why), ctx);
    if (!seen) EndNow(ctx, kExitUnhealthy);
    return kExitUnhealthy;
  }
  const model::MachineSnapshot& snap = *seen->snap;
  const JobGpus gpus = MapJobGpus(ctx, snap, node);
  const auto leftovers = slurm::FindLeftovers(snap, gpus.uuids, *idle);
  const slurm::PrologCheck check =
      slurm::CheckPrologGpus(*job_id, gpus.uuids, gpus.problems, seen->health->report.findings, leftovers);
  if (check.reason) {
    for (const std::string& p : check.problems) {
      ctx.err() << "gpuman: slurm prolog: job " << *job_id << ": " << p << "\n";
    }
    DrainFor("prolog", node, *check.reason, ctx);
    return kExitUnhealthy;
  }
  *uuids = gpus.uuids;
  return kExitOk;
}

int RunEpilog(const SlurmHookArgs& args, Context& ctx) {
  const auto job_id = RequiredJobId("epilog", ctx);
  if (!job_id) return kExitUsage;
  auto idle = IdleMemory(args);
  auto grace = ParseDurationMs(args.grace);
  if (!idle || !grace) {
    ctx.err() << "gpuman: error: " << (!idle ? idle.error().message : grace.error().WithContext("--grace").message)
              << "\n";
    return kExitUsage;
  }
  const std::string node = NodeName(args, ctx);
  const std::string dir = StateDir(ctx);
  auto record = slurm::ReadJobRecord(dir, *job_id);
  if (!record) {
    // Slurm runs the epilog of a job its prolog refused, too; the GPUs were never the job's.
    slurm::ScontrolNodeControl control(kScontrolTimeoutMs);
    const std::string refused = std::string(slurm::kPrologPrefix) + "job " + *job_id + " ";
    if (auto state = control.Get(node); state && state->drained && state->reason.rfind(refused, 0) == 0) {
      ctx.err() << "gpuman: slurm epilog: job " << *job_id << " was refused by the prolog; nothing to check\n";
      return kExitOk;
    }
  }
  const std::string user = record ? record->user : ctx.env().Get("SLURM_JOB_USER").value_or("?");
  if (record && record->gpu_uuids.empty()) {  // a job without GPUs: nothing to check
    record->ended_unix_ms = ctx.clock().NowUnixMs();
    if (auto written = slurm::WriteJobRecord(dir, *record); !written) {
      ctx.err() << "gpuman: warning: slurm epilog: job " << *job_id << ": " << written.error().message << "\n";
    }
    ctx.out() << SlurmJobSummaryLine(*record, ctx, *record->ended_unix_ms) << "\n";
    return kExitOk;
  }
  const int64_t deadline = *grace + kNvmlDeadlineMs;
  auto left = WithinDeadline<Result<std::vector<slurm::GpuLeftover>>>(deadline, [&] {
    std::vector<std::string> uuids;
    if (record) {
      uuids = record->gpu_uuids;
    } else {
      auto snap = EnrichedSnapshot(ctx);
      if (!snap) return Result<std::vector<slurm::GpuLeftover>>(snap.error());
      uuids = MapJobGpus(ctx, *snap, node).uuids;
    }
    slurm::Poller poller{[&] { return EnrichedSnapshot(ctx); }, MonotonicMs,
                         [](int64_t ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }};
    return slurm::WaitForLeftovers(poller, uuids, *idle, *grace);
  });
  int code = kExitOk;
  if (!left || !*left) {
    const std::string why = !left ? "NVML did not answer within " + FormatDurationMs(deadline) : left->error().message;
    ctx.err() << "gpuman: slurm epilog: job " << *job_id << ": cannot check its GPUs: " << why << "\n";
    DrainFor("epilog", node, std::string(slurm::kEpilogPrefix) + "job " + *job_id + " " + EscapeControl(why), ctx);
    code = kExitUnhealthy;
  } else if (!(*left)->empty()) {
    for (const slurm::GpuLeftover& l : **left) {
      ctx.err() << "gpuman: slurm epilog: job " << *job_id << ": " << slurm::DescribeLeftover(l) << " left behind after "
                << FormatDurationMs(*grace) << "\n";
    }
    DrainFor("epilog", node, slurm::EpilogReason(*job_id, user, **left), ctx);
    code = kExitUnhealthy;
  }
  if (record) {
    record->ended_unix_ms = ctx.clock().NowUnixMs();
    if (auto written = slurm::WriteJobRecord(dir, *record); !written) {
      ctx.err() << "gpuman: warning: slurm epilog: job " << *job_id << ": " << written.error().message << "\n";
    }
    ctx.out() << SlurmJobSummaryLine(*record, ctx, *record->ended_unix_ms) << "\n";
  } else {
    ctx.err() << "gpuman: warning: slurm epilog: job " << *job_id << ": no record (" << record.error().message
              << "); no summary\n";
  }
  if (!left) EndNow(ctx, code);
  return code;
}

}  // namespace

std::optional<int> RunSlurmHooks(std::string_view subcommand, const SlurmHookArgs& args, Context& ctx) {
  if (subcommand == "healthcheck") return RunHealthcheck(args, ctx);
  if (subcommand == "prolog") return RunProlog(args, ctx);
  if (subcommand == "epilog") return RunEpilog(args, ctx);
  return std::nullopt;
}

}  // namespace gpuman::cli
