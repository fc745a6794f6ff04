// UTF-8 helpers for the terminal grid: decode/encode one code point and its width in
// terminal columns. Independent of the C locale (wcwidth is not), so the layout gives the
// same answer in tests and in a terminal. Pure functions, any thread.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "base/utf8.h"

namespace gpuman::tui {

/// Decodes the code point starting at text[pos] and advances pos past it. A malformed or
/// truncated sequence yields U+FFFD and advances by one byte.
char32_t DecodeUtf8(std::string_view text, size_t& pos);

/// The UTF-8 bytes of `cp` (base/utf8.h).
using gpuman::EncodeUtf8;

/// Columns `cp` takes in a terminal: 0 for combining marks and zero-width characters, 2 for
/// East Asian wide/fullwidth characters and most emoji, -1 for control characters (the
/// caller replaces them), 1 otherwise.
int CodePointWidth(char32_t cp);

/// Display columns of `text` (control characters count as one, as they are shown as '?').
int TextWidth(std::string_view text);

}  // namespace gpuman::tui
