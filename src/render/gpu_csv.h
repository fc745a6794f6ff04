// `gpuman status --format csv`: nvidia-smi's `--query-gpu=FIELDS --format=csv` lines, with
// gpuman's own fields (gpuman.*) beside NVIDIA's. GpuCsvFields() is the one list of
// fields: parsing --fields, the header, the values and docs/cli.md's table (compared with
// it by tests/render/gpu_csv_test.cc) all read it. Pure functions: no I/O, no
// environment; safe to call from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "model/device_snapshot.h"
#include "model/job.h"
#include "model/lease.h"
#include "render/status_view.h"

namespace gpuman::render {

/// What a field's value is computed from: one GPU and what `status` knows beside it.
struct GpuCsvRow {
  const model::MachineSnapshot& snap;
  const model::DeviceSnapshot& gpu;
  const StatusOptions& opts;
  const model::Lease* lease = nullptr;  // the lease holding the GPU (the newest); null: none, or unknown
  std::optional<model::JobRef> job_id;  // the queue job holding it through `lease` (12, or 12_3)
};

struct GpuCsvField {
  std::string_view name;     // what --fields takes: "memory.used", "gpuman.holder"
  std::string_view aliases;  // other names nvidia-smi takes for it, space-separated ("gpu_name")
  std::string_view header;   // the header cell: nvidia-smi's ("clocks.current.sm" for clocks.sm)
  std::string_view unit;     // "MiB", "%", "W", "MHz", or "" (printed without one)
  std::string_view meaning;  // docs/cli.md's description
  /// The value without its unit; nullopt when unknown (printed "[N/A]").
  std::optional<std::string> (*value)(const GpuCsvRow&);
};

/// Every field, in the order docs/cli.md lists them: nvidia-smi's, then gpuman's.
std::span<const GpuCsvField> GpuCsvFields();

/// What `status --format csv` prints when no --fields are given.
inline constexpr std::string_view kDefaultGpuCsvFields =
    "index,name,uuid,memory.used,memory.total,utilization.gpu,gpuman.holder";

/// Parses a --fields (--query-gpu) list such as "index,memory.used": names or aliases,
/// compared case-insensitively, blanks around a name ignored, repeats kept in place.
/// Errors: kInvalidArgument naming an empty or unknown field, with "did you mean" when a
/// known one is close, else the list of fields.
Result<std::vector<const GpuCsvField*>> ParseGpuCsvFields(std::string_view list);

/// The `csv` modifiers of --format, and what the CLI resolved for the gpuman.* fields.
struct GpuCsvOptions {
  bool header = true;  // false: csv,noheader
  bool units = true;   // false: csv,nounits
  /// Lease id -> the queue job that holds the lease (policy::JobIdOfLease), for gpuman.job.
  std::map<int64_t, model::JobRef> lease_jobs;
};

/// The header line, "index, name, memory.used [MiB]\n" (no bracketed units with
/// !csv.units); "" with !csv.header.
std::string RenderGpuCsvHeader(std::span<const GpuCsvField* const> fields, const GpuCsvOptions& csv);

/// One line per GPU of `snap`, in its order: the values of `fields` separated by ", ",
/// each followed by " <unit>" when it has one and csv.units, "[N/A]" when unknown. Control
/// characters in values are escaped (base/strings.h EscapeControl). Holders come from
/// opts.leases (unknown leases: gpuman.holder/lease/job are [N/A]), drains from opts.drains.
std::string RenderGpuCsvRows(const model::MachineSnapshot& snap, const StatusOptions& opts,
                             std::span<const GpuCsvField* const> fields, const GpuCsvOptions& csv);

}  // namespace gpuman::render
