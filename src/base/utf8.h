// UTF-8 encoding of one code point, shared by the terminal grid (tui) and the config
// reader (cli), and cutting text at a character boundary. Pure, any thread.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace gpuman {

/// The UTF-8 bytes of `cp` (U+FFFD for values that are not scalar values).
std::string EncodeUtf8(char32_t cp);
/// The UTF-8 bytes of each code point of `text`, in order.
std::string EncodeUtf8(std::u32string_view text);

/// `text` cut to at most `max_bytes` bytes at a UTF-8 character boundary, ending with
/// "…" when something was cut; unchanged when it fits.
std::string CutText(std::string text, size_t max_bytes);

}  // namespace gpuman
