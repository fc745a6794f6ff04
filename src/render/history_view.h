// `gpuman history` output: per-GPU summaries with sparklines (text), one row per sample
// (CSV), and the documented JSON document (docs/history.md). Pure functions of the samples
// the history store returned; safe to call from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "model/history.h"
#include "render/status_view.h"

namespace gpuman::render {

struct HistoryView {
  std::optional<int64_t> since_unix_ms, until_unix_ms;  // the window asked for
  std::optional<int64_t> step_ms;                       // re-bucketing asked for
  std::vector<model::GpuSample> samples;                // by time, then GPU index
};

/// {"version": 1, "since_unix_ms", "until_unix_ms", "step_ms", "gpus": [{index, uuid}],
///  "samples": [{t_unix_ms, time, gpu_index, gpu_uuid, utilization_percent, ..., user,
///  job_id, holder_kind, holders: [{user, kind, share}]}]}; missing values are null.
/// Schema: docs/history.md.
nlohmann::json HistoryToJson(const HistoryView& view);

/// A header line, then one line per sample in the JSON sample fields' order; empty
/// fields for missing values; fields with a comma, quote or newline are quoted (RFC 4180).
std::string HistoryToCsv(const std::vector<model::GpuSample>& samples);

/// Per GPU: a summary line (averages and maxima), utilization and memory sparklines over
/// the window, and who held it for what share of the samples (users outside gpuman as
/// "alice (outside gpuman)", unused time as "(free)"). "No samples" when empty.
std::string RenderHistoryText(const HistoryView& view, const TerminalInfo& term);

/// A point of a series: time and value (nullopt: not reported).
struct SeriesPoint {
  int64_t t_unix_ms = 0;
  std::optional<double> value;
};

/// `width` columns of block characters (U+2581..U+2588, lowest for 0, full for `max`),
/// one column per equal time slice of [from, to]: the mean of the slice's values, or a
/// space when it has none.
std::string Sparkline(const std::vector<SeriesPoint>& points, int64_t from_unix_ms,
                      int64_t to_unix_ms, int width, double max);

}  // namespace gpuman::render
