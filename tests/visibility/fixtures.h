// Machines shared by the visibility tests: four identical A100s (two of them with UUIDs
// sharing the prefix "GPU-8932f9", for ambiguity), and a mixed RTX 3090 / 4090 / 3090
// box in PCI order, where FASTEST_FIRST and PCI_BUS_ID disagree.
#pragma once

#include <cstdint>
#include <vector>

#include "model/device_snapshot.h"

namespace gpuman::visibility::testing_fixtures {

constexpr int64_t kGiB = int64_t{1} << 30;

inline model::DeviceSnapshot Gpu(int index, const char* uuid, const char* name, const char* bus,
                                 const char* cc, int64_t memory_gib) {
  model::DeviceSnapshot d;
  d.index = index;
  d.uuid = uuid;
  d.name = name;
  d.pci_bus_id = bus;
  d.compute_capability = cc;
  d.memory_total_bytes = memory_gib * kGiB;
  d.mig_mode_current = false;
  return d;
}

inline constexpr const char* kUuid0 = "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6";
inline constexpr const char* kUuid1 = "GPU-8932f9aa-1111-4222-8333-444455556666";
inline constexpr const char* kUuid2 = "GPU-3eb79704-aaaa-4bbb-8ccc-dddd00001111";
inline constexpr const char* kUuid3 = "GPU-c0ffee00-0000-4000-8000-000000000003";

inline std::vector<model::DeviceSnapshot> FourA100() {
  return {Gpu(0, kUuid0, "NVIDIA A100-SXM4-80GB", "00000000:07:00.0", "8.0", 80),
          Gpu(1, kUuid1, "NVIDIA A100-SXM4-80GB", "00000000:0F:00.0", "8.0", 80),
          Gpu(2, kUuid2, "NVIDIA A100-SXM4-80GB", "00000000:47:00.0", "8.0", 80),
          Gpu(3, kUuid3, "NVIDIA A100-SXM4-80GB", "00000000:4E:00.0", "8.0", 80)};
}

inline std::vector<model::DeviceSnapshot> TwoA100() {
  auto gpus = FourA100();
  gpus.resize(2);
  return gpus;
}

inline constexpr const char* kUuid3090a = "GPU-30900000-0000-4000-8000-00000000000a";
inline constexpr const char* kUuid4090 = "GPU-40900000-0000-4000-8000-00000000000b";
inline constexpr const char* kUuid3090c = "GPU-30900000-0000-4000-8000-00000000000c";

/// RTX 3090, RTX 4090, RTX 3090 in PCI (= NVML) order. Estimated FASTEST_FIRST: 1, 0, 2.
inline std::vector<model::DeviceSnapshot> Mixed() {
  return {Gpu(0, kUuid3090a, "NVIDIA GeForce RTX 3090", "00000000:01:00.0", "8.6", 24),
          Gpu(1, kUuid4090, "NVIDIA GeForce RTX 4090", "00000000:21:00.0", "8.9", 24),
          Gpu(2, kUuid3090c, "NVIDIA GeForce RTX 3090", "00000000:41:00.0", "8.6", 24)};
}

}  // namespace gpuman::visibility::testing_fixtures
