// The Slurm job record (docs/json.md "Slurm job record", docs/slurm.md "Accounting"):
// one small JSON file per Slurm job, <dir>/<jobid>.json, written by `gpuman slurm prolog`,
// completed by `gpuman slurm epilog`, read by the daemon (history tagging) and by
// `gpuman history/report --slurm-job` and `gpuman slurm job-summary`.
// Files are written as tmp + fsync + rename, so a reader never sees a partial record.
// Thread-compatible free functions; no globals, no getenv (callers pass the values in).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"

namespace gpuman::slurm {

inline constexpr int kJobRecordSchema = 1;
inline constexpr const char* kDefaultSlurmStateDir = "/run/gpuman/slurm";
/// A record file larger than this is refused as not ours (a real one is a few hundred bytes).
inline constexpr size_t kMaxJobRecordBytes = 64 * 1024;

struct SlurmJobRecord {
  std::string job_id;  // SLURM_JOB_ID, e.g. "123"
  std::string user;    // login name of the job's owner
  uint32_t uid = 0;
  std::string host;                    // node name (short host name)
  std::vector<std::string> gpu_uuids;  // the job's GPUs on this node, "GPU-..."
  int64_t started_unix_ms = 0;
  std::optional<int64_t> ended_unix_ms;  // nullopt while the job runs

  /// True when the job held its GPUs at `unix_ms`: started at or before it and not ended
  /// before it.
  bool HeldAt(int64_t unix_ms) const {
    return started_unix_ms <= unix_ms && (!ended_unix_ms || unix_ms <= *ended_unix_ms);
  }
  bool operator==(const SlurmJobRecord&) const = default;
};

/// Where the records live: `config_value` (`[slurm] state_dir`) when set and non-empty,
/// else `env_value` ($GPUMAN_SLURM_DIR, as the caller read it; may be null), else
/// /run/gpuman/slurm.
std::string SlurmStateDir(const std::optional<std::string>& config_value, const char* env_value);

/// True for a job id that can name a record file: 1-64 characters of [0-9A-Za-z_.+-],
/// not starting with '.' (Slurm job ids are decimal; "123_4" array and "123+1" het forms pass).
bool IsValidJobId(std::string_view job_id);
/// What a user types for a Slurm job: digits, optionally followed by `_N` (an array task)
/// or `+N` (a heterogeneous component): 1234, 1234_7, 1234+1. Stricter than IsValidJobId,
/// which only keeps a record's file name safe.
bool LooksLikeSlurmJobId(std::string_view id);

/// The record as one JSON object (no trailing newline) and back. Parsing checks types,
/// schema == 1, the job id and every UUID ("GPU-" or "MIG-" prefix).
std::string JobRecordToJson(const SlurmJobRecord& rec);
Result<SlurmJobRecord> JobRecordFromJson(std::string_view text);

/// Path of the record of `job_id` in `dir`: <dir>/<job_id>.json.
std::string JobRecordPath(const std::string& dir, const std::string& job_id);

/// Writes <dir>/<job_id>.json atomically (a hidden sibling temp file, fsync, rename, fsync
/// of the directory), mode 0644. Creates `dir` (0755) when missing. Replaces an older record.
Status WriteJobRecord(const std::string& dir, const SlurmJobRecord& rec);

/// Reads one record. kNotFound when there is none; kInvalidArgument for a file that is not
/// a valid record (message names the path), kIo when it cannot be read.
Result<SlurmJobRecord> ReadJobRecord(const std::string& dir, const std::string& job_id);

/// Every valid record in `dir` (sorted by job id: numeric ids in numeric order). A bad
/// file (unreadable, not JSON, wrong fields, a name that is not <job_id>.json of its
/// content) is skipped; its reason is appended to `problems` when given. Hidden files
/// (our temp files) and names not ending in .json are ignored silently. A missing
/// `dir` is an empty list; an unreadable one is an error.
Result<std::vector<SlurmJobRecord>> ListJobRecords(const std::string& dir,
                                                   std::vector<std::string>* problems = nullptr);

/// The record among `records` that held `gpu_uuid` at `unix_ms` (HeldAt), or null. When
/// several do (a record left behind by a crashed epilog), the one started last wins.
const SlurmJobRecord* JobHoldingGpu(const std::vector<SlurmJobRecord>& records, std::string_view gpu_uuid,
                                    int64_t unix_ms);

/// The records of one directory for a reader that asks every second (the daemon's
/// collector): re-reads the directory only when its modification time or inode changed
/// (gpuman writes by rename, which changes it), while that time is under 2 s old (a
/// second change within the file system's timestamp tick would not show), or
/// `max_age_ms` after the last read (a record edited in place). Not thread-safe.
class JobRecordCache {
 public:
  explicit JobRecordCache(std::string dir, int64_t max_age_ms = 60'000)
      : dir_(std::move(dir)), max_age_ms_(max_age_ms) {}
  /// The records as of `now_unix_ms`. When this call re-read the directory, `problems`
  /// (if given) is set to the reasons of its bad files or why it could not be read (empty:
  /// none); otherwise it is left alone, so a caller logs each once per change.
  const std::vector<SlurmJobRecord>& Get(int64_t now_unix_ms, std::vector<std::string>* problems = nullptr);
  const std::string& dir() const { return dir_; }
  int reads() const { return reads_; }  // directory reads so far (tests)

 private:
  std::string dir_;
  int64_t max_age_ms_;
  bool have_ = false, racy_ = false;
  int64_t mtime_ns_ = 0, ino_ = 0, read_at_ms_ = 0;
  std::vector<SlurmJobRecord> records_;
  int reads_ = 0;
};

}  // namespace gpuman::slurm
