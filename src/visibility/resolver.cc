// Resolve(): the layers of a process environment, applied outermost first, and the
// warnings `gpuman explain` prints. The CUDA rules themselves are in
// cuda_visible_devices.cc; this file composes them with the enclosing allocations and
// the machine's state (health, other users' leases and processes, MIG mode).
//
// Composition, in the host's numbering:
//   1. container (NVIDIA_VISIBLE_DEVICES) and Slurm (SLURM_STEP_GPUS/SLURM_JOB_GPUS)
//      each restrict the set of GPUs; their intersection is "the allocation";
//   2. CUDA_DEVICE_ORDER fixes the enumeration order (estimated on mixed machines);
//   3. CUDA_VISIBLE_DEVICES, if set, picks and orders devices from the host enumeration;
//      if unset, CUDA sees the allocation (or every GPU) in enumeration order.
// Slurm indices are mapped to GPUs through gres.conf and minor numbers (slurm_gpus.cc); in
// a device-constrained job, integer CUDA_VISIBLE_DEVICES entries index the allocation's GPUs
// in CUDA order (job-local), and a CUDA_VISIBLE_DEVICES that Slurm itself set adds nothing.
// A GPU that CUDA_VISIBLE_DEVICES names outside the allocation stays in the visible list
// marked is_outside_allocation: whether CUDA can really open it depends on cgroup device
// confinement we cannot see, so we show it and warn instead of guessing.
#include "visibility/resolver.h"

#include <algorithm>
#include <set>

#include "base/strings.h"
#include "model/intruders.h"
#include "visibility/allocation.h"
#include "visibility/resolver_text.h"

namespace gpuman::visibility {
namespace {

using detail::GpuLabel;
using detail::JoinIndices;

void Warn(VisibilityReport& report, WarningCode code, std::string message) {
  report.warnings.push_back(Warning{code, std::move(message)});
}

struct Allocation {
  std::optional<std::set<int>> gpus;  // nullopt: nothing restricts
  std::vector<std::string> sources;   // "SLURM_STEP_GPUS=1,2"

  void Restrict(const std::vector<PhysicalIndex>& list, std::string source) {
    std::set<int> set;
    for (PhysicalIndex i : list) set.insert(i.value);
    if (gpus) {
      std::set<int> both;
      std::set_intersection(gpus->begin(), gpus->end(), set.begin(), set.end(),
                            std::inserter(both, both.begin()));
      set = std::move(both);
    }
    gpus = std::move(set);
    sources.push_back(std::move(source));
  }
  bool Allows(PhysicalIndex i) const { return !gpus || gpus->count(i.value) > 0; }
};

void AddContainerLayer(const Environment& env, const std::vector<model::DeviceSnapshot>& gpus,
                       VisibilityReport& report, Allocation& allocation) {
  const auto value = GetVar(env, "NVIDIA_VISIBLE_DEVICES");
  if (!value) return;
  const ContainerDevices container = ParseNvidiaVisibleDevices(value, gpus);
  Layer layer{"container", "NVIDIA_VISIBLE_DEVICES", std::string(*value), ""};
  switch (container.mode) {
    case ContainerMode::kUnrestricted:
      layer.effect = "void/empty: plain runc, the container toolkit restricts nothing";
      break;
    case ContainerMode::kAll:
      layer.effect = "all: every host GPU is injected into the container";
      break;
    case ContainerMode::kNone:
      layer.effect = "none: driver libraries only, no GPU";
      allocation.Restrict({}, "NVIDIA_VISIBLE_DEVICES=none");
      break;
    case ContainerMode::kList:
      layer.effect = "injects host GPU(s) " + JoinIndices(container.devices) +
                     "; inside the container they are renumbered from 0";
      allocation.Restrict(container.devices, "NVIDIA_VISIBLE_DEVICES=" + std::string(*value));
      break;
  }
  for (const std::string& problem : container.problems) {
    Warn(report, WarningCode::kInvalidEntry,
         "NVIDIA_VISIBLE_DEVICES " + problem + "; the container runtime would refuse it");
  }
  report.layers.push_back(std::move(layer));
}

// "Slurm GPU 3 -> /dev/nvidia3 -> GPU 3 (GPU-c9d8e7f6…)", one per Slurm index.
std::string MappingText(const SlurmGpus& slurm, const std::vector<model::DeviceSnapshot>& gpus) {
  std::string out;
  for (const SlurmGpuMapping& m : slurm.mapping) {
    out += out.empty() ? "" : "; ";
    out += "Slurm GPU " + std::to_string(m.slurm_index);
    if (m.file) out += " -> " + *m.file;
    if (m.minor) out += " (minor " + std::to_string(*m.minor) + ")";
    const model::DeviceSnapshot* gpu = m.index ? FindGpu(gpus, *m.index) : nullptr;
    out += gpu != nullptr ? " -> " + detail::GpuIdLabel(*gpu) : " -> no GPU";
  }
  return out;
}

void AddSlurmLayer(const Environment& env, const std::vector<model::DeviceSnapshot>& gpus,
                   const ResolveOptions& options, VisibilityReport& report, Allocation& allocation) {
  const SlurmNode* node = options.slurm_node ? &*options.slurm_node : nullptr;
  auto slurm = ParseSlurmGpus(env, gpus, node);
  if (!slurm) return;
  Layer layer{"slurm", slurm->variable, slurm->value, ""};
  layer.effect = "allocation: host GPU(s) " + JoinIndices(slurm->devices) + "; " + MappingText(*slurm, gpus) +
                 " [" + slurm->mapping_source + "]; " +
                 (slurm->is_constrained ? "devices constrained (" + slurm->constrained_reason +
                                              "): CUDA_VISIBLE_DEVICES is job-local, numbered from 0"
                                        : "devices not constrained (" + slurm->constrained_reason +
                                              "): CUDA_VISIBLE_DEVICES holds node indices");
  allocation.Restrict(slurm->devices, slurm->variable + "=" + slurm->value);
  for (const std::string& problem : slurm->problems) {
    Warn(report, WarningCode::kInvalidEntry, slurm->variable + " " + problem);
  }
  if (node != nullptr && !GresInPciOrder(*node, gpus)) {
    std::string order;
    const auto nvml = GresToNvml(*node, gpus);
    for (size_t k = 0; k < nvml.size(); ++k) {
      if (nvml[k]) order += (order.empty() ? "" : ",") + std::to_string(nvml[k]->value);
    }
    Warn(report, WarningCode::kGresOrderNotPci,
         "gres.conf (" + node->gres_path + ") lists the GPUs in an order that is not PCI bus order (Slurm GPU 0, 1, ... "
         "are NVML GPUs " + order + "): Slurm's integer indices are not nvidia-smi's" +
             (slurm->is_constrained ? "" : ", and the CUDA_VISIBLE_DEVICES Slurm sets names other GPUs than the job holds") +
             "; gpuman maps them through minor numbers and hands jobs UUIDs");
  }
  report.layers.push_back(std::move(layer));
  report.slurm = std::move(slurm);
}

// A process on one of the job's GPUs that is not one of the job's processes (its cgroup):
// another job or a user outside Slurm shares the GPU.
void WarnForeignProcesses(const std::vector<model::DeviceSnapshot>& gpus, const ResolveOptions& options,
                          VisibilityReport& report) {
  if (!report.slurm || !options.slurm_node || !options.slurm_node->job_pids) return;
  const std::set<uint32_t>& mine = *options.slurm_node->job_pids;
  for (PhysicalIndex i : report.slurm->devices) {
    const model::DeviceSnapshot* gpu = FindGpu(gpus, i);
    if (gpu == nullptr) continue;
    std::string list;
    size_t count = 0;
    for (const model::GpuProcess& p : gpu->processes) {
      if (mine.count(p.pid) > 0) continue;
      if (++count <= 3) {
        list += (list.empty() ? "" : ", ") + std::string("pid ") + std::to_string(p.pid) +
                (p.command ? " " + *p.command : "") + (p.uid ? " of " + detail::UserLabel(p.user, *p.uid) : "");
      }
    }
    if (count == 0) continue;
    if (count > 3) list += " and " + std::to_string(count - 3) + " more";
    Warn(report, WarningCode::kForeignProcess,
         detail::GpuIdLabel(*gpu) + " is in this Slurm job's allocation but runs " + std::to_string(count) +
             " process" + (count == 1 ? "" : "es") + " that are not the job's (" + list + ")" +
             (options.slurm_node->job_id ? "; job " + *options.slurm_node->job_id : ""));
  }
}

// The classic mix-up: "CUDA_VISIBLE_DEVICES=0" read as nvidia-smi's GPU 0.
void WarnIndexMixup(const CudaVisibleDevices& cvd, const std::vector<LexedEntry>& lexed,
                    const std::vector<model::DeviceSnapshot>& gpus,
                    const CudaEnumeration& enumeration, VisibilityReport& report) {
  std::string differences;
  std::set<std::string> said;  // "0,1,0": explain "0" once
  for (const EntryDiagnostic& entry : cvd.entries) {
    if (!entry.device || !said.insert(entry.text).second) continue;
    const uint64_t n = *lexed[static_cast<size_t>(entry.position)].number;
    const PhysicalIndex meant{static_cast<int>(n)};
    if (meant == *entry.device || FindGpu(gpus, meant) == nullptr) continue;
    if (!differences.empty()) differences += "; ";
    differences += "\"" + entry.text + "\" is nvidia-smi's " + GpuLabel(gpus, meant) +
                   " but CUDA " + (enumeration.order_is_estimate ? "probably " : "") +
                   "gives " + GpuLabel(gpus, *entry.device);
  }
  std::string message =
      "CUDA_VISIBLE_DEVICES uses integer indices, CUDA_DEVICE_ORDER is not PCI_BUS_ID and "
      "the GPUs are not all the same model, so indices follow CUDA's FASTEST_FIRST order, "
      "not nvidia-smi's: ";
  message += differences.empty()
                 ? "our estimate maps them to the same GPUs, but CUDA's heuristic is "
                   "undocumented"
                 : differences;
  message += ". Set CUDA_DEVICE_ORDER=PCI_BUS_ID or use UUIDs";
  Warn(report, WarningCode::kIndexWithoutPciBusOrder, std::move(message));
}

void WarnCvdEntries(const CudaVisibleDevices& cvd, VisibilityReport& report) {
  if (cvd.truncated_at) {
    const EntryDiagnostic& bad = cvd.entries[static_cast<size_t>(*cvd.truncated_at)];
    const size_t dropped = cvd.entries.size() - static_cast<size_t>(*cvd.truncated_at) - 1;
    Warn(report, WarningCode::kInvalidEntry,
         "CUDA_VISIBLE_DEVICES is cut at entry " + std::to_string(bad.position + 1) + " \"" +
             bad.text + "\" (" + bad.reason + "): CUDA ignores it" +
             (dropped > 0 ? " and the " + std::to_string(dropped) + " entr" +
                                (dropped == 1 ? "y" : "ies") + " after it"
                          : std::string()));
  }
  if (cvd.duplicate_at) {
    const EntryDiagnostic& dup = cvd.entries[static_cast<size_t>(*cvd.duplicate_at)];
    Warn(report, WarningCode::kDuplicateEntry,
         "CUDA_VISIBLE_DEVICES entry " + std::to_string(dup.position + 1) + " \"" + dup.text +
             "\" " + dup.reason.substr(0, dup.reason.find(':')) +
             ": a duplicate makes CUDA expose no GPU at all");
  }
  if (cvd.mig_hidden_count > 0) {
    Warn(report, WarningCode::kMigSingleDevice,
         "CUDA exposes a single MIG device per process: only the first MIG entry is "
         "visible, " + std::to_string(cvd.mig_hidden_count) + " more ignored");
  }
}

std::string CvdEffect(const CudaVisibleDevices& cvd, const Allocation& allocation,
                      size_t visible_count) {
  if (!cvd.is_set) {
    return allocation.gpus ? "unset: CUDA sees the allocation's GPUs"
                           : "unset: CUDA sees every GPU";
  }
  if (cvd.entries.empty()) return "empty: CUDA sees no GPU (unset would mean all)";
  std::string effect = std::to_string(visible_count) + " of " +
                       std::to_string(cvd.entries.size()) + " entr" +
                       (cvd.entries.size() == 1 ? "y" : "ies") + " visible";
  if (cvd.truncated_at) {
    effect += "; list ends at entry " + std::to_string(*cvd.truncated_at + 1);
  }
  if (cvd.duplicate_at) {
    effect += "; entry " + std::to_string(*cvd.duplicate_at + 1) + " is a duplicate";
  }
  return effect;
}

// A listed physical GPU in MIG mode contributes only its first MIG device, and non-MIG
// GPUs are dropped (the nvitop model of "only single MIG instance enumeration").
void ApplyMigMode(const std::vector<model::DeviceSnapshot>& gpus,
                  std::vector<ResolvedDevice>& devices, VisibilityReport& report) {
  const auto is_mig_gpu = [&gpus](const ResolvedDevice& d) {
    if (d.is_mig || !d.index) return false;
    const model::DeviceSnapshot* gpu = FindGpu(gpus, *d.index);
    return gpu != nullptr && gpu->mig_mode_current.value_or(false);
  };
  const auto first = std::find_if(devices.begin(), devices.end(), is_mig_gpu);
  if (first == devices.end() || std::any_of(devices.begin(), devices.end(),
                                            [](const ResolvedDevice& d) { return d.is_mig; })) {
    return;
  }
  ResolvedDevice kept = *first;
  kept.is_mig = true;
  std::vector<PhysicalIndex> dropped;
  for (const ResolvedDevice& d : devices) {
    if (d.index && d.index != kept.index) dropped.push_back(*d.index);
  }
  devices = {kept};
  std::string message = GpuLabel(gpus, *kept.index) +
                        " has MIG enabled: CUDA exposes only its first MIG device";
  if (!dropped.empty()) message += "; GPU(s) " + JoinIndices(dropped) + " are not visible";
  Warn(report, WarningCode::kMigSingleDevice, std::move(message));
}

// Someone else on a GPU this process would get: a lease of another uid (the daemon's
// table, or the per-user store), or a process of another uid in the snapshot. Both mean
// the process would share the GPU; neither stops CUDA from opening it.
void WarnOtherUsers(const model::DeviceSnapshot& gpu, size_t cuda_index, const ResolveOptions& options,
                    VisibleDevice& v, VisibilityReport& report) {
  const auto is_other = [&options](uint32_t uid) { return !options.current_uid || uid != *options.current_uid; };
  const std::string share = ": your process would share it as cuda:" + std::to_string(cuda_index);
  if (gpu.uuid) {
    for (const model::Lease& lease : options.leases) {
      const bool holds = std::find(lease.gpu_uuids.begin(), lease.gpu_uuids.end(), *gpu.uuid) != lease.gpu_uuids.end();
      if (!holds || !is_other(lease.uid)) continue;
      v.leased_to_uids.push_back(lease.uid);
      // "alice (uid 1001, lease 7 for python train.py)", or "uid 1001 (lease 7 ...)".
      const std::string uid = "uid " + std::to_string(lease.uid);
      const std::string what = "lease " + std::to_string(lease.id) + (lease.command.empty() ? "" : " for " + lease.command);
      const std::string who = lease.user.empty() ? uid + " (" + what + ")" : lease.user + " (" + uid + ", " + what + ")";
      Warn(report, WarningCode::kLeasedToOther, detail::GpuIdLabel(gpu) + " is leased to " + who + share);
    }
  }
  // Intruders (issue 23): whoever they belong to, the caller included.
  for (const model::GpuProcess& p : gpu.processes) {
    const model::Lease* lease = model::IntrudedLease(gpu, p, options.leases);
    if (!lease) continue;
    v.intruder_pids.push_back(p.pid);
    const bool yours = options.current_uid && p.uid && *p.uid == *options.current_uid;
    Warn(report, WarningCode::kIntruder,
         detail::GpuIdLabel(gpu) + ": pid " + std::to_string(p.pid) + (p.command ? " " + *p.command : "") + " of " +
             (yours ? std::string("yours") : p.uid ? detail::UserLabel(p.user, *p.uid) : std::string("an unseen owner")) +
             " is an INTRUDER on lease " + std::to_string(lease->id) + " (" +
             (lease->user.empty() ? "uid " + std::to_string(lease->uid) : lease->user) +
             "): it is not part of that lease");
  }
  // A MIG instance is isolated from the others on its GPU, and we cannot tell which
  // instance a process uses relative to the one CUDA picks: no process warning there.
  if (v.mig) return;
  std::vector<uint32_t> uids;  // in order of first appearance
  for (const model::GpuProcess& p : gpu.processes) {
    if (p.uid && is_other(*p.uid) && std::find(uids.begin(), uids.end(), *p.uid) == uids.end()) uids.push_back(*p.uid);
  }
  for (uint32_t uid : uids) {
    std::vector<const model::GpuProcess*> theirs;
    for (const model::GpuProcess& p : gpu.processes) {
      if (p.uid == uid) theirs.push_back(&p);
    }
    constexpr size_t kListed = 3;
    std::string list;
    for (size_t i = 0; i < theirs.size() && i < kListed; ++i) {
      list += (i == 0 ? "" : ", ") + std::string("pid ") + std::to_string(theirs[i]->pid) +
              (theirs[i]->command ? " " + *theirs[i]->command : "");
    }
    if (theirs.size() > kListed) list += " and " + std::to_string(theirs.size() - kListed) + " more";
    v.used_by_uids.push_back(uid);
    Warn(report, WarningCode::kUsedByOtherUser,
         detail::GpuIdLabel(gpu) + " runs " + std::to_string(theirs.size()) + " process" +
             (theirs.size() == 1 ? "" : "es") + " of " + detail::UserLabel(theirs.front()->user, uid) + " (" +
             list + ")" + share);
  }
}

}  // namespace

const char* WarningCodeName(WarningCode code) {
  switch (code) {
    case WarningCode::kInvalidEntry: return "invalid_entry";
    case WarningCode::kDuplicateEntry: return "duplicate_entry";
    case WarningCode::kIndexWithoutPciBusOrder: return "index_without_pci_bus_order";
    case WarningCode::kOutsideAllocation: return "outside_allocation";
    case WarningCode::kUnknownDeviceOrder: return "unknown_device_order";
    case WarningCode::kNothingVisible: return "nothing_visible";
    case WarningCode::kUnhealthyGpu: return "unhealthy_gpu";
    case WarningCode::kMigSingleDevice: return "mig_single_device";
    case WarningCode::kLeasedToOther: return "leased_to_other";
    case WarningCode::kUsedByOtherUser: return "used_by_other_user";
    case WarningCode::kIntruder: return "intruder";
    case WarningCode::kNoDriver: return "no_driver";
    case WarningCode::kGresOrderNotPci: return "gres_order_not_pci";
    case WarningCode::kForeignProcess: return "foreign_process";
  }
  return "invalid_entry";
}

bool VisibilityReport::HasWarning(WarningCode code) const {
  return std::any_of(warnings.begin(), warnings.end(),
                     [code](const Warning& w) { return w.code == code; });
}

VisibilityReport Resolve(const Environment& env, const std::vector<model::DeviceSnapshot>& gpus,
                         const ResolveOptions& options) {
  VisibilityReport report;
  report.gpu_count = static_cast<int>(gpus.size());
  Allocation allocation;
  AddContainerLayer(env, gpus, report, allocation);
  AddSlurmLayer(env, gpus, options, report, allocation);

  // CUDA_DEVICE_ORDER.
  const auto order_value = GetVar(env, "CUDA_DEVICE_ORDER");
  const DeviceOrderSetting order = ParseDeviceOrder(order_value);
  const CudaEnumeration enumeration = EnumerateCuda(gpus, order.order);
  report.device_order = order.order;
  report.layers.push_back(Layer{"device_order", "CUDA_DEVICE_ORDER",
                                order_value ? std::optional<std::string>(*order_value)
                                            : std::nullopt,
                                detail::OrderEffect(order, enumeration, gpus)});
  if (!order.is_recognized) {
    Warn(report, WarningCode::kUnknownDeviceOrder,
         "CUDA_DEVICE_ORDER=\"" + std::string(*order_value) +
             "\" is not PCI_BUS_ID or FASTEST_FIRST; CUDA uses FASTEST_FIRST");
  }

  // CUDA_VISIBLE_DEVICES.
  const auto cvd_value = GetVar(env, "CUDA_VISIBLE_DEVICES");
  // In a device-constrained Slurm job CUDA sees only the allocation, numbered from 0.
  const CudaVisibleDevices cvd =
      ParseCudaVisibleDevices(cvd_value, gpus, JobLocalOrder(enumeration.order, report.slurm));
  report.entries = cvd.entries;
  std::vector<ResolvedDevice> devices;
  for (const ResolvedDevice& d : cvd.devices) {
    // Unset: CUDA sees what the allocation let through, in enumeration order.
    if (cvd.is_set || allocation.Allows(*d.index)) devices.push_back(d);
  }
  WarnCvdEntries(cvd, report);
  ApplyMigMode(gpus, devices, report);
  report.layers.push_back(Layer{"visible_devices", "CUDA_VISIBLE_DEVICES",
                                cvd_value ? std::optional<std::string>(*cvd_value) : std::nullopt,
                                CvdEffect(cvd, allocation, devices.size())});

  const bool uses_indices = cvd.is_set && cvd.kind == EntryKind::kIndex;
  const bool any_on_mixup = std::any_of(cvd.entries.begin(), cvd.entries.end(),
                                        [](const EntryDiagnostic& e) { return e.device; });
  const bool job_local = report.slurm && report.slurm->is_constrained;
  if (uses_indices && !job_local && order.order != DeviceOrder::kPciBusId && !IsHomogeneous(gpus) &&
      any_on_mixup) {
    WarnIndexMixup(cvd, LexCudaVisibleDevices(*cvd_value), gpus, enumeration, report);
  }

  // The visible list, with per-GPU checks.
  report.order_is_estimate = enumeration.order_is_estimate && !devices.empty() &&
                             (!cvd.is_set || uses_indices);
  std::vector<PhysicalIndex> outside;
  for (size_t k = 0; k < devices.size(); ++k) {
    const ResolvedDevice& d = devices[k];
    VisibleDevice v;
    v.cuda_index = VisibleOrdinal{static_cast<int>(k)};
    v.index = d.index;
    if (d.is_mig) v.mig = d.entry.starts_with("MIG-") ? d.entry : "first MIG device";
    const model::DeviceSnapshot* gpu = d.index ? FindGpu(gpus, *d.index) : nullptr;
    if (gpu != nullptr) {
      v.uuid = gpu->uuid;
      v.name = gpu->name;
      v.compute_capability = gpu->compute_capability;
      v.is_healthy = gpu->is_healthy;
      v.is_outside_allocation = !allocation.Allows(*d.index);
      if (v.is_outside_allocation) outside.push_back(*d.index);
      if (!gpu->is_healthy) {
        std::string problems;
        for (const std::string& p : gpu->health_problems) problems += (problems.empty() ? "" : "; ") + p;
        Warn(report, WarningCode::kUnhealthyGpu,
             "cuda:" + std::to_string(k) + " is " + GpuLabel(gpus, *d.index) +
                 ", which is unhealthy" + (problems.empty() ? "" : ": " + problems));
      }
      WarnOtherUsers(*gpu, k, options, v, report);
    }
    report.visible.push_back(std::move(v));
  }
  if (!outside.empty()) {
    std::string sources;
    for (const std::string& s : allocation.sources) sources += (sources.empty() ? "" : ", ") + s;
    std::string message = "CUDA_VISIBLE_DEVICES names GPU(s) " + JoinIndices(outside) +
                          " outside the allocation (" + sources + ")";
    if (report.slurm && report.slurm->cvd_is_slurms) {
      message += "; Slurm wrote its gres.conf indices there and CUDA reads them as its own ordinals "
                 "(gres.conf is not in PCI bus order); `gpuman run` inside the job passes UUIDs instead";
    } else if (uses_indices && !job_local) {
      message += "; if the job is device-constrained (Slurm ConstrainDevices=yes) or in a "
                 "container, its indices restart at 0 and this may be intended; this report "
                 "uses host numbering";
    }
    Warn(report, WarningCode::kOutsideAllocation, std::move(message));
  }
  if (report.visible.empty()) {
    std::string why = gpus.empty() ? "this machine has no GPUs"
                      : (cvd.is_set ? "see CUDA_VISIBLE_DEVICES=\"" + std::string(*cvd_value) + "\""
                                    : "the allocation is empty");
    Warn(report, WarningCode::kNothingVisible, "CUDA will see no GPU: " + why);
  }
  WarnForeignProcesses(gpus, options, report);
  if (options.leases_error) {
    report.notes.push_back("leases not checked (" + *options.leases_error +
                           "): a GPU leased to another user is not warned about");
  }
  const SlurmNode* node = options.slurm_node ? &*options.slurm_node : nullptr;
  report.allowed_uuids = AllowedGpus(env, gpus, node);
  // What `gpuman run`/`select` make of the same environment: a CUDA_VISIBLE_DEVICES that
  // neither Slurm nor a gpuman lease set (one left over in the shell) confines them too,
  // which is the surprise; said with how to clear it.
  const auto lease = GetVar(env, "GPUMAN_LEASE_ID");
  const std::vector<AllocationLimit> limits = AllocationLimits(env, gpus, node);
  const bool shell_cvd_limits = std::any_of(limits.begin(), limits.end(), [&](const AllocationLimit& l) {
    return l.variable == "CUDA_VISIBLE_DEVICES" && l.allows.size() < gpus.size();
  });
  if (shell_cvd_limits && (!lease || Trim(*lease).empty())) {
    report.notes.push_back("gpuman run and select from here choose only among the GPUs this environment allows: " +
                           DescribeAllocationLimits(env, gpus, node));
  }
  return report;
}

}  // namespace gpuman::visibility
