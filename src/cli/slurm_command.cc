#include "cli/slurm_command.h"

#include <unistd.h>


#include "base/strings.h"
#include "cli/exit_codes.h"
#include "cli/slurm_accounting.h"
#include "slurm/capture.h"
#include "slurm/gres_conf_gen.h"
#include "slurm/node_facts.h"

namespace gpuman::cli {
namespace {

std::string ShortHostName() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) return "localhost";
  std::string name = host;
  if (const size_t dot = name.find('.'); dot != std::string::npos) name.resize(dot);
  return name;
}

}  // namespace

int RunSlurm(const SlurmArgs& args, Context& ctx) {
  if (auto code = RunSlurmHooks(args.subcommand, args.hooks, ctx)) return *code;
  if (args.subcommand == "job-summary") return RunSlurmJobSummary(args.summary_job_id, ctx);
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
  const std::string node = ctx.env().Get("SLURMD_NODENAME").value_or(ShortHostName());
  if (!args.check) {
    const slurm::GresConf conf = slurm::GenerateGresConf(*snap, node);
    if (!conf.missing.empty() && !args.allow_missing) {
      // A shorter file moves every later GPU to a lower Slurm index: jobs would get the
      // wrong devices. Nothing on stdout, so that `> gres.conf` is visibly empty.
      for (const std::string& p : conf.problems) ctx.err() << "gpuman: error: " << EscapeControl(p) << "\n";
      ctx.err() << "gpuman: error: slurm gres-conf: " << conf.missing.size() << " of " << snap->gpus.size()
                << " GPU(s) missing (GPU " << conf.missing.front()
                << (conf.missing.size() > 1 ? " first" : "")
                << "): the GPUs after it would get other Slurm indices; fix or remove the GPU, or pass "
                   "--allow-missing to write the shorter file anyway\n";
      return kExitUnhealthy;
    }
    ctx.out() << "# gres.conf for " << node << " (gpuman slurm gres-conf), GPUs in PCI bus order\n";
    for (const std::string& line : conf.lines) ctx.out() << line << "\n";
    for (const std::string& line : conf.mig_comments) ctx.out() << EscapeControl(line) << "\n";
    ctx.out() << "# slurm.conf: NodeName=" << node << " ... Gres=" << conf.node_gres << "\n";
    if (!conf.mig_node_gres.empty()) {
      ctx.out() << "# slurm.conf with AutoDetect=nvml: Gres= also " << conf.mig_node_gres << "\n";
    }
    for (const std::string& p : conf.problems) ctx.err() << "gpuman: warning: " << EscapeControl(p) << "\n";
    return conf.lines.empty() && conf.mig_comments.empty() && !snap->gpus.empty() ? kExitError : kExitOk;
  }
  auto captured = slurm::RunCapture({"slurmd", "-G"});
  if (!captured) {
    return ctx.Fail(captured.error().WithContext("slurm gres-conf --check"));
  }
  if (captured->exit_code != 0) {
    std::string last = std::string(Trim(captured->output));
    if (const size_t nl = last.rfind('\n'); nl != std::string::npos) last = last.substr(nl + 1);
    ctx.err() << "gpuman: error: slurm gres-conf --check: slurmd -G exited " << captured->exit_code << ": "
              << EscapeControl(last) << "\n";
    return kExitError;
  }
  const auto gres = slurm::ParseSlurmdGres(captured->output);
  const slurm::GresCheck check = slurm::CheckGres(gres, *snap, slurm::MinorOfDeviceFile);
  for (const std::string& m : check.mismatches) ctx.out() << "mismatch: " << EscapeControl(m) << "\n";
  for (const std::string& n : check.notes) ctx.out() << "note: " << EscapeControl(n) << "\n";
  if (!check.mismatches.empty()) return kExitUnhealthy;
  ctx.out() << "ok: slurmd's " << snap->gpus.size() << " GPU(s) are NVML's\n";
  return kExitOk;
}

}  // namespace gpuman::cli
