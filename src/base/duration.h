// Parsing and formatting of human durations ("90s", "5m", "1h30m", "2.5h", "45").
// Pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"

namespace gpuman {

/// Milliseconds for a duration: a sequence of <number><unit> with units ms, s, m, h, d, or a
/// bare number of seconds. Fractions allowed ("1.5h"). Errors: kInvalidArgument for empty,
/// negative, unknown units, or more than 365 days.
Result<int64_t> ParseDurationMs(std::string_view text);

/// "45s", "12m 5s", "3h 20m", "2d 4h" (two most significant units).
std::string FormatDurationMs(int64_t ms);

}  // namespace gpuman
