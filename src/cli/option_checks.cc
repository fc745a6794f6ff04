#include "cli/option_checks.h"

#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "base/strings.h"

namespace gpuman::cli {

CLI::Validator SecondsIn(double min, double max, const char* shown) {
  return CLI::Validator(
      [=](std::string& value) -> std::string {
        const std::optional<double> s = ParseFiniteDouble(value);
        if (!s) return "'" + value + "' is not a number of seconds";
        if (*s < min || *s > max) return value + " is not in " + shown + " seconds";
        return "";
      },
      std::string("SECONDS in ") + shown);
}

}  // namespace gpuman::cli
