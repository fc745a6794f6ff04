// Shared fixtures for the tui tests: a small machine snapshot with processes of two users.
#pragma once

#include <memory>

#include "model/device_snapshot.h"
#include "tui/top_model.h"

namespace gpuman::tui::testing {

inline constexpr int64_t kGiB = int64_t{1} << 30;
inline constexpr int64_t kNowMs = 1764400000000;  // 2025-11-29T07:06:40Z

inline model::GpuProcess Proc(uint32_t pid, uint32_t uid, const std::string& user, int64_t mem_gib,
                              std::optional<int> sm, const std::string& command) {
  model::GpuProcess p;
  p.pid = pid;
  p.used_memory_bytes = mem_gib * kGiB;
  p.is_visible = true;
  p.uid = uid;
  p.user = user;
  p.command = command;
  p.start_time_unix = kNowMs / 1000 - 3600;
  p.sm_util_percent = sm;
  return p;
}

inline model::DeviceSnapshot Gpu(int index, int util, int64_t used_gib, int temp, double power_w) {
  model::DeviceSnapshot g;
  g.index = index;
  g.uuid = "GPU-0000000" + std::to_string(index) + "-aaaa-bbbb-cccc-dddddddddddd";
  g.name = "NVIDIA A100-SXM4-80GB";
  g.memory_total_bytes = 80 * kGiB;
  g.memory_used_bytes = used_gib * kGiB;
  g.gpu_utilization_percent = util;
  g.temperature_c = temp;
  g.power_usage_w = power_w;
  g.power_limit_w = 400;
  return g;
}

/// 4 GPUs; alice (1001) has two processes on GPU 1, bob (1002) one on GPU 2, and one pid on
/// GPU 3 is in another PID namespace.
inline model::MachineSnapshot Machine() {
  model::MachineSnapshot s;
  s.system.driver_version = "550.54.15";
  s.gpus = {Gpu(0, 0, 0, 31, 61), Gpu(1, 97, 71, 67, 362), Gpu(2, 40, 20, 50, 200), Gpu(3, 5, 3, 35, 80)};
  s.gpus[1].processes = {Proc(4242, 1001, "alice", 52, 80, "python train.py --epochs 90"),
                         Proc(4243, 1001, "alice", 18, 15, "python eval.py")};
  s.gpus[2].processes = {Proc(5000, 1002, "bob", 20, std::nullopt, "./serve --port 8000")};
  model::GpuProcess hidden;
  hidden.pid = 777;
  hidden.used_memory_bytes = 3 * kGiB;
  s.gpus[3].processes = {hidden};
  s.taken_at_unix_ms = kNowMs;
  return s;
}

/// h100-mig's shape: GPU 0 an H100 in MIG mode split 3g.40gb + 2x 2g.20gb (MIG-0, MIG-1,
/// MIG-2; alice's pid 6100 on MIG-1), GPUs 1-3 whole H100s (GPU 1 used by bob's pid 5000).
inline model::MachineSnapshot MigMachine() {
  model::MachineSnapshot s;
  s.system.driver_version = "550.54.15";
  s.gpus = {Gpu(0, 30, 10, 40, 150), Gpu(1, 60, 30, 55, 300), Gpu(2, 0, 0, 31, 70), Gpu(3, 0, 0, 31, 70)};
  for (auto& g : s.gpus) g.name = "NVIDIA H100 80GB HBM3";
  model::GpuProcess p = Proc(6100, 1001, "alice", 9, std::nullopt, "python infer.py");
  p.gpu_instance_id = 3;
  p.compute_instance_id = 0;
  s.gpus[0].processes = {p};
  const char* profiles[] = {"3g.40gb", "2g.20gb", "2g.20gb"};
  for (int i = 0; i < 3; ++i) {
    model::MigDevice m;
    m.index = i;
    m.uuid = "MIG-" + std::to_string(i);
    m.parent_uuid = *s.gpus[0].uuid;
    m.gpu_instance_id = static_cast<uint32_t>(i + 2);
    m.compute_instance_id = 0;
    m.profile = profiles[i];
    m.memory_total_bytes = (i == 0 ? 40 : 20) * kGiB;
    m.memory_used_bytes = i == 1 ? 9 * kGiB : 0;
    if (i == 1) m.processes = {p};
    s.gpus[0].mig_devices.push_back(m);
  }
  s.gpus[1].processes = {Proc(5000, 1002, "bob", 30, 60, "./serve --port 8000")};
  s.taken_at_unix_ms = kNowMs;
  return s;
}

inline std::shared_ptr<const Frame> MakeFrame(uint64_t seq, model::MachineSnapshot snap,
                                              std::vector<model::Lease> leases = {},
                                              std::vector<model::Job> jobs = {}) {
  auto f = std::make_shared<Frame>();
  f->sequence = seq;
  f->taken_at_unix_ms = kNowMs;
  f->snapshot = std::move(snap);
  f->leases = std::move(leases);
  f->jobs = std::move(jobs);
  return f;
}

}  // namespace gpuman::tui::testing
