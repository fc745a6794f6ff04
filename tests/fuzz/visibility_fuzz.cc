// Fuzz target: CUDA_VISIBLE_DEVICES / NVIDIA_VISIBLE_DEVICES parsing and resolution
// (visibility/cuda_visible_devices.h, allocation.h, resolver.h) against a fixed machine.
// The input is lines: CUDA_VISIBLE_DEVICES, NVIDIA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER,
// SLURM_STEP_GPUS, SLURM_JOB_GPUS; a missing line leaves that variable unset. The first
// byte's low bit picks the machine (four identical GPUs, or four of two models).
// Properties: never crash; every resolved device is a GPU of the machine; one diagnostic
// per entry; what AllowedGpus permits are UUIDs of the machine; explain with and without
// a driver completes.
#include <algorithm>

#include "fuzz_util.h"
#include "visibility/allocation.h"
#include "visibility/cuda_visible_devices.h"
#include "visibility/device_order.h"
#include "visibility/resolver.h"

namespace {

using namespace gpuman;

std::vector<model::DeviceSnapshot> Machine(bool mixed) {
  std::vector<model::DeviceSnapshot> gpus;
  const char* uuids[] = {"GPU-8932f937-d72c-4106-c12f-20bd9faed9f6", "GPU-8932f937-0000-4106-c12f-20bd9faed9f7",
                         "GPU-a1b2c3d4-e5f6-0718-293a-4b5c6d7e8f90", "GPU-ffffffff-ffff-ffff-ffff-ffffffffffff"};
  const char* buses[] = {"00000000:3B:00.0", "00000000:07:00.0", "00000000:86:00.0", "00000000:AF:00.0"};
  for (int i = 0; i < 4; ++i) {
    model::DeviceSnapshot g;
    g.index = i;
    g.uuid = uuids[i];
    g.pci_bus_id = buses[i];
    g.minor_number = 3 - i;
    g.name = mixed && i % 2 ? "NVIDIA GeForce RTX 4090" : "NVIDIA A100-SXM4-80GB";
    g.memory_total_bytes = int64_t{80} << 30;
    g.mig_mode_current = i == 2;
    gpus.push_back(g);
  }
  return gpus;
}

bool IsGpu(const std::vector<model::DeviceSnapshot>& gpus, visibility::PhysicalIndex index) {
  return index.value >= 0 && index.value < static_cast<int>(gpus.size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const std::vector<model::DeviceSnapshot> kMachines[2] = {Machine(false), Machine(true)};
  const auto& gpus = kMachines[data[0] & 1];
  auto lines = fuzz::SplitAll(fuzz::AsText(data + 1, size - 1), '\n');
  const char* names[] = {"CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "SLURM_STEP_GPUS",
                         "SLURM_JOB_GPUS"};
  visibility::Environment env;
  for (size_t i = 0; i < lines.size() && i < std::size(names); ++i) env[names[i]] = std::string(lines[i]);
  auto cvd = visibility::GetVar(env, "CUDA_VISIBLE_DEVICES");

  auto lexed = visibility::LexCudaVisibleDevices(cvd.value_or(""));
  auto order = visibility::ParseDeviceOrder(visibility::GetVar(env, "CUDA_DEVICE_ORDER"));
  auto enumeration = visibility::EnumerateCuda(gpus, order.order);
  FUZZ_CHECK(enumeration.order.size() == gpus.size());
  auto parsed = visibility::ParseCudaVisibleDevices(cvd, gpus, enumeration.order);
  if (cvd) FUZZ_CHECK(parsed.entries.size() == lexed.size());
  for (const auto& d : parsed.devices) FUZZ_CHECK(!d.index || IsGpu(gpus, *d.index));
  for (const auto& e : parsed.entries) FUZZ_CHECK(!e.device || IsGpu(gpus, *e.device));
  FUZZ_CHECK(parsed.devices.size() <= parsed.entries.size() || !cvd);

  auto container = visibility::ParseNvidiaVisibleDevices(visibility::GetVar(env, "NVIDIA_VISIBLE_DEVICES"), gpus);
  for (auto index : container.devices) FUZZ_CHECK(IsGpu(gpus, index));
  if (auto slurm = visibility::ParseSlurmGpus(env, gpus)) {
    for (auto index : slurm->devices) FUZZ_CHECK(IsGpu(gpus, index));
  }
  if (auto allowed = visibility::AllowedGpus(env, gpus)) {
    for (const auto& uuid : *allowed) {
      FUZZ_CHECK(std::any_of(gpus.begin(), gpus.end(), [&](const auto& g) { return g.uuid == uuid; }));
    }
  }

  auto report = visibility::Resolve(env, gpus);
  for (const auto& v : report.visible) FUZZ_CHECK(!v.index || IsGpu(gpus, *v.index));
  (void)visibility::ExplainWithoutDriver(env, "no driver");
  return 0;
}
