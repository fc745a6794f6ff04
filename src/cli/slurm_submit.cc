#include "cli/slurm_submit.h"

#include <pwd.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "base/duration.h"
#include "base/strings.h"
#include "cli/exit_codes.h"
#include "cli/queue_commands.h"
#include "render/format.h"
#include "slurm/sbatch.h"
#include "visibility/child_env.h"

namespace gpuman::cli {
namespace {

constexpr std::string_view kPrefix = kSlurmIdPrefix;
constexpr int64_t kPollMs = 1000;

int FailSubmit(Context& ctx, const Error& e) { return ctx.Fail(MakeError(e.code, EscapeControl(e.message))); }

std::string Shown(const std::string& id) { return std::string(kPrefix) + id; }

// The selection options Slurm cannot honour, each with the reason (docs/slurm.md).
std::optional<Error> RefusedOption(const QueueArgs& args) {
  const SelectionArgs& sel = args.selection;
  auto refuse = [](const std::string& option, const std::string& why) {
    return MakeError(ErrorCode::kInvalidArgument, option + ": not with --backend slurm: " + why);
  };
  if (sel.gpus) return refuse("--gpus", "Slurm chooses the node and its GPUs (ask for a GPU type with --model)");
  if (!sel.exclude.empty()) return refuse("--exclude", "Slurm chooses the node and its GPUs (ask for a GPU type with --model)");
  if (sel.min_free_memory) return refuse("--min-free-memory", "Slurm hands out whole GPUs and does not look at their free memory");
  if (sel.gpu_memory) {
    return refuse("--gpu-memory", "Slurm hands out whole GPUs here (its GPU sharing is configured per node as shards or MPS)");
  }
  if (sel.mps) return refuse("--mps", "Slurm runs MPS itself where a node is configured for it (gres mps)");
  if (sel.max_utilization) return refuse("--max-utilization", "Slurm hands out whole GPUs and does not look at their utilization");
  if (sel.require) {
    return refuse("--require", "Slurm knows GPU types, not compute capabilities (name the type with --model)");
  }
  if (sel.min_compute_capability) {
    return refuse("--min-compute-capability", "Slurm knows GPU types, not compute capabilities (name the type with --model)");
  }
  if (sel.prefer) return refuse("--prefer", "Slurm chooses the node and its GPUs (ask for a GPU type with --model)");
  if (args.priority != 0) return refuse("--priority", "Slurm orders its queue itself (fair share, QOS; see sbatch --nice)");
  return std::nullopt;
}

int SubmitToSlurm(const QueueArgs& args, Context& ctx, const SlurmCliDeps& deps) {
  if (auto refused = RefusedOption(args)) return FailSubmit(ctx, *refused);
  slurm::SbatchSpec spec;
  spec.gpus = args.selection.count;
  if (args.selection.mig) {
    // --mig PROFILE: Slurm's own MIG types (gres.conf AutoDetect=nvml names a MIG device
    // Type=<...profile>, docs/slurm.md "MIG"): --gres=gpu:<the type holding the profile>:N.
    if (args.selection.model) {
      return FailSubmit(ctx, MakeError(ErrorCode::kInvalidArgument,
                                       "--mig: not with --model and --backend slurm: Slurm requests one GPU type, and a MIG "
                                       "profile is one"));
    }
    const std::string profile(Trim(*args.selection.mig));
    auto type = slurm::ResolveGresType(profile, slurm::ConfiguredGpuTypes(*deps.tools));
    if (!type) {
      std::string why = type.error().message;
      if (why.starts_with("--model ")) why.replace(0, 8, "--mig ");
      return FailSubmit(ctx, MakeError(type.error().code, why));
    }
    spec.gres_type = *type;
    spec.mig_profile = profile;
  } else if (args.selection.model && spec.gpus > 0) {
    auto type = slurm::ResolveGresType(*args.selection.model, slurm::ConfiguredGpuTypes(*deps.tools));
    if (!type) return FailSubmit(ctx, type.error());
    spec.gres_type = *type;
  }
  if (args.time_limit) {
    auto ms = ParseDurationMs(*args.time_limit);
    if (!ms) return FailSubmit(ctx, ms.error().WithContext("--time-limit"));
    if (*ms <= 0) return FailSubmit(ctx, MakeError(ErrorCode::kInvalidArgument, "--time-limit: must be more than 0"));
    spec.time_limit_ms = *ms;
  }
  for (int64_t id : args.after) {
    if (id <= 0) return FailSubmit(ctx, MakeError(ErrorCode::kInvalidArgument, "--after: " + std::to_string(id) + " is not a Slurm job id"));
    spec.after.push_back(std::to_string(id));
  }
  if (args.array) {  // the same syntax, checked the same way as for gpuman's queue
    if (auto checked = model::ParseArraySpec(*args.array); !checked) return FailSubmit(ctx, checked.error());
    spec.array = *args.array;
  }
  if (args.notify) {
    if (Trim(*args.notify) != "mail") {
      return FailSubmit(ctx, MakeError(ErrorCode::kInvalidArgument,
                                       "--notify: not with --backend slurm: Slurm runs no program of yours when a job ends "
                                       "(--notify mail asks Slurm to mail you)"));
    }
    passwd* pw = getpwuid(getuid());
    if (!pw) return FailSubmit(ctx, MakeError(ErrorCode::kNotFound, "--notify mail: uid " + std::to_string(getuid()) + " has no user name"));
    spec.mail_user = pw->pw_name;
  }
  spec.name = args.name;
  spec.output = args.output;
  spec.requeue = args.requeue;
  spec.allow_shared = args.selection.allow_shared;
  spec.cwd = deps.cwd;
  spec.gpuman_exe = deps.gpuman_exe;
  spec.argv = args.command;
  if (spec.cwd.empty()) return FailSubmit(ctx, MakeError(ErrorCode::kInvalidArgument, "cannot read the current directory"));
  auto id = slurm::Submit(*deps.tools, spec);
  if (!id) return FailSubmit(ctx, id.error());
  if (args.json) {
    ctx.out() << nlohmann::json{{"id", Shown(*id)}, {"backend", "slurm"}, {"slurm_job_id", *id}}.dump() << "\n";
  } else {
    ctx.out() << Shown(*id) << "\n";
  }
  return kExitOk;
}

nlohmann::json JobJson(const slurm::SlurmJob& j) {
  auto opt = [](const auto& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  auto text = [](const std::string& s) { return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s); };
  return nlohmann::json{{"id", Shown(j.id)},
                        {"backend", "slurm"},
                        {"slurm_job_id", j.id},
                        {"name", j.name},
                        {"user", j.user},
                        {"state", model::JobStateName(slurm::GpumanState(j))},
                        {"slurm_state", j.state},
                        {"reason", text(j.reason)},
                        {"gpus", j.gpus},
                        {"nodes", text(j.nodes)},
                        {"time_limit", text(j.time_limit)},
                        {"submitted", text(j.submitted)},
                        {"started", text(j.started)},
                        {"ended", text(j.ended)},
                        {"exit_code", opt(j.exit_code)},
                        {"signal", opt(j.signal)},
                        {"dependency", text(j.dependency)},
                        {"cwd", text(j.cwd)},
                        {"output", text(j.output_path)},
                        {"source", j.source}};
}

// "why / when" of a queue row.
std::string WhyOrWhen(const slurm::SlurmJob& j) {
  const model::JobState s = slurm::GpumanState(j);
  if (s == model::JobState::kRunning) return "running on " + j.nodes + (j.started.empty() ? "" : " since " + j.started);
  if (model::IsFinal(s)) return j.ended.empty() ? j.state : "ended " + j.ended + " (" + j.state + ")";
  std::string why = j.reason.empty() ? "queued" : "waiting: " + j.reason;
  if (!j.dependency.empty()) why += " (" + j.dependency + ")";
  return why;
}

int QueueFromSlurm(const QueueArgs& args, Context& ctx, const SlurmCliDeps& deps) {
  auto jobs = slurm::ListJobs(*deps.tools, args.all);
  if (!jobs) return FailSubmit(ctx, jobs.error());
  if (args.json) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& j : *jobs) list.push_back(JobJson(j));
    ctx.out() << nlohmann::json{{"schema_version", 1}, {"backend", "slurm"}, {"jobs", list}}.dump(2) << "\n";
    return kExitOk;
  }
  if (jobs->empty()) {
    ctx.out() << "no jobs\n";
    return kExitOk;
  }
  // On a terminal a line is cut to its width; to a pipe or a file nothing is (USER and NAME grow).
  const render::TerminalInfo term = ctx.Terminal(true);
  int user_width = 10;
  int name_width = 16;
  if (!term.cut_to_width) {
    for (const auto& j : *jobs) {
      user_width = std::max(user_width, render::DisplayWidth(EscapeControl(j.user)));
      name_width = std::max(name_width, render::DisplayWidth(EscapeControl(j.name)));
    }
  }
  ctx.out() << render::PadRight("ID", 12) << "  " << render::PadRight("STATE", 10) << "  " << render::PadRight("USER", user_width) << "  "
            << render::PadRight("GPUS", 5) << "  " << render::PadRight("NAME", name_width) << "  WHY / WHEN\n";
  for (const auto& j : *jobs) {
    const std::string line = render::PadRight(Shown(j.id), 12) + "  " +
                             render::PadRight(model::JobStateName(slurm::GpumanState(j)), 10) + "  " +
                             render::PadRight(render::TruncateToWidth(EscapeControl(j.user), user_width), user_width) + "  " +
                             render::PadRight(std::to_string(j.gpus), 5) + "  " +
                             render::PadRight(render::TruncateToWidth(EscapeControl(j.name), name_width), name_width) + "  " +
                             EscapeControl(WhyOrWhen(j));
    ctx.out() << render::TruncateToWidth(line, render::LineLimit(term)) << "\n";
  }
  return kExitOk;
}

void PrintSlurmJob(Context& ctx, const slurm::SlurmJob& j) {
  auto row = [&](const char* label, const std::string& value) {
    if (!value.empty()) ctx.out() << "  " << label << EscapeControl(value) << "\n";
  };
  ctx.out() << "job " << Shown(j.id) << " (" << EscapeControl(j.name) << ")\n";
  row("state:      ", std::string(model::JobStateName(slurm::GpumanState(j))) + (j.reason.empty() ? "" : " — " + j.reason) +
                         " (Slurm " + j.state + ")");
  row("user:       ", j.user);
  row("gpus:       ", std::to_string(j.gpus) + (j.nodes.empty() ? "" : " on " + j.nodes));
  row("time limit: ", j.time_limit);
  row("after:      ", j.dependency);
  row("submitted:  ", j.submitted);
  row("started:    ", j.started);
  row("ended:      ", j.ended);
  if (j.exit_code && slurm::IsFinalSlurmState(j.state)) {
    row("exit code:  ", std::to_string(*j.exit_code) + (j.signal ? " (signal " + std::to_string(*j.signal) + ")" : ""));
  }
  row("cwd:        ", j.cwd);
  row("output:     ", j.output_path);
  row("from:       ", j.source);
}

// The job's output file: StdOut from slurmctld, else gpuman's default name in its
// directory (accounting does not keep the path).
Result<std::string> OutputPath(const slurm::SlurmJob& j) {
  if (!j.output_path.empty()) return j.output_path;
  if (!j.cwd.empty()) return j.cwd + "/gpuman-" + j.id + ".log";
  return MakeError(ErrorCode::kNotFound, "job " + Shown(j.id) + ": Slurm no longer says where its output went");
}

int LogsFromSlurm(const std::string& id, bool follow, Context& ctx, const SlurmCliDeps& deps) {
  auto job = slurm::FindJob(*deps.tools, id);
  if (!job) return FailSubmit(ctx, job.error());
  auto path = OutputPath(*job);
  if (!path) return FailSubmit(ctx, path.error());
  std::string state = job->state;
  std::streamoff offset = 0;
  while (true) {
    const bool final_before_read = slurm::IsFinalSlurmState(state);
    std::ifstream in(*path, std::ios::binary);
    if (in) {
      in.seekg(offset);
      std::string chunk((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      offset += static_cast<std::streamoff>(chunk.size());
      ctx.out() << chunk;
      ctx.out().flush();
      if (!ctx.out().good()) return kExitError;  // a full disk, a reader gone: said at the edge
    } else if (errno == EACCES) {
      return FailSubmit(ctx, MakeError(ErrorCode::kPermissionDenied, "job " + Shown(id) + ": cannot read its output " + *path + ": permission denied"));
    } else if (final_before_read || !follow) {
      if (slurm::GpumanState(*job) == model::JobState::kQueued && !follow) return kExitOk;  // nothing written yet
      return FailSubmit(ctx, MakeError(ErrorCode::kNotFound, "job " + Shown(id) + ": its output " + *path + ": no such file"));
    }
    if (!follow || final_before_read) return kExitOk;
    deps.sleep_ms(kPollMs / 2);
    auto now = slurm::JobState(*deps.tools, id);
    if (!now) return FailSubmit(ctx, now.error());
    state = *now;
  }
}

int WaitForSlurm(const std::string& id, bool json, Context& ctx, const SlurmCliDeps& deps) {
  auto fail = [&](const Error& e) {
    ctx.err() << "gpuman: error: " << EscapeControl(e.message) << "\n";
    return int{kJobGpumanFailed};
  };
  while (true) {
    auto state = slurm::JobState(*deps.tools, id);
    if (!state) return fail(state.error());
    if (slurm::IsFinalSlurmState(*state)) break;
    deps.sleep_ms(kPollMs);
  }
  auto job = slurm::FindJob(*deps.tools, id);
  if (!job) return fail(job.error());
  const int code = SlurmWaitExitCode(job->state, job->exit_code, job->signal);
  const model::JobState state = slurm::GpumanState(*job);
  if (json) {
    nlohmann::json out = JobJson(*job);
    out["schema_version"] = 1;
    out["ended_by_itself"] = job->state == "COMPLETED" || (job->state == "FAILED" && job->exit_code.has_value());
    out["wait_exit_code"] = code;
    ctx.out() << out.dump() << "\n";
  } else if (state != model::JobState::kSucceeded) {
    ctx.err() << "gpuman: job " << Shown(id) << " " << model::JobStateName(state)
              << (job->reason.empty() ? "" : ": " + EscapeControl(job->reason)) << " (Slurm " << job->state << ", exit " << code
              << ")\n";
  }
  return code;
}

}  // namespace

Result<bool> UsesSlurm(const std::string& name, const QueueArgs& args, const Config& config) {
  if (name == "daemon" || name == "drain" || name == "undrain" || name == "update") return false;
  const int prefixed = name == "submit" ? args.slurm_after : args.slurm_ids;
  const size_t given = name == "submit" ? args.after.size() : args.ids.size();
  if (prefixed > 0 && static_cast<size_t>(prefixed) != given) {
    return MakeError(ErrorCode::kInvalidArgument, std::string(name == "submit" ? "--after" : name) +
                                                      ": Slurm jobs (slurm:ID) and gpuman jobs cannot be mixed");
  }
  if (args.backend == std::optional<std::string>("gpuman")) {
    if (prefixed > 0) {
      return MakeError(ErrorCode::kInvalidArgument,
                       std::string(name == "submit" ? "--after" : name) + ": slurm:ID names a Slurm job, not one of --backend gpuman");
    }
    return false;
  }
  if (args.backend) return true;
  if (prefixed > 0) return true;
  return config.submit.backend == "slurm";
}

int SlurmWaitExitCode(const std::string& s, std::optional<int> exit_code, std::optional<int> signal) {
  if (s == "COMPLETED") return exit_code.value_or(0);
  if (s == "TIMEOUT") return kJobTimedOut;
  if (s == "CANCELLED" || s == "PREEMPTED" || s == "DEADLINE" || s == "REVOKED") return kJobCancelled;
  if (s == "OUT_OF_MEMORY") return kJobSignalBase + 9;  // the kernel's OOM killer sends SIGKILL
  if (s == "FAILED" || s == "SPECIAL_EXIT") {
    if (signal) return kJobSignalBase + *signal;
    if (exit_code && *exit_code != 0) return *exit_code;
  }
  return kJobGpumanFailed;  // NODE_FAIL, BOOT_FAIL, or a failure with no status of its own
}

std::map<std::string, std::string> SbatchEnvironment(const std::map<std::string, std::string>& env) {
  std::map<std::string, std::string> out = env;
  // They name this machine's GPUs and lease; on the node, `gpuman run` sets its own.
  for (std::string_view k : visibility::MachineBoundVariables()) out.erase(std::string(k));
  return out;
}

int RunSlurmQueueCommand(const std::string& name, const QueueArgs& args, Context& ctx, const SlurmCliDeps& deps) {
  if (name == "submit") return SubmitToSlurm(args, ctx, deps);
  if (name == "queue") return QueueFromSlurm(args, ctx, deps);
  std::vector<std::string> ids;
  for (const std::string& text : args.ids) {
    auto ref = model::ParseJobRef(text);  // Slurm writes a task of an array as 12_7 too
    if (!ref) {
      return name == "wait" ? (ctx.err() << "gpuman: error: " << text << " is not a Slurm job id\n", int{kExitUsage})
                            : FailSubmit(ctx, MakeError(ErrorCode::kInvalidArgument, text + " is not a Slurm job id"));
    }
    ids.push_back(model::FormatJobRef(*ref));
  }
  if (name == "show") {
    auto job = slurm::FindJob(*deps.tools, ids.front());
    if (!job) return FailSubmit(ctx, job.error());
    if (args.json) ctx.out() << JobJson(*job).dump(2) << "\n";
    else PrintSlurmJob(ctx, *job);
    return kExitOk;
  }
  if (name == "cancel" || name == "hold" || name == "resume") {
    int rc = kExitOk;
    for (const auto& id : ids) {
      const Status st = name == "cancel" ? slurm::Cancel(*deps.tools, id) : slurm::Hold(*deps.tools, id, name == "hold");
      if (!st) {
        ctx.err() << "gpuman: error: job " << Shown(id) << ": " << EscapeControl(st.error().message) << "\n";
        rc = ExitCodeFor(st.error().code);
      }
    }
    return rc;
  }
  if (name == "logs") return LogsFromSlurm(ids.front(), args.follow, ctx, deps);
  if (name == "wait") return WaitForSlurm(ids.front(), args.json, ctx, deps);
  return FailSubmit(ctx, MakeError(ErrorCode::kInvalidArgument, name + ": not available for Slurm jobs"));
}

int RunSlurmQueueCommand(const std::string& name, const QueueArgs& args, Context& ctx) {
  slurm::ExecSlurmTools tools(SbatchEnvironment(ctx.env().vars));
  std::error_code ec;
  SlurmCliDeps deps;
  deps.tools = &tools;
  deps.cwd = std::filesystem::current_path(ec).string();
  deps.gpuman_exe = ctx.layout().exe;
  deps.sleep_ms = [](int64_t ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); };
  return RunSlurmQueueCommand(name, args, ctx, deps);
}

}  // namespace gpuman::cli
