#include "tui/history.h"

#include <algorithm>
#include <cmath>

#include "base/utf8.h"

namespace gpuman::tui {

History::History(size_t capacity) : values_(std::max<size_t>(capacity, 1)) {}

void History::Push(std::optional<double> value) {
  values_[next_] = value;
  next_ = (next_ + 1) % values_.size();
  size_ = std::min(size_ + 1, values_.size());
}

std::optional<double> History::At(size_t i) const {
  if (i >= size_) return std::nullopt;
  const size_t oldest = (next_ + values_.size() - size_) % values_.size();
  return values_[(oldest + i) % values_.size()];
}

std::vector<std::optional<double>> History::Last(size_t n) const {
  n = std::min(n, size_);
  std::vector<std::optional<double>> out;
  out.reserve(n);
  for (size_t i = size_ - n; i < size_; ++i) out.push_back(At(i));
  return out;
}

std::u32string SparklineCells(const History& history, int width, double max, bool unicode) {
  static constexpr char32_t kBlocks[] = {U'\u2581', U'\u2582', U'\u2583', U'\u2584',
                                         U'\u2585', U'\u2586', U'\u2587', U'\u2588'};
  static constexpr char kAscii[] = "._-=+*#@";
  if (width <= 0) return U"";
  auto samples = history.Last(static_cast<size_t>(width));
  std::u32string out(static_cast<size_t>(width) - samples.size(), U' ');
  for (const auto& v : samples) {
    if (!v || max <= 0 || std::isnan(*v)) {
      out += U' ';
      continue;
    }
    double f = std::clamp(*v / max, 0.0, 1.0);
    int level = std::clamp(static_cast<int>(std::lround(f * 7)), 0, 7);
    out += unicode ? kBlocks[level] : static_cast<char32_t>(kAscii[level]);
  }
  return out;
}

std::string Sparkline(const History& history, int width, double max, bool unicode) {
  return EncodeUtf8(SparklineCells(history, width, max, unicode));
}

}  // namespace gpuman::tui
