// CLI11 validators shared by several commands. Main thread only.
#pragma once

namespace CLI {
class Validator;
}

namespace gpuman::cli {

/// Seconds in [min, max], finite numbers only: CLI::Range lets "nan" through (every
/// comparison with NaN is false), which made `status --watch nan` a busy loop. `shown` is
/// the range as help and errors print it ("0.1..86400").
CLI::Validator SecondsIn(double min, double max, const char* shown);

}  // namespace gpuman::cli
