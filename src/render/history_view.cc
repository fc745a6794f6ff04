#include "render/history_view.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <map>

#include "base/duration.h"
#include "render/format.h"

namespace gpuman::render {
namespace {

// Stored precision: hundredths of a percent or degree, milliwatts. Means of several rows
// are rounded to the same precision so that output does not depend on float noise.
double Round(double v, int decimals) {
  const double scale = std::pow(10.0, decimals);
  return std::round(v * scale) / scale;
}

nlohmann::json Number(const std::optional<double>& v, int decimals) {
  if (!v) return nullptr;
  return Round(*v, decimals);
}

template <typename T>
nlohmann::json Optional(const std::optional<T>& v) {
  if (!v) return nullptr;
  return *v;
}

std::string CsvNumber(const std::optional<double>& v, int decimals) {
  return v ? fmt::format("{}", Round(*v, decimals)) : "";
}

std::string CsvField(std::string_view text) {
  if (text.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(text);
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::optional<double> MemoryPercent(const model::GpuSample& s) {
  if (!s.memory_used_bytes || !s.memory_total_bytes || *s.memory_total_bytes <= 0) {
    return s.memory_utilization_percent;
  }
  return 100.0 * static_cast<double>(*s.memory_used_bytes) /
         static_cast<double>(*s.memory_total_bytes);
}

nlohmann::json HoldersJson(const model::GpuSample& s) {
  auto out = nlohmann::json::array();
  for (const auto& h : model::SharesOf(s)) {
    out.push_back({{"user", h.user}, {"kind", model::HolderKindName(h.kind)}, {"share", Round(h.share, 4)}});
  }
  return out;
}

// "kind:user:share;..." when the sample had more than one holder; "" otherwise.
std::string HoldersCsv(const model::GpuSample& s) {
  std::string out;
  for (const auto& h : s.holders) {
    if (!out.empty()) out += ';';
    out += fmt::format("{}:{}:{}", model::HolderKindName(h.kind), h.user, Round(h.share, 4));
  }
  return out;
}

struct Stat {
  double sum = 0, max = 0;
  int n = 0;
  void Add(const std::optional<double>& v) {
    if (!v) return;
    sum += *v;
    max = n ? std::max(max, *v) : *v;
    ++n;
  }
  std::optional<double> Mean() const { return n ? std::optional<double>(sum / n) : std::nullopt; }
};

}  // namespace

nlohmann::json HistoryToJson(const HistoryView& view) {
  nlohmann::json doc;
  doc["version"] = 1;
  doc["since_unix_ms"] = Optional(view.since_unix_ms);
  doc["until_unix_ms"] = Optional(view.until_unix_ms);
  doc["step_ms"] = Optional(view.step_ms);
  std::map<std::pair<int, std::string>, bool> gpus;
  for (const auto& s : view.samples) gpus[{s.gpu_index, s.gpu_uuid}] = true;
  doc["gpus"] = nlohmann::json::array();
  for (const auto& [key, unused] : gpus) {
    doc["gpus"].push_back({{"index", key.first}, {"uuid", key.second}});
  }
  auto& samples = doc["samples"] = nlohmann::json::array();
  for (const auto& s : view.samples) {
    samples.push_back({
        {"t_unix_ms", s.t_unix_ms},
        {"time", FormatIsoUtcSeconds(s.t_unix_ms / 1000)},
        {"gpu_index", s.gpu_index},
        {"gpu_uuid", s.gpu_uuid},
        {"utilization_percent", Number(s.utilization_percent, 2)},
        {"memory_utilization_percent", Number(s.memory_utilization_percent, 2)},
        {"memory_used_bytes", Optional(s.memory_used_bytes)},
        {"memory_total_bytes", Optional(s.memory_total_bytes)},
        {"temperature_c", Number(s.temperature_c, 2)},
        {"power_w", Number(s.power_w, 3)},
        {"user", s.user},
        {"job_id", Optional(s.job_id)},
        {"holder_kind", model::HolderKindName(s.holder_kind)},
        {"holders", HoldersJson(s)},
        {"slurm_job_id", s.slurm_job_id.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.slurm_job_id)},
        {"slurm_user", s.slurm_job_id.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.slurm_user)},
    });
  }
  return doc;
}

std::string HistoryToCsv(const std::vector<model::GpuSample>& samples) {
  std::string out =
      "t_unix_ms,time,gpu_index,gpu_uuid,utilization_percent,memory_utilization_percent,"
      "memory_used_bytes,memory_total_bytes,temperature_c,power_w,user,job_id,holder_kind,holders\n";
  for (const auto& s : samples) {
    auto integer = [](const std::optional<int64_t>& v) { return v ? std::to_string(*v) : ""; };
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", s.t_unix_ms,
                       FormatIsoUtcSeconds(s.t_unix_ms / 1000), s.gpu_index, CsvField(s.gpu_uuid),
                       CsvNumber(s.utilization_percent, 2),
                       CsvNumber(s.memory_utilization_percent, 2), integer(s.memory_used_bytes),
                       integer(s.memory_total_bytes), CsvNumber(s.temperature_c, 2),
                       CsvNumber(s.power_w, 3), CsvField(s.user), integer(s.job_id),
                       model::HolderKindName(s.holder_kind), CsvField(HoldersCsv(s)));
  }
  return out;
}

std::string Sparkline(const std::vector<SeriesPoint>& points, int64_t from_unix_ms,
                      int64_t to_unix_ms, int width, double max) {
  static constexpr const char* kBlocks[] = {"\u2581", "\u2582", "\u2583", "\u2584",
                                            "\u2585", "\u2586", "\u2587", "\u2588"};
  if (width <= 0) return "";
  std::vector<double> sum(static_cast<size_t>(width), 0);
  std::vector<int> count(static_cast<size_t>(width), 0);
  const double span = static_cast<double>(std::max<int64_t>(to_unix_ms - from_unix_ms, 0) + 1);
  for (const auto& p : points) {
    if (!p.value || p.t_unix_ms < from_unix_ms || p.t_unix_ms > to_unix_ms) continue;
    auto col = static_cast<int>(static_cast<double>(p.t_unix_ms - from_unix_ms) / span * width);
    col = std::clamp(col, 0, width - 1);
    sum[static_cast<size_t>(col)] += *p.value;
    ++count[static_cast<size_t>(col)];
  }
  std::string out;
  for (size_t i = 0; i < sum.size(); ++i) {
    if (count[i] == 0) {
      out += ' ';
      continue;
    }
    double frac = max > 0 ? sum[i] / count[i] / max : 0;
    int level = static_cast<int>(std::lround(std::clamp(frac, 0.0, 1.0) * 7));
    out += kBlocks[level];
  }
  return out;
}

std::string RenderHistoryText(const HistoryView& view, const TerminalInfo& term) {
  if (view.samples.empty()) return "No samples in this window.\n";
  int64_t from = view.samples.front().t_unix_ms, to = from;
  for (const auto& s : view.samples) {
    from = std::min(from, s.t_unix_ms);
    to = std::max(to, s.t_unix_ms);
  }
  struct Gpu {
    std::string uuid;
    int index = 0;
    int samples = 0;
    Stat util, mem_pct, temp, power;
    std::optional<int64_t> mem_total;
    double mem_used_sum = 0;
    int64_t mem_used_max = 0;
    int mem_used_n = 0;
    std::map<model::UsageKey, double> holders;  // sum of shares
    std::vector<SeriesPoint> util_points, mem_points;
  };
  std::map<std::pair<int, std::string>, Gpu> gpus;
  for (const auto& s : view.samples) {
    Gpu& g = gpus[{s.gpu_index, s.gpu_uuid}];
    g.uuid = s.gpu_uuid;
    g.index = s.gpu_index;
    ++g.samples;
    g.util.Add(s.utilization_percent);
    g.mem_pct.Add(MemoryPercent(s));
    g.temp.Add(s.temperature_c);
    g.power.Add(s.power_w);
    if (s.memory_total_bytes) g.mem_total = s.memory_total_bytes;
    if (s.memory_used_bytes) {
      g.mem_used_sum += static_cast<double>(*s.memory_used_bytes);
      g.mem_used_max = std::max(g.mem_used_max, *s.memory_used_bytes);
      ++g.mem_used_n;
    }
    for (const auto& h : model::SharesOf(s)) g.holders[model::UsageKeyOf(h.kind, h.user)] += h.share;
    g.util_points.push_back({s.t_unix_ms, s.utilization_percent});
    g.mem_points.push_back({s.t_unix_ms, MemoryPercent(s)});
  }
  const int width = std::max(term.width, 80);
  // One column per sample at most, so that a short window has no holes.
  int most_samples = 0;
  for (const auto& [key, g] : gpus) most_samples = std::max(most_samples, g.samples);
  const int spark_width = std::min(width - 13, most_samples);  // "       util |" ... "|"
  std::string out = fmt::format("History {} .. {}", FormatIsoUtcSeconds(from / 1000),
                                FormatIsoUtcSeconds(to / 1000));
  if (view.step_ms) out += ", step " + FormatDurationMs(*view.step_ms);
  out += fmt::format(", {} GPU{}", gpus.size(), gpus.size() == 1 ? "" : "s");
  if (const int64_t per_column = (to - from) / spark_width; per_column >= 1000) {
    out += ", sparkline columns of " + FormatDurationMs(per_column);
  }
  out += "\n";
  auto percent = [](const std::optional<double>& v) {
    return v ? fmt::format("{:.0f}%", *v) : std::string("-");
  };
  for (const auto& [key, g] : gpus) {
    std::string line = fmt::format("GPU {}  {}  {} samples  util avg {} max {}", g.index,
                                   TruncateToWidth(g.uuid, 12), g.samples, percent(g.util.Mean()),
                                   g.util.n ? percent(g.util.max) : "-");
    if (g.mem_used_n) {
      line += fmt::format(
          "  mem avg {} max {}",
          FormatBytes(static_cast<int64_t>(std::llround(g.mem_used_sum / g.mem_used_n))),
          FormatBytes(g.mem_used_max));
      if (g.mem_total) line += " of " + FormatBytes(*g.mem_total);
    }
    if (auto t = g.temp.Mean()) line += fmt::format("  {:.0f} C", *t);
    if (auto p = g.power.Mean()) line += fmt::format("  {:.0f} W", *p);
    out += line + "\n";
    out += "       util |" + Sparkline(g.util_points, from, to, spark_width, 100) + "|\n";
    out += "       mem  |" + Sparkline(g.mem_points, from, to, spark_width, 100) + "|\n";
    // Largest share first; "(free)" only for time nobody used the GPU.
    std::vector<std::pair<double, model::UsageKey>> holders;
    for (const auto& [who, share] : g.holders) holders.push_back({share, who});
    std::stable_sort(holders.begin(), holders.end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });
    std::string held = "       held:";
    for (const auto& [share, who] : holders) {
      held += fmt::format(" {} {:.0f}%", model::UsageLabel(who), 100.0 * share / g.samples);
    }
    out += TruncateToWidth(held, LineLimit(term)) + "\n";  // whole to a pipe or a file
  }
  return out;
}

}  // namespace gpuman::render
