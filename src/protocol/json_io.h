// JSON plumbing shared by the protocol's .cc files: depth-bounded parsing, dumping that
// cannot throw, and FieldReader, which turns a wrong shape into one precise
// kInvalidArgument ("args.request.count: expected integer >= 1"). Pure; any thread.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace gpuman::protocol {

/// Deepest nesting of arrays/objects accepted in a message.
inline constexpr int kMaxJsonDepth = 64;

/// Parses one JSON text. Never throws; nesting is measured before nlohmann parses.
/// Errors: kInvalidArgument for nesting deeper than kMaxJsonDepth, syntax errors, invalid
/// UTF-8 and trailing bytes.
Result<nlohmann::json> ParseJson(std::string_view text);

/// Compact text. Never throws: invalid UTF-8 in strings becomes U+FFFD.
std::string DumpJson(const nlohmann::json& value);

// Conversions of one value; on a wrong type they set `error` ("<path>: expected ...").
void ReadValue(const nlohmann::json& v, const std::string& path, std::string& out, std::optional<Error>& error);
void ReadValue(const nlohmann::json& v, const std::string& path, bool& out, std::optional<Error>& error);
void ReadValue(const nlohmann::json& v, const std::string& path, int& out, std::optional<Error>& error);
void ReadValue(const nlohmann::json& v, const std::string& path, int64_t& out, std::optional<Error>& error);
void ReadValue(const nlohmann::json& v, const std::string& path, uint32_t& out, std::optional<Error>& error);
void ReadValue(const nlohmann::json& v, const std::string& path, uint64_t& out, std::optional<Error>& error);
/// Any JSON number.
void ReadValue(const nlohmann::json& v, const std::string& path, double& out, std::optional<Error>& error);
void ReadValue(const nlohmann::json& v, const std::string& path, std::vector<int>& out, std::optional<Error>& error);
void ReadValue(const nlohmann::json& v, const std::string& path, std::vector<std::string>& out,
               std::optional<Error>& error);
void ReadValue(const nlohmann::json& v, const std::string& path, std::vector<int64_t>& out,
               std::optional<Error>& error);
void ReadValue(const nlohmann::json& v, const std::string& path, std::map<std::string, std::string>& out,
               std::optional<Error>& error);
/// null -> nullopt; anything else must convert to T.
template <typename T>
void ReadValue(const nlohmann::json& v, const std::string& path, std::optional<T>& out, std::optional<Error>& error) {
  if (v.is_null()) {
    out.reset();
    return;
  }
  T value{};
  ReadValue(v, path, value, error);
  if (!error) out = std::move(value);
}

/// Reads the members of one JSON object. Keeps the first error; later calls do nothing.
/// Unknown members are ignored.
class FieldReader {
 public:
  /// Records "<path>: expected object" when `object` is not one.
  FieldReader(const nlohmann::json& object, std::string path);

  bool ok() const { return !error_.has_value(); }
  /// Precondition: !ok().
  const Error& error() const { return *error_; }

  /// The member, or nullptr when it is absent or an error was already recorded.
  const nlohmann::json* Find(std::string_view key) const;
  /// "<path>.<key>".
  std::string PathOf(std::string_view key) const;

  /// Missing -> "<path>.<key>: missing".
  template <typename T>
  void Required(std::string_view key, T& out) {
    if (error_) return;
    const nlohmann::json* v = Find(key);
    if (v == nullptr) {
      Fail(key, "missing");
      return;
    }
    Read(*v, key, out);
  }
  /// Missing -> `out` keeps its default.
  template <typename T>
  void Optional(std::string_view key, T& out) {
    if (error_) return;
    const nlohmann::json* v = Find(key);
    if (v != nullptr) Read(*v, key, out);
  }
  /// Records "<path>.<key>: <expectation>" unless `condition`.
  void Check(bool condition, std::string_view key, std::string_view expectation);
  /// Records "<path>.<key>: <what>".
  void Fail(std::string_view key, std::string_view what);
  /// Records an error produced elsewhere (a nested reader's).
  void Adopt(const Error& error);

 private:
  // Converts without building "<path>.<key>" (a string per field was a tenth of reading a
  // snapshot reply); only a value that fails is converted again, with its path, for the
  // message. ReadValue is pure, so the second attempt fails the same way.
  template <typename T>
  void Read(const nlohmann::json& v, std::string_view key, T& out) {
    static const std::string kUnnamed;
    std::optional<Error> failed;
    ReadValue(v, kUnnamed, out, failed);
    if (failed) ReadValue(v, PathOf(key), out, error_);
  }

  const nlohmann::json& object_;
  std::string path_;
  std::optional<Error> error_;
};

/// True when `s` contains no NUL byte (argv, env and paths go to execve and open).
bool HasNoNul(std::string_view s);

}  // namespace gpuman::protocol
