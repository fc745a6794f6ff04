// History: a fixed-size ring of recent samples of one metric of one GPU (utilization,
// memory, temperature, power), and the sparkline that draws it. Owned by the TopModel on
// the UI thread; a plain value type.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace gpuman::tui {

class History {
 public:
  explicit History(size_t capacity = 300);

  /// Appends a sample (nullopt: the driver did not say), dropping the oldest when full.
  void Push(std::optional<double> value);
  size_t size() const { return size_; }
  size_t capacity() const { return values_.size(); }
  /// The i-th retained sample, 0 = oldest.
  std::optional<double> At(size_t i) const;
  /// The newest min(n, size()) samples, oldest first.
  std::vector<std::optional<double>> Last(size_t n) const;

 private:
  std::vector<std::optional<double>> values_;
  size_t next_ = 0;  // where the next sample goes
  size_t size_ = 0;
};

/// The newest `width` samples scaled to [0, max] as block glyphs ("▁".."█"), or as ASCII
/// (" ._-=+*#") when !unicode; unknown samples are spaces. Right-aligned: fewer samples than
/// `width` leave spaces on the left. Always exactly `width` glyphs.
std::string Sparkline(const History& history, int width, double max, bool unicode);
/// The same glyphs as code points, one per column (what the layout puts in the grid).
std::u32string SparklineCells(const History& history, int width, double max, bool unicode);

/// The four histories kept per GPU.
struct GpuHistory {
  explicit GpuHistory(size_t capacity = 300)
      : utilization(capacity), memory_percent(capacity), temperature_c(capacity), power_w(capacity) {}
  History utilization;
  History memory_percent;  // used / total * 100
  History temperature_c;
  History power_w;
};

}  // namespace gpuman::tui
