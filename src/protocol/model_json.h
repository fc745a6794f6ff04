// JSON forms of the model values the protocol carries: GpuRequest, Job, Lease,
// LeaseProcess, the health report and the device snapshot (MachineSnapshot with its
// DeviceSnapshots, processes and topology). Field names are the model's, in snake_case.
// Pure; any thread.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string_view>

#include "base/result.h"
#include "model/device_snapshot.h"
#include "model/health.h"
#include "model/job.h"
#include "model/lease.h"

namespace gpuman::protocol {

nlohmann::json GpuRequestToJson(const model::GpuRequest& request);
/// Missing members keep GpuRequest's defaults. Errors: kInvalidArgument, naming the member
/// under `path` ("args.request.count: expected integer >= 1").
Result<model::GpuRequest> GpuRequestFromJson(const nlohmann::json& j, std::string_view path = "request");

/// Every Job field. The private ones (argv, env, cwd, output_path) only when
/// `include_private`: the daemon sets it for the job's owner and for root.
nlohmann::json JobToJson(const model::Job& job, bool include_private);
/// Private fields may be absent (they stay empty). Errors: kInvalidArgument for a missing
/// id/state, a wrong type, an unknown state name.
Result<model::Job> JobFromJson(const nlohmann::json& j, std::string_view path = "job");

nlohmann::json LeaseProcessToJson(const model::LeaseProcess& process);
/// Errors: kInvalidArgument unless pid >= 1 and start_time_ticks >= 0.
Result<model::LeaseProcess> LeaseProcessFromJson(const nlohmann::json& j, std::string_view path = "process");

nlohmann::json LeaseToJson(const model::Lease& lease);
Result<model::Lease> LeaseFromJson(const nlohmann::json& j, std::string_view path = "lease");

/// The health report in the schema of `gpuman health --json` (docs/json.md).
nlohmann::json HealthReportToJson(const model::HealthReport& report);
Result<model::HealthReport> HealthReportFromJson(const nlohmann::json& j, std::string_view path = "report");

/// Every field of the snapshot, its GPUs and their processes (the wire form of the
/// `snapshot` op; not the `status --json` contract, which render/ owns). Unknown values
/// are null; the topology is present only when the snapshot has one.
nlohmann::json MachineSnapshotToJson(const model::MachineSnapshot& snap);
/// The inverse: MachineSnapshotFromJson(MachineSnapshotToJson(s)) == s field by field.
/// Missing members keep their defaults. Errors: kInvalidArgument naming the first bad
/// member ("result.snapshot.gpus[2].memory_total_bytes: expected 64-bit integer").
Result<model::MachineSnapshot> MachineSnapshotFromJson(const nlohmann::json& j, std::string_view path = "snapshot");

nlohmann::json DeviceSnapshotToJson(const model::DeviceSnapshot& gpu);

/// The NVLink/PCIe topology alone (the machine object's `topology` member), and back.
/// Errors: kInvalidArgument naming the first bad member.
nlohmann::json TopologyToJson(const model::Topology& topology);
Result<model::Topology> TopologyFromJson(const nlohmann::json& j, const std::string& path);
Result<model::DeviceSnapshot> DeviceSnapshotFromJson(const nlohmann::json& j, std::string_view path = "gpu");

}  // namespace gpuman::protocol
