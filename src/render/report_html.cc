// The HTML report. Charts are SVG written here, inline in the page, so the file renders
// the same with scripts off, offline, and years later: no JavaScript, fonts or styles
// are fetched (a Content-Security-Policy forbids it). Series are drawn as they come; the
// caller keeps them to a few hundred points by re-bucketing (gpuman report does).
#include "render/report_html.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "base/duration.h"
#include "render/format.h"

namespace gpuman::render {
namespace {

constexpr int kChartWidth = 560, kChartHeight = 200;
constexpr int kLeft = 44, kRight = 12, kTop = 12, kBottom = 28;
constexpr int kPlotWidth = kChartWidth - kLeft - kRight;
constexpr int kPlotHeight = kChartHeight - kTop - kBottom;

constexpr const char* kStyle = R"css(
body { font-family: "DejaVu Sans", Arial, sans-serif; margin: 0; background: #fff; color: #222; }
main { max-width: 1220px; margin: 0 auto; padding: 16px 24px; }
h1 { font-size: 22px; margin: 8px 0 4px; }
h2 { font-size: 17px; margin: 24px 0 8px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
h3 { font-size: 14px; margin: 0 0 6px; font-weight: normal; }
p.meta { color: #555; margin: 2px 0; font-size: 13px; }
p.empty { color: #777; font-style: italic; }
table { border-collapse: collapse; font-size: 13px; }
th, td { border-bottom: 1px solid #e5e5e5; padding: 4px 10px; text-align: right; }
th { background: #f5f5f5; }
td.l, th.l { text-align: left; }
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(570px, 1fr)); gap: 12px; }
.card { border: 1px solid #ddd; border-radius: 4px; padding: 8px; }
.key { display: inline-block; width: 12px; height: 12px; margin: 0 4px 0 12px; vertical-align: -1px; }
svg { display: block; width: 100%; height: auto; }
svg text { font-size: 11px; fill: #555; }
)css";

std::string Num(double v, int decimals = 1) { return fmt::format("{:.{}f}", v, decimals); }

// "14:05" for short ranges, "05-01 14:05" when the range spans days (UTC).
std::string TimeLabel(int64_t t_unix_ms, int64_t range_ms) {
  std::string iso = FormatIsoUtcSeconds(t_unix_ms / 1000);  // 2024-05-01T14:05:09Z
  if (range_ms <= 36LL * 3600 * 1000) return iso.substr(11, 5);
  return iso.substr(5, 5) + " " + iso.substr(11, 5);
}

std::optional<double> MemoryPercent(const model::GpuSample& s) {
  if (s.memory_used_bytes && s.memory_total_bytes && *s.memory_total_bytes > 0) {
    return 100.0 * static_cast<double>(*s.memory_used_bytes) /
           static_cast<double>(*s.memory_total_bytes);
  }
  return s.memory_utilization_percent;
}

struct Series {
  std::string_view color;
  std::vector<std::pair<int64_t, std::optional<double>>> points;  // (t, 0..100)
  bool fill = false;
};

// A 0-100 % line chart over [from, to]: grid, axes labels, one path per series (a
// missing value or a gap of more than three steps starts a new segment).
std::string LineChart(const std::vector<Series>& series, int64_t from, int64_t to,
                      int64_t step_ms, const std::string& label) {
  const double span = static_cast<double>(std::max<int64_t>(to - from, 1));
  auto x = [&](int64_t t) { return kLeft + static_cast<double>(t - from) / span * kPlotWidth; };
  auto y = [&](double v) { return kTop + kPlotHeight - std::clamp(v, 0.0, 100.0) / 100 * kPlotHeight; };
  std::string svg = fmt::format(
      "<svg viewBox=\"0 0 {0} {1}\" width=\"{0}\" "
      "height=\"{1}\" role=\"img\" aria-label=\"{2}\">\n",
      kChartWidth, kChartHeight, HtmlEscape(label));
  for (int v = 0; v <= 100; v += 25) {
    svg += fmt::format(
        "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#e5e5e5\"/>"
        "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}%</text>\n",
        kLeft, Num(y(v)), kLeft + kPlotWidth, Num(y(v)), kLeft - 4, Num(y(v) + 4), v);
  }
  for (int k = 0; k <= 4; ++k) {
    const int64_t t = from + (to - from) * k / 4;
    const char* anchor = k == 0 ? "start" : k == 4 ? "end" : "middle";
    svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"{}\">{}</text>\n", Num(x(t)),
                       kChartHeight - 8, anchor, TimeLabel(t, to - from));
  }
  svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#bbb\"/>\n",
                     kLeft, kTop, kPlotWidth, kPlotHeight);
  for (const Series& s : series) {
    // Segments of consecutive points.
    // Lines break where more than three sampling periods are missing: the period is the
    // caller's step or the series' own spacing, whichever is longer.
    int64_t period = step_ms;
    if (period > 0) {
      int64_t spacing = 0;
      for (size_t i = 1; i < s.points.size(); ++i) {
        const int64_t gap = s.points[i].first - s.points[i - 1].first;
        if (gap > 0 && (spacing == 0 || gap < spacing)) spacing = gap;
      }
      period = std::max(period, spacing);
    }
    std::vector<std::vector<std::pair<double, double>>> segments;
    int64_t last_t = 0;
    bool open = false;
    for (const auto& [t, v] : s.points) {
      if (!v) {
        open = false;
        continue;
      }
      if (!open || (period > 0 && t - last_t > 3 * period)) segments.emplace_back();
      segments.back().push_back({x(t), y(*v)});
      open = true;
      last_t = t;
    }
    std::string line, area;
    for (const auto& seg : segments) {
      for (size_t i = 0; i < seg.size(); ++i) {
        line += fmt::format("{}{},{} ", i == 0 ? "M" : "L", Num(seg[i].first), Num(seg[i].second));
      }
      if (seg.size() == 1) line += fmt::format("h1.5 ");  // a lone point still shows
      if (s.fill) {
        area += fmt::format("M{},{} ", Num(seg.front().first), kTop + kPlotHeight);
        for (const auto& [px, py] : seg) area += fmt::format("L{},{} ", Num(px), Num(py));
        area += fmt::format("L{},{} Z ", Num(seg.back().first), kTop + kPlotHeight);
      }
    }
    if (!area.empty()) {
      svg += fmt::format("<path d=\"{}\" fill=\"{}\" fill-opacity=\"0.15\" stroke=\"none\"/>\n",
                         area, s.color);
    }
    if (!line.empty()) {
      svg += fmt::format(
          "<path d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\" "
          "stroke-linejoin=\"round\"/>\n",
          line, s.color);
    }
  }
  return svg + "</svg>\n";
}

std::string Key(std::string_view color, std::string_view text) {
  return fmt::format("<span class=\"key\" style=\"background:{}\"></span>{}", color, text);
}

struct GpuStats {
  int index = 0;
  std::string uuid;
  int samples = 0;  // chart points (samples or step means)
  double held = 0, outside = 0;  // sums of shares: through gpuman, outside it
  double util_sum = 0, util_max = 0;
  int util_n = 0;
  double mem_sum = 0;
  int64_t mem_max = 0;
  int mem_n = 0;
  std::optional<int64_t> mem_total;
  double temp_sum = 0, power_sum = 0;
  int temp_n = 0, power_n = 0;
  Series util{kUtilizationColor, {}, true};
  Series mem{kMemoryColor, {}, false};
};

std::string SummaryAndCharts(const ReportData& data) {
  std::map<std::pair<int, std::string>, GpuStats> gpus;
  for (const auto& s : data.samples) {
    GpuStats& g = gpus[{s.gpu_index, s.gpu_uuid}];
    g.index = s.gpu_index;
    g.uuid = s.gpu_uuid;
    ++g.samples;
    for (const auto& h : model::SharesOf(s)) {
      if (h.kind == model::HolderKind::kOutside) {
        g.outside += h.share;
      } else if (h.kind != model::HolderKind::kFree) {
        g.held += h.share;
      }
    }
    if (s.utilization_percent) {
      g.util_sum += *s.utilization_percent;
      g.util_max = g.util_n ? std::max(g.util_max, *s.utilization_percent) : *s.utilization_percent;
      ++g.util_n;
    }
    if (s.memory_used_bytes) {
      g.mem_sum += static_cast<double>(*s.memory_used_bytes);
      g.mem_max = std::max(g.mem_max, *s.memory_used_bytes);
      ++g.mem_n;
    }
    if (s.memory_total_bytes) g.mem_total = s.memory_total_bytes;
    if (s.temperature_c) {
      g.temp_sum += *s.temperature_c;
      ++g.temp_n;
    }
    if (s.power_w) {
      g.power_sum += *s.power_w;
      ++g.power_n;
    }
    g.util.points.push_back({s.t_unix_ms, s.utilization_percent});
    g.mem.points.push_back({s.t_unix_ms, MemoryPercent(s)});
  }
  std::string html = "<h2>Summary</h2>\n";
  if (gpus.empty()) {
    html += "<p class=\"empty\">No samples in this range.</p>\n";
    html += "<h2>Utilization and memory per GPU</h2>\n";
    html += "<p class=\"empty\">No samples in this range: nothing to chart.</p>\n";
    return html;
  }
  html +=
      "<table id=\"summary\">\n<tr><th>GPU</th><th class=\"l\">UUID</th><th>points</th>"
      "<th>util avg</th><th>util max</th><th>memory avg</th><th>memory max</th>"
      "<th>memory total</th><th>temp avg</th><th>power avg</th><th>held</th>"
      "<th>outside gpuman</th></tr>\n";
  auto or_dash = [](bool has, const std::string& text) { return has ? text : std::string("&ndash;"); };
  for (const auto& [key, g] : gpus) {
    html += fmt::format(
        "<tr><td>{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
        "<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
        g.index, HtmlEscape(g.uuid), g.samples,
        or_dash(g.util_n > 0, Num(g.util_n ? g.util_sum / g.util_n : 0) + " %"),
        or_dash(g.util_n > 0, Num(g.util_max) + " %"),
        or_dash(g.mem_n > 0, FormatBytes(g.mem_n ? std::llround(g.mem_sum / g.mem_n) : 0)),
        or_dash(g.mem_n > 0, FormatBytes(g.mem_max)),
        or_dash(g.mem_total.has_value(), FormatBytes(g.mem_total.value_or(0))),
        or_dash(g.temp_n > 0, Num(g.temp_n ? g.temp_sum / g.temp_n : 0) + " &deg;C"),
        or_dash(g.power_n > 0, Num(g.power_n ? g.power_sum / g.power_n : 0) + " W"),
        Num(100.0 * g.held / g.samples) + " %", Num(100.0 * g.outside / g.samples) + " %");
  }
  html += "</table>\n<h2>Utilization and memory per GPU</h2>\n<div class=\"grid\">\n";
  for (const auto& [key, g] : gpus) {
    const std::string title = fmt::format("GPU {} {}", g.index, g.uuid);
    html += fmt::format(
        "<div class=\"card\"><h3><b>GPU {}</b> {} {}{}</h3>\n", g.index, HtmlEscape(g.uuid),
        Key(kUtilizationColor, "utilization"),
        Key(kMemoryColor, g.mem_total ? "memory used (of " + FormatBytes(*g.mem_total) + ")"
                                      : std::string("memory used")));
    html += LineChart({g.util, g.mem}, data.since_unix_ms, data.until_unix_ms, data.step_ms,
                      "utilization and memory of " + title);
    html += "</div>\n";
  }
  return html + "</div>\n";
}

std::string GpuHours(const ReportData& data) {
  std::string html = "<h2>GPU-hours per user</h2>\n";
  std::vector<std::pair<double, model::UsageKey>> rows;
  double total = 0;
  for (const auto& [who, hours] : data.gpu_hours_by_user) {
    if (hours <= 0) continue;
    rows.push_back({hours, who});
    total += hours;
  }
  if (rows.empty()) return html + "<p class=\"empty\">No GPU time in this range.</p>\n";
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  const double max = rows.front().first;
  constexpr int kRow = 24, kLabel = 210, kWidth = 820, kBarMax = kWidth - kLabel - 110;
  const int height = static_cast<int>(rows.size()) * kRow + 8;
  html += fmt::format(
      "<p class=\"meta\">{} GPU-hours in total; \"(outside gpuman)\" is time processes of "
      "that user ran on a GPU that no lease or job held; \"(free)\" is time nobody used a "
      "GPU.</p>\n<div class=\"card\" style=\"max-width:{}px\">"
      "<svg viewBox=\"0 0 {} {}\" width=\"{}\" height=\"{}\" "
      "role=\"img\" aria-label=\"GPU-hours per user\">\n",
      Num(total, 2), kWidth, kWidth, height, kWidth, height);
  int row = 0;
  for (const auto& [hours, who] : rows) {
    const int y = 4 + row++ * kRow;
    const double w = std::max(1.0, hours / max * kBarMax);
    const bool free = who.user.empty() && !who.outside;
    const std::string_view color = free ? kFreeColor : who.outside ? kOutsideColor : kGpuHoursColor;
    html += fmt::format(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>"
        "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"/>"
        "<text x=\"{}\" y=\"{}\">{} h ({} %)</text>\n",
        kLabel - 6, y + 15, HtmlEscape(model::UsageLabel(who)), kLabel, y + 2, Num(w), kRow - 6,
        color, Num(kLabel + w + 6), y + 15,
        Num(hours, 2), Num(100 * hours / total));
  }
  return html + "</svg></div>\n";
}

std::string Waits(const ReportData& data) {
  std::string html = "<h2>Queue wait times</h2>\n";
  if (data.waits.empty()) return html + "<p class=\"empty\">No queued job started in this range.</p>\n";
  std::vector<int64_t> waited;
  for (const auto& w : data.waits) waited.push_back(std::max<int64_t>(0, w.started_unix_ms - w.submitted_unix_ms));
  std::vector<int64_t> sorted = waited;
  std::sort(sorted.begin(), sorted.end());
  auto quantile = [&](double q) {
    return sorted[static_cast<size_t>(std::ceil(q * static_cast<double>(sorted.size()))) - 1];
  };
  html += fmt::format(
      "<p class=\"meta\">{} job{} started; waited median {}, 90th percentile {}, longest {}.</p>\n",
      sorted.size(), sorted.size() == 1 ? "" : "s", FormatDurationMs(quantile(0.5)),
      FormatDurationMs(quantile(0.9)), FormatDurationMs(sorted.back()));

  struct Bucket {
    const char* label;
    int64_t below_ms;
    int count = 0;
  };
  Bucket buckets[] = {{"&lt; 10s", 10'000}, {"10s-1m", 60'000}, {"1-5m", 300'000},
                      {"5-15m", 900'000},   {"15m-1h", 3'600'000}, {"1-4h", 14'400'000},
                      {"&gt; 4h", INT64_MAX}};
  for (int64_t w : waited) {
    for (Bucket& b : buckets) {
      if (w < b.below_ms) {
        ++b.count;
        break;
      }
    }
  }
  int most = 0;
  for (const Bucket& b : buckets) most = std::max(most, b.count);
  constexpr int kW = 560, kH = 200, kBase = 170, kBarArea = 140, kSlot = 76;
  html += fmt::format(
      "<div class=\"card\" style=\"max-width:{}px\"><h3>{}</h3>"
      "<svg viewBox=\"0 0 {} {}\" width=\"{}\" height=\"{}\" "
      "role=\"img\" aria-label=\"queue wait histogram\">\n"
      "<line x1=\"12\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#bbb\"/>\n",
      kW, Key(kWaitColor, "jobs by time waited in the queue"), kW, kH, kW, kH, kBase, kW - 12, kBase);
  for (size_t i = 0; i < std::size(buckets); ++i) {
    const Bucket& b = buckets[i];
    const int x = 20 + static_cast<int>(i) * kSlot;
    const double h = most ? static_cast<double>(b.count) / most * kBarArea : 0;
    html += fmt::format(
        "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"/>"
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>"
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
        x, Num(kBase - h), kSlot - 16, Num(h), kWaitColor, x + (kSlot - 16) / 2, kBase + 16,
        b.label, x + (kSlot - 16) / 2, Num(kBase - h - 4), b.count);
  }
  html += "</svg></div>\n";

  // The longest waits, for a closer look.
  std::vector<size_t> order(data.waits.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return waited[a] > waited[b]; });
  if (order.size() > 10) order.resize(10);
  html += "<h3 style=\"margin-top:12px\">Longest waits</h3>\n<table id=\"waits\">\n"
          "<tr><th>job</th><th class=\"l\">user</th><th>GPUs</th><th class=\"l\">submitted</th>"
          "<th>waited</th></tr>\n";
  for (size_t i : order) {
    const model::JobWait& w = data.waits[i];
    html += fmt::format(
        "<tr><td>{}</td><td class=\"l\">{}</td><td>{}</td><td class=\"l\">{}</td><td>{}</td></tr>\n",
        w.job_id, HtmlEscape(w.user), w.gpus, FormatIsoUtcSeconds(w.submitted_unix_ms / 1000),
        FormatDurationMs(waited[i]));
  }
  return html + "</table>\n";
}

}  // namespace

std::string HtmlEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string RenderReportHtml(const ReportData& data) {
  const std::string title =
      data.host.empty() ? std::string("GPU usage report") : "GPU usage report: " + HtmlEscape(data.host);
  std::string html = fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
      "style-src 'unsafe-inline'; img-src data:\">\n"
      "<meta name=\"generator\" content=\"gpuman\">\n<title>{}</title>\n<style>{}</style>\n"
      "</head>\n<body>\n<main>\n<h1>{}</h1>\n",
      title, kStyle, title);
  html += fmt::format(
      "<p class=\"meta\">Range: {} to {} (UTC, {}){}</p>\n<p class=\"meta\">Generated {} by "
      "gpuman.</p>\n",
      FormatIsoUtcSeconds(data.since_unix_ms / 1000), FormatIsoUtcSeconds(data.until_unix_ms / 1000),
      FormatDurationMs(std::max<int64_t>(0, data.until_unix_ms - data.since_unix_ms)),
      data.step_ms > 0 ? "; one point per " + FormatDurationMs(data.step_ms) : std::string(),
      FormatIsoUtcSeconds(data.generated_unix_ms / 1000));
  html += SummaryAndCharts(data);
  html += GpuHours(data);
  html += Waits(data);
  return html + "</main>\n</body>\n</html>\n";
}

}  // namespace gpuman::render
