// UTF-8 helpers for the terminal grid: decode/encode one code point and its width in
// terminal columns. They live in base/utf8.h (the text views of render/ measure with
// them too); these names keep the grid's code short. Pure functions, any thread.
#pragma once

#include "base/utf8.h"

namespace gpuman::tui {

using gpuman::CodePointWidth;
using gpuman::DecodeUtf8;
using gpuman::EncodeUtf8;
using gpuman::TextWidth;

}  // namespace gpuman::tui
