// Every command and option of gpuman, registered with CLI11 into the argument structs of
// cli/command_args.h, and everything else that needs CLI11's types: parsing (the one-command
// fast path and the whole tree), one-line parse errors, `help` text, and the walk that
// describes the tree for man pages and completion. The only unit that includes CLI11
// (cli/cli_options.h says why). The handlers never see CLI11: cli/app.cc dispatches the
// parsed CommandArgs through its command table.
#include "cli/cli_options.h"

#include <cctype>
#include <map>
#include <memory>
#include <regex>
#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

#include "base/strings.h"
#include "cli/command_tree.h"
#include "cli/exit_codes.h"
#include "cli/help_docs.h"
#include "cli/installed_layout.h"
#include "cli/slurm_submit.h"
#include "render/command_doc.h"

#ifndef GPUMAN_VERSION
#define GPUMAN_VERSION "0.0.0"
#endif

namespace gpuman::cli {
namespace {

// ---- Checks shared by several options ---------------------------------------------------

// Seconds in [min, max], finite numbers only: CLI::Range lets "nan" through (every
// comparison with NaN is false), which made `status --watch nan` a busy loop. `shown` is
// the range as help and errors print it ("0.1..86400").
CLI::Validator SecondsIn(double min, double max, const char* shown) {
  return CLI::Validator(
      [=](std::string& value) -> std::string {
        const std::optional<double> s = ParseFiniteDouble(value);
        if (!s) return "'" + value + "' is not a number of seconds";
        if (*s < min || *s > max) return value + " is not in " + shown + " seconds";
        return "";
      },
      std::string("SECONDS in ") + shown);
}

// ---- The commands, in the order --help lists them ---------------------------------------

// The GPU selection options of `select`, `run` and `submit`.
void AddSelectionOptions(CLI::App& cmd, SelectionArgs& args) {
  cmd.add_option("-n,--count", args.count, "Number of GPUs (default 1)")->check(CLI::Range(0, 4096));
  cmd.add_option("--gpus,-i,--id", args.gpus,
                 "Only these GPUs (indices, ranges such as 0-3, or UUIDs, comma-separated), or 'none'; -i/--id as nvidia-smi");
  cmd.add_option("--min-free-memory", args.min_free_memory, "Each GPU needs this much free memory, e.g. 20GiB");
  cmd.add_option("--max-utilization", args.max_utilization, "Each GPU at most this busy (percent)")
      ->check(CLI::Range(0, 100));
  cmd.add_option("--model", args.model, "GPU name contains this (case-insensitive), e.g. A100");
  cmd.add_option("--min-compute-capability", args.min_compute_capability, "e.g. 8.0");
  cmd.add_option("--require", args.require,
                 "GPUs that compute in these formats: tf32, bf16, fp8, fp4 (comma-separated; from the compute capability)");
  cmd.add_option("--exclude", args.exclude, "Never these GPUs (indices or UUIDs)")->delimiter(',');
  cmd.add_flag("--allow-shared", args.allow_shared,
               "Count a GPU as free although processes not started by gpuman use it");
  cmd.add_option("--gpu-memory", args.gpu_memory,
                 "A slice of this much memory on each GPU instead of whole GPUs, e.g. 20GiB (docs/share.md)");
  cmd.add_option("--prefer", args.prefer,
                 "fastest: the eligible GPUs with the highest peak throughput first (docs/selection.md)");
  cmd.add_flag("--mps", args.mps,
               "Run as MPS clients of the GPU's MPS control daemon, which the gpuman daemon starts; one GPU (docs/share.md)");
  cmd.add_option("--gpu-share", args.gpu_share,
                 "With --mps: at most this percent of the GPU's SMs (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE), 1..100");
  cmd.add_option("--mig", args.mig,
                 "MIG devices of this profile instead of whole GPUs, e.g. 1g.10gb; -n counts MIG devices (docs/share.md)");
}

CLI::App* AddStatusCommand(CLI::App& app, StatusArgs& args) {
  CLI::App* cmd = app.add_subcommand("status", "Show every GPU: memory, load, health and who holds it");
  cmd->add_flag("--json", args.json, "Print one JSON object (with --watch: one per line)");
  cmd->add_option("--format", args.format,
                  "text (default), json (as --json), or csv[,noheader][,nounits] as nvidia-smi's --format");
  cmd->add_option("--fields,--query-gpu", args.fields,
                  "With --format csv: the columns, e.g. index,memory.used,gpuman.holder (nvidia-smi's "
                  "--query-gpu names; docs/cli.md lists them)");
  cmd->add_option("--watch,-l,--loop", args.watch_seconds,
                  "Refresh every SECONDS until interrupted; -l/--loop as nvidia-smi")
      ->check(SecondsIn(0.1, 86400.0, "0.1..86400"));
  cmd->add_option("--iterations", args.iterations, "With --watch: stop after N refreshes")
      ->check(CLI::Range(1, 1000000000));
  cmd->add_option("--gpus,-i,--id", args.gpus,
                  "Only these GPUs: indices, ranges such as 0-3, or UUIDs, comma-separated; -i/--id as nvidia-smi");
  cmd->add_option("--units", args.units, "Text view memory: auto (GiB; MiB below 1 GiB) or mib (as nvidia-smi)")
      ->check(CLI::IsMember({"auto", "mib"}));
  cmd->add_flag("--compact,-c", args.compact,
                "One line per GPU with its users inline, alice(9.8G), as gpustat prints it");
  cmd->add_flag("--no-processes", args.no_processes, "Do not list processes");
  cmd->add_flag("--no-color", args.no_color, "Never use colour");
  cmd->add_flag("--allocation", args.allocation,
                "Only the GPUs of the allocation gpuman runs inside (Slurm job, container, CUDA_VISIBLE_DEVICES)");
  return cmd;
}

CLI::App* AddTopCommand(CLI::App& app, TopArgs& args) {
  CLI::App* cmd = app.add_subcommand("top", "Full-screen monitor: GPUs, their processes, leases and jobs");
  cmd->add_option("--interval", args.interval_seconds, "Seconds between samples (default 1; fractions allowed)")
      ->check(SecondsIn(0.1, 3600.0, "0.1..3600"));
  cmd->add_flag("--once", args.once, "Print one screen as text and exit (no terminal needed)");
  cmd->add_flag("--no-color", args.no_color, "Never use colour (also $NO_COLOR)");
  cmd->add_flag("--ascii", args.ascii, "ASCII bars and history, even in a UTF-8 locale");
  return cmd;
}

CLI::App* AddSelectCommand(CLI::App& app, SelectArgs& args) {
  CLI::App* cmd = app.add_subcommand("select", "Pick free GPUs and print them (leases only with --lease)");
  AddSelectionOptions(*cmd, args.selection);
  cmd->add_option("--format", args.format, "index | uuid | env | docker | json (default uuid)")
      ->check(CLI::IsMember({"index", "uuid", "env", "docker", "json"}));
  cmd->add_flag("--lease", args.lease,
                "Also lease the GPUs, for as long as the calling shell lives (or until `gpuman release`)");
  cmd->add_option("--wait", args.wait, "With --lease: wait until GPUs fit (optionally at most DURATION)")
      ->expected(0, 1);
  return cmd;
}

CLI::App* AddRunCommand(CLI::App& app, RunArgs& args) {
  CLI::App* cmd = app.add_subcommand("run", "Lease GPUs and run a command on them: gpuman run -n 2 -- CMD ARGS...");
  AddSelectionOptions(*cmd, args.selection);
  cmd->add_option("--wait", args.wait, "When no GPUs fit, wait (optionally at most DURATION, e.g. 30m)")
      ->expected(0, 1);
  cmd->add_flag("--index", args.index,
                "Give the job PCI-ordered indices plus CUDA_DEVICE_ORDER=PCI_BUS_ID instead of UUIDs");
  cmd->add_flag("--bind-numa", args.bind_numa, "Bind the job's CPUs and memory to the GPUs' NUMA node");
  cmd->add_flag("-q,--quiet", args.quiet, "Do not say which GPUs were leased");
  cmd->add_flag("--per-gpu", args.per_gpu,
                "One process per leased GPU with RANK, LOCAL_RANK, WORLD_SIZE (as torchrun starts them)");
  cmd->add_option("command", args.command, "The command and its arguments (after --)")->required();
  cmd->positionals_at_end();
  return cmd;
}

CLI::App* AddJupyterCommand(CLI::App& app, JupyterArgs& args) {
  CLI::App* cmd = app.add_subcommand("jupyter", "Jupyter kernels that hold a gpuman lease while they run");
  cmd->require_subcommand(1);
  CLI::App* install = cmd->add_subcommand(
      "install-kernel", "Write a kernelspec whose kernel runs under `gpuman run`: GPUs from its start to its end");
  install->add_option("--name", args.name, "The kernel's name (letters, digits, . _ -)")->required();
  AddSelectionOptions(*install, args.selection);
  install->add_option("--wait", args.wait, "When no GPUs fit as the kernel starts, wait (optionally at most DURATION)")
      ->expected(0, 1);
  install->add_flag("--bind-numa", args.bind_numa, "Bind the kernel's CPUs and memory to its GPUs' NUMA node");
  install->add_option("--display-name", args.display_name, "What the notebook's kernel menu shows");
  install->add_option("--python", args.python, "The kernel's Python (default python3 on PATH), with ipykernel");
  auto* system = install->add_flag("--system", args.system, "For every user: /usr/local/share/jupyter/kernels (root)");
  install->add_option("--prefix", args.prefix, "Into PREFIX/share/jupyter/kernels (a venv or conda environment)")
      ->excludes(system);
  return cmd;
}

CLI::App* AddDoctorCommand(CLI::App& app, DoctorArgs& args) {
  CLI::App* cmd = app.add_subcommand("doctor", "Check the driver, the GPUs, gpuman's setup and the frameworks: verdicts and fixes");
  cmd->add_flag("--json", args.json, "Print {\"checks\": [{name, status, message, fix}]}");
  cmd->add_option("--python", args.python, "Whose frameworks to probe (default python3 on PATH; a venv's or conda's)");
  cmd->add_option("--timeout", args.timeout_s, "Seconds each framework probe may take (default 30)")
      ->check(CLI::Range(1.0, 600.0));
  cmd->add_flag("--no-frameworks", args.no_frameworks, "Do not probe the frameworks");
  return cmd;
}

CLI::App* AddBenchCommand(CLI::App& app, BenchArgs& args) {
  CLI::App* cmd = app.add_subcommand(
      "bench", "Measure FP32 TFLOPS and memory bandwidth under a lease (CUDA driver); --prefer fastest ranks by them");
  cmd->add_option("--gpus", args.gpus, "Only these GPUs: indices or UUIDs, comma-separated (default: every GPU)");
  cmd->add_flag("--json", args.json, "Print JSON");
  return cmd;
}

CLI::App* AddLeasesCommand(CLI::App& app, LeasesArgs& args) {
  CLI::App* cmd = app.add_subcommand("leases", "List the GPU leases on this machine");
  cmd->add_flag("--json", args.json, "Print JSON");
  return cmd;
}

CLI::App* AddReleaseCommand(CLI::App& app, ReleaseArgs& args) {
  CLI::App* cmd = app.add_subcommand("release", "Free a lease of yours, or a stale one");
  cmd->add_option("ID", args.ids, "Lease id(s), as `gpuman leases` shows them")->required();
  cmd->add_flag("--force", args.force,
                "Root and the admin group: end what still runs on the lease (SIGTERM, SIGKILL after 5 s), then free it");
  return cmd;
}

CLI::App* AddTopoCommand(CLI::App& app, TopoArgs& args) {
  CLI::App* cmd = app.add_subcommand("topo", "GPU connection matrix (NVLink, PCIe) with CPU affinity and NUMA node");
  cmd->add_flag("--json", args.json, "Print JSON");
  cmd->add_flag("-l,--long", args.long_form,
                "Also each GPU's peak throughput (SMs, FP32 and tensor TFLOPS, memory GB/s) and what `gpuman bench` measured");
  cmd->add_flag("--no-color", args.no_color, "Never use colour");
  return cmd;
}

CLI::App* AddExplainCommand(CLI::App& app, ExplainArgs& args) {
  CLI::App* cmd = app.add_subcommand(
      "explain", "What a CUDA process will see through container, Slurm, CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER");
  cmd->add_flag("--json", args.json, "Print JSON");
  cmd->add_flag("--no-color", args.no_color, "Never use colour");
  cmd->add_option("--env", args.env, "Explain this environment instead of the current one: 'K=V K2=V2'");
  return cmd;
}

CLI::App* AddHealthCommand(CLI::App& app, HealthArgs& args) {
  CLI::App* cmd = app.add_subcommand(
      "health", "Check every GPU: Xid errors, ECC, retired pages, row remapping, throttling, lost GPUs");
  cmd->add_flag("--json", args.json, "Print one JSON object");
  cmd->add_flag("--no-color", args.no_color, "Never use colour");
  cmd->add_flag("--local", args.local, "Check here and now, without asking the daemon");
  cmd->add_option("--since", args.since, "Without the daemon: report kernel-log Xids this recent (default 24h)");
  return cmd;
}

CLI::App* AddHistoryCommand(CLI::App& app, HistoryArgs& args) {
  CLI::App* cmd = app.add_subcommand("history", "GPU utilization, memory and holders over time, from the daemon's history");
  cmd->add_option("--gpu", args.gpus, "Only these GPUs (index, UUID or UUID prefix; repeat or comma-separate)");
  cmd->add_option("--since", args.since, "Start: a duration before now (1h, 30m, 7d) or an ISO time (default 1h)");
  cmd->add_option("--until", args.until, "End: a duration before now or an ISO time (default now)");
  cmd->add_option("--step", args.step, "Average samples over steps of this length (10s, 5m, 1h)");
  cmd->add_option("--db", args.db, "History db to read (default $GPUMAN_HISTORY_DB, else the daemon's)");
  cmd->add_option("--slurm-job", args.slurm_job, "Only this Slurm job: its GPUs over its time (docs/slurm.md)")
      ->excludes("--since")
      ->excludes("--until");
  auto* intruders = cmd->add_flag("--intruders", args.intruders,
                                  "Intruders the daemon saw on leased GPUs, and what it did (docs/enforce.md)");
  intruders->excludes("--slurm-job")->excludes("--step");
  auto* slices = cmd->add_flag("--slices", args.slices,
                               "Memory slices whose holders went over their declaration, and what the daemon did "
                               "(docs/share.md)");
  slices->excludes("--slurm-job")->excludes("--step")->excludes(intruders);
  auto* json = cmd->add_flag("--json", args.json, "Print JSON (docs/history.md)");
  cmd->add_flag("--csv", args.csv, "Print CSV, one line per sample")->excludes(json)->excludes(intruders)->excludes(slices);
  cmd->add_flag("--no-color", args.no_color, "Never use colour");
  return cmd;
}

CLI::App* AddReportCommand(CLI::App& app, ReportArgs& args) {
  CLI::App* cmd = app.add_subcommand("report", "Write a self-contained HTML report of GPU usage from the daemon's history");
  cmd->add_option("--html", args.html, "Output file ('-' for stdout)")->required();
  cmd->add_option("--since", args.since, "Start: a duration before now or an ISO time (default 24h)");
  cmd->add_option("--until", args.until, "End: a duration before now or an ISO time (default now)");
  cmd->add_option("--db", args.db, "History db to read (default $GPUMAN_HISTORY_DB, else the daemon's)");
  cmd->add_option("--slurm-job", args.slurm_job, "Only this Slurm job: its GPUs over its time (docs/slurm.md)")
      ->excludes("--since")
      ->excludes("--until");
  return cmd;
}

// `--backend gpuman|slurm` on the queue commands that have a Slurm path; their job ids (and
// submit's --after) may be written `slurm:ID`: the prefix is taken off and counted in
// `args` (slurm_ids, slurm_after; cli/slurm_submit.h, UsesSlurm).
void AddSlurmBackendOptions(const std::vector<CLI::App*>& cmds, QueueArgs& args) {
  auto strip = [](int* counter) {
    return CLI::Validator(
        [counter](std::string& value) {
          if (value.rfind(kSlurmIdPrefix, 0) == 0) {
            value = value.substr(kSlurmIdPrefix.size());
            ++*counter;
          }
          return std::string();
        },
        "", "slurm:ID");
  };
  for (CLI::App* cmd : cmds) {
    const std::string name = cmd->get_name();
    if (name == "daemon" || name == "drain" || name == "undrain" || name == "update") continue;
    cmd->add_option("--backend", args.backend,
                    name == "submit" ? "gpuman (the machine's daemon) or slurm (sbatch); default from [submit] backend"
                                     : "gpuman or slurm (default from [submit] backend; slurm:ID ids are Slurm's)")
        ->check(CLI::IsMember({"gpuman", "slurm"}));
    if (name == "submit") {
      if (CLI::Option* after = cmd->get_option_no_throw("--after")) after->transform(strip(&args.slurm_after));
    } else if (CLI::Option* id = cmd->get_option_no_throw("ID")) {
      id->transform(strip(&args.slurm_ids));
    }
  }
}

// `slurm healthcheck`, `slurm prolog`, `slurm epilog` (cli/slurm_hooks.h).
void AddSlurmHookCommands(CLI::App& slurm, SlurmHookArgs& args) {
  CLI::App* healthcheck = slurm.add_subcommand(
      "healthcheck", "Slurm HealthCheckProgram: drain the node on a fatal GPU finding, resume it when healthy again");
  healthcheck->add_option("--node", args.node, "The Slurm node (default $SLURMD_NODENAME, else the host name)");
  healthcheck->add_flag("--local", args.local, "Check here and now, without asking the daemon");
  CLI::App* prolog = slurm.add_subcommand(
      "prolog", "Slurm Prolog: refuse a job whose GPUs are unhealthy or still busy; record the job's GPUs");
  prolog->add_option("--node", args.node, "The Slurm node (default $SLURMD_NODENAME, else the host name)");
  prolog->add_option("--idle-memory", args.idle_memory,
                          "Used memory a GPU without processes may show and still count as free (default 256MiB)");
  CLI::App* epilog = slurm.add_subcommand(
      "epilog", "Slurm Epilog: drain the node when the job left processes or memory on its GPUs; print its summary");
  epilog->add_option("--node", args.node, "The Slurm node (default $SLURMD_NODENAME, else the host name)");
  epilog->add_option("--grace", args.grace, "How long exiting processes get to leave the GPUs (default 10s)");
  epilog->add_option("--idle-memory", args.idle_memory,
                          "Used memory a GPU without processes may show and still count as free (default 256MiB)");
}

// `slurm job-summary ID` (cli/slurm_accounting.h).
void AddSlurmJobSummaryCommand(CLI::App& slurm, std::string& job_id) {
  CLI::App* cmd = slurm.add_subcommand("job-summary",
                                       "Print a Slurm job's one-line JSON GPU summary (for AdminComment), from its record and the history");
  cmd->add_option("job_id", job_id, "Slurm job id")->required();
}

CLI::App* AddSlurmCommand(CLI::App& app, SlurmArgs& args) {
  CLI::App* cmd = app.add_subcommand("slurm", "Node-side tools for Slurm admins (docs/slurm.md)");
  cmd->require_subcommand(1);
  CLI::App* gres_conf = cmd->add_subcommand(
      "gres-conf", "Print this node's gres.conf lines and slurm.conf Gres= value, from NVML");
  gres_conf->add_flag("--check", args.check,
                      "Compare what slurmd reports (slurmd -G: device files, Cores=, Links=) with NVML; exit 6 on a "
                      "mismatch");
  gres_conf->add_flag("--allow-missing", args.allow_missing,
                      "Print the file even when a GPU (lost, or without a minor number) is left out of it, "
                      "which shifts Slurm's indices of the GPUs after it (otherwise exit 6)");
  AddSlurmHookCommands(*cmd, args.hooks);
  AddSlurmJobSummaryCommand(*cmd, args.summary_job_id);
  return cmd;
}

}  // namespace

namespace {
// squeue's and scancel's selection of jobs by who, what state and what name.
void AddJobFilterOptions(CLI::App& cmd, JobFilterArgs& args) {
  cmd.add_option("--user", args.user, "Only jobs of this user (name or uid)");
  cmd.add_flag("--me", args.me, "Only your own jobs");
  cmd.add_option("--state", args.states, "Only jobs in these states: queued, held, starting, running, succeeded, failed, cancelled, timed_out (comma-separated)");
  cmd.add_option("--name", args.name, "Only jobs with this name (exactly)");
}
}  // namespace

std::vector<CLI::App*> AddQueueCommands(CLI::App& app, QueueArgs& args) {
  std::vector<CLI::App*> cmds;
  CLI::App* d = app.add_subcommand("daemon", "Serve the machine's job queue and lease table");
  d->add_option("--socket", args.socket, "Socket path (default /run/gpuman/gpuman.sock as root, else $XDG_RUNTIME_DIR/gpuman/gpuman.sock)");
  d->add_option("--state-dir", args.state_dir, "State directory (default /var/lib/gpuman as root, else $XDG_STATE_HOME/gpuman/daemon)");
  d->add_option("--metrics", args.metrics, "Serve Prometheus metrics at ADDRESS (default 127.0.0.1:9400)")
      ->expected(0, 1);
  cmds.push_back(d);

  CLI::App* submit = app.add_subcommand("submit", "Queue a job: gpuman submit -n 2 -- CMD ARGS...");
  AddSelectionOptions(*submit, args.selection);
  submit->add_option("--name", args.name, "A name for the job");
  submit->add_option("--priority", args.priority, "Higher runs first (default 0; above 0 only root and the admin group)");
  submit->add_option("--time-limit", args.time_limit, "SIGTERM after this long, e.g. 2h (default from the daemon, 24h)");
  submit->add_option("--output", args.output, "Log file for stdout and stderr; %j job id, %x name, %u user, %A array id, %a task (default gpuman-ID.log in the current directory)");
  submit->add_option("--array", args.array, "A job array: one task per index, as Slurm's 0-99, 1,5,9 or 0-98:2; %N runs at most N at once (0-99%8)");
  submit->add_option("--notify", args.notify,
                     "When the job ends, run 'PROGRAM ARGS' as you (no shell; %j id, %x name, %u user, %s state, %e exit "
                     "code), or `mail` for the machine's mail hook");
  submit->add_flag("--requeue", args.requeue, "Queue the job again if its GPU is lost");
  submit->add_flag("--per-gpu", args.per_gpu, "Refused: one process per GPU is `run --per-gpu`'s")->group("");
  submit->add_option("--after", args.after, "Start only after these jobs succeeded")->delimiter(',');
  submit->add_flag("--json", args.json, "Print {\"id\": N}");
  submit->add_option("command", args.command, "The command and its arguments (after --)")->required();
  submit->positionals_at_end();
  cmds.push_back(submit);

  CLI::App* queue = app.add_subcommand("queue", "List queued and running jobs");
  queue->add_flag("--all", args.all, "Include finished jobs");
  queue->add_flag("--json", args.json, "Print JSON (with --watch: one object per line)");
  queue->add_flag("-r,--expand", args.expand, "Each task of a job array on its own row (as squeue -r)");
  queue->add_option("--watch", args.watch, "Redraw every SECONDS (default 2) until interrupted, across daemon restarts")
      ->expected(0, 1);
  queue->add_option("--iterations", args.iterations, "With --watch: stop after N refreshes")
      ->check(CLI::Range(1, 1000000000));
  AddJobFilterOptions(*queue, args.filter);
  cmds.push_back(queue);

  CLI::App* show = app.add_subcommand("show", "Show one job");
  show->add_option("ID", args.ids, "Job id (12), array task (12_7) or array (its id)")->required()->expected(1);
  show->add_flag("--json", args.json, "Print JSON");
  cmds.push_back(show);

  for (const char* name : {"cancel", "hold", "resume"}) {
    CLI::App* c = app.add_subcommand(name, std::string(name) == "cancel" ? "Cancel jobs (running ones get SIGTERM)"
                                           : std::string(name) == "hold" ? "Keep queued jobs from starting"
                                                                          : "Let held jobs start again");
    c->add_option("ID", args.ids, "Job ids, array tasks (12_7) or whole arrays (or choose them with --all, --user, --state, --name)");
    c->add_flag("--all", args.filter.all, std::string("Every job of yours (with --user: of that user)"));
    AddJobFilterOptions(*c, args.filter);
    cmds.push_back(c);
  }
  CLI::App* update = app.add_subcommand("update", "Change the priority, time limit or name of queued or held jobs");
  update->add_option("ID", args.ids, "Job ids, array tasks (12_7) or whole arrays")->required();
  update->add_option("--priority", args.new_priority, "Higher runs first (above 0 only root and the admin group)");
  update->add_option("--time-limit", args.time_limit, "SIGTERM after this long, e.g. 2h");
  update->add_option("--name", args.new_name, "A new name");
  cmds.push_back(update);
  CLI::App* logs = app.add_subcommand("logs", "Print a job's output");
  logs->add_option("ID", args.ids, "Job id or array task (12_7)")->required()->expected(1);
  logs->add_flag("-f,--follow", args.follow, "Keep printing until the job ends");
  cmds.push_back(logs);
  CLI::App* wait = app.add_subcommand("wait", "Wait for jobs; exit with the exit code of the first that did not succeed, or 124 timed out, 125 gpuman failed, 193 cancelled");
  wait->add_option("ID", args.ids, "Job ids, array tasks (12_7) or whole arrays")->required();
  wait->add_flag("--json", args.json, "Print the outcome (state, exit code, signal, reason, times) as one JSON object");
  cmds.push_back(wait);
  for (const char* name : {"drain", "undrain"}) {
    CLI::App* c = app.add_subcommand(name, std::string(name) == "drain" ? "Stop giving a GPU to jobs (admins)"
                                                                         : "Give a drained GPU to jobs again (admins)");
    c->add_option("GPU", args.gpu, "GPU index or UUID")->required();
    if (std::string(name) == "drain") c->add_option("--reason", args.reason, "Why");
    cmds.push_back(c);
  }
  AddSlurmBackendOptions(cmds, args);
  return cmds;
}

namespace {

// ---- Reading the command line -----------------------------------------------------------

// "0.100000" -> "0.1", "4096" -> "4096": CLI11 prints Range bounds with std::to_string.
std::string TrimNumber(std::string n) {
  if (n.find('.') == std::string::npos) return n;
  while (!n.empty() && n.back() == '0') n.pop_back();
  if (!n.empty() && n.back() == '.') n.pop_back();
  return n;
}

bool StartsWith(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

// CLI11's own message on one line: newlines (and the runs of spaces after them) folded.
std::string Fold(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '\n' || c == '\r') c = ' ';
    if (c == ' ' && (out.empty() || out.back() == ' ')) continue;
    out += c;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

// One readable line for a CLI11 parse error (without "gpuman: error: "). `app` is the
// root; the deepest command the parse entered names the --help to point at.
std::string DescribeParseError(CLI::App& app, const CLI::ParseError& e) {
  std::string command = "gpuman";
  CLI::App* deepest = &app;
  for (std::vector<CLI::App*> subs = app.get_subcommands(); !subs.empty(); subs = deepest->get_subcommands()) {
    deepest = subs.front();
    command += " " + deepest->get_name();
  }
  const std::string hint = " (see " + command + " --help)";
  // An unknown option is the first thing to say, even when CLI11 stopped at something it
  // checks earlier (`run --frob` is "command is required" to CLI11).
  std::vector<std::string> extras = app.remaining(true);
  for (const std::string& arg : extras) {
    if (arg.size() > 1 && arg[0] == '-' && arg != "--") {
      const std::string typed = arg.substr(0, arg.find('='));
      // "did you mean": the closest long option of this command, when it is close.
      std::string best;
      size_t best_distance = typed.size() >= 7 ? 3 : 2;
      for (const CLI::Option* opt : deepest->get_options()) {
        for (const std::string& lname : opt->get_lnames()) {
          const size_t d = EditDistance(typed, "--" + lname);
          if (d < best_distance) {
            best_distance = d;
            best = "--" + lname;
          }
        }
      }
      return "unknown option " + typed + (best.empty() ? "" : " (did you mean " + best + "?)") + hint;
    }
  }
  const std::string what = e.what();
  const size_t colon = what.find(": ");
  const std::string name = colon == std::string::npos ? std::string() : what.substr(0, colon);
  const std::string detail = colon == std::string::npos ? what : what.substr(colon + 2);

  if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) {
    if (!extras.empty()) return "unexpected argument '" + extras.front() + "'" + hint;
    return Fold(what) + hint;
  }
  if (dynamic_cast<const CLI::ValidationError*>(&e) != nullptr && !name.empty()) {
    // CLI::Range: "Value V not in range A to B" (also when V is no number at all).
    static const std::regex range(R"(Value (.*) not in range (\S+) to (\S+))");
    // CLI::IsMember: "V not in {a,b}".
    static const std::regex member(R"((.*) not in \{(.*)\})");
    std::smatch m;
    if (std::regex_match(detail, m, range)) {
      const std::string value = m[1], lo = m[2], hi = m[3];
      const bool whole = lo.find('.') == std::string::npos && hi.find('.') == std::string::npos;
      const bool numeric = whole ? ParseInt(value[0] == '-' ? value.substr(1) : value).has_value()
                                 : ParseFiniteDouble(value).has_value();
      if (!numeric) return name + ": '" + value + "' is not a " + (whole ? "whole number" : "number");
      return name + ": " + value + " is not in " + TrimNumber(lo) + ".." + TrimNumber(hi);
    }
    if (std::regex_match(detail, m, member)) {
      std::string choices = m[2];
      for (size_t i = 0; (i = choices.find(',', i)) != std::string::npos; i += 2) choices.replace(i, 1, ", ");
      return name + ": '" + std::string(m[1]) + "' is not one of " + choices;
    }
    return Fold(what);
  }
  if (dynamic_cast<const CLI::ConversionError*>(&e) != nullptr) {
    static const std::regex convert(R"(Could not convert: (\S+) = (.*))");
    std::smatch m;
    if (std::regex_match(what, m, convert)) {
      const std::string option = m[1], value = m[2];
      const CLI::Option* opt = deepest->get_option_no_throw(option);
      const std::string type = opt != nullptr ? opt->get_type_name() : "";
      if (StartsWith(type, "INT") || StartsWith(type, "UINT")) return option + ": '" + value + "' is not a whole number";
      if (StartsWith(type, "FLOAT")) return option + ": '" + value + "' is not a number";
      if (opt != nullptr && opt->get_expected_min() == 0) return option + " takes no value ('" + value + "' given)";
      return option + ": '" + value + "' is not a valid value" + hint;
    }
    return Fold(what) + hint;
  }
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&e) != nullptr) {
    // e.g. "--watch: 1 required FLOAT:FLOAT in [0.1 - 86400] missing"
    if (!name.empty() && detail.find(" required ") != std::string::npos && detail.ends_with(" missing")) {
      return name + " needs a value" + hint;
    }
    // e.g. "ID: At Most 1 required but received 2": CLI11's wording, said plainly.
    static const std::regex at_most(R"(At Most (\d+) required but received (\d+))");
    std::smatch m;
    if (!name.empty() && std::regex_search(detail, m, at_most)) {
      return command + " takes " + (m[1] == "1" ? std::string("one ") + name : "at most " + std::string(m[1]) + " " + name) +
             " (" + std::string(m[2]) + " given)" + hint;
    }
    return Fold(what) + hint;
  }
  if (dynamic_cast<const CLI::RequiredError*>(&e) != nullptr) {
    std::string text = Fold(what);
    if (text.size() > 1 && std::islower(static_cast<unsigned char>(text[1]))) {  // "A subcommand", not "ID"
      text[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(text[0])));
    }
    return text + hint;
  }
  return Fold(what);
}

// `gpuman __supervise ...` is read by app.cc before any of this.

}  // namespace

// The root App and every command's argument struct; a tree may hold only some commands.
struct CommandTree::Parts {
  CLI::App app{"gpuman: GPU resource manager for shared multi-GPU machines", "gpuman"};
  CommandArgs args;
};

namespace {

using Parts = CommandTree::Parts;

// Every command, in the order --help lists them, and how it is registered. The queue
// commands (daemon, submit, queue, show, cancel, ...) are registered together: the entry
// without a name, which a tree for one command falls back to for any name not listed.
struct CommandEntry {
  std::string_view name;
  void (*add)(Parts&);
};
constexpr CommandEntry kCommands[] = {
    {"status", [](Parts& p) { AddStatusCommand(p.app, p.args.status); }},
    {"top", [](Parts& p) { AddTopCommand(p.app, p.args.top); }},
    {"select", [](Parts& p) { AddSelectCommand(p.app, p.args.select); }},
    {"run", [](Parts& p) { AddRunCommand(p.app, p.args.run); }},
    {"leases", [](Parts& p) { AddLeasesCommand(p.app, p.args.leases); }},
    {"jupyter", [](Parts& p) { AddJupyterCommand(p.app, p.args.jupyter); }},
    {"release", [](Parts& p) { AddReleaseCommand(p.app, p.args.release); }},
    {"topo", [](Parts& p) { AddTopoCommand(p.app, p.args.topo); }},
    {"list", [](Parts& p) { p.app.add_subcommand("list", "One line per GPU: index, name, UUID (as nvidia-smi -L)"); }},
    {"explain", [](Parts& p) { AddExplainCommand(p.app, p.args.explain); }},
    {"health", [](Parts& p) { AddHealthCommand(p.app, p.args.health); }},
    {"doctor", [](Parts& p) { AddDoctorCommand(p.app, p.args.doctor); }},
    {"bench", [](Parts& p) { AddBenchCommand(p.app, p.args.bench); }},
    {"history", [](Parts& p) { AddHistoryCommand(p.app, p.args.history); }},
    {"report", [](Parts& p) { AddReportCommand(p.app, p.args.report); }},
    {"", [](Parts& p) { AddQueueCommands(p.app, p.args.queue); }},
    {"slurm", [](Parts& p) { AddSlurmCommand(p.app, p.args.slurm); }},
    {"scenarios",
     [](Parts& p) { p.app.add_subcommand("scenarios", "List the simulated nodes usable with --simulate"); }},
    {"help",
     [](Parts& p) {
       CLI::App* help = p.app.add_subcommand("help", "Show the help of gpuman or of one command (as COMMAND --help does)");
       help->add_option("command", p.args.help_command, "The command to describe");
     }},
    {"completion",
     [](Parts& p) {
       CLI::App* completion =
           p.app.add_subcommand("completion", "Print a shell completion script: source <(gpuman completion bash)");
       completion->add_option("shell", p.args.completion_shell, "The shell")
           ->required()
           ->check(CLI::IsMember({"bash", "zsh"}));
     }},
};

// The root: version, global options, one subcommand required.
void AddRoot(Parts& p) {
  CLI::App& app = p.app;
  app.set_version_flag("--version", "gpuman " GPUMAN_VERSION);
  app.require_subcommand(1);
  app.fallthrough();  // global options may also follow the subcommand

  GlobalArgs& global = p.args.global;
  app.add_option("--simulate", global.simulate,
                 "Run against a simulated node (scenario name or .json file); also $GPUMAN_SIMULATE");
  app.add_option("--config", global.config_path, "Config file (default: $GPUMAN_CONFIG, ~/.config/gpuman/config.toml, /etc/gpuman/config.toml)");
  app.add_option("--nvml-library", global.nvml_library, "NVML library to load (default libnvidia-ml.so.1; also $GPUMAN_NVML_LIBRARY)");
}

// Help as CLI11 formats it, with each docs/NAME of its texts pointing at this gpuman's
// documents (PREFIX/share/doc/gpuman when installed, base/installed_layout.h), so that an
// installed gpuman never sends a user to the sources. The directory is looked up only when
// help is printed.
class DocReferenceFormatter : public CLI::Formatter {
 public:
  std::string make_help(const CLI::App* app, std::string name, CLI::AppFormatMode mode) const override {
    return PointDocReferencesAt(CLI::Formatter::make_help(app, std::move(name), mode), ThisInstallation().FindDocDir());
  }
};

}  // namespace

CommandTree::CommandTree() : parts_(std::make_unique<Parts>()) {
  AddRoot(*parts_);
  // Before the commands are added: each subcommand takes its parent's formatter.
  parts_->app.formatter(std::make_shared<DocReferenceFormatter>());
  for (const CommandEntry& entry : kCommands) entry.add(*parts_);
}

CommandTree::CommandTree(std::string_view command) : parts_(std::make_unique<Parts>()) {
  AddRoot(*parts_);
  if (command.empty()) return;
  const CommandEntry* named = nullptr;
  const CommandEntry* queue = nullptr;
  for (const CommandEntry& entry : kCommands) {
    if (entry.name.empty()) queue = &entry;
    else if (entry.name == command) named = &entry;
  }
  (named != nullptr ? named : queue)->add(*parts_);
}

bool CommandTree::Has(std::string_view command) {
  for (const CLI::App* sub : parts_->app.get_subcommands({})) {
    if (sub->get_name() == command) return true;
  }
  return false;
}

std::vector<std::string> CommandTree::CommandNames() {
  std::vector<std::string> names;
  for (const CLI::App* sub : parts_->app.get_subcommands({})) names.push_back(sub->get_name());
  return names;
}

CommandTree::~CommandTree() = default;

CLI::App& CommandTree::app() { return parts_->app; }

namespace {

// The command named on the command line (the first word that is neither an option nor the
// value of a global option), or "" when there is none.
std::string_view CommandName(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--simulate" || arg == "--config" || arg == "--nvml-library") {
      ++i;
      continue;
    }
    if (arg.empty() || arg[0] == '-') continue;
    return arg;
  }
  return {};
}

// After a clean parse: the arguments, with the command (and `slurm`'s subcommand) that
// CLI11 entered.
ParsedCommandLine Parsed(Parts& p) {
  ParsedCommandLine parsed;
  for (const CLI::App* sub : p.app.get_subcommands()) {
    p.args.command = sub->get_name();
    for (const CLI::App* child : sub->get_subcommands()) {
      if (p.args.command == "slurm") p.args.slurm.subcommand = child->get_name();
    }
  }
  parsed.args = std::move(p.args);
  return parsed;
}

// The fast path: a tree of the root and the named command only (or the root alone for
// `gpuman --version`). Only a clean parse is taken; anything else (help, completion, a
// parse error, a name that is no command) returns nullopt, and the whole tree parses the
// command line again, so every message and help text is the whole tree's. A clean parse
// here is one there too: the trees differ only in the other commands' Apps, and a word
// that names one is a subcommand to CLI11 only before any subcommand was parsed, which is
// where CommandName looked.
std::optional<ParsedCommandLine> ParseOneCommand(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "-h" || arg == "--help" || arg == "--help-all") return std::nullopt;
  }
  const std::string_view name = CommandName(argc, argv);
  if (name == "help" || name == "completion") return std::nullopt;
  CommandTree tree(name);
  if (!name.empty() && !tree.Has(name)) return std::nullopt;
  Parts& p = tree.parts();
  try {
    p.app.parse(argc, argv);
  } catch (const CLI::CallForVersion& e) {
    ParsedCommandLine done;
    done.exit_code = p.app.exit(e);
    return done;
  } catch (const CLI::Error&) {
    return std::nullopt;
  }
  if (name.empty()) return std::nullopt;
  return Parsed(p);
}

ParsedCommandLine ParseWholeTree(int argc, char** argv) {
  CommandTree tree;
  Parts& p = tree.parts();
  CLI::App& app = p.app;
  ParsedCommandLine failed;
  failed.args.command = std::string(CommandName(argc, argv));

  // CLI11 reports an unknown command as "a subcommand is required"; say what was meant.
  if (const std::string& arg = failed.args.command; !arg.empty() && !tree.Has(arg)) {
    std::string names;
    std::string closest;
    size_t closest_distance = arg.size() >= 5 ? 3 : 2;  // what counts as a typo, plus one
    for (const std::string& name : tree.CommandNames()) {
      names += (names.empty() ? "" : ", ") + name;
      if (const size_t d = EditDistance(arg, name); d < closest_distance) {
        closest_distance = d;
        closest = name;
      }
    }
    failed.error = MakeError(ErrorCode::kInvalidArgument,
                             "unknown command '" + arg + "' " +
                                 (closest.empty() ? "(commands: " + names + ")" : "(did you mean '" + closest + "'?)"));
    return failed;
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    failed.exit_code = app.exit(e);
    return failed;
  } catch (const CLI::CallForAllHelp& e) {
    failed.exit_code = app.exit(e);
    return failed;
  } catch (const CLI::CallForVersion& e) {
    failed.exit_code = app.exit(e);
    return failed;
  } catch (const CLI::ParseError& e) {
    failed.error = MakeError(ErrorCode::kInvalidArgument, DescribeParseError(app, e));
    return failed;
  }
  return Parsed(p);
}

}  // namespace

ParsedCommandLine ParseCommandLine(int argc, char** argv) {
  if (auto parsed = ParseOneCommand(argc, argv)) return std::move(*parsed);
  return ParseWholeTree(argc, argv);
}

// ---- Describing the tree: help, man pages, completion -----------------------------------

namespace {

using render::ValueKind;

// What option values are, for completion. Keyed by long name: an option means the same
// thing in every command that has it.
const std::map<std::string, ValueKind>& OptionKinds() {
  static const std::map<std::string, ValueKind> kinds = {
      {"--simulate", ValueKind::kScenario}, {"--config", ValueKind::kFile},
      {"--nvml-library", ValueKind::kFile}, {"--output", ValueKind::kFile},
      {"--html", ValueKind::kFile},         {"--db", ValueKind::kFile},
      {"--socket", ValueKind::kFile},       {"--state-dir", ValueKind::kFile},
      {"--gpus", ValueKind::kGpu},          {"--exclude", ValueKind::kGpu},
      {"--gpu", ValueKind::kGpu},
  };
  return kinds;
}

// Positionals by (command, name).
ValueKind PositionalKind(const std::string& command, const std::string& name) {
  if (name == "GPU") return ValueKind::kGpu;
  if ((command == "run" || command == "submit") && name == "command") return ValueKind::kCommand;
  if (command == "help" || command == "completion") return ValueKind::kChoice;
  return ValueKind::kText;
}

bool Visible(const CLI::App* sub) { return !sub->get_group().empty(); }

render::OptionDoc DescribeOption(const CLI::Option& opt) {
  render::OptionDoc doc;
  if (opt.nonpositional()) {
    for (const auto& s : opt.get_snames()) doc.names.push_back("-" + s);
    for (const auto& l : opt.get_lnames()) doc.names.push_back("--" + l);
  } else {
    doc.names.push_back(opt.get_name(true, false));
  }
  doc.description = opt.get_description();
  doc.default_value = opt.get_default_str();
  doc.required = opt.get_required();
  if (opt.get_type_size() == 0 || opt.get_expected_max() == 0) {  // a flag
    doc.kind = ValueKind::kNone;
    return doc;
  }
  // "INT:INT in [0 - 4096]" -> "INT": the check is in the description's words already.
  doc.value_name = opt.get_type_name().substr(0, opt.get_type_name().find(':'));
  if (doc.value_name.empty()) doc.value_name = "VALUE";
  doc.value_optional = opt.get_expected_min() == 0;
  doc.repeatable = opt.get_expected_max() >= CLI::detail::expected_max_vector_size;
  doc.kind = ValueKind::kText;
  for (const auto& name : doc.names) {
    auto it = OptionKinds().find(name);
    if (it != OptionKinds().end()) doc.kind = it->second;
  }
  return doc;
}

render::CommandDoc DescribeCommand(const CLI::App& sub, const std::vector<std::string>& command_names) {
  render::CommandDoc doc;
  doc.name = sub.get_name();
  doc.summary = sub.get_description();
  doc.footer = sub.get_footer();
  for (const CLI::Option* opt : sub.get_options()) {
    if (opt->get_group().empty()) continue;  // hidden
    render::OptionDoc o = DescribeOption(*opt);
    if (opt->nonpositional()) {
      doc.options.push_back(std::move(o));
    } else {
      o.kind = PositionalKind(doc.name, o.names.front());
      if (doc.name == "help") o.choices = command_names;
      if (doc.name == "completion") o.choices = {"bash", "zsh"};
      doc.positionals.push_back(std::move(o));
    }
  }
  for (const CLI::App* child : sub.get_subcommands(Visible)) {
    render::CommandDoc child_doc = DescribeCommand(*child, {});
    child_doc.parent = doc.parent.empty() ? doc.name : doc.parent + " " + doc.name;
    for (render::CommandDoc& grandchild : child_doc.subcommands) grandchild.parent = child_doc.parent + " " + child_doc.name;
    doc.subcommands.push_back(std::move(child_doc));
  }
  return doc;
}

}  // namespace

render::ProgramDoc DescribeCommandLine(const CLI::App& app) {
  render::ProgramDoc doc;
  doc.name = app.get_name();
  doc.version = GPUMAN_VERSION;
  doc.summary = "GPU resource manager for shared multi-GPU machines";
  doc.description = {
      "gpuman shows every GPU of a Linux machine and who holds it, picks free GPUs correctly, "
      "leases them race-free and runs jobs on them, and queues jobs through a per-machine daemon.",
      "It talks to the NVIDIA driver only through NVML, loaded at run time; --simulate runs "
      "against a simulated node instead.",
      "Run gpuman help COMMAND, or read gpuman-COMMAND(1), for each command.",
  };
  std::vector<const CLI::App*> subs = app.get_subcommands(Visible);
  std::vector<std::string> names;
  for (const CLI::App* sub : subs) names.push_back(sub->get_name());
  for (const CLI::Option* opt : app.get_options()) {
    if (!opt->get_group().empty() && opt->nonpositional()) doc.global_options.push_back(DescribeOption(*opt));
  }
  for (const CLI::App* sub : subs) doc.commands.push_back(DescribeCommand(*sub, names));
  doc.exit_codes = ExitCodeTable();
  doc.environment = EnvironmentTable();
  doc.files = FilesTable();
  return doc;
}

int RunHelp(const CLI::App& app, const std::optional<std::string>& command, std::ostream& out,
            std::ostream& err) {
  // The same formatter calls CLI11 makes for `--help`, so the two cannot differ.
  if (!command) {
    out << app.get_formatter()->make_help(&app, app.get_name(), CLI::AppFormatMode::Normal);
    return kExitOk;
  }
  for (const CLI::App* sub : app.get_subcommands(Visible)) {
    if (sub->get_name() == *command) {
      out << sub->get_formatter()->make_help(sub, app.get_name() + " " + sub->get_name(),
                                             CLI::AppFormatMode::Normal);
      return kExitOk;
    }
  }
  return ReportError(err, MakeError(ErrorCode::kInvalidArgument, "help: no command '" + *command + "' (see gpuman --help)"),
                     ExitPolicy::kPlain);
}

}  // namespace gpuman::cli
