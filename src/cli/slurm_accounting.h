// Slurm accounting (docs/slurm.md "Accounting", docs/json.md "Slurm AdminComment summary"):
// a one-line JSON summary of what a Slurm job did on this node's GPUs, fit for Slurm's
// free-text AdminComment, printed by `gpuman slurm job-summary ID` and by the epilog.
// SlurmAdminComment is pure; the rest read files (main thread).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cli/context.h"
#include "model/history.h"
#include "slurm/job_record.h"

namespace gpuman::store {
class HistoryStore;
}

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

/// The job record directory: [slurm] state_dir, else $GPUMAN_SLURM_DIR, else
/// /run/gpuman/slurm (slurm::SlurmStateDir).
std::string SlurmStateDirOf(const Context& ctx);

/// The job's record in `dir`, or nullopt when there is none; a record that cannot be read
/// is also nullopt, with one warning line on ctx.err() (the history may still know the job).
std::optional<slurm::SlurmJobRecord> ReadJobRecordOrWarn(const std::string& dir, const std::string& job_id,
                                                         Context& ctx);

/// What the history holds of one Slurm job.
struct SlurmJobHistory {
  std::string job_id, user;
  std::vector<std::string> gpu_uuids;  // by index
  int64_t since_unix_ms = 0, until_unix_ms = 0;
  /// "history": the rows the daemon tagged with the job; "record": no row is tagged (the
  /// daemon did not see the record), so the rows of the record's GPUs in its time window
  /// that no other Slurm job tagged.
  std::string source;
  std::vector<model::GpuSample> samples;
};

/// The job's rows in `store` (re-bucketed to `step_ms` when given). `rec`: the job's
/// record if there is one (the fallback when no row is tagged); `now_unix_ms` ends a
/// running job's window. Errors: kNotFound when neither the history nor `rec` knows the
/// job; those of HistoryStore.
Result<SlurmJobHistory> ReadSlurmJobHistory(store::HistoryStore& store, const std::string& job_id,
                                            const std::optional<slurm::SlurmJobRecord>& rec,
                                            std::optional<int64_t> step_ms, int64_t now_unix_ms);

/// The AdminComment line of `rec`, from the history db the commands read (FindHistoryDb)
/// when there is one, else from the record alone. What the epilog prints.
std::string SlurmJobSummaryLine(const slurm::SlurmJobRecord& rec, Context& ctx, int64_t now_unix_ms);

int RunSlurmJobSummary(const std::string& job_id, Context& ctx);

}  // namespace gpuman::cli
