#include "render/json_text.h"

#include <charconv>
#include <nlohmann/json.hpp>

namespace gpuman::render {
namespace {

using json = nlohmann::ordered_json;

void Indent(std::string& out, int depth) { out.append(static_cast<size_t>(depth) * 2, ' '); }

// Length of the valid UTF-8 sequence at s[i], or 0 when the bytes there are not one.
size_t Utf8Length(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  const auto cont = [&](size_t k) { return k < s.size() && (b(k) & 0xC0) == 0x80; };
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return cont(i + 1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (!cont(i + 1) || !cont(i + 2)) return 0;
    if (c == 0xE0 && b(i + 1) < 0xA0) return 0;   // overlong
    if (c == 0xED && b(i + 1) >= 0xA0) return 0;  // surrogate
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (!cont(i + 1) || !cont(i + 2) || !cont(i + 3)) return 0;
    if (c == 0xF0 && b(i + 1) < 0x90) return 0;   // overlong
    if (c == 0xF4 && b(i + 1) >= 0x90) return 0;  // beyond U+10FFFF
    return 4;
  }
  return 0;
}

void String(std::string& out, std::string_view s) {
  out += '"';
  size_t i = 0;
  while (i < s.size()) {
    // The common case: a run of bytes that need nothing.
    size_t run = i;
    while (run < s.size()) {
      const unsigned char c = static_cast<unsigned char>(s[run]);
      if (c < 0x20 || c == '"' || c == '\\' || c >= 0x80) break;
      ++run;
    }
    out.append(s.data() + i, run - i);
    i = run;
    if (i == s.size()) break;
    const unsigned char c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"': out += "\\\""; ++i; continue;
      case '\\': out += "\\\\"; ++i; continue;
      case '\b': out += "\\b"; ++i; continue;
      case '\f': out += "\\f"; ++i; continue;
      case '\n': out += "\\n"; ++i; continue;
      case '\r': out += "\\r"; ++i; continue;
      case '\t': out += "\\t"; ++i; continue;
      default: break;
    }
    if (c < 0x20) {
      static const char kHex[] = "0123456789abcdef";
      out += "\\u00";
      out += kHex[c >> 4];
      out += kHex[c & 0xF];
      ++i;
      continue;
    }
    const size_t n = Utf8Length(s, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD";  // U+FFFD
      ++i;
    } else {
      out.append(s, i, n);
      i += n;
    }
  }
  out += '"';
}

template <typename Int>
void Integer(std::string& out, Int v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

void Write(std::string& out, const json& v, int depth) {
  switch (v.type()) {
    case json::value_t::object: {
      if (v.empty()) {
        out += "{}";
        return;
      }
      out += "{\n";
      bool first = true;
      for (const auto& [key, member] : v.get_ref<const json::object_t&>()) {
        if (!first) out += ",\n";
        first = false;
        Indent(out, depth + 1);
        String(out, key);
        out += ": ";
        Write(out, member, depth + 1);
      }
      out += '\n';
      Indent(out, depth);
      out += '}';
      return;
    }
    case json::value_t::array: {
      if (v.empty()) {
        out += "[]";
        return;
      }
      out += "[\n";
      bool first = true;
      for (const json& element : v) {
        if (!first) out += ",\n";
        first = false;
        Indent(out, depth + 1);
        Write(out, element, depth + 1);
      }
      out += '\n';
      Indent(out, depth);
      out += ']';
      return;
    }
    case json::value_t::string: String(out, v.get_ref<const std::string&>()); return;
    case json::value_t::boolean: out += v.get<bool>() ? "true" : "false"; return;
    case json::value_t::number_integer: Integer(out, v.get<json::number_integer_t>()); return;
    case json::value_t::number_unsigned: Integer(out, v.get<json::number_unsigned_t>()); return;
    case json::value_t::number_float: out += v.dump(); return;  // nlohmann's shortest form, "null" if not finite
    case json::value_t::null:
    case json::value_t::discarded: out += "null"; return;
    case json::value_t::binary: out += v.dump(); return;  // never in gpuman's outputs
  }
}

}  // namespace

std::string PrettyJson(const json& value) {
  std::string out;
  out.reserve(16384);
  Write(out, value, 0);
  return out;
}

void JsonWriter::BeforeValue() {
  if (pending_key_) {  // a member's value: its key wrote the separator and indent
    pending_key_ = false;
    return;
  }
  if (has_members_.empty()) return;  // the top-level value
  if (!pretty_) {
    if (has_members_.back()) out_ += ',';
    has_members_.back() = true;
    return;
  }
  out_ += has_members_.back() ? ",\n" : "\n";
  has_members_.back() = true;
  Indent(out_, static_cast<int>(has_members_.size()));
}

void JsonWriter::Open(char bracket) {
  BeforeValue();
  out_ += bracket;
  has_members_.push_back(false);
}

void JsonWriter::Close(char bracket) {
  const bool any = has_members_.back();
  has_members_.pop_back();
  if (any && pretty_) {
    out_ += '\n';
    Indent(out_, static_cast<int>(has_members_.size()));
  }
  out_ += bracket;
}

JsonWriter& JsonWriter::BeginObject() {
  Open('{');
  return *this;
}

JsonWriter& JsonWriter::EndObject() {
  Close('}');
  return *this;
}

JsonWriter& JsonWriter::BeginArray() {
  Open('[');
  return *this;
}

JsonWriter& JsonWriter::EndArray() {
  Close(']');
  return *this;
}

JsonWriter& JsonWriter::Key(std::string_view key) {
  BeforeValue();
  render::String(out_, key);
  out_ += pretty_ ? ": " : ":";
  pending_key_ = true;
  return *this;
}

JsonWriter& JsonWriter::Null() {
  BeforeValue();
  out_ += "null";
  return *this;
}

JsonWriter& JsonWriter::Bool(bool v) {
  BeforeValue();
  out_ += v ? "true" : "false";
  return *this;
}

JsonWriter& JsonWriter::Int(int64_t v) {
  BeforeValue();
  Integer(out_, v);
  return *this;
}

JsonWriter& JsonWriter::UInt(uint64_t v) {
  BeforeValue();
  Integer(out_, v);
  return *this;
}

JsonWriter& JsonWriter::Double(double v) {
  BeforeValue();
  out_ += json(v).dump();  // nlohmann's shortest form, "null" if not finite
  return *this;
}

JsonWriter& JsonWriter::String(std::string_view v) {
  BeforeValue();
  render::String(out_, v);
  return *this;
}

}  // namespace gpuman::render
