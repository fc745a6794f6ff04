#include "model/device_snapshot.h"

#include <algorithm>
#include <utility>

namespace gpuman::model {

const char* ProcessTypeName(ProcessType type) {
  switch (type) {
    case ProcessType::kCompute: return "compute";
    case ProcessType::kGraphics: return "graphics";
    case ProcessType::kComputeAndGraphics: return "compute+graphics";
  }
  return "compute";
}

std::vector<std::string> ClockEventReasonNames(uint64_t mask) {
  static constexpr std::pair<uint64_t, const char*> kNames[] = {
      {kClockGpuIdle, "gpu_idle"},
      {kClockApplicationsSetting, "applications_clocks_setting"},
      {kClockSwPowerCap, "sw_power_cap"},
      {kClockHwSlowdown, "hw_slowdown"},
      {kClockSyncBoost, "sync_boost"},
      {kClockSwThermalSlowdown, "sw_thermal_slowdown"},
      {kClockHwThermalSlowdown, "hw_thermal_slowdown"},
      {kClockHwPowerBrakeSlowdown, "hw_power_brake_slowdown"},
      {kClockDisplaySetting, "display_clock_setting"},
  };
  std::vector<std::string> names;
  for (const auto& [bit, name] : kNames) {
    if (mask & bit) names.emplace_back(name);
  }
  return names;
}

std::string FormatCpuList(const std::vector<int>& cpus_in) {
  std::vector<int> cpus = cpus_in;
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) out += '-' + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

int64_t SmallestMemoryTotal(const MachineSnapshot& snap, const std::vector<std::string>& uuids) {
  int64_t smallest = 0;
  for (const auto& g : snap.gpus) {
    if (!g.uuid || !g.memory_total_bytes || std::find(uuids.begin(), uuids.end(), *g.uuid) == uuids.end()) continue;
    if (smallest == 0 || *g.memory_total_bytes < smallest) smallest = *g.memory_total_bytes;
  }
  return smallest;
}

}  // namespace gpuman::model
