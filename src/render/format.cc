#include "render/format.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iterator>
#include <limits>

#include <fmt/format.h>

#include "base/utf8.h"

namespace gpuman::render {
namespace {

constexpr std::string_view kEllipsis = "\xE2\x80\xA6";  // U+2026, one column

struct CivilTime {
  int year;
  unsigned month, day;
  int64_t hour, minute, second;
};

CivilTime ToCivil(int64_t unix_s) {
  using namespace std::chrono;
  const sys_seconds tp{seconds{unix_s}};
  const sys_days day = floor<days>(tp);
  const year_month_day ymd{day};
  const int64_t rest = (tp - day).count();
  return CivilTime{static_cast<int>(ymd.year()), static_cast<unsigned>(ymd.month()),
                   static_cast<unsigned>(ymd.day()), rest / 3600, rest / 60 % 60, rest % 60};
}

}  // namespace

std::string FormatBytes(int64_t bytes) {
  if (bytes < 0) {
    // INT64_MIN has no positive counterpart; it is -8 EiB exactly.
    if (bytes == std::numeric_limits<int64_t>::min()) return "-8 EiB";
    return "-" + FormatBytes(-bytes);
  }
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return fmt::format("{} B", bytes);
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit + 1 < static_cast<int>(std::size(kUnits))) {
    value /= 1024.0;
    ++unit;
  }
  // One decimal, dropped when it would be ".0" ("80 GiB", not "80.0 GiB").
  std::string number = fmt::format("{:.1f}", value);
  if (number.ends_with(".0")) number.resize(number.size() - 2);
  // Rounding can carry into the next unit ("1024 MiB" -> "1 GiB").
  if (number == "1024" && unit + 1 < static_cast<int>(std::size(kUnits))) {
    number = "1";
    ++unit;
  }
  return number + " " + kUnits[unit];
}

std::string FormatIsoUtcMillis(int64_t unix_ms) {
  int64_t seconds = unix_ms / 1000;
  int64_t millis = unix_ms % 1000;
  if (millis < 0) {
    millis += 1000;
    --seconds;
  }
  const CivilTime t = ToCivil(seconds);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", t.year, t.month, t.day,
                     t.hour, t.minute, t.second, millis);
}

std::string FormatIsoUtcSeconds(int64_t unix_s) {
  const CivilTime t = ToCivil(unix_s);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z", t.year, t.month, t.day, t.hour,
                     t.minute, t.second);
}

int LineLimit(const TerminalInfo& term) {
  return term.cut_to_width ? std::max(term.width, 80) : std::numeric_limits<int>::max();
}

int DisplayWidth(std::string_view text) { return TextWidth(text); }

std::string TruncateToWidth(std::string_view text, int width) {
  if (width <= 0) return "";
  if (DisplayWidth(text) <= width) return std::string(text);
  // Keep what fits in width - 1 columns, then the ellipsis (one column).
  int used = 0;
  size_t end = 0;
  while (end < text.size()) {
    size_t next = end;
    const int w = CodePointWidth(DecodeUtf8(text, next));
    if (used + (w < 0 ? 1 : w) > width - 1) break;
    used += w < 0 ? 1 : w;
    end = next;
  }
  std::string out(text.substr(0, end));
  out += kEllipsis;
  return out;
}

std::string PadRight(std::string_view text, int width) {
  std::string out(text);
  const int pad = width - DisplayWidth(text);
  if (pad > 0) out.append(static_cast<size_t>(pad), ' ');
  return out;
}

std::string PadLeft(std::string_view text, int width) {
  const int pad = width - DisplayWidth(text);
  std::string out(pad > 0 ? static_cast<size_t>(pad) : 0, ' ');
  out += text;
  return out;
}

std::string Colorize(std::string_view text, Color color, bool enabled) {
  if (!enabled || color == Color::kNone) return std::string(text);
  const char* code = "";
  switch (color) {
    case Color::kNone: break;
    case Color::kGreen: code = "32"; break;
    case Color::kYellow: code = "33"; break;
    case Color::kRed: code = "31"; break;
    case Color::kDim: code = "2"; break;
    case Color::kBold: code = "1"; break;
    case Color::kYellowInverse: code = "33;7"; break;
  }
  return fmt::format("\x1b[{}m{}\x1b[0m", code, text);
}

Color PercentColor(double percent) {
  if (percent < 50.0) return Color::kGreen;
  if (percent < 90.0) return Color::kYellow;
  return Color::kRed;
}

}  // namespace gpuman::render
