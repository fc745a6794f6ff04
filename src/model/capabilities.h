// What a GPU's arithmetic supports, derived from its CUDA compute capability alone (issue
// 24; docs/json.md, "capabilities"): the number formats frameworks pick by name. Each came
// with an architecture and stayed in every later one, so each is "compute capability at
// least X":
//   tf32  8.0  Ampere tensor cores (A100), and every later GPU
//   bf16  8.0  Ampere (bfloat16 in tensor cores and arithmetic); Turing 7.5 has none
//   fp8   8.9  Ada (L4, L40, RTX 40) and Hopper 9.0 (E4M3/E5M2 tensor cores)
//   fp4   10.0 Blackwell (B200 10.0, RTX 50 12.0: FP4 tensor cores)
// Pure; no GPU needed.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace gpuman::model {

struct Capabilities {
  bool tf32 = false;
  bool bf16 = false;
  bool fp8 = false;
  bool fp4 = false;
};

/// The names `--require` takes, in this order.
inline constexpr std::array<std::string_view, 4> kCapabilityNames = {"tf32", "bf16", "fp8", "fp4"};

/// For a compute capability such as "8.6"; nullopt when it is not "MAJOR.MINOR".
std::optional<Capabilities> CapabilitiesOf(std::string_view compute_capability);

/// The lowest compute capability that has `name` ("8.0" for bf16); nullopt for a name not
/// in kCapabilityNames.
std::optional<std::string> MinComputeCapabilityFor(std::string_view name);

/// `caps` as its names, in kCapabilityNames order ("tf32, bf16, fp8"); "" for none.
std::string CapabilityList(const Capabilities& caps);

}  // namespace gpuman::model
