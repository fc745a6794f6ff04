// Byte sizes as users type them on the command line ("20GiB", "1.5 G", "512MiB") and
// as selection reasons print them. Pure functions, no locale; safe from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"

namespace gpuman::policy {

/// Parses a size: a non-negative decimal number, optional blanks, and an optional unit.
/// Units are case-insensitive and all binary: K, KB, KiB = 1024; M, MB, MiB = 1024^2;
/// G, GB, GiB = 1024^3; T, TB, TiB = 1024^4; B or no unit = bytes. "GB" is binary on
/// purpose: nvidia-smi prints MiB and GPUs are sold by binary size ("A100 80GB" has
/// 80 GiB), so "--min-free-memory 20GB" should mean what the user reads in nvidia-smi.
/// A fraction is allowed with a unit and rounds down to whole bytes ("1.5GiB",
/// "0.5 M"); a bare number must be a whole number of bytes ("1000000").
/// Errors: kInvalidArgument for an empty string, junk, a sign, a fraction of a byte,
/// an unknown unit or a value above INT64_MAX.
Result<int64_t> ParseByteSize(std::string_view text);

/// Binary units with at most one decimal, trailing ".0" dropped: "0 B", "512 MiB",
/// "1.5 GiB", "80 GiB". Negative values get a leading '-'.
std::string FormatByteSize(int64_t bytes);

}  // namespace gpuman::policy
