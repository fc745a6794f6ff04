#include "cli/config.h"

#include "base/strings.h"

#include "confine/cgroup.h"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <initializer_list>
#include <fstream>
#include <set>
#include <sstream>
#include <toml++/toml.h>

#include "base/duration.h"
#include "base/posix_error.h"
#include "base/utf8.h"
#include "policy/byte_size.h"

extern char** environ;

namespace gpuman::cli {

std::optional<std::string> Environment::Get(const std::string& name) const {
  auto it = vars.find(name);
  if (it == vars.end()) return std::nullopt;
  return it->second;
}

Environment Environment::FromProcess() {
  Environment env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string kv(*e);
    size_t eq = kv.find('=');
    if (eq == std::string::npos) continue;
    env.vars.emplace(kv.substr(0, eq), kv.substr(eq + 1));
  }
  return env;
}

namespace {

// " (did you mean 'x'?)" for a typo of a known key, else " (known: a, b, ...)".
std::string DidYouMean(const std::string& typed, std::initializer_list<const char*> known) {
  std::string closest, all;
  size_t best = typed.size() >= 6 ? 4 : 2;  // what counts as a typo, plus one
  for (const char* k : known) {
    all += (all.empty() ? "" : ", ") + std::string(k);
    if (const size_t d = EditDistance(typed, k); d < best) {
      best = d;
      closest = k;
    }
  }
  return closest.empty() ? " (known: " + all + ")" : " (did you mean '" + closest + "'?)";
}

// Length of the UTF-8 sequence at text[i] (1 to 4), or 0 when it is not valid UTF-8
// (overlong forms, surrogates and values above U+10FFFF included).
size_t Utf8Length(std::string_view text, size_t i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  unsigned char c = byte(i);
  if (c < 0x80) return 1;
  size_t n = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
  if (n == 0 || i + n > text.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
  }
  unsigned char c1 = byte(i + 1);
  if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 > 0x9F) || (c == 0xF0 && c1 < 0x90) ||
      (c == 0xF4 && c1 > 0x8F)) {
    return 0;
  }
  return n;
}

// Debian's toml++ 3.3 has two bugs that text can reach (tests/fuzz/corpus/config/,
// docs/testing.md). Its is_non_ascii_horizontal_whitespace() reaches an "unreachable"
// branch for the characters in kUnclassified (undefined behaviour in the packaged,
// assertion-free library), and toml++ asks that question wherever it skips blanks or looks
// for the end of a value: a bare key "é = 1", "x = 0é", the blanks after a line-ending
// backslash in a multi-line string. And a table header "[" followed by a character that
// can start no key (a control character, "=", "#", ...) fails an assertion that the release
// build turns into an assumption. So gpuman never gives toml++ those characters: it hands
// toml++ a "shadow" of the text in which each of them is moved to the private-use plane 15
// (+ kShadowOffset, which toml++ classifies correctly: not blank, not a key character), and
// moves them back in every key, string and message of the result. Before that it refuses
// what it cannot shadow or toml++ cannot take: NUL bytes, invalid UTF-8, characters of
// plane 15 themselves, and a table header that starts with no key.
//
// kUnclassified: toml++ splits U+00A0-U+FEFF into 64 blocks of 0x3FA characters and
// answers "no" at once for the blocks whose bit is set in 0x7FFFFFFFFFFFF75E; of the
// others it handles U+00A0, U+3000, U+FEFF and blocks 5 and 7; blocks 0, 11 and 63 fall
// through to the unreachable default.
struct CodeRange {
  char32_t first, last;
};
constexpr CodeRange kUnclassified[] = {{0xA1, 0x499}, {0x2C5E, 0x2FFF}, {0x3001, 0x3057}, {0xFB26, 0xFEFE}};
constexpr char32_t kShadowOffset = 0xF0000;  // into U+F0000-U+FFFFD (private use, plane 15)

bool IsUnclassified(char32_t cp) {
  for (const CodeRange& r : kUnclassified) {
    if (cp >= r.first && cp <= r.last) return true;
  }
  return false;
}

// Decodes the valid UTF-8 sequence of `len` bytes at `p`.
char32_t DecodeAt(const char* p, size_t len) {
  auto b = [&](size_t k) { return static_cast<char32_t>(static_cast<unsigned char>(p[k])); };
  if (len == 1) return b(0);
  if (len == 2) return ((b(0) & 0x1F) << 6) | (b(1) & 0x3F);
  if (len == 3) return ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
  return ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
}

// `text` with every character for which `moves` holds moved by `delta`. Invalid UTF-8
// (not possible in config text, possible in a message) is kept as it is.
template <typename Pred>
std::string MoveChars(std::string_view text, Pred moves, int64_t delta) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    size_t n = Utf8Length(text, i);
    if (n == 0) n = 1;
    char32_t cp = n == 1 ? static_cast<unsigned char>(text[i]) : DecodeAt(text.data() + i, n);
    if (n > 1 && moves(cp)) {
      out += EncodeUtf8(static_cast<char32_t>(cp + delta));
    } else {
      out.append(text.substr(i, n));
    }
    i += n;
  }
  return out;
}

std::string Shadow(std::string_view text) {
  return MoveChars(text, IsUnclassified, kShadowOffset);
}
std::string Unshadow(std::string_view text) {
  return MoveChars(
      text, [](char32_t cp) { return cp >= kShadowOffset && IsUnclassified(cp - kShadowOffset); },
      -static_cast<int64_t>(kShadowOffset));
}

// Moves the shadowed characters back in every key and string of `node`.
void UnshadowNode(toml::node& node);
void UnshadowTable(toml::table& table) {
  bool keys = false;
  for (auto&& [key, value] : table) {
    UnshadowNode(value);
    keys = keys || Unshadow(key.str()) != key.str();
  }
  if (!keys) return;
  toml::table rebuilt;
  for (auto&& [key, value] : table) {
    std::string name = Unshadow(key.str());
    std::move(value).visit([&](auto&& concrete) { rebuilt.insert(name, std::move(concrete)); });
  }
  table = std::move(rebuilt);
}
void UnshadowNode(toml::node& node) {
  if (auto* table = node.as_table()) {
    UnshadowTable(*table);
  } else if (auto* array = node.as_array()) {
    for (toml::node& element : *array) UnshadowNode(element);
  } else if (auto* string = node.as_string()) {
    string->get() = Unshadow(string->get());
  }
}

// toml++ 3.3 reads a value by scanning ahead to the next value terminator (blanks, line
// breaks, ",", "]", "}", "#"). When those first characters look like a date (10 of them,
// underscores not counted, a digit first, "-" 5th and 8th, only digits and "-" otherwise
// among those it gives meaning to) and a space follows, it reads on for a date-time
// written with a space for the "T": the space, one digit, and then asserts that no
// terminator follows (`x = 1979-05-27 0`, `x = 8----x=-er 8`; the release build assumes it).
// No valid TOML has a date or any other value or key followed by " D" and a terminator
// outside strings, so this refuses the wider shape: the space at `space` follows 10
// non-terminator characters (underscores skipped) of which the 1st is a digit and the 5th
// and 8th are "-", and is itself followed by one digit and a terminator (any non-ASCII
// character counts as one: toml++ has blanks beyond ASCII).
bool DateThenOneDigit(std::string_view text, size_t space) {
  auto terminator = [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f' || c == ',' || c == ']' ||
           c == '}' || c == '#';
  };
  if (space + 2 >= text.size()) return false;  // at the end of the text toml++ stops scanning
  const char digit = text[space + 1], after = text[space + 2];
  if (digit < '0' || digit > '9') return false;
  if (!terminator(after) && static_cast<unsigned char>(after) < 0x80) return false;
  // The 10 characters before the space, last first (a UTF-8 sequence is one character).
  char before[10];
  size_t n = 0;
  for (size_t k = space; k > 0 && n < 10;) {
    --k;
    const char b = text[k];
    if ((static_cast<unsigned char>(b) & 0xC0) == 0x80) continue;  // inside a UTF-8 sequence
    if (terminator(b)) return false;
    if (b == '_') continue;
    before[n++] = b;
  }
  if (n < 10) return false;
  // before[9] is the first of the ten.
  return before[9] >= '0' && before[9] <= '9' && before[5] == '-' && before[2] == '-';
}

// "" when `text` may be shadowed and given to toml++; otherwise the problem, with its line
// and column. Follows strings and comments only as far as needed to find table headers
// (a "[" first on a line outside any string).
std::string CheckConfigText(std::string_view text) {
  enum class In { kCode, kComment, kBasic, kLiteral, kMultiBasic, kMultiLiteral } in = In::kCode;
  int line = 1;
  size_t line_start = 0;
  bool escape = false;      // the character after a backslash in a basic string
  bool line_blank = true;   // only blanks so far on this line (outside strings)
  char last = '\n';         // the last character outside strings and comments, blanks left out
  auto at = [&](size_t i, const std::string& what) {
    return std::to_string(line) + ":" + std::to_string(i - line_start + 1) + ": " + what;
  };
  auto is_blank = [](char c) { return c == ' ' || c == '\t'; };
  // The length of a closing """ or ''' at i, with up to two more quotes that belong to the string.
  auto closing = [&](size_t i, char quote) {
    size_t n = 3;
    while (n < 5 && i + n < text.size() && text[i + n] == quote) ++n;
    return n;
  };
  constexpr std::string_view kTripleDouble = "\"\"\"", kTripleSingle = "'''";
  // toml++ skips a UTF-8 byte order mark; a header may follow it.
  for (size_t i = text.starts_with("\xEF\xBB\xBF") ? 3 : 0; i < text.size();) {
    char c = text[i];
    if (c == '\0') return at(i, "NUL byte");
    size_t step = Utf8Length(text, i);
    if (step == 0) return at(i, "invalid UTF-8");
    if (step == 4) {
      char32_t cp = DecodeAt(text.data() + i, 4);
      if (cp >= kShadowOffset && cp <= kShadowOffset + 0xFFFF) {
        return at(i, "private-use character of plane 15 (U+F0000-U+FFFFF) not accepted");
      }
    }
    std::string_view rest = text.substr(i);
    if (escape) {
      escape = false;
    } else {
      switch (in) {
        case In::kCode:
          if (c == '[' && line_blank) {
            // A table header: "[" or "[[", blanks, then the first key must start.
            size_t k = i + 1;
            if (k < text.size() && text[k] == '[') ++k;
            while (k < text.size() && is_blank(text[k])) ++k;
            if (k < text.size()) {
              char first = text[k];
              bool starts_key = std::isalnum(static_cast<unsigned char>(first)) || first == '_' ||
                                first == '-' || first == '"' || first == '\'' || first == ']';
              if (!starts_key) return at(k, "expected a table name after '['");
            }
          }
          // toml++ asserts that a value follows "[" or "," in an array; "}" does not.
          // And a date followed by a space and one digit (DateThenOneDigit).
          if (c == ' ' && DateThenOneDigit(text, i)) {
            return at(i + 1, "a date and a time need HH:MM:SS after the space (1979-05-27 07:32:00)");
          }
          if (c == '}' && (last == '[' || last == ',')) return at(i, "expected a value, saw '}'");
          if (!is_blank(c) && c != '\n' && c != '\r' && c != '#') last = c;
          if (c == '#') in = In::kComment;
          else if (rest.starts_with(kTripleDouble)) in = In::kMultiBasic, step = 3;
          else if (rest.starts_with(kTripleSingle)) in = In::kMultiLiteral, step = 3;
          else if (c == '"') in = In::kBasic;
          else if (c == '\'') in = In::kLiteral;
          break;
        case In::kComment:
          break;
        case In::kBasic:
          if (c == '\\') escape = true;
          else if (c == '"') in = In::kCode;
          break;
        case In::kLiteral:
          if (c == '\'') in = In::kCode;
          break;
        case In::kMultiBasic:
          if (c == '\\') escape = true;
          else if (rest.starts_with(kTripleDouble)) in = In::kCode, step = closing(i, '"');
          break;
        case In::kMultiLiteral:
          if (rest.starts_with(kTripleSingle)) in = In::kCode, step = closing(i, '\'');
          break;
      }
    }
    if (c == '\n') {  // ends a comment; a one-line string that reaches it is toml++'s error
      ++line;
      line_start = i + 1;
      line_blank = true;
      if (in == In::kComment || in == In::kBasic || in == In::kLiteral) in = In::kCode;
    } else if (!is_blank(c) && c != '\r') {
      line_blank = false;
    }
    i += step;
  }
  return "";
}

// GPU caps are stored as int: a larger number in the file would wrap.
constexpr int64_t kMaxGpuCap = 1000000;

}  // namespace

Result<Config> ParseConfig(const std::string& text, const std::string& origin) {
  Config config;
  config.config_path = origin;
  if (std::string problem = CheckConfigText(text); !problem.empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "config " + origin + ":" + problem);
  }
  toml::table table;
  try {
    table = toml::parse(Shadow(text), origin);
  } catch (const toml::parse_error& err) {
    const auto& where = err.source().begin;
    return MakeError(ErrorCode::kInvalidArgument,
                     "config " + origin + ":" + std::to_string(where.line) + ":" +
                         std::to_string(where.column) + ": " + Unshadow(err.description()));
  }
  UnshadowTable(table);
  static const std::set<std::string> kKnown = {"nvml_library", "kernel_log", "lease_dir", "daemon", "client", "submit", "health", "idle", "alert", "slurm", "enforce", "launch", "share", "notify"};
  for (const auto& [key, value] : table) {
    std::string k(key.str());
    config.keys.push_back(k);
    if (!kKnown.count(k)) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "config " + origin + ": unknown key '" + k +
                           "' (known: nvml_library, kernel_log, lease_dir, [daemon], [client], [submit], [health], [idle], [[alert]], [slurm], [enforce], [launch], [share], [notify])");
    }
  }
  if (auto* node = table.get("daemon")) {
    auto* d = node->as_table();
    if (!d) return MakeError(ErrorCode::kInvalidArgument, "config " + origin + ": daemon must be a table");
    auto bad = [&](const std::string& what) {
      return MakeError(ErrorCode::kInvalidArgument, "config " + origin + ": daemon." + what);
    };
    for (const auto& [key, value] : *d) {
      std::string k(key.str());
      if (k == "admin_group") {
        auto v = value.value<std::string>();
        if (!v || v->empty()) return bad("admin_group must be a group name");
        config.daemon.admin_group = *v;
      } else if (k == "default_time_limit") {
        auto v = value.value<std::string>();
        auto ms = v ? ParseDurationMs(*v) : Result<int64_t>(MakeError(ErrorCode::kInvalidArgument, "not a string"));
        if (!ms || *ms <= 0) return bad("default_time_limit must be a duration such as \"24h\"");
        config.daemon.default_time_limit_ms = *ms;
      } else if (k == "max_gpus_per_user") {
        auto v = value.value_exact<int64_t>();  // value<> would cast a float such as 4e96 (undefined)
        if (!v || *v < 0 || *v > kMaxGpuCap) return bad("max_gpus_per_user must be a number from 0 to 1000000");
        config.daemon.max_gpus_per_user = static_cast<int>(*v);
      } else if (k == "max_connections" || k == "max_connections_per_user") {
        auto v = value.value_exact<int64_t>();
        if (!v || *v < 1 || *v > 1'000'000) return bad(k + " must be a number from 1 to 1000000");
        if (k == "max_connections") config.daemon.max_connections = static_cast<size_t>(*v);
        else config.daemon.max_connections_per_user = static_cast<size_t>(*v);
      } else if (k == "user_limits") {
        auto* limits = value.as_table();
        if (!limits) return bad("user_limits must be a table of user = GPUs");
        for (const auto& [user, n] : *limits) {
          auto v = n.value_exact<int64_t>();
          if (!v || *v < 0 || *v > kMaxGpuCap) {
            return bad("user_limits." + std::string(user.str()) + " must be a number from 0 to 1000000");
          }
          config.daemon.user_max_gpus[std::string(user.str())] = static_cast<int>(*v);
        }
      } else if (k == "metrics") {
        auto v = value.value<std::string>();
        if (!v || v->empty()) return bad("metrics must be an address such as \"127.0.0.1:9400\"");
        config.daemon.metrics = *v;
      } else if (k == "sample_interval" || k == "history_fine_keep" || k == "history_coarse_keep") {
        auto v = value.value<std::string>();
        auto ms = v ? ParseDurationMs(*v) : Result<int64_t>(MakeError(ErrorCode::kInvalidArgument, "not a string"));
        if (!ms || *ms <= 0) return bad(k + " must be a duration such as \"1s\" or \"31d\"");
        if (k == "sample_interval") {
          if (*ms < 100) return bad("sample_interval must be at least 100ms");
          config.daemon.sample_interval_ms = *ms;
        } else if (k == "history_fine_keep") {
          config.daemon.history_fine_keep_ms = *ms;
        } else {
          config.daemon.history_coarse_keep_ms = *ms;
        }
      } else {
        return MakeError(ErrorCode::kInvalidArgument,
                         "config " + origin + ": daemon: unknown key '" + k + "'" +
                             DidYouMean(k, {"admin_group", "default_time_limit", "max_gpus_per_user", "user_limits",
                                            "metrics", "sample_interval", "history_fine_keep", "history_coarse_keep",
                                            "max_connections", "max_connections_per_user"}));
      }
    }
  }
  if (auto* node = table.get("client")) {
    auto* c = node->as_table();
    if (!c) return MakeError(ErrorCode::kInvalidArgument, "config " + origin + ": client must be a table");
    for (const auto& [key, value] : *c) {
      std::string k(key.str());
      if (k == "reconnect_timeout") {
        auto v = value.value<std::string>();
        auto ms = v ? ParseDurationMs(*v) : Result<int64_t>(MakeError(ErrorCode::kInvalidArgument, "not a string"));
        if (!ms || *ms < 0) {
          return MakeError(ErrorCode::kInvalidArgument,
                           "config " + origin + ": client.reconnect_timeout must be a duration such as \"60s\"");
        }
        config.client.reconnect_timeout_ms = *ms;
      } else {
        return MakeError(ErrorCode::kInvalidArgument,
                         "config " + origin + ": client: unknown key '" + k + "' (known: reconnect_timeout)");
      }
    }
  }
  if (auto* node = table.get("submit")) {
    auto* sub = node->as_table();
    if (!sub) return MakeError(ErrorCode::kInvalidArgument, "config " + origin + ": submit must be a table");
    for (const auto& [key, value] : *sub) {
      std::string k(key.str());
      if (k != "backend") {
        return MakeError(ErrorCode::kInvalidArgument, "config " + origin + ": submit: unknown key '" + k + "' (known: backend)");
      }
      auto v = value.value<std::string>();
      if (!v || (*v != "gpuman" && *v != "slurm")) {
        return MakeError(ErrorCode::kInvalidArgument, "config " + origin + ": submit.backend must be \"gpuman\" or \"slurm\"");
      }
      config.submit.backend = *v;
    }
  }
  if (auto* node = table.get("health")) {
    auto* h = node->as_table();
    if (!h) return MakeError(ErrorCode::kInvalidArgument, "config " + origin + ": health must be a table");
    auto bad = [&](const std::string& what) {
      return MakeError(ErrorCode::kInvalidArgument, "config " + origin + ": health." + what);
    };
    for (const auto& [key, value] : *h) {
      std::string k(key.str());
      if (k == "drain_on_fatal") {
        auto v = value.value<bool>();
        if (!v) return bad("drain_on_fatal must be true or false");
        config.health.drain_on_fatal = *v;
      } else if (k == "recheck_after" || k == "xid_window") {
        auto v = value.value<std::string>();
        auto ms = v ? ParseDurationMs(*v) : Result<int64_t>(MakeError(ErrorCode::kInvalidArgument, "not a string"));
        if (!ms || *ms < 0) return bad(k + " must be a duration such as \"10m\"");
        (k == "recheck_after" ? config.health.recheck_after_ms : config.health.xid_window_ms) = *ms;
      } else {
        return MakeError(ErrorCode::kInvalidArgument, "config " + origin + ": health: unknown key '" + k + "'" +
                                                          DidYouMean(k, {"drain_on_fatal", "recheck_after", "xid_window"}));
      }
    }
  }
  if (auto* node = table.get("idle")) {
    auto* t = node->as_table();
    if (!t) return MakeError(ErrorCode::kInvalidArgument, "config " + origin + ": idle must be a table");
    auto idle = monitor::ParseIdlePolicy(*t, origin);
    if (!idle) return idle.error();
    config.idle = *idle;
  }
  if (auto* node = table.get("alert")) {
    auto* a = node->as_array();
    if (!a) return MakeError(ErrorCode::kInvalidArgument, "config " + origin + ": alert must be an array of tables ([[alert]])");
    auto rules = monitor::ParseAlertRules(*a, origin);
    if (!rules) return rules.error();
    config.alerts = std::move(*rules);
  }
  if (auto* node = table.get("slurm")) {
    auto* t = node->as_table();
    if (!t) return MakeError(ErrorCode::kInvalidArgument, "config " + origin + ": slurm must be a table");
    for (const auto& [key, value] : *t) {
      std::string k(key.str());
      if (k == "state_dir") {
        auto v = value.value<std::string>();
        if (!v || v->empty() || (*v)[0] != '/') {
          return MakeError(ErrorCode::kInvalidArgument, "config " + origin + ": slurm.state_dir must be an absolute path");
        }
        config.slurm.state_dir = *v;
      } else if (k == "node") {
        const auto v = value.value<std::string>();
        if (v && *v == "auto") config.slurm.node = slurm::SlurmNodeMode::kAuto;
        else if (v && *v == "yes") config.slurm.node = slurm::SlurmNodeMode::kYes;
        else if (v && *v == "no") config.slurm.node = slurm::SlurmNodeMode::kNo;
        else return MakeError(ErrorCode::kInvalidArgument, "config " + origin + ": slurm.node must be \"auto\", \"yes\" or \"no\"");
      } else {
        return MakeError(ErrorCode::kInvalidArgument,
                         "config " + origin + ": slurm: unknown key '" + k + "' (known: state_dir, node)");
      }
    }
  }
  if (auto* node = table.get("enforce")) {
    auto* t = node->as_table();
    if (!t) return MakeError(ErrorCode::kInvalidArgument, "config " + origin + ": enforce must be a table");
    for (const auto& [key, value] : *t) {
      std::string k(key.str());
      if (k == "devices") {
        const auto v = value.value<std::string>();
        auto setting = confine::ParseDevicesSetting(v.value_or(""));
        if (!v || !setting) {
          return MakeError(ErrorCode::kInvalidArgument,
                           "config " + origin + ": enforce." + (v ? setting.error().message : "devices must be a string"));
        }
        config.enforce.devices = *setting;
      } else if (k == "foreign_processes") {
        const auto v = value.value<std::string>();
        if (v && *v == "report") config.enforce.intruders.kill = false;
        else if (v && *v == "kill") config.enforce.intruders.kill = true;
        else return MakeError(ErrorCode::kInvalidArgument, "config " + origin + ": enforce.foreign_processes must be \"report\" or \"kill\"");
      } else if (k == "unleased_processes") {
        using Unleased = monitor::IntruderPolicy::Unleased;
        const auto v = value.value<std::string>();
        if (v && *v == "allow") config.enforce.intruders.unleased = Unleased::kAllow;
        else if (v && *v == "report") config.enforce.intruders.unleased = Unleased::kReport;
        else if (v && *v == "kill") config.enforce.intruders.unleased = Unleased::kKill;
        else {
          return MakeError(ErrorCode::kInvalidArgument,
                           "config " + origin + ": enforce.unleased_processes must be \"allow\", \"report\" or \"kill\"");
        }
      } else if (k == "grace") {
        const auto v = value.value<std::string>();
        auto ms = v ? ParseDurationMs(*v) : Result<int64_t>(MakeError(ErrorCode::kInvalidArgument, "not a string"));
        if (!ms) {
          return MakeError(ErrorCode::kInvalidArgument, "config " + origin + ": enforce.grace must be a duration such as \"10s\"");
        }
        config.enforce.intruders.grace_ms = *ms;
      } else {
        return MakeError(ErrorCode::kInvalidArgument,
                         "config " + origin + ": enforce: unknown key '" + k +
                             "' (known: devices, foreign_processes, unleased_processes, grace)");
      }
    }
  }
  if (auto* node = table.get("launch")) {
    auto* t = node->as_table();
    if (!t) return MakeError(ErrorCode::kInvalidArgument, "config " + origin + ": launch must be a table");
    for (const auto& [key, value] : *t) {
      std::string k(key.str());
      if (k != "ports") {
        return MakeError(ErrorCode::kInvalidArgument, "config " + origin + ": launch: unknown key '" + k + "' (known: ports)");
      }
      const auto v = value.value<std::string>();
      const std::string bad = "config " + origin + ": launch.ports must be a range of TCP ports such as \"29500-29999\", or \"off\"";
      if (!v) return MakeError(ErrorCode::kInvalidArgument, bad);
      if (*v == "off") {
        config.launch.ports.reset();
        continue;
      }
      const size_t dash = v->find('-');
      auto first = ParseInt(Trim(v->substr(0, dash)));
      auto last = dash == std::string::npos ? first : ParseInt(Trim(v->substr(dash + 1)));
      if (!first || !last || *first < 1024 || *last > 65535 || *first > *last) return MakeError(ErrorCode::kInvalidArgument, bad + " (1024-65535)");
      config.launch.ports = policy::PortRange{static_cast<int>(*first), static_cast<int>(*last)};
    }
  }
  if (auto* node = table.get("share")) {
    auto* t = node->as_table();
    if (!t) return MakeError(ErrorCode::kInvalidArgument, "config " + origin + ": share must be a table");
    const std::string where = "config " + origin + ": share.";
    for (const auto& [key, value] : *t) {
      std::string k(key.str());
      if (k == "allow") {
        const auto v = value.value<bool>();
        if (!v) return MakeError(ErrorCode::kInvalidArgument, where + "allow must be true or false");
        config.share.allow = *v;
      } else if (k == "min_slice") {
        const auto v = value.value<std::string>();
        auto bytes = v ? policy::ParseByteSize(*v) : Result<int64_t>(MakeError(ErrorCode::kInvalidArgument, "not a string"));
        if (!bytes || *bytes <= 0) {
          return MakeError(ErrorCode::kInvalidArgument, where + "min_slice must be a size such as \"1GiB\"");
        }
        config.share.min_slice_bytes = *bytes;
      } else if (k == "gpus") {
        const auto* list = value.as_array();
        const std::string bad = where + "gpus must be a list of GPU indices or UUIDs, such as [0, 1, \"GPU-...\"]";
        if (!list) return MakeError(ErrorCode::kInvalidArgument, bad);
        config.share.gpus.clear();
        for (const auto& item : *list) {
          if (auto i = item.value<int64_t>(); i && *i >= 0) config.share.gpus.push_back(std::to_string(*i));
          else if (auto u = item.value<std::string>(); u && !u->empty()) config.share.gpus.push_back(*u);
          else return MakeError(ErrorCode::kInvalidArgument, bad);
        }
        if (config.share.gpus.empty()) return MakeError(ErrorCode::kInvalidArgument, bad + " (use allow = false for none)");
      } else if (k == "over_limit") {
        const auto v = value.value<std::string>();
        if (v && *v == "report") config.slice_watch.kill = false;
        else if (v && *v == "kill") config.slice_watch.kill = true;
        else return MakeError(ErrorCode::kInvalidArgument, where + "over_limit must be \"report\" or \"kill\"");
      } else if (k == "over_limit_grace") {
        const auto v = value.value<std::string>();
        auto ms = v ? ParseDurationMs(*v) : Result<int64_t>(MakeError(ErrorCode::kInvalidArgument, "not a string"));
        if (!ms || *ms < 0) return MakeError(ErrorCode::kInvalidArgument, where + "over_limit_grace must be a duration such as \"30s\"");
        config.slice_watch.grace_ms = *ms;
      } else if (k == "mps") {
        const auto v = value.value<std::string>();
        if (v && *v == "off") config.share.mps_on = false;
        else if (v && *v == "on") config.share.mps_on = true;
        else return MakeError(ErrorCode::kInvalidArgument, where + "mps must be \"off\" or \"on\"");
      } else if (k == "mps_control") {
        const auto v = value.value<std::string>();
        if (!v || v->empty() || (*v)[0] != '/') {
          return MakeError(ErrorCode::kInvalidArgument,
                           where + "mps_control must be an absolute path such as \"/usr/bin/nvidia-cuda-mps-control\"");
        }
        config.share.mps_control = *v;
      } else if (k == "mps_dir") {
        const auto v = value.value<std::string>();
        if (!v || v->empty() || (*v)[0] != '/') {
          return MakeError(ErrorCode::kInvalidArgument, where + "mps_dir must be an absolute path such as \"/run/gpuman/mps\"");
        }
        config.share.mps_dir = *v;
      } else {
        return MakeError(ErrorCode::kInvalidArgument, where.substr(0, where.size() - 1) +
                                                          ": unknown key '" + k + "' (known: allow, min_slice, gpus, over_limit, over_limit_grace, mps, mps_control, mps_dir)");
      }
    }
  }
  if (auto* node = table.get("notify")) {
    auto* t = node->as_table();
    if (!t) return MakeError(ErrorCode::kInvalidArgument, "config " + origin + ": notify must be a table");
    for (const auto& [key, value] : *t) {
      std::string k(key.str());
      if (k == "mail") {
        const auto v = value.value<std::string>();
        if (!v || v->empty() || (*v)[0] != '/') {
          return MakeError(ErrorCode::kInvalidArgument, "config " + origin + ": notify.mail must be an absolute path such as \"/usr/sbin/sendmail\"");
        }
        config.notify.mail = *v;
      } else if (k == "timeout") {
        const auto v = value.value<std::string>();
        auto ms = v ? ParseDurationMs(*v) : Result<int64_t>(MakeError(ErrorCode::kInvalidArgument, "not a string"));
        if (!ms || *ms <= 0) {
          return MakeError(ErrorCode::kInvalidArgument, "config " + origin + ": notify.timeout must be a duration such as \"60s\"");
        }
        config.notify.timeout_ms = *ms;
      } else {
        return MakeError(ErrorCode::kInvalidArgument, "config " + origin + ": notify: unknown key '" + k + "' (known: mail, timeout)");
      }
    }
  }
  if (auto* node = table.get("kernel_log")) {
    auto value = node->value<std::string>();
    if (!value || value->empty()) {
      return MakeError(ErrorCode::kInvalidArgument, "config " + origin + ": kernel_log must be a path");
    }
    config.kernel_log = *value;
  }
  if (auto* node = table.get("lease_dir")) {
    auto value = node->value<std::string>();
    if (!value || value->empty() || (*value)[0] != '/') {
      return MakeError(ErrorCode::kInvalidArgument, "config " + origin + ": lease_dir must be an absolute path");
    }
    config.lease_dir = *value;
  }
  if (auto* node = table.get("nvml_library")) {
    auto value = node->value<std::string>();
    if (!value || value->empty()) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "config " + origin + ": nvml_library must be a non-empty string");
    }
    config.nvml_library = *value;
  }
  return config;
}

namespace {

// Reads and parses one config file. nullopt: a default location with nothing there.
Result<std::optional<Config>> ReadConfigFile(const std::string& path, bool must_exist) {
  // A directory opens as an empty stream on Linux and would read as an empty config.
  struct stat st{};
  // /dev/null is the usual way to say "no config file" (it reads as empty).
  if (stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && path != "/dev/null") {
    return MakeError(ErrorCode::kInvalidArgument,
                     "config " + path + (S_ISDIR(st.st_mode) ? ": is a directory, not a file" : ": not a regular file"));
  }
  errno = 0;
  std::ifstream in(path);
  if (!in) {
    const int err = errno;
    if (must_exist || access(path.c_str(), F_OK) == 0) {
      // The reason, not just "cannot read": a missing file and an unreadable one differ.
      return MakeError(ErrorCode::kInvalidArgument,
                       "config " + path + ": cannot read file" + (err != 0 ? ": " + PosixErrorText(err) : ""));
    }
    return std::optional<Config>();
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  auto parsed = ParseConfig(ss.str(), path);
  if (!parsed) return parsed.error();
  return std::optional<Config>(std::move(*parsed));
}

// Whether a file named with --config or $GPUMAN_CONFIG may set the machine's rules: root
// reads what it chose; anyone else only a file root owns and only root may write (what
// the daemon was started with, a packaged one). Any other is the caller's own: personal.
bool MaySetMachineRules(const std::string& path, uint32_t caller_uid) {
  if (caller_uid == 0 || path == "/dev/null") return true;
  struct stat st{};
  return stat(path.c_str(), &st) == 0 && st.st_uid == 0 && (st.st_mode & (S_IWGRP | S_IWOTH)) == 0;
}

// The tables a user's own file may set: how their own client behaves.
bool IsPersonalKey(const std::string& key) { return key == "client" || key == "submit"; }

}  // namespace

Result<Config> LoadConfig(const Environment& env, const std::optional<std::string>& explicit_path) {
  return LoadConfigFrom(env, explicit_path, kMachineConfigPath, geteuid());
}

Result<Config> LoadConfigFrom(const Environment& env, const std::optional<std::string>& explicit_path,
                              const std::string& machine_path, uint32_t caller_uid) {
  std::optional<std::string> named = explicit_path;
  if (!named) {
    if (auto p = env.Get("GPUMAN_CONFIG"); p && !p->empty()) named = *p;
  }
  std::optional<std::string> personal_path;
  Config config;
  if (named && MaySetMachineRules(*named, caller_uid)) {
    // The whole configuration, in place of the machine's file.
    auto read = ReadConfigFile(*named, true);
    if (!read) return read.error();
    if (*read) {
      config = std::move(**read);
      config.machine_config_path = *named;
    }
  } else {
    auto machine = ReadConfigFile(machine_path, false);
    if (!machine) return machine.error();
    if (*machine) {
      config = std::move(**machine);
      config.machine_config_path = machine_path;
    }
    if (named) {
      personal_path = *named;
    } else {
      std::string base;
      if (auto x = env.Get("XDG_CONFIG_HOME"); x && !x->empty()) base = *x;
      else if (auto h = env.Get("HOME"); h && !h->empty()) base = *h + "/.config";
      if (!base.empty()) personal_path = base + "/gpuman/config.toml";
    }
  }
  if (personal_path) {
    auto personal = ReadConfigFile(*personal_path, named.has_value());
    if (!personal) return personal.error();
    if (*personal) {
      // Over the machine's file: its own preferences only. The machine's rules (lease_dir,
      // caps, [daemon], [health], [slurm], ...) come from the machine, whatever a user writes.
      for (const std::string& key : (*personal)->keys) {
        if (key == "client") config.client = (*personal)->client;
        else if (key == "submit") config.submit = (*personal)->submit;
      }
      std::vector<std::string> ignored;
      for (const std::string& key : (*personal)->keys) {
        if (!IsPersonalKey(key)) ignored.push_back(key);
      }
      if (!ignored.empty()) {
        std::string list;
        for (const auto& k : ignored) list += (list.empty() ? "" : ", ") + k;
        config.warnings.push_back("config " + *personal_path + ": " + list + (ignored.size() == 1 ? " is" : " are") +
                                  " the machine's to set (" + machine_path +
                                  "); ignored here, where only [client] and [submit] count");
      }
      config.personal_config_path = *personal_path;
    }
  }
  if (auto lib = env.Get("GPUMAN_NVML_LIBRARY"); lib && !lib->empty()) config.nvml_library = *lib;
  if (auto log = env.Get("GPUMAN_KERNEL_LOG"); log && !log->empty()) config.kernel_log = *log;
  if (auto t = env.Get("GPUMAN_RECONNECT_TIMEOUT"); t && !t->empty()) {
    auto ms = ParseDurationMs(*t);
    if (!ms || *ms < 0) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "GPUMAN_RECONNECT_TIMEOUT='" + *t + "' is not a duration such as \"60s\"");
    }
    config.client.reconnect_timeout_ms = *ms;
  }
  return config;
}

policy::MachineRules MachineRulesFromConfig(const Config& config) {
  policy::MachineRules rules;
  rules.default_max_gpus_per_user = config.daemon.max_gpus_per_user;
  for (const auto& [user, n] : config.daemon.user_max_gpus) {
    if (passwd* pw = getpwnam(user.c_str())) rules.max_gpus_per_user[pw->pw_uid] = n;
  }
  rules.launch_ports = config.launch.ports;
  rules.share = config.share;
  return rules;
}

}  // namespace gpuman::cli
