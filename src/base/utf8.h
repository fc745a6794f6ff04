// UTF-8: encoding and decoding one code point, its width in terminal columns, and cutting
// text at a character boundary; shared by the terminal grid (tui), the text views (render)
// and the config reader (cli). Widths do not depend on the C locale (wcwidth does), so a
// layout gives the same answer in tests, in a pipe and in a terminal. Pure, any thread.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace gpuman {

/// The UTF-8 bytes of `cp` (U+FFFD for values that are not scalar values).
std::string EncodeUtf8(char32_t cp);
/// The UTF-8 bytes of each code point of `text`, in order.
std::string EncodeUtf8(std::u32string_view text);

/// Decodes the code point starting at text[pos] and advances pos past it. A malformed or
/// truncated sequence yields U+FFFD and advances by one byte.
char32_t DecodeUtf8(std::string_view text, size_t& pos);

/// Columns `cp` takes in a terminal: 0 for combining marks and zero-width characters, 2 for
/// East Asian wide/fullwidth characters and most emoji, -1 for control characters (the
/// caller replaces or escapes them), 1 otherwise.
int CodePointWidth(char32_t cp);

/// Display columns of UTF-8 text (control characters count as one, as they are shown as
/// '?' or escaped; a malformed byte as one, U+FFFD).
int TextWidth(std::string_view text);

/// `text` cut to at most `max_bytes` bytes at a UTF-8 character boundary, ending with
/// "…" when something was cut; unchanged when it fits.
std::string CutText(std::string text, size_t max_bytes);

}  // namespace gpuman
