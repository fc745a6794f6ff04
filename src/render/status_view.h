// The `gpuman status` views: a MachineSnapshot rendered as a JSON object (the
// machine-readable contract, documented in docs/json.md) or as human text.
// Pure functions: no I/O, no environment; the caller passes terminal facts in.
// Safe to call from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "model/device_snapshot.h"
#include "model/drain.h"
#include "model/job.h"
#include "model/lease.h"
#include "render/format.h"  // FormatBytes and TerminalInfo, used across the CLI
#include "render/json_text.h"

namespace gpuman::render {

/// The GPUs of the allocation gpuman runs inside (a Slurm job, a container's device list,
/// an outer CUDA_VISIBLE_DEVICES), as the CLI resolved them (visibility::AllowedGpus).
struct StatusAllocation {
  std::string source;               // "Slurm job 12 (SLURM_STEP_GPUS=3,4)"
  std::vector<std::string> uuids;   // full UUIDs
};

struct StatusOptions {
  bool show_processes = true;
  bool simulated = false;  // data comes from the stand-in NVML
  std::string scenario;    // name shown with the simulated marker
  /// Leases, when the lease table could be read: each GPU then gets a "lease" line (text)
  /// and a "lease" member (JSON, null when free), idle ones marked.
  std::optional<std::vector<model::Lease>> leases;
  /// Drained GPUs (from the daemon; none without one). A drained GPU's row says DRAINED
  /// with the reason beneath (text) and its JSON object has "drain" (null when not drained).
  std::vector<model::GpuDrain> drains;
  /// Set inside an allocation: its GPUs are marked (text: a line "in this allocation: …"
  /// under the row; JSON: "in_allocation" on every GPU and a top-level "allocation").
  std::optional<StatusAllocation> allocation;
  /// Text: memory in whole MiB, as nvidia-smi prints it (`status --units mib`), instead of
  /// GiB with one decimal (MiB only below 1 GiB).
  bool memory_in_mib = false;
  /// Lease id -> the queue job that holds the lease (policy::JobIdOfLease), filled in by the
  /// CLI: the compact view says "job N" for such a lease.
  std::map<int64_t, model::JobRef> lease_jobs;
};

/// Where a status came from: the members `status --json` ends with (docs/json.md).
struct StatusJsonSource {
  std::string source;  // "daemon" or "nvml"
  int64_t sampled_at_unix_ms = 0;
  std::string note;  // why NVML was read here; "" is written as null
};

/// The JSON contract of `gpuman status --json` (schema_version 1), as text: kPretty is
/// what dump(2) would print, kCompact what dump() would (`status --watch --json`). Every
/// unknown value is null, never 0. With show_processes == false each GPU object has no
/// "processes" key at all; with simulated == true the top level gains "scenario".
/// Every GPU has "drain": null, or {"reason", "by", "by_uid", "since_unix_ms"}. With
/// opts.allocation the top level gains "allocation" {"source", "uuids"} and every GPU
/// "in_allocation" (bool); without it neither key exists. With `source` the top level
/// ends with "source", "sampled_at_unix_ms" and "source_note".
std::string StatusJsonText(const model::MachineSnapshot& snap, const StatusOptions& opts, JsonWriter::Style style,
                           const StatusJsonSource* source = nullptr);

/// The same document (without the source members), parsed: for callers that read it.
nlohmann::ordered_json StatusToJson(const model::MachineSnapshot& snap, const StatusOptions& opts);

/// Human view: a header line, a column-title line, one line per GPU, then indented
/// problem / warning / process lines under it. Lines are joined with '\n' and the
/// result ends with '\n'. With term.cut_to_width no line is wider than max(term.width, 80)
/// display columns (ANSI escapes, present only with use_color, are not counted); without
/// it nothing is cut. Unknown values print as "-". Wider terminals get extra columns (fan,
/// performance state, bars, PCI bus).
std::string RenderStatusText(const model::MachineSnapshot& snap, const StatusOptions& opts,
                             const TerminalInfo& term);

/// `status --compact`: gpustat's one line per GPU, what people paste into chat. The header
/// line of RenderStatusText (simulated marker first), then per GPU
///   `[0] H100 80GB HBM3 | 58C  99% | 71.3/79.6 GiB | [job 12 bob] bob(71.3G)`
/// index, name (with DRAINED, UNHEALTHY or LOST after it when the GPU is not plain "ok"),
/// temperature, utilization, memory used/total, then gpuman's leases of the GPU in brackets
/// ("[lease 7 alice]", "[job 12 bob]" for a queue job's, ", IDLE 2h" when idle) and the users
/// of its processes with the GPU memory each uses in all ("alice(9.8G)", most first; whole
/// MiB "bob(73000M)" with memory_in_mib). Columns are padded by display width. With
/// term.cut_to_width a long GPU name is cut as in the table and lines to the terminal's
/// width (the users first); without it nothing is cut. No users without show_processes.
std::string RenderStatusCompact(const model::MachineSnapshot& snap, const StatusOptions& opts,
                                const TerminalInfo& term);

}  // namespace gpuman::render
