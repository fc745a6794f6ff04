// Parsing of gres.conf / slurm.conf text (see gres_conf.h). Slurm's own parser accepts
// more (Include, line continuations, AutoDetect); gpuman needs only the GPU device files
// of one node, in order, and treats anything else as not a GPU line.
#include "slurm/gres_conf.h"

#include <algorithm>
#include <cctype>

#include "base/strings.h"

namespace gpuman::slurm {
namespace {

constexpr size_t kMaxNames = 65536;

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

// Splits on `sep` outside brackets.
std::vector<std::string> SplitOutsideBrackets(std::string_view s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  int depth = 0;
  for (char c : s) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == sep && depth == 0) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

// One name with bracket groups: "nvidia[0-1]x[2,3]".
bool ExpandOne(std::string_view name, std::vector<std::string>& out) {
  const size_t open = name.find('[');
  if (open == std::string_view::npos) {
    if (name.find(']') != std::string_view::npos) return false;
    out.emplace_back(name);
    return out.size() <= kMaxNames;
  }
  const size_t close = name.find(']', open);
  if (close == std::string_view::npos) return false;
  const std::string prefix(name.substr(0, open));
  const std::string_view rest = name.substr(close + 1);
  for (const std::string& part : Split(name.substr(open + 1, close - open - 1), ',')) {
    const std::string_view p = Trim(part);
    const size_t dash = p.find('-');
    const std::string_view lo = dash == std::string_view::npos ? p : p.substr(0, dash);
    const std::string_view hi = dash == std::string_view::npos ? p : p.substr(dash + 1);
    const auto a = ParseInt(lo);
    const auto b = ParseInt(hi);
    if (lo.empty() || !a || !b || *a < 0 || *b < *a || *b - *a > static_cast<int64_t>(kMaxNames)) return false;
    for (int64_t n = *a; n <= *b; ++n) {
      std::string num = std::to_string(n);
      if (num.size() < lo.size()) num.insert(0, lo.size() - num.size(), '0');  // node[01-03]
      if (!ExpandOne(prefix + num + std::string(rest), out)) return false;
    }
  }
  return true;
}

// "Key=Value Key2=Value2" -> lower-cased keys; values as written.
std::vector<std::pair<std::string, std::string>> Pairs(std::string_view line) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    size_t j = i;
    while (j < line.size() && !std::isspace(static_cast<unsigned char>(line[j]))) ++j;
    const std::string_view token = line.substr(i, j - i);
    const size_t eq = token.find('=');
    if (eq != std::string_view::npos && eq > 0) out.emplace_back(Lower(token.substr(0, eq)), std::string(token.substr(eq + 1)));
    i = j;
  }
  return out;
}

std::string_view StripComment(std::string_view line) {
  const size_t hash = line.find('#');
  return hash == std::string_view::npos ? line : line.substr(0, hash);
}

}  // namespace

std::optional<std::vector<std::string>> ExpandHostlist(std::string_view expr) {
  std::vector<std::string> out;
  for (const std::string& part : SplitOutsideBrackets(Trim(expr), ',')) {
    if (Trim(part).empty()) continue;
    if (!ExpandOne(Trim(part), out)) return std::nullopt;
  }
  return out;
}

std::vector<visibility::GresGpu> ParseGresConf(std::string_view text, std::string_view node_name) {
  std::vector<visibility::GresGpu> out;
  for (const std::string& raw : Split(text, '\n')) {
    std::optional<std::string> node, name, file, type;
    for (auto& [k, v] : Pairs(StripComment(raw))) {
      if (k == "nodename") node = v;
      if (k == "name") name = v;
      if (k == "file") file = v;
      if (k == "type") type = v;
    }
    if (!name || Lower(*name) != "gpu" || !file) continue;
    if (node) {
      const auto nodes = ExpandHostlist(*node);
      if (!nodes || std::find(nodes->begin(), nodes->end(), node_name) == nodes->end()) continue;
    }
    const auto files = ExpandHostlist(*file);
    if (!files) continue;
    for (const std::string& f : *files) out.push_back(visibility::GresGpu{f, std::nullopt, type});
  }
  return out;
}

std::map<std::string, std::string> ParseConfKeys(std::string_view text) {
  std::map<std::string, std::string> out;
  for (const std::string& raw : Split(text, '\n')) {
    const auto pairs = Pairs(StripComment(raw));
    if (pairs.empty() || pairs.front().first == "nodename" || pairs.front().first == "partitionname") continue;
    for (auto& [k, v] : pairs) out[k] = v;
  }
  return out;
}

std::vector<std::string> ConfNodeNames(std::string_view text) {
  std::vector<std::string> out;
  for (const std::string& raw : Split(text, '\n')) {
    const auto pairs = Pairs(StripComment(raw));
    if (pairs.empty() || pairs.front().first != "nodename") continue;
    for (const auto& [k, v] : pairs) {
      if (k != "nodename" && k != "nodehostname") continue;
      if (Lower(v) == "default") continue;
      if (auto names = ExpandHostlist(v)) out.insert(out.end(), names->begin(), names->end());
    }
  }
  return out;
}

std::optional<int> MinorFromName(std::string_view path) {
  const size_t slash = path.rfind('/');
  const std::string_view base = slash == std::string_view::npos ? path : path.substr(slash + 1);
  if (!base.starts_with("nvidia") || base.size() == 6) return std::nullopt;
  const std::string_view digits = base.substr(6);
  if (!std::all_of(digits.begin(), digits.end(), [](unsigned char c) { return std::isdigit(c); }) || digits.size() > 6) {
    return std::nullopt;
  }
  return static_cast<int>(*ParseInt(digits));
}

}  // namespace gpuman::slurm
