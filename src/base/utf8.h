// UTF-8 encoding of one code point, shared by the terminal grid (tui) and the config
// reader (cli). Pure, any thread.
#pragma once

#include <string>
#include <string_view>

namespace gpuman {

/// The UTF-8 bytes of `cp` (U+FFFD for values that are not scalar values).
std::string EncodeUtf8(char32_t cp);
/// The UTF-8 bytes of each code point of `text`, in order.
std::string EncodeUtf8(std::u32string_view text);

}  // namespace gpuman
