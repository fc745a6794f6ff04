// `gpuman report --html`: one self-contained HTML page (inline CSS and SVG, no scripts,
// no network) with per-GPU utilization and memory charts, GPU-hours per user, queue wait
// times and a summary table. Pure: the caller reads the history store and passes the
// data and the generation time in. Safe to call from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "model/history.h"

namespace gpuman::render {

struct ReportData {
  int64_t generated_unix_ms = 0;
  int64_t since_unix_ms = 0, until_unix_ms = 0;  // the window the report covers
  /// Spacing of `samples` (their re-bucketing step); a gap of more than three steps in a
  /// series breaks its line. 0: unknown (lines are never broken).
  int64_t step_ms = 0;
  std::string host;                           // shown in the title when not empty
  std::vector<model::GpuSample> samples;      // by time, then GPU
  /// GPU-hours per user through gpuman, per user outside gpuman, and free ({"", false}).
  std::map<model::UsageKey, double> gpu_hours_by_user;
  std::vector<model::JobWait> waits;
};

/// The page. Every string from the data (user and host names, UUIDs) is HTML-escaped.
/// Users outside gpuman are named "alice (outside gpuman)"; "(free)" is time nobody used.
/// Sections without data say so ("No samples in this range.") instead of drawing charts.
std::string RenderReportHtml(const ReportData& data);

/// Escapes & < > " ' for HTML text and attribute values.
std::string HtmlEscape(std::string_view text);

/// The colours of the chart series, for tests that look at a rendering.
inline constexpr std::string_view kUtilizationColor = "#1f77b4";
inline constexpr std::string_view kMemoryColor = "#ff7f0e";
inline constexpr std::string_view kGpuHoursColor = "#2ca02c";
inline constexpr std::string_view kOutsideColor = "#8c564b";  // GPU-hours outside gpuman
inline constexpr std::string_view kFreeColor = "#bbbbbb";
inline constexpr std::string_view kWaitColor = "#9467bd";

}  // namespace gpuman::render
