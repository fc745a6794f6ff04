#include "cli/inspect_commands.h"

#include <unistd.h>

#include <sstream>

#include <fmt/format.h>

#include "base/strings.h"
#include "cli/acquire.h"
#include "cli/bench_store.h"
#include "cli/daemon_sample.h"
#include "cli/exit_codes.h"
#include "cli/slurm_node.h"
#include "devices/process_inspector.h"
#include "render/explain_view.h"
#include "render/topo_view.h"
#include "visibility/resolver.h"

namespace gpuman::cli {

int RunTopo(const TopoArgs& args, Context& ctx) {
  auto source = ctx.Devices();
  if (!source) {
    return ctx.Fail(source.error());
  }
  devices::SnapshotOptions options;
  options.topology = true;
  auto snap = (*source)->Snapshot(options);
  if (!snap) {
    return ctx.Fail(snap.error());
  }
  render::StatusOptions opts;
  opts.simulated = ctx.is_simulated();
  if (ctx.simulation()) opts.scenario = ctx.simulation()->scenario_name;
  if (args.json) {
    ctx.out() << render::TopoToJson(*snap, opts).dump(2) << "\n";
  } else {
    ctx.out() << render::RenderTopoText(*snap, opts, ctx.Terminal(args.no_color));
    if (args.long_form) {
      std::vector<std::string> warnings;
      const auto measured = MeasuredFp32(BenchFilePaths(ctx.env(), getuid()), warnings);
      for (const auto& w : warnings) ctx.err() << "gpuman: warning: " << w << "\n";
      ctx.out() << render::RenderPeakTable(*snap, measured);
    }
  }
  return kExitOk;
}

Result<std::map<std::string, std::string>> ParseEnvAssignments(const std::vector<std::string>& values) {
  std::map<std::string, std::string> env;
  for (const auto& value : values) {
    std::istringstream words(value);
    for (std::string word; words >> word;) {
      size_t eq = word.find('=');
      if (eq == std::string::npos || eq == 0) {
        return MakeError(ErrorCode::kInvalidArgument, "--env: '" + word + "' is not NAME=VALUE");
      }
      env[word.substr(0, eq)] = word.substr(eq + 1);
    }
  }
  return env;
}

int RunExplain(const ExplainArgs& args, Context& ctx) {
  visibility::Environment env = ctx.env().vars;
  if (!args.env.empty()) {
    auto parsed = ParseEnvAssignments(args.env);
    if (!parsed) {
      ctx.err() << "gpuman: error: " << parsed.error().message << "\n";
      return kExitUsage;
    }
    env = *parsed;
  }
  visibility::VisibilityReport report;
  auto source = ctx.Devices();
  Result<model::MachineSnapshot> snap = source ? (*source)->Snapshot() : Result<model::MachineSnapshot>(source.error());
  if (!snap) {
    // The doctor case: still explain the variables, and say why there are no GPUs.
    report = visibility::ExplainWithoutDriver(env, snap.error().message);
  } else {
    devices::EnrichProcesses(*snap, ctx.Inspector());  // who owns each GPU process
    visibility::ResolveOptions options;
    options.current_uid = getuid();
    // Everyone's leases (the daemon's table when one runs): a GPU leased to someone else
    // is worth a warning. Not being able to read them is worth a note, never a failure.
    if (auto live = LiveLeases(ctx)) {
      options.leases = std::move(*live);
    } else {
      options.leases_error = live.error().message;
    }
    // The node's Slurm facts (gres.conf, confinement) describe this process, not a given --env.
    if (args.env.empty()) options.slurm_node = SlurmNodeForJob(env, *snap);
    report = visibility::Resolve(env, snap->gpus, options);
  }
  // Where the GPU facts came from: the daemon's sample (how old), or NVML read here.
  const DaemonSampleSource* sample = ctx.daemon_sample();
  const bool from_daemon = snap && sample && sample->last_age_ms() >= 0;
  if (args.json) {
    auto doc = render::ExplainToJson(report);
    doc["simulated"] = ctx.is_simulated();
    if (snap) {
      doc["source"] = from_daemon ? nlohmann::ordered_json{{"from", "daemon"}, {"age_ms", sample->last_age_ms()}}
                                  : nlohmann::ordered_json{{"from", "nvml"}, {"age_ms", 0}};
    }
    ctx.out() << doc.dump(2) << "\n";
  } else {
    if (ctx.simulation()) ctx.out() << "[SIMULATED: " << ctx.simulation()->scenario_name << "]\n";
    ctx.out() << render::RenderExplainText(report, ctx.Terminal(args.no_color));
    if (from_daemon) {
      ctx.out() << fmt::format("GPU facts: the daemon's sample, {:.1f} s old\n",
                               static_cast<double>(sample->last_age_ms()) / 1000.0);
    }
  }
  return kExitOk;
}

int RunList(Context& ctx) {
  auto source = ctx.Devices();
  if (!source) return ctx.Fail(source.error());
  auto snap = (*source)->Snapshot(devices::FieldOptions(devices::kFieldIdentity));
  if (!snap) return ctx.Fail(snap.error());
  // nvidia-smi -L's form, so scripts and habits carry over: "GPU 0: NAME (UUID: GPU-...)".
  for (const auto& g : snap->gpus) {
    ctx.out() << "GPU " << g.index << ": " << EscapeControl(g.name.value_or("unknown")) << " (UUID: "
              << g.uuid.value_or("unknown") << ")\n";
  }
  return kExitOk;
}

}  // namespace gpuman::cli
