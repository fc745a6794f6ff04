// UTF-8 encoding of one code point, shared by the terminal grid (tui) and the config
// reader (cli). Pure, any thread.
#pragma once

#include <string>

namespace gpuman {

/// The UTF-8 bytes of `cp` (U+FFFD for values that are not scalar values).
std::string EncodeUtf8(char32_t cp);

}  // namespace gpuman
