// Indented JSON text for the human-facing JSON outputs (`status --json`). Pure; any thread.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

namespace gpuman::render {

/// The same text as value.dump(2) (two-space indent, `"key": value`, `[]`/`{}` when
/// empty, control characters as \uXXXX, other UTF-8 as is, numbers as nlohmann writes
/// them), written in one pass into one string: nlohmann's serializer took a sixth of a
/// `status --json` served by the daemon (docs/design.md, "Start-up"). Where dump(2)
/// would throw (a string that is not UTF-8), each byte that does not begin a valid
/// sequence becomes U+FFFD instead.
std::string PrettyJson(const nlohmann::ordered_json& value);

}  // namespace gpuman::render
