// Fuzz target: the stand-in NVML's scenario reader (sim/scenario.h, docs/scenarios.md).
// Properties: never crash, never let an exception out, and every accepted scenario
// keeps the reader's limits (at most kMaxGpus GPUs, NVLink peers that are GPUs, switch
// numbers below kMaxNvSwitches, link indices below 18, each link once).
#include <vector>

#include "fuzz_util.h"
#include "sim/scenario.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpuman::sim;
  std::string error;
  auto scenario = ParseScenarioText(gpuman::fuzz::AsText(data, size), &error);
  if (!scenario) {
    FUZZ_CHECK(!error.empty());
    return 0;
  }
  FUZZ_CHECK(scenario->gpus.size() <= kMaxGpus);
  for (const Gpu& gpu : scenario->gpus) {
    if (gpu.nvlinks) {
      std::vector<bool> seen(18, false);
      for (const NvLink& l : *gpu.nvlinks) {
        FUZZ_CHECK(l.to_switch ? l.target < kMaxNvSwitches : l.target < scenario->gpus.size());
        FUZZ_CHECK(l.link < seen.size() && !seen[l.link]);
        seen[l.link] = true;
      }
    }
  }
  return 0;
}
