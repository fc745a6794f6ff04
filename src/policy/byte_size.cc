#include "policy/byte_size.h"

#include <cmath>
#include <cstdio>
#include <limits>

#include "base/strings.h"

namespace gpuman::policy {
namespace {

Error Invalid(std::string_view text, const char* why) {
  return MakeError(ErrorCode::kInvalidArgument,
                   "invalid size \"" + std::string(text) + "\": " + why);
}

// Multiplier for a lower-cased unit, 0 when unknown.
int64_t UnitMultiplier(std::string_view unit) {
  if (unit.empty() || unit == "b") return 1;
  int shift = 0;
  switch (unit.front()) {
    case 'k': shift = 10; break;
    case 'm': shift = 20; break;
    case 'g': shift = 30; break;
    case 't': shift = 40; break;
    default: return 0;
  }
  std::string_view rest = unit.substr(1);
  if (rest.empty() || rest == "b" || rest == "ib") return int64_t{1} << shift;
  return 0;
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

Result<int64_t> ParseByteSize(std::string_view text) {
  std::string_view s = Trim(text);
  if (s.empty()) return Invalid(text, "empty");

  size_t pos = 0;
  while (pos < s.size() && IsDigit(s[pos])) ++pos;
  std::string_view whole = s.substr(0, pos);
  std::string_view fraction;
  if (pos < s.size() && s[pos] == '.') {
    size_t start = ++pos;
    while (pos < s.size() && IsDigit(s[pos])) ++pos;
    fraction = s.substr(start, pos - start);
    if (fraction.empty()) return Invalid(text, "expected digits after '.'");
  }
  if (whole.empty() && fraction.empty()) {
    return Invalid(text, "expected a number with an optional unit (B, KiB, MiB, GiB, TiB)");
  }
  std::string unit = ToLower(Trim(s.substr(pos)));
  int64_t multiplier = UnitMultiplier(unit);
  if (multiplier == 0) {
    return Invalid(text, "unknown unit (use B, K, M, G, T, optionally with B or iB)");
  }
  if (!fraction.empty() && multiplier == 1) return Invalid(text, "fraction of a byte");

  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  int64_t value = 0;
  if (!whole.empty()) {
    std::optional<int64_t> parsed = ParseInt(whole);
    if (!parsed || *parsed > kMax / multiplier) return Invalid(text, "too large");
    value = *parsed * multiplier;
  }
  if (!fraction.empty()) {
    // At most 2^40 per unit, so 12 digits are more precision than a byte needs.
    std::string_view digits = fraction.substr(0, 12);
    long double part = 0;
    long double scale = 1;
    for (char c : digits) {
      part = part * 10 + (c - '0');
      scale *= 10;
    }
    auto extra = static_cast<int64_t>(std::floor(part / scale * multiplier));
    if (value > kMax - extra) return Invalid(text, "too large");
    value += extra;
  }
  return value;
}

std::string FormatByteSize(int64_t bytes) {
  if (bytes < 0) {
    if (bytes == std::numeric_limits<int64_t>::min()) return "-8 EiB";
    return "-" + FormatByteSize(-bytes);
  }
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int unit = 0;
  double value = static_cast<double>(bytes);
  while (value >= 1024 && unit < 6) {
    value /= 1024;
    ++unit;
  }
  if (unit == 0) return std::to_string(bytes) + " B";
  // One decimal, rounded down so "19.99 GiB free" never prints as the 20 GiB it misses.
  double tenths = std::floor(value * 10);
  char buf[32];
  if (std::fmod(tenths, 10) == 0) {
    std::snprintf(buf, sizeof buf, "%.0f %s", tenths / 10, kUnits[unit]);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f %s", tenths / 10, kUnits[unit]);
  }
  return buf;
}

}  // namespace gpuman::policy
