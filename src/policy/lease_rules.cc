#include "policy/lease_rules.h"

#include <algorithm>
#include <charconv>
#include <set>

#include "policy/byte_size.h"

namespace gpuman::policy {
namespace {

std::string Gpus(int64_t n) { return std::to_string(n) + (n == 1 ? " GPU" : " GPUs"); }

std::string Name(const Caller& caller) {
  return caller.user.empty() ? "uid " + std::to_string(caller.uid) : caller.user;
}

}  // namespace

std::optional<int> MachineRules::CapFor(uint32_t uid) const {
  auto it = max_gpus_per_user.find(uid);
  if (it != max_gpus_per_user.end()) return it->second;
  return default_max_gpus_per_user;
}

const char* MachineRules::CapOrigin(uint32_t uid) const {
  return max_gpus_per_user.count(uid) ? "[daemon.user_limits]" : "max_gpus_per_user";
}

bool IsYourLease(const model::Lease& lease, const Caller& caller, LeaseAct act) {
  if (lease.uid == caller.uid) return true;
  return act == LeaseAct::kManage && (caller.is_admin || caller.uid == 0);
}

Status CheckYourLease(const model::Lease& lease, const Caller& caller, LeaseAct act) {
  if (IsYourLease(lease, caller, act)) return {};
  return MakeError(ErrorCode::kPermissionDenied, "lease " + std::to_string(lease.id) + " belongs to " +
                                                     (lease.user.empty() ? "another user" : lease.user));
}

int GpusHeldBy(uint32_t uid, const std::vector<model::Lease>& leases, std::optional<int64_t> except) {
  // Distinct GPUs, as the queue counts them: two memory slices of one GPU are one GPU held.
  std::set<std::string> held;
  for (const auto& l : leases) {
    if (l.uid == uid && (!except || l.id != *except)) held.insert(l.gpu_uuids.begin(), l.gpu_uuids.end());
  }
  return static_cast<int>(held.size());
}

std::map<std::string, std::string> NotSliceable(const model::MachineSnapshot& snap, const ShareRules& share) {
  std::map<std::string, std::string> out;
  if (share.allow && share.gpus.empty()) return out;
  for (const auto& g : snap.gpus) {
    if (!g.uuid) continue;
    if (!share.allow) {  // a queued slice job after an admin turned slices off waits, with why
      out[*g.uuid] = "[share] allow = false";
      continue;
    }
    const bool listed = std::any_of(share.gpus.begin(), share.gpus.end(), [&](const std::string& id) {
      return id == *g.uuid || id == std::to_string(g.index);
    });
    if (!listed) out[*g.uuid] = "[share] gpus";
  }
  return out;
}

Status CheckSlice(int64_t bytes, const ShareRules& share) {
  if (!share.allow) {
    return MakeError(ErrorCode::kNotFound, "--gpu-memory: this machine hands out whole GPUs only ([share] allow = false)");
  }
  if (bytes < share.min_slice_bytes) {
    return MakeError(ErrorCode::kInvalidArgument, "--gpu-memory " + FormatByteSize(bytes) +
                                                      " is below this machine's smallest slice, " +
                                                      FormatByteSize(share.min_slice_bytes) + " ([share] min_slice)");
  }
  return {};
}

Result<RuledRequest> ApplyLeaseRules(model::GpuRequest req, const Caller& caller,
                                     std::optional<int64_t> within_lease,
                                     const std::vector<model::Lease>& live,
                                     const MachineRules& rules, int machine_gpus) {
  RuledRequest out;
  // Drained, not excluded: a drain is lifted again, so a request that only drains block
  // is busy (it may wait), never "can not be met here".
  for (const auto& [uuid, reason] : rules.drained) req.drained[uuid] = reason;
  req.uid = caller.uid;  // MPS's one user per GPU (policy::Select)
  // [share] mps = "on": a one-GPU slice is an MPS slice (an MPS client reaches one GPU's
  // control daemon, so a slice of several GPUs stays a plain one).
  if (req.gpu_memory_bytes && req.count == 1 && rules.share.mps_on) req.mps = true;

  if (within_lease) {
    auto it = std::find_if(live.begin(), live.end(), [&](const model::Lease& l) { return l.id == *within_lease; });
    if (it == live.end()) {
      return MakeError(ErrorCode::kInvalidArgument, "GPUMAN_LEASE_ID=" + std::to_string(*within_lease) +
                                                        ": no such lease (it ended?); unset it to lease new GPUs");
    }
    if (!IsYourLease(*it, caller, LeaseAct::kJoin)) {
      return MakeError(ErrorCode::kPermissionDenied, "GPUMAN_LEASE_ID=" + std::to_string(*within_lease) +
                                                         ": the lease belongs to " + it->user + ", not to you");
    }
    // Inside the lease: its GPUs and nothing else, whatever the outer environment says.
    std::vector<std::string> inside = it->gpu_uuids;
    if (req.allowed) {
      std::erase_if(inside, [&](const std::string& u) {
        return std::find(req.allowed->begin(), req.allowed->end(), u) == req.allowed->end();
      });
    }
    req.allowed = inside;
    if (req.count > static_cast<int>(it->gpu_uuids.size())) {
      return MakeError(ErrorCode::kNotFound, "asked for " + Gpus(req.count) + " inside lease " +
                                                 std::to_string(it->id) + ", which holds " +
                                                 Gpus(static_cast<int64_t>(it->gpu_uuids.size())));
    }
    for (const auto& l : live) {
      if (l.id != it->id) out.leases.push_back(l);
    }
    out.within = it->id;
    out.request = std::move(req);
    return out;  // the enclosing lease was within the cap when it was taken
  }

  if (req.count > machine_gpus) {
    if (model::IsMigRequest(req)) {
      return MakeError(ErrorCode::kNotFound, "asked for " + std::to_string(req.count) + " MIG devices; this machine has " +
                                                 std::to_string(machine_gpus));
    }
    return MakeError(ErrorCode::kNotFound, "asked for " + Gpus(req.count) + "; this machine has " + Gpus(machine_gpus));
  }
  if (req.gpu_memory_bytes) {
    if (auto ok = CheckSlice(*req.gpu_memory_bytes, rules.share); !ok) return ok.error();
  }
  if (auto cap = rules.CapFor(caller.uid)) {
    if (req.count > *cap) {
      return MakeError(ErrorCode::kNotFound, "asked for " + Gpus(req.count) + "; " + Name(caller) +
                                                 " may hold at most " + Gpus(*cap) + " (" + rules.CapOrigin(caller.uid) + ")");
    }
    int held = GpusHeldBy(caller.uid, live);
    if (held + req.count > *cap) {
      return MakeError(ErrorCode::kBusy, Name(caller) + " holds " + Gpus(held) + " of at most " + Gpus(*cap) +
                                             " (" + rules.CapOrigin(caller.uid) + "); asked for " + std::to_string(req.count) + " more");
    }
  }
  out.leases = live;
  out.request = std::move(req);
  return out;
}

int MachineUnits(const model::MachineSnapshot& snap, const model::GpuRequest& req) {
  if (!model::IsMigRequest(req)) return static_cast<int>(snap.gpus.size());
  int units = 0;
  for (const auto& g : snap.gpus) units += static_cast<int>(g.mig_devices.size());
  return units;
}

Status CheckSatisfiable(int count, const std::optional<std::vector<std::string>>& gpus, const Caller& caller,
                        const MachineRules& rules, int machine_gpus) {
  if (count > machine_gpus) {
    return MakeError(ErrorCode::kNotFound, "asked for " + Gpus(count) + "; this machine has " + Gpus(machine_gpus));
  }
  if (gpus && count > static_cast<int>(gpus->size())) {
    return MakeError(ErrorCode::kNotFound, "asked for " + Gpus(count) + " but --gpus names " +
                                               Gpus(static_cast<int64_t>(gpus->size())));
  }
  if (auto cap = rules.CapFor(caller.uid); cap && count > *cap) {
    return MakeError(ErrorCode::kNotFound, "asked for " + Gpus(count) + "; " + Name(caller) + " may hold at most " +
                                               Gpus(*cap) + " (" + rules.CapOrigin(caller.uid) + ")");
  }
  return {};
}

std::optional<model::JobRef> JobIdOfLease(const model::Lease& lease) {
  if (lease.kind != "job") return std::nullopt;
  const std::string& c = lease.command;  // "job 7 (train)", "job 12_3 (sweep)"
  if (c.rfind("job ", 0) != 0) return std::nullopt;
  const size_t end = c.find(' ', 4);
  auto ref = model::ParseJobRef(std::string_view(c).substr(4, end == std::string::npos ? std::string::npos : end - 4));
  if (!ref) return std::nullopt;
  return *ref;
}

namespace {

Status RefuseJobLease(const model::Lease& lease, const std::optional<LeaseJob>& job) {
  if (job || lease.kind == "job") {
    std::string id = model::FormatJobRef(job ? job->ref : JobIdOfLease(lease).value_or(model::JobRef{0}));
    std::string name = job && !job->name.empty() ? " (" + job->name + ")" : "";
    return MakeError(ErrorCode::kConflict, "lease " + std::to_string(lease.id) + " belongs to job " + id + name +
                                               ", which still runs on its GPUs: cancel the job with `gpuman cancel " +
                                               id + "`");
  }
  return {};
}

}  // namespace

Status CheckForceRelease(const model::Lease& lease, const Caller& caller, const std::optional<LeaseJob>& job) {
  if (auto refused = RefuseJobLease(lease, job); !refused) return refused;
  if (!caller.is_admin) {
    return MakeError(ErrorCode::kPermissionDenied,
                     "release --force is for root and the admin group: end the command that holds lease " +
                         std::to_string(lease.id) + " (Ctrl-C where it runs) and its lease ends with it");
  }
  return {};
}

Status CheckRelease(const model::Lease& lease, const Caller& caller, const std::optional<LeaseJob>& job,
                    const std::vector<model::LeaseProcess>& live) {
  if (auto refused = RefuseJobLease(lease, job); !refused) return refused;
  if (auto mine = CheckYourLease(lease, caller, LeaseAct::kManage); !mine) return mine;
  if (lease.kind == "run" && !live.empty()) {
    const std::string pid = std::to_string(live.front().pid);
    return MakeError(ErrorCode::kConflict, "lease " + std::to_string(lease.id) + " belongs to `gpuman run` (pid " + pid +
                                               (lease.command.empty() ? "" : ": " + lease.command) +
                                               "), which still runs on its GPUs: end it (Ctrl-C where it runs, or kill " +
                                               pid + ") and its lease ends with it");
  }
  return {};
}

}  // namespace gpuman::policy
