#include "base/duration.h"

#include <cctype>
#include <cstdlib>

namespace gpuman {

Result<int64_t> ParseDurationMs(std::string_view text) {
  auto bad = [&](const std::string& why) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "invalid duration '" + std::string(text) + "': " + why +
                         " (examples: 90s, 5m, 1h30m, 2.5h)");
  };
  if (text.empty()) return bad("empty");
  double total_ms = 0;
  size_t i = 0;
  while (i < text.size()) {
    size_t start = i;
    while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
    if (start == i) return bad("expected a number");
    std::string number(text.substr(start, i - start));
    char* end = nullptr;
    double value = std::strtod(number.c_str(), &end);
    if (end == nullptr || *end != '\0') return bad("malformed number '" + number + "'");
    size_t unit_start = i;
    while (i < text.size() && std::isalpha(static_cast<unsigned char>(text[i]))) ++i;
    std::string_view unit = text.substr(unit_start, i - unit_start);
    double factor = 0;
    if (unit.empty()) {
      if (start != 0 || i != text.size()) return bad("a unit is needed after " + number);
      factor = 1000;
    } else if (unit == "ms") factor = 1;
    else if (unit == "s") factor = 1000;
    else if (unit == "m") factor = 60e3;
    else if (unit == "h") factor = 3600e3;
    else if (unit == "d") factor = 86400e3;
    else return bad("unknown unit '" + std::string(unit) + "'");
    total_ms += value * factor;
  }
  if (total_ms > 365.0 * 86400e3) return bad("longer than 365 days");
  return static_cast<int64_t>(total_ms + 0.5);
}

std::string FormatDurationMs(int64_t ms) {
  if (ms < 0) ms = 0;
  int64_t s = ms / 1000;
  struct Unit {
    int64_t seconds;
    const char* name;
  } units[] = {{86400, "d"}, {3600, "h"}, {60, "m"}, {1, "s"}};
  std::string out;
  int parts = 0;
  for (const auto& u : units) {
    if (parts == 2) break;
    int64_t n = s / u.seconds;
    if (n == 0 && (parts == 0 ? u.seconds != 1 : true)) {
      if (parts > 0) ++parts;  // stop after a zero in the middle ("2h", not "2h 0m 5s")
      continue;
    }
    s -= n * u.seconds;
    if (!out.empty()) out += ' ';
    out += std::to_string(n) + u.name;
    ++parts;
  }
  return out.empty() ? "0s" : out;
}

}  // namespace gpuman
