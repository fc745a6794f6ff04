#include "model/capabilities.h"

#include <charconv>

namespace gpuman::model {
namespace {

struct Threshold {
  std::string_view name;
  int major, minor;
};
constexpr Threshold kThresholds[] = {{"tf32", 8, 0}, {"bf16", 8, 0}, {"fp8", 8, 9}, {"fp4", 10, 0}};

std::optional<std::pair<int, int>> Parse(std::string_view cc) {
  const size_t dot = cc.find('.');
  if (dot == std::string_view::npos || dot == 0 || dot + 1 >= cc.size()) return std::nullopt;
  int major = 0, minor = 0;
  auto a = std::from_chars(cc.data(), cc.data() + dot, major);
  auto b = std::from_chars(cc.data() + dot + 1, cc.data() + cc.size(), minor);
  if (a.ec != std::errc() || a.ptr != cc.data() + dot || b.ec != std::errc() || b.ptr != cc.data() + cc.size()) {
    return std::nullopt;
  }
  if (major < 0 || minor < 0) return std::nullopt;
  return std::pair{major, minor};
}

}  // namespace

std::optional<Capabilities> CapabilitiesOf(std::string_view compute_capability) {
  auto cc = Parse(compute_capability);
  if (!cc) return std::nullopt;
  auto at_least = [&](std::string_view name) {
    for (const Threshold& t : kThresholds) {
      if (t.name == name) return *cc >= std::pair{t.major, t.minor};
    }
    return false;
  };
  return Capabilities{at_least("tf32"), at_least("bf16"), at_least("fp8"), at_least("fp4")};
}

std::optional<std::string> MinComputeCapabilityFor(std::string_view name) {
  for (const Threshold& t : kThresholds) {
    if (t.name == name) return std::to_string(t.major) + "." + std::to_string(t.minor);
  }
  return std::nullopt;
}

std::string CapabilityList(const Capabilities& caps) {
  std::string out;
  const bool has[] = {caps.tf32, caps.bf16, caps.fp8, caps.fp4};
  for (size_t i = 0; i < kCapabilityNames.size(); ++i) {
    if (!has[i]) continue;
    if (!out.empty()) out += ", ";
    out += kCapabilityNames[i];
  }
  return out;
}

}  // namespace gpuman::model
