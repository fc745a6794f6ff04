// Helpers for tests that run the real loader against the stand-in libnvidia-ml.so.1:
// a small scenario builder and access to the stand-in's call counters.
#pragma once

#include <dlfcn.h>
#include <stdlib.h>

#include <nlohmann/json.hpp>
#include <string>

#include "support/temp_dir.h"

namespace gpuman::testing {

inline nlohmann::json TestGpu(int index) {
  char uuid[64];
  std::snprintf(uuid, sizeof uuid, "GPU-%08x-1111-2222-3333-44445555666%d", 0xabc00000 + index, index);
  return {
      {"uuid", uuid},
      {"name", "NVIDIA A100-SXM4-80GB"},
      {"serial", "13240200" + std::to_string(index)},
      {"pci", {{"domain", 0}, {"bus", 7 + index * 8}, {"device", 0}, {"device_id", 8370}, {"subsystem_id", 5219}}},
      {"memory", {{"total", 85899345920LL}, {"reserved", 611319808LL}, {"used", 1073741824LL}}},
      {"utilization", {{"gpu", 10 * index}, {"memory", 5}}},
      {"temperature", 40 + index},
      {"power_usage_mw", 61000},
      {"power_limit_mw", 400000},
      {"fan", nullptr},
      {"clocks", {{"sm", 210}, {"sm_max", 1410}, {"mem", 1593}, {"mem_max", 1593}}},
      {"pstate", 0},
      {"compute_capability", {8, 0}},
      {"compute_mode", 0},
      {"persistence_mode", 1},
      {"mig_mode", {{"current", 0}, {"pending", 0}}},
      {"ecc", {{"volatile_corrected", 0}, {"volatile_uncorrected", 0}, {"aggregate_corrected", 0}, {"aggregate_uncorrected", 0}}},
      {"retired_pages_pending", 0},
      {"remapped_rows", {{"corrected", 0}, {"uncorrected", 0}, {"pending", 0}, {"failure", 0}}},
      {"clock_event_reasons", 1},
      {"cpu_affinity", index < 2 ? "0-3" : "4-7"},
      {"numa_node", index < 2 ? 0 : 1},
      {"topology", {{"pci_switch", "sw" + std::to_string(index / 2)}, {"host_bridge", "hb" + std::to_string(index / 2)}}},
      {"processes", nlohmann::json::array()},
  };
}

inline nlohmann::json TestScenario(int gpus) {
  nlohmann::json s = {
      {"description", "unit test node"},
      {"driver", {{"driver_version", "550.54.15"}, {"nvml_version", "12.550.54.15"}, {"cuda_driver_version", 12040}}},
      {"errors", nlohmann::json::object()},
      {"gpus", nlohmann::json::array()},
  };
  for (int i = 0; i < gpus; ++i) s["gpus"].push_back(TestGpu(i));
  return s;
}

/// Writes the scenario and points the stand-in at it (it reads GPUMAN_FAKE_NVML_SCENARIO).
inline std::string UseScenario(const TempDir& dir, const nlohmann::json& scenario,
                               const std::string& name = "scenario.json") {
  std::string path = dir.Write(name, scenario.dump(2));
  setenv("GPUMAN_FAKE_NVML_SCENARIO", path.c_str(), 1);
  return path;
}

/// How often the loaded stand-in saw `function` called (0 if it is not loaded).
inline unsigned long FakeCallCount(const char* library, const char* function) {
  void* handle = dlopen(library, RTLD_NOW | RTLD_NOLOAD);
  if (handle == nullptr) return 0;
  using Fn = unsigned long (*)(const char*);
  auto fn = reinterpret_cast<Fn>(dlsym(handle, "fake_nvml_call_count"));
  unsigned long n = fn ? fn(function) : 0;
  dlclose(handle);
  return n;
}

/// Calls of every function the loaded stand-in saw (0 if it is not loaded).
inline unsigned long FakeTotalCalls(const char* library) {
  void* handle = dlopen(library, RTLD_NOW | RTLD_NOLOAD);
  if (handle == nullptr) return 0;
  using Fn = unsigned long (*)();
  auto fn = reinterpret_cast<Fn>(dlsym(handle, "fake_nvml_total_call_count"));
  unsigned long n = fn ? fn() : 0;
  dlclose(handle);
  return n;
}

}  // namespace gpuman::testing
