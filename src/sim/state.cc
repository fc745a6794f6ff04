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

const MigDevice* LookupMigIn(const Scenario& scenario, nvmlDevice_t device, const Gpu** parent) {
  std::less<const nvmlDevice_st*> before;
  if (!device || before(device, kMigSlots.data()) || !before(device, kMigSlots.data() + kMigSlots.size())) {
    return nullptr;
  }
  auto n = static_cast<size_t>(device - kMigSlots.data());
  size_t gpu = n / kMaxMigDevices, slot = n % kMaxMigDevices;
  if (gpu >= scenario.gpus.size()) return nullptr;
  for (const MigDevice& m : scenario.gpus[gpu].mig_devices) {
    if (m.index == slot) {
      if (parent) *parent = &scenario.gpus[gpu];
      return &m;
    }
  }
  return nullptr;
}

State& TheState() {
  // Leaked on purpose: other libraries' static destructors may still call nvmlShutdown.
  static State* const state = new State;
  return *state;
}

}  // namespace gpuman::sim
