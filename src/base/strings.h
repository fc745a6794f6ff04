// Small string helpers shared by every layer. Pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpuman {

/// Splits on `sep`, keeping empty fields ("a,,b" -> {"a","","b"}).
std::vector<std::string> Split(std::string_view text, char sep);
/// Joins with `sep` between items ({"a", "", "b"}, "," -> "a,,b").
std::string Join(const std::vector<std::string>& items, std::string_view sep);
/// Removes ASCII whitespace at both ends.
std::string_view Trim(std::string_view text);
/// Parses a whole decimal integer; nullopt on any junk, sign or overflow.
std::optional<int64_t> ParseInt(std::string_view text);
/// Lower-cases ASCII letters.
std::string ToLower(std::string_view text);
/// ISO-8601 UTC with seconds, e.g. "2026-11-30T07:24:15Z".
std::string FormatIsoUtc(int64_t unix_seconds);

}  // namespace gpuman
