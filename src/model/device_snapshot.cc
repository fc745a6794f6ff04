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

std::string MigProfileName(int gpu_slices, int compute_slices, int64_t memory_mib, int64_t parent_total_bytes) {
  constexpr int64_t kMiB = int64_t{1} << 20, kGiB = int64_t{1} << 30;
  int64_t gb = 0;
  if (parent_total_bytes > 0) {
    // The share in eighths, rounded up; the GPU's memory in GB, rounded up; the product rounded.
    const int64_t eighths = (memory_mib * kMiB * 8 + parent_total_bytes - 1) / parent_total_bytes;
    const int64_t total_gb = (parent_total_bytes + kGiB - 1) / kGiB;
    gb = (eighths * total_gb * 2 + 8) / 16;
  } else {
    gb = (memory_mib * kMiB + kGiB - 1) / kGiB;
  }
  std::string name;
  if (compute_slices > 0 && compute_slices < gpu_slices) name = std::to_string(compute_slices) + "c.";
  return name + std::to_string(gpu_slices) + "g." + std::to_string(gb) + "gb";
}

bool InMigMode(const DeviceSnapshot& gpu) { return gpu.mig_mode_current.value_or(false) || !gpu.mig_devices.empty(); }

const MigDevice* FindMigDevice(const MachineSnapshot& snap, const std::string& uuid, const DeviceSnapshot** parent) {
  for (const auto& g : snap.gpus) {
    for (const auto& m : g.mig_devices) {
      if (m.uuid && *m.uuid == uuid) {
        if (parent) *parent = &g;
        return &m;
      }
    }
  }
  return nullptr;
}

int UnitIndex(const MachineSnapshot& snap, const std::string& uuid) {
  for (const auto& g : snap.gpus) {
    if (g.uuid == uuid) return g.index;
  }
  const DeviceSnapshot* parent = nullptr;
  if (FindMigDevice(snap, uuid, &parent)) return parent->index;
  return -1;
}

std::vector<std::string> MigProfiles(const MachineSnapshot& snap) {
  std::vector<std::string> out;
  for (const auto& g : snap.gpus) {
    for (const auto& m : g.mig_devices) {
      if (m.profile && std::find(out.begin(), out.end(), *m.profile) == out.end()) out.push_back(*m.profile);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace gpuman::model
