#include "protocol/json_io.h"

#include <limits>
#include <utility>

namespace gpuman::protocol {

namespace {

using nlohmann::json;

Error Expected(const std::string& path, std::string_view what) {
  return MakeError(ErrorCode::kInvalidArgument, path + ": expected " + std::string(what));
}

// The integer value of `v` if it is a JSON integer that fits int64_t.
std::optional<int64_t> AsInt64(const json& v) {
  if (v.is_number_unsigned()) {
    const auto u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  return std::nullopt;
}

// Deepest nesting of [ and { outside strings. Exact for valid JSON; for invalid JSON the
// parser reports the error anyway.
int MaxDepth(std::string_view text, int limit) {
  int depth = 0;
  int max_depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) max_depth = depth;
      if (max_depth > limit) return max_depth;  // no need to look further
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return max_depth;
}

}  // namespace

Result<json> ParseJson(std::string_view text) {
  if (MaxDepth(text, kMaxJsonDepth) > kMaxJsonDepth) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "json: nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  }
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    // what() is "[json.exception.parse_error.101] parse error at ...": keep the useful part.
    std::string what = e.what();
    if (auto pos = what.find("] "); what.rfind("[json.exception", 0) == 0 && pos != std::string::npos) {
      what.erase(0, pos + 2);
    }
    return MakeError(ErrorCode::kInvalidArgument, "json: " + what);
  }
}

std::string DumpJson(const json& value) {
  return value.dump(-1, ' ', /*ensure_ascii=*/false, json::error_handler_t::replace);
}

void ReadValue(const json& v, const std::string& path, std::string& out, std::optional<Error>& error) {
  if (!v.is_string()) {
    error = Expected(path, "string");
    return;
  }
  out = v.get<std::string>();
}

void ReadValue(const json& v, const std::string& path, bool& out, std::optional<Error>& error) {
  if (!v.is_boolean()) {
    error = Expected(path, "boolean");
    return;
  }
  out = v.get<bool>();
}

void ReadValue(const json& v, const std::string& path, int& out, std::optional<Error>& error) {
  const std::optional<int64_t> i = AsInt64(v);
  if (!i || *i < std::numeric_limits<int>::min() || *i > std::numeric_limits<int>::max()) {
    error = Expected(path, "32-bit integer");
    return;
  }
  out = static_cast<int>(*i);
}

void ReadValue(const json& v, const std::string& path, int64_t& out, std::optional<Error>& error) {
  const std::optional<int64_t> i = AsInt64(v);
  if (!i) {
    error = Expected(path, "64-bit integer");
    return;
  }
  out = *i;
}

void ReadValue(const json& v, const std::string& path, uint32_t& out, std::optional<Error>& error) {
  const std::optional<int64_t> i = AsInt64(v);
  if (!i || *i < 0 || *i > std::numeric_limits<uint32_t>::max()) {
    error = Expected(path, "integer in [0, 4294967295]");
    return;
  }
  out = static_cast<uint32_t>(*i);
}

void ReadValue(const json& v, const std::string& path, uint64_t& out, std::optional<Error>& error) {
  if (v.is_number_unsigned()) {
    out = v.get<uint64_t>();
  } else if (v.is_number_integer() && v.get<int64_t>() >= 0) {
    out = static_cast<uint64_t>(v.get<int64_t>());
  } else {
    error = Expected(path, "integer in [0, 2^64)");
  }
}

void ReadValue(const json& v, const std::string& path, double& out, std::optional<Error>& error) {
  if (!v.is_number()) {
    error = Expected(path, "number");
    return;
  }
  out = v.get<double>();
}

void ReadValue(const json& v, const std::string& path, std::vector<int>& out, std::optional<Error>& error) {
  if (!v.is_array()) {
    error = Expected(path, "array of integers");
    return;
  }
  out.clear();
  for (std::size_t i = 0; i < v.size(); ++i) {
    ReadValue(v[i], path + "[" + std::to_string(i) + "]", out.emplace_back(), error);
    if (error) return;
  }
}

void ReadValue(const json& v, const std::string& path, std::vector<std::string>& out, std::optional<Error>& error) {
  if (!v.is_array()) {
    error = Expected(path, "array of strings");
    return;
  }
  out.clear();
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_string()) {
      error = Expected(path + "[" + std::to_string(i) + "]", "string");
      return;
    }
    out.push_back(v[i].get<std::string>());
  }
}

void ReadValue(const json& v, const std::string& path, std::vector<int64_t>& out, std::optional<Error>& error) {
  if (!v.is_array()) {
    error = Expected(path, "array of integers");
    return;
  }
  out.clear();
  for (std::size_t i = 0; i < v.size(); ++i) {
    ReadValue(v[i], path + "[" + std::to_string(i) + "]", out.emplace_back(), error);
    if (error) return;
  }
}

void ReadValue(const json& v, const std::string& path, std::map<std::string, std::string>& out,
               std::optional<Error>& error) {
  if (!v.is_object()) {
    error = Expected(path, "object of strings");
    return;
  }
  out.clear();
  for (const auto& [key, value] : v.items()) {
    if (!value.is_string()) {
      error = Expected(path + "." + key, "string");
      return;
    }
    out[key] = value.get<std::string>();
  }
}

FieldReader::FieldReader(const json& object, std::string path) : object_(object), path_(std::move(path)) {
  if (!object_.is_object()) error_ = Expected(path_, "object");
}

const json* FieldReader::Find(std::string_view key) const {
  if (error_) return nullptr;
  auto it = object_.find(key);
  return it == object_.end() ? nullptr : &*it;
}

std::string FieldReader::PathOf(std::string_view key) const { return path_ + "." + std::string(key); }

void FieldReader::Check(bool condition, std::string_view key, std::string_view expectation) {
  if (!error_ && !condition) error_ = Expected(PathOf(key), expectation);
}

void FieldReader::Fail(std::string_view key, std::string_view what) {
  if (!error_) error_ = MakeError(ErrorCode::kInvalidArgument, PathOf(key) + ": " + std::string(what));
}

void FieldReader::Adopt(const Error& error) {
  if (!error_) error_ = error;
}

bool HasNoNul(std::string_view s) { return s.find('\0') == std::string_view::npos; }

}  // namespace gpuman::protocol
