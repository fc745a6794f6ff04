// JSON forms of the model values the protocol carries: GpuRequest, Job, Lease and
// LeaseProcess. Field names are the model's, in snake_case. Pure; any thread.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string_view>

#include "base/result.h"
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

}  // namespace gpuman::protocol
