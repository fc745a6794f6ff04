#include "sim/state.h"

#include <functional>

namespace gpuman::sim {

const Gpu* LookupIn(const Scenario& scenario, nvmlDevice_t device) {
  std::less<const nvmlDevice_st*> before;
  if (!device || before(device, kSlots.data()) || !before(device, kSlots.data() + kMaxGpus)) {
    return nullptr;
  }
  auto index = static_cast<size_t>(device - kSlots.data());
  return index < scenario.gpus.size() ? &scenario.gpus[index] : nullptr;
}

State& TheState() {
  // Leaked on purpose: other libraries' static destructors may still call nvmlShutdown.
  static State* const state = new State;
  return *state;
}

}  // namespace gpuman::sim
