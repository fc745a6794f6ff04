#include "lease/acquire_step.h"

#include <algorithm>

#include "base/utf8.h"
#include "devices/device_source.h"
#include "lease/ports.h"
#include "store/lease_store.h"

namespace gpuman::lease {

store::GpuIndexOf IndexIn(const model::MachineSnapshot& snap) {
  return [&snap](const std::string& uuid) { return model::UnitIndex(snap, uuid); };
}

Result<Grant> AcquireStep(const model::MachineSnapshot& snap, const AcquireAsk& ask, const policy::Caller& caller,
                          const Authority& authority) {
  const int machine_gpus = policy::MachineUnits(snap, ask.request);  // MIG devices for a MIG request
  auto live = authority.table.ListLive(authority.alive);
  if (!live) return live.error();
  live->insert(live->end(), authority.foreign.begin(), authority.foreign.end());

  model::GpuRequest request = ask.request;
  if (request.gpu_memory_bytes) request.not_sliceable = policy::NotSliceable(snap, authority.rules.share);
  auto ruled = policy::ApplyLeaseRules(request, caller, ask.within, *live, authority.rules, machine_gpus);
  if (!ruled) return ruled.error();
  auto chosen = policy::Select(snap, ruled->leases, ruled->request);
  if (!chosen) return chosen.error();

  Grant grant;
  if (ruled->within) {
    // Inside the caller's own lease (a run in a `select --lease` shell or in a job): no new
    // lease; its processes join the enclosing one, so it lives as long as they do too.
    if (!ask.preview) {
      if (auto added = authority.table.AddProcesses(*ruled->within, ask.processes); !added) return added.error();
    }
    grant.lease_id = *ruled->within;
    grant.nested = true;
    for (const auto& l : *live) {
      if (l.id == *ruled->within) grant.master_port = l.master_port;
    }
    grant.selection = std::move(*chosen);
    return grant;
  }
  if (ask.preview) {
    grant.selection = std::move(*chosen);
    return grant;
  }

  // Only now the write lock; the rules run again on what it shows.
  model::Lease draft;
  draft.uid = caller.uid;
  draft.user = caller.user;
  draft.kind = ask.kind;
  draft.command = CutText(ask.command, model::kMaxLeaseCommandBytes);  // every `leases` page carries it
  draft.created_unix_ms = authority.clock.NowUnixMs();
  draft.processes = ask.processes;
  draft.gpu_memory_bytes = request.gpu_memory_bytes;
  draft.mps = request.mps;
  draft.gpu_share_percent = request.gpu_share_percent;
  std::optional<policy::Selection> final_choice;
  auto lease = authority.table.Acquire(
      draft,
      [&](const std::vector<model::Lease>& current) -> Result<std::vector<std::string>> {
        std::vector<model::Lease> all = current;
        all.insert(all.end(), authority.foreign.begin(), authority.foreign.end());
        auto again = policy::ApplyLeaseRules(request, caller, std::nullopt, all, authority.rules, machine_gpus);
        if (!again) return again.error();
        auto selection = policy::Select(snap, again->leases, again->request);
        if (!selection) return selection.error();
        final_choice = std::move(*selection);
        return final_choice->uuids;
      },
      authority.alive, IndexIn(snap), MasterPortChooser(authority.rules.launch_ports, authority.foreign));
  if (!lease) return lease.error();
  grant.lease_id = lease->id;
  grant.master_port = lease->master_port;
  grant.selection = std::move(*final_choice);
  return grant;
}

model::MachineSnapshot WithoutEndedProcesses(model::MachineSnapshot sample,
                                             const std::function<bool(uint32_t pid)>& ended) {
  for (auto& g : sample.gpus) {
    std::erase_if(g.processes, [&](const model::GpuProcess& p) {
      if (!p.is_visible || !ended(p.pid)) return false;
      if (p.used_memory_bytes) {
        if (g.memory_used_bytes) g.memory_used_bytes = std::max<int64_t>(0, *g.memory_used_bytes - *p.used_memory_bytes);
        if (g.memory_free_bytes) {
          g.memory_free_bytes = *g.memory_free_bytes + *p.used_memory_bytes;
          if (g.memory_total_bytes) g.memory_free_bytes = std::min(*g.memory_free_bytes, *g.memory_total_bytes);
        }
      }
      return true;
    });
  }
  return sample;
}

Result<model::MachineSnapshot> SnapshotWithTopology(devices::DeviceSource& source,
                                                    std::optional<model::Topology>& topology) {
  // What choosing needs, read now (memory, utilization and processes change by the
  // second); health and settings as a monitor keeps them, the static facts once.
  devices::SnapshotOptions options = devices::FieldOptions(devices::kSelectionFields);
  options.slow_max_age = devices::kMonitorSlowAge;
  // Even one GPU is placed by topology: it should come from a group already in use.
  options.topology = !topology.has_value();
  auto snap = source.Snapshot(options);
  if (!snap) return snap.error();
  if (topology) snap->topology = topology;
  else topology = snap->topology;
  return snap;
}

}  // namespace gpuman::lease
