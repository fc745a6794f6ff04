// Slurm accounting (docs/slurm.md "Accounting", docs/json.md "Slurm AdminComment summary"):
// a one-line JSON summary of what a Slurm job did on this node's GPUs, fit for Slurm's
// free-text AdminComment, printed by `gpuman slurm job-summary ID` and by the epilog.
// Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "model/history.h"
#include "slurm/job_record.h"

namespace gpuman::cli {

/// The summary never exceeds this many bytes: past it the per-GPU list is cut, with
/// "gpus_omitted" counting what was left out (totals stay whole).
inline constexpr size_t kAdminCommentMaxBytes = 1024;

/// One line of JSON (no newline) for `rec`: job, user, host, duration (end, else
/// `now_unix_ms`, minus start), and per GPU of the record its UUID and, from `samples`,
/// mean/max utilisation, max memory used and the sample count. `samples` is the history
/// the caller has (any rows: only those of the record's GPUs inside its time window
/// count); when none of them count, "source" is "record" and the GPUs carry UUIDs only.
/// Never longer than kAdminCommentMaxBytes.
std::string SlurmAdminComment(const slurm::SlurmJobRecord& rec, const std::vector<model::GpuSample>& samples,
                              int64_t now_unix_ms);

}  // namespace gpuman::cli
