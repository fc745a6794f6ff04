#include "cli/lease_commands.h"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <nlohmann/json.hpp>

#include "base/duration.h"
#include "base/file.h"
#include "base/interrupts.h"
#include "base/strings.h"
#include "policy/byte_size.h"
#include "cli/acquire.h"
#include "cli/exit_codes.h"
#include "cli/lease_broker.h"
#include "lease/force_release.h"
#include "model/mps_mark.h"
#include "render/format.h"
#include "store/proc_liveness.h"
#include "visibility/child_env.h"
#include "visibility/cuda_visible_devices.h"

namespace gpuman::cli {
namespace {

using ojson = nlohmann::ordered_json;

// Busy and not found are kExitNotEnoughGpus here (ExitPolicy::kLease, the command table).
int FailLease(Context& ctx, const Error& error) { return ctx.Fail(error); }

// `select --lease` ties the lease to its parent (the shell). Under `sudo -u` or `runuser`
// the parent is root's, ends as soon as gpuman does, and is not the caller's to hold a
// lease with: refused here, with the reason, whichever authority would take the lease (the
// daemon refuses it too, as "process N is not yours"; the machine table would take a lease
// that dies at once).
Status CheckLeaseHolder(pid_t holder) {
  const uid_t me = getuid();
  if (me == 0) return {};
  struct stat st{};
  if (stat(("/proc/" + std::to_string(holder)).c_str(), &st) != 0 || st.st_uid == me) return {};
  std::string comm = ReadWholeFile("/proc/" + std::to_string(holder) + "/comm").value_or("?");
  while (!comm.empty() && comm.back() == '\n') comm.pop_back();
  passwd* pw = getpwuid(st.st_uid);
  const std::string owner = pw ? pw->pw_name : std::to_string(st.st_uid);
  return MakeError(ErrorCode::kPermissionDenied,
                   "select --lease: the lease would live as long as its parent, process " + std::to_string(holder) + " (" +
                       EscapeControl(comm) + "), which is " + owner +
                       "'s, not yours (sudo -u and runuser start gpuman that way): run it from your own shell, or "
                       "use `gpuman run -- CMD`, whose lease lives as long as CMD");
}

}  // namespace

Result<std::optional<int64_t>> ParseWait(const std::optional<std::string>& wait) {
  if (!wait) return std::optional<int64_t>();
  if (wait->empty() || *wait == "forever") return std::optional<int64_t>(-1);
  auto ms = ParseDurationMs(*wait);
  if (!ms) return ms.error().WithContext("--wait");
  return std::optional<int64_t>(*ms);
}

int RunSelect(const SelectArgs& args, Context& ctx) {
  auto wait = ParseWait(args.wait);
  if (!wait) return FailLease(ctx, wait.error());
  policy::Selection selection;
  std::optional<int64_t> lease_id;
  std::optional<int> master_port;
  bool nested = false;
  model::MachineSnapshot snap;
  Acquired got;  // for a slice's environment (AddSliceEnv)
  std::optional<BlockInterrupts> interrupts;  // held until the lease's id is printed
  if (args.lease) {
    // The lease lives as long as the shell that ran us (our parent), like an exported variable.
    if (auto holder = CheckLeaseHolder(getppid()); !holder) return FailLease(ctx, holder.error());
    auto draft = DraftLease(ctx, getppid(), "select", "gpuman select --lease");
    if (!draft) return FailLease(ctx, draft.error());
    // Ctrl-C or SIGTERM while waiting ends the wait (128 + N) and takes no lease; one that
    // comes once the lease is ours is not acted on: what it is is printed.
    interrupts.emplace();
    int interrupted = 0;
    AcquireOptions options;
    options.wait_ms = *wait;
    options.waiting_for = std::to_string(args.selection.count) + " GPU(s)";
    options.interrupted_by = &interrupted;
    auto acquired = AcquireLease(ctx, args.selection, *draft, options);
    if (!acquired && interrupted) {
      ctx.err() << "gpuman: " << acquired.error().message << "\n";
      return 128 + interrupted;
    }
    if (!acquired) return FailLease(ctx, acquired.error());
    selection = acquired->selection;
    lease_id = acquired->lease.id;
    master_port = acquired->lease.master_port;
    nested = acquired->nested;
    snap = acquired->snapshot;
    got = std::move(*acquired);
  } else {
    // A preview through the machine's lease authority (the daemon when one runs): the same
    // step, rules, drains and leases a lease would meet (and the enclosing lease of a nested
    // select), so that what select prints is what `run` would get now.
    auto previewed = PreviewLease(ctx, args.selection);
    if (!previewed) return FailLease(ctx, previewed.error());
    selection = previewed->selection;
    snap = previewed->snapshot;
    got = std::move(*previewed);
  }

  std::vector<std::string> indices;
  for (int i : selection.indices) indices.push_back(std::to_string(i));
  const std::string uuids = visibility::FormatCudaVisibleDevices(selection.uuids);
  auto& out = ctx.out();
  if (args.format == "index") {
    out << Join(indices, ",") << "\n";
  } else if (args.format == "uuid") {
    out << uuids << "\n";
  } else if (args.format == "env") {
    // What `run` would give its child (visibility/child_env.h), for a shell to eval.
    visibility::ChildGpuEnvRequest gpu_env;
    gpu_env.uuids = selection.uuids;
    gpu_env.lease_id = lease_id;
    gpu_env.master_port = master_port;
    AddSliceEnv(got, gpu_env);
    for (const auto& var : visibility::ChildGpuEnv(gpu_env)) out << "export " << var.name << "=" << ShellWord(var.value) << "\n";
  } else if (args.format == "docker") {
    out << "--gpus '\"device=" << uuids << "\"'\n";
  } else {
    ojson doc = {{"schema_version", 1}, {"simulated", ctx.is_simulated()}};
    ojson gpus = ojson::array();
    for (size_t k = 0; k < selection.uuids.size(); ++k) {
      ojson g = {{"index", selection.indices[k]}, {"uuid", selection.uuids[k]}, {"name", nullptr}};
      for (const auto& d : snap.gpus) {
        if (d.uuid == selection.uuids[k] && d.name) g["name"] = *d.name;
      }
      gpus.push_back(g);
    }
    doc["gpus"] = gpus;
    doc["placement"] = selection.placement;
    doc["cuda_visible_devices"] = uuids;
    doc["lease_id"] = lease_id ? ojson(*lease_id) : ojson(nullptr);
    if (lease_id) doc["nested"] = nested;
    if (master_port) doc["master_port"] = *master_port;
    if (got.lease.gpu_memory_bytes) doc["gpu_memory_bytes"] = *got.lease.gpu_memory_bytes;
    if (got.mps) doc["mps"] = true;
    // What `--format env` would export, from the same builder (the Python package's env).
    visibility::ChildGpuEnvRequest gpu_env;
    gpu_env.uuids = selection.uuids;
    gpu_env.lease_id = lease_id;
    gpu_env.master_port = master_port;
    AddSliceEnv(got, gpu_env);
    ojson env = ojson::object();
    for (const auto& var : visibility::ChildGpuEnv(gpu_env)) env[var.name] = var.value;
    doc["env"] = env;
    out << doc.dump(2) << "\n";
  }
  return kExitOk;
}

int RunLeases(const LeasesArgs& args, Context& ctx) {
  auto live = LiveLeases(ctx);
  if (!live) return FailLease(ctx, live.error());
  // GPU indices are a convenience: each lease recorded them when it was taken, so listing
  // leases asks the driver nothing (a lease recorded without them shows UUIDs only).
  auto index_of = [](const model::Lease& l, size_t i) -> std::optional<int> {
    if (i >= l.gpu_indices.size() || l.gpu_indices[i] < 0) return std::nullopt;
    return l.gpu_indices[i];
  };
  const int64_t now = ctx.clock().NowUnixMs();
  if (args.json) {
    ojson list = ojson::array();
    for (const auto& l : *live) {
      ojson gpus = ojson::array();
      for (size_t i = 0; i < l.gpu_uuids.size(); ++i) {
        const auto index = index_of(l, i);
        gpus.push_back({{"uuid", l.gpu_uuids[i]}, {"index", index ? ojson(*index) : ojson(nullptr)}});
      }
      ojson procs = ojson::array();
      for (const auto& p : l.processes) procs.push_back({{"pid", p.pid}, {"start_time_ticks", p.start_time_ticks}});
      ojson entry = {{"id", l.id}, {"uid", l.uid}, {"user", l.user}, {"kind", l.kind}, {"command", l.command},
                    {"created", render::FormatIsoUtcMillis(l.created_unix_ms)},
                    {"created_unix_ms", l.created_unix_ms}, {"host", l.host}, {"gpus", gpus}, {"processes", procs},
                    {"idle_since_unix_ms", l.idle_since_unix_ms ? ojson(*l.idle_since_unix_ms) : ojson(nullptr)},
                    {"master_port", l.master_port ? ojson(*l.master_port) : ojson(nullptr)},
                    {"gpu_memory_bytes", l.gpu_memory_bytes ? ojson(*l.gpu_memory_bytes) : ojson(nullptr)},
                    {"mps", l.mps},
                    {"gpu_share_percent", l.gpu_share_percent ? ojson(*l.gpu_share_percent) : ojson(nullptr)}};
      list.push_back(std::move(entry));
    }
    ctx.out() << ojson{{"schema_version", 1}, {"leases", list}}.dump(2) << "\n";
    return kExitOk;
  }
  if (live->empty()) {
    ctx.out() << "no leases\n";
    return kExitOk;
  }
  // On a terminal a line is cut to its width; to a pipe or a file nothing is (USER grows).
  const render::TerminalInfo term = ctx.Terminal(true);
  int user_width = 10;
  int gpus_width = 14;
  std::vector<std::string> gpu_cells;
  for (const auto& l : *live) {
    std::vector<std::string> gpus;
    for (size_t i = 0; i < l.gpu_uuids.size(); ++i) {
      const auto index = index_of(l, i);
      gpus.push_back(index ? std::to_string(*index) : l.gpu_uuids[i].substr(0, 12));
    }
    // A slice says how much of each GPU it declares: "3 (20 GiB)".
    // An MPS lease says so, with its --gpu-share: "3 (20 GiB, MPS)", "3 (MPS 25%)".
    std::string note = l.gpu_memory_bytes ? policy::FormatByteSize(*l.gpu_memory_bytes) : "";
    if (l.mps) note += (note.empty() ? "" : ", ") + model::MpsMark(l);
    gpu_cells.push_back(Join(gpus, ",") + (note.empty() ? "" : " (" + note + ")"));
    gpus_width = std::max(gpus_width, render::DisplayWidth(gpu_cells.back()));
    if (!term.cut_to_width) user_width = std::max(user_width, render::DisplayWidth(EscapeControl(l.user)));
  }
  ctx.out() << render::PadLeft("ID", 5) << "  " << render::PadRight("USER", user_width) << "  "
            << render::PadRight("GPUS", gpus_width) << "  " << render::PadRight("AGE", 8) << "  "
            << render::PadRight("KIND", 6) << "  " << render::PadRight("IDLE", 8) << "  COMMAND\n";
  for (size_t n = 0; n < live->size(); ++n) {
    const model::Lease& l = (*live)[n];
    // The command is a user's command line or a job's name: escaped, never sent raw.
    std::string line = render::PadLeft(std::to_string(l.id), 5) + "  " +
                       render::PadRight(render::TruncateToWidth(EscapeControl(l.user), user_width), user_width) +
                       "  " + render::PadRight(gpu_cells[n], gpus_width) + "  " +
                       render::PadRight(FormatDurationMs(now - l.created_unix_ms), 8) + "  " +
                       render::PadRight(EscapeControl(l.kind), 6) + "  " +
                       render::PadRight(l.idle_since_unix_ms ? FormatDurationMs(now - *l.idle_since_unix_ms) : "-", 8) +
                       "  " + EscapeControl(l.command);
    ctx.out() << render::TruncateToWidth(line, render::LineLimit(term)) << "\n";
  }
  return kExitOk;
}

namespace {

// `release --force`: steps until nothing runs on the lease and it is freed. The authority
// signals (SIGTERM, then SIGKILL after lease::kForceReleaseGraceMs); we only ask again.
Status ForceRelease(LeaseBroker& broker, int64_t id, Context& ctx) {
  constexpr int kStepMs = 100;
  constexpr int64_t kGiveUpMs = lease::kForceReleaseGraceMs + 10000;
  bool said = false;
  for (int64_t waited = 0;; waited += kStepMs) {
    auto left = broker.ForceReleaseStep(id);
    if (!left) return left.error();
    if (*left == 0) return {};
    if (!said) {
      ctx.err() << "gpuman: ending " << *left << (*left == 1 ? " process" : " processes") << " of lease " << id
                << " (SIGTERM, SIGKILL after " << lease::kForceReleaseGraceMs / 1000 << " s)\n";
      said = true;
    }
    if (waited >= kGiveUpMs) {
      return MakeError(ErrorCode::kBusy, "lease " + std::to_string(id) + ": " + std::to_string(*left) +
                                             " of its processes still live after SIGKILL (uninterruptible?); not freed");
    }
    usleep(kStepMs * 1000);
  }
}

}  // namespace

int RunRelease(const ReleaseArgs& args, Context& ctx) {
  // The lease authority (daemon or machine lease table) checks who may release what.
  auto broker = ctx.Broker();
  if (!broker) return FailLease(ctx, broker.error());
  int rc = kExitOk;
  for (int64_t id : args.ids) {
    Status r = args.force ? ForceRelease(**broker, id, ctx) : (*broker)->Release(id);
    if (!r) {
      ctx.err() << "gpuman: error: " << r.error().message
                << (r.error().code == ErrorCode::kNotFound ? " (see `gpuman leases`)" : "") << "\n";
      rc = r.error().code == ErrorCode::kNotFound ? int{kExitUsage} : ExitCodeFor(r.error().code);
    } else {
      ctx.err() << "gpuman: released lease " << id << "\n";
    }
  }
  return rc;
}

}  // namespace gpuman::cli
