// Snapshots shared by the render tests: a 4-GPU machine with an idle GPU, a busy GPU
// (throttling, a foreign pid, a long command line), a lost GPU and a GPU whose driver
// reports little (unknown values, an unhealthy state, a user we cannot name).
#pragma once

#include "model/device_snapshot.h"

namespace gpuman::render::testing_fixtures {

constexpr int64_t kGiB = int64_t{1} << 30;
constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kTakenAtMs = 1714564800250;  // 2024-05-01T12:00:00.250Z
constexpr int64_t kNow = kTakenAtMs / 1000;

inline model::DeviceSnapshot IdleGpu() {
  model::DeviceSnapshot d;
  d.index = 0;
  d.uuid = "GPU-3f2a9c1d-5b6e-4f70-8a91-0c2d3e4f5a6b";
  d.name = "NVIDIA A100-SXM4-80GB";
  d.pci_bus_id = "00000000:07:00.0";
  d.serial = "1322621034567";
  d.memory_total_bytes = 80 * kGiB;
  d.memory_used_bytes = 512 * kMiB;
  d.memory_free_bytes = 80 * kGiB - 512 * kMiB;
  d.memory_reserved_bytes = 0;
  d.gpu_utilization_percent = 0;
  d.memory_utilization_percent = 0;
  d.temperature_c = 34;
  d.power_usage_w = 61.25;
  d.power_limit_w = 400.0;
  d.clocks = {210, 1410, 1593, 1593};
  d.performance_state = 0;
  d.compute_capability = "8.0";
  d.compute_mode = "default";
  d.persistence_mode = true;
  d.mig_mode_current = false;
  d.mig_mode_pending = false;
  d.ecc_volatile_corrected = 0;
  d.ecc_volatile_uncorrected = 0;
  d.retired_pages_pending = false;
  d.remapped_rows_pending = false;
  d.remapped_rows_failure = false;
  d.clock_event_reasons = 0x1;  // gpu_idle
  d.cpu_affinity = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  d.numa_node = 0;
  return d;
}

inline model::DeviceSnapshot BusyGpu() {
  model::DeviceSnapshot d = IdleGpu();
  d.index = 1;
  d.uuid = "GPU-8e0b7a42-11aa-4c3d-9e8f-7a6b5c4d3e2f";
  d.pci_bus_id = "00000000:0F:00.0";
  d.serial = "1322621034568";
  d.memory_used_bytes = static_cast<int64_t>(71.2 * kGiB);
  d.memory_free_bytes = *d.memory_total_bytes - *d.memory_used_bytes;
  d.gpu_utilization_percent = 97;
  d.memory_utilization_percent = 64;
  d.temperature_c = 78;
  d.power_usage_w = 380.4;
  d.clocks = {1275, 1410, 1593, 1593};
  d.clock_event_reasons = 0x4;  // sw_power_cap
  d.warnings = {"clocks reduced: sw_power_cap"};

  model::GpuProcess train;
  train.pid = 41234;
  train.used_memory_bytes = 40 * kGiB + 300 * kMiB;
  train.is_visible = true;
  train.uid = 1001;
  train.user = "alice";
  train.command = "python train.py --epochs 100";
  train.start_time_unix = kNow - 2 * 3600 - 13 * 60;

  model::GpuProcess foreign;
  foreign.pid = 7;
  foreign.used_memory_bytes = 20 * kGiB;
  foreign.is_visible = false;

  model::GpuProcess long_cmd;
  long_cmd.pid = 1048577;
  long_cmd.used_memory_bytes = 10 * kGiB + 512 * kMiB;
  long_cmd.is_visible = true;
  long_cmd.uid = 1002;
  long_cmd.user = "bartholomew_long_name";
  long_cmd.command =
      "/opt/conda/envs/research/bin/python -m torch.distributed.run --nproc_per_node=8 "
      "--master_port=29500 finetune.py --config configs/llama-70b-lora.yaml "
      "--output-dir /scratch/bartholomew/runs/2024-05-01";
  long_cmd.start_time_unix = kNow - 3 * 86400 - 4 * 3600;
  d.processes = {train, foreign, long_cmd};
  return d;
}

inline model::DeviceSnapshot LostGpu() {
  model::DeviceSnapshot d;
  d.index = 2;
  d.uuid = "GPU-c0ffee00-1234-5678-9abc-def012345678";
  d.name = "NVIDIA A100-SXM4-80GB";
  d.pci_bus_id = "00000000:47:00.0";
  d.is_healthy = false;
  d.health_problems = {"nvmlDeviceGetMemoryInfo_v2: GPU is lost"};
  return d;
}

inline model::DeviceSnapshot SparseGpu() {
  model::DeviceSnapshot d;
  d.index = 3;
  d.uuid = "GPU-5d4c3b2a-0000-1111-2222-333344445555";
  d.name = "NVIDIA GeForce RTX 4090 Founders Edition Overclocked";
  d.pci_bus_id = "00000000:81:00.0";
  d.memory_total_bytes = 24 * kGiB;
  d.gpu_utilization_percent = 55;
  d.temperature_c = std::nullopt;
  d.power_limit_w = 450.0;
  d.fan_percent = 30;
  d.is_healthy = false;
  d.health_problems = {"2 retired pages pending: reset the GPU",
                       "uncorrectable ECC errors since boot: 3"};

  model::GpuProcess nameless;
  nameless.pid = 5150;
  nameless.type = model::ProcessType::kComputeAndGraphics;
  nameless.is_visible = true;
  nameless.uid = 1234;
  nameless.command = "./render-farm --gpu 3";
  d.processes = {nameless};
  return d;
}

inline model::MachineSnapshot FourGpuMachine() {
  model::MachineSnapshot snap;
  snap.system.driver_version = "550.54.15";
  snap.system.nvml_version = "12.550.54.15";
  snap.system.cuda_driver_version = "12.4";
  snap.taken_at_unix_ms = kTakenAtMs;
  snap.gpus = {IdleGpu(), BusyGpu(), LostGpu(), SparseGpu()};
  return snap;
}

/// h100-mig's shape: an H100 in MIG mode split 3g.40gb + 2x 2g.20gb (GPU 0) beside a whole
/// H100 (GPU 1) and an A100 in MIG mode without MIG devices (GPU 2). alice's process runs
/// on MIG device 2.
inline model::MachineSnapshot MigMachine() {
  model::MachineSnapshot snap;
  snap.system.driver_version = "550.54.15";
  snap.system.nvml_version = "12.550.54.15";
  snap.system.cuda_driver_version = "12.4";
  snap.taken_at_unix_ms = kTakenAtMs;
  model::DeviceSnapshot split = IdleGpu();
  split.name = "NVIDIA H100 80GB HBM3";
  split.mig_mode_current = true;
  split.memory_used_bytes = 1 * kGiB;
  const char* profiles[] = {"3g.40gb", "2g.20gb", "2g.20gb"};
  const char* uuids[] = {"MIG-11111111-aaaa-4bbb-8ccc-000000000000", "MIG-22222222-aaaa-4bbb-8ccc-000000000000",
                         "MIG-33333333-aaaa-4bbb-8ccc-000000000000"};
  model::GpuProcess p;
  p.pid = 6100;
  p.used_memory_bytes = 9 * kGiB;
  p.is_visible = true;
  p.uid = 1001;
  p.user = "alice";
  p.command = "python infer.py";
  p.start_time_unix = kNow - 600;
  p.gpu_instance_id = 5;
  p.compute_instance_id = 0;
  split.processes = {p};
  for (int i = 0; i < 3; ++i) {
    model::MigDevice m;
    m.index = i;
    m.uuid = uuids[i];
    m.parent_uuid = *split.uuid;
    m.gpu_instance_id = static_cast<uint32_t>(i == 0 ? 2 : 3 + 2 * (i - 1));
    m.compute_instance_id = 0;
    m.gpu_slices = i == 0 ? 3 : 2;
    m.compute_slices = m.gpu_slices;
    m.multiprocessors = i == 0 ? 60 : 32;
    m.profile = profiles[i];
    m.memory_total_bytes = (i == 0 ? 40 : 20) * kGiB - 512 * kMiB;
    m.memory_used_bytes = i == 2 ? 9 * kGiB : 64 * kMiB;
    if (i == 2) m.processes = {p};
    split.mig_devices.push_back(m);
  }
  model::DeviceSnapshot whole = IdleGpu();
  whole.index = 1;
  whole.uuid = "GPU-8e0b7a42-11aa-4c3d-9e8f-7a6b5c4d3e2f";
  whole.pci_bus_id = "00000000:0F:00.0";
  whole.name = "NVIDIA H100 80GB HBM3";
  whole.memory_used_bytes = 30 * kGiB;
  whole.gpu_utilization_percent = 64;
  model::DeviceSnapshot empty_mig = IdleGpu();
  empty_mig.index = 2;
  empty_mig.uuid = "GPU-c0ffee00-1234-5678-9abc-def012345678";
  empty_mig.pci_bus_id = "00000000:47:00.0";
  empty_mig.mig_mode_current = true;
  snap.gpus = {split, whole, empty_mig};
  return snap;
}

}  // namespace gpuman::render::testing_fixtures
