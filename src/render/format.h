// Small text helpers shared by the render layer: byte and time formatting, display
// width of UTF-8 text, truncation with an ellipsis, padding and ANSI colour.
// Pure functions, no I/O, no locale; safe to call from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace gpuman::render {

/// Binary units with at most one decimal: "0 B", "512 KiB", "1.5 GiB", "80 GiB".
/// Negative values are formatted with a leading '-'.
std::string FormatBytes(int64_t bytes);

/// ISO-8601 UTC with milliseconds: 1714564800250 -> "2024-05-01T12:00:00.250Z".
std::string FormatIsoUtcMillis(int64_t unix_ms);

/// ISO-8601 UTC to the second: 1714564800 -> "2024-05-01T12:00:00Z".
std::string FormatIsoUtcSeconds(int64_t unix_s);

/// Facts about the output, decided by the CLI (isatty, $COLUMNS, NO_COLOR...).
struct TerminalInfo {
  int width = 80;  // display columns; values below 80 are treated as 80
  bool use_color = false;
  /// True on a terminal: lines are cut to `width` with "…". False for a pipe or a file:
  /// nothing is cut (a table's columns grow to their longest cell), and `width` only
  /// chooses which optional columns a table shows.
  bool cut_to_width = true;
};

/// The most display columns a line may take: max(width, 80) on a terminal, no limit
/// (INT_MAX) when nothing is cut.
int LineLimit(const TerminalInfo& term);

/// Display columns of UTF-8 text as a terminal shows it: East Asian wide characters and
/// most emoji take two columns, combining marks none (base/utf8.h, independent of the
/// locale). ANSI escape sequences are not skipped.
int DisplayWidth(std::string_view text);

/// Cuts `text` to at most `width` display columns, ending with "…" when something
/// was dropped. Never splits a UTF-8 sequence, nor a wide character (the result may then
/// be a column narrower). width <= 0 yields "".
std::string TruncateToWidth(std::string_view text, int width);

/// Pads with spaces on the right (PadRight) or left (PadLeft) to `width` columns;
/// text that is already wider is returned unchanged.
std::string PadRight(std::string_view text, int width);
std::string PadLeft(std::string_view text, int width);

enum class Color { kNone, kGreen, kYellow, kRed, kDim, kBold, kYellowInverse };

/// Wraps `text` in the ANSI escape for `color` when `enabled`; otherwise returns it as is.
std::string Colorize(std::string_view text, Color color, bool enabled);

/// Green below 50 %, yellow below 90 %, red from 90 %.
Color PercentColor(double percent);

}  // namespace gpuman::render
