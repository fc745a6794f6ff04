// Indented JSON text for the human-facing JSON outputs (`status --json`). Pure; any thread.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace gpuman::render {

/// The same text as value.dump(2) (two-space indent, `"key": value`, `[]`/`{}` when
/// empty, control characters as \uXXXX, other UTF-8 as is, numbers as nlohmann writes
/// them), written in one pass into one string: nlohmann's serializer took a sixth of a
/// `status --json` served by the daemon (docs/design.md, "Start-up"). Where dump(2)
/// would throw (a string that is not UTF-8), each byte that does not begin a valid
/// sequence becomes U+FFFD instead.
std::string PrettyJson(const nlohmann::ordered_json& value);

/// Writes JSON text straight from the caller's data, without building a document first:
/// `status --json` built, printed and freed an ordered_json of every GPU (docs/design.md,
/// "Start-up"). Pretty: the same text as PrettyJson, i.e. dump(2); compact: the same as
/// dump() (no whitespace). Members are written in the order they are given; the caller
/// pairs every Begin with its End. Strings go through PrettyJson's escaping (U+FFFD for
/// bytes that are not UTF-8, where dump would throw), doubles through nlohmann's shortest
/// form ("null" when not finite).
class JsonWriter {
 public:
  enum class Style { kPretty, kCompact };
  JsonWriter(std::string& out, Style style) : out_(out), pretty_(style == Style::kPretty) {}

  JsonWriter& BeginObject();
  JsonWriter& EndObject();
  JsonWriter& BeginArray();
  JsonWriter& EndArray();
  /// The next member's key, inside an object; its value follows.
  JsonWriter& Key(std::string_view key);

  JsonWriter& Null();
  JsonWriter& Bool(bool v);
  JsonWriter& Int(int64_t v);
  JsonWriter& UInt(uint64_t v);
  JsonWriter& Double(double v);
  JsonWriter& String(std::string_view v);

 private:
  void BeforeValue();  // the separator and indent of the next value, unless a key wrote them
  void Open(char bracket);
  void Close(char bracket);

  std::string& out_;
  bool pretty_;
  // One entry per open container: whether anything was written into it yet.
  std::vector<unsigned char> has_members_;
  bool pending_key_ = false;  // a key was written; its value comes next
};

}  // namespace gpuman::render
