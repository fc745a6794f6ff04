// Sample values with every field set to something other than its default, shared by the
// protocol tests.
#pragma once

#include "model/device_snapshot.h"
#include "model/job.h"
#include "model/lease.h"
#include "protocol/envelope.h"

namespace gpuman::protocol::testing_samples {

inline model::GpuRequest FullGpuRequest() {
  model::GpuRequest r;
  r.count = 2;
  r.gpus = std::vector<std::string>{"GPU-aaaa", "GPU-bbbb"};
  r.min_free_memory_bytes = int64_t{40} << 30;
  r.max_utilization_percent = 10;
  r.model = "A100";
  r.min_compute_capability = "8.0";
  r.exclude = {"GPU-cccc"};
  r.allow_shared = true;
  return r;
}

inline model::Job FullJob() {
  model::Job j;
  j.id = 42;
  j.name = "train";
  j.uid = 1000;
  j.gid = 100;
  j.user = "alice";
  j.argv = {"python", "train.py", "--lr=3e-4"};
  j.env = {{"PATH", "/usr/bin"}, {"HOME", "/home/alice"}};
  j.cwd = "/home/alice/proj";
  j.output_path = "/home/alice/proj/train.log";
  j.request = FullGpuRequest();
  j.priority = -5;
  j.time_limit_ms = 3600000;
  j.requeue = true;
  j.after = {40, 41};
  j.state = model::JobState::kRunning;
  j.submitted_unix_ms = 1700000000000;
  j.started_unix_ms = 1700000001000;
  j.ended_unix_ms = 1700000002000;
  j.exit_code = 3;
  j.gpu_uuids = {"GPU-aaaa", "GPU-bbbb"};
  j.lease_id = 9;
  j.supervisor_pid = 4242;
  j.supervisor_start_ticks = 123456;
  j.reason = "waiting for job 40";
  return j;
}

/// A GPU with every field set, each to a value no default has.
inline model::DeviceSnapshot FullGpu(int index = 3) {
  model::DeviceSnapshot g;
  g.index = index;
  g.uuid = "GPU-3f2a9c1e-0000-4000-8000-00000000000" + std::to_string(index);
  g.name = "NVIDIA H100 80GB HBM3";
  g.pci_bus_id = "00000000:18:00.0";
  g.serial = "1652323041870";
  g.minor_number = 7;
  g.memory_total_bytes = 85520809984;
  g.memory_used_bytes = 76554436608;
  g.memory_free_bytes = 8398045184;
  g.memory_reserved_bytes = 568328192;
  g.gpu_utilization_percent = 99;
  g.memory_utilization_percent = 71;
  g.temperature_c = 58;
  g.power_usage_w = 612.375;
  g.power_limit_w = 700.1;
  g.fan_percent = 42;
  g.clocks.sm_mhz = 1980;
  g.clocks.sm_max_mhz = 1981;
  g.clocks.memory_mhz = 2619;
  g.clocks.memory_max_mhz = 2620;
  g.performance_state = 2;
  g.compute_capability = "9.0";
  g.cuda_cores = 16896;
  g.memory_bus_width_bits = 5120;
  g.fabric_state = "completed";
  g.compute_mode = "exclusive_process";
  g.persistence_mode = true;
  g.mig_mode_current = false;
  g.mig_mode_pending = true;
  g.ecc_volatile_corrected = 11;
  g.ecc_volatile_uncorrected = 12;
  g.ecc_aggregate_corrected = 13;
  g.ecc_aggregate_uncorrected = 14;
  g.retired_pages_pending = true;
  g.remapped_rows_pending = false;
  g.remapped_rows_failure = true;
  g.clock_event_reasons = (uint64_t{1} << 63) | 0x24;  // above INT64_MAX: must survive as unsigned
  g.cpu_affinity = {0, 1, 2, 3, 64, 127};
  g.numa_node = 1;
  model::GpuProcess p;
  p.pid = 51200;
  p.type = model::ProcessType::kComputeAndGraphics;
  p.used_memory_bytes = 76550242304;
  p.gpu_instance_id = 1;
  p.compute_instance_id = 2;
  p.is_visible = true;
  p.uid = 1002;
  p.user = "bob";
  p.command = "python -m torch.distributed.run \"quoted\" \xc3\xa9";
  p.start_time_unix = 1764391200;
  p.sm_util_percent = 97;
  model::GpuProcess hidden;  // a pid outside our PID namespace: nothing but the pid
  hidden.pid = 4242;
  g.processes = {p, hidden};
  g.is_healthy = false;
  g.health_problems = {"volatile uncorrected ECC errors: 12"};
  g.warnings = {"clocks reduced: sw_thermal_slowdown"};
  model::MigDevice mig;
  mig.index = 2;
  mig.uuid = "MIG-2f6d1b0a-93c4-5e7f-a8b1-0c2d3e4f5a61";
  mig.parent_uuid = g.uuid.value_or("");
  mig.parent_index = index;
  mig.gpu_instance_id = 5;
  mig.compute_instance_id = 1;
  mig.gpu_slices = 3;
  mig.compute_slices = 1;
  mig.multiprocessors = 20;
  mig.profile = "1c.3g.40gb";
  mig.memory_total_bytes = 40320LL << 20;
  mig.memory_used_bytes = 1LL << 30;
  mig.processes = {p};
  g.mig_devices = {mig};
  return g;
}

/// A machine of two full GPUs, system info and a topology.
inline model::MachineSnapshot FullSnapshot() {
  model::MachineSnapshot s;
  s.system.driver_version = "550.54.15";
  s.system.nvml_version = "12.550.54.15";
  s.system.cuda_driver_version = "12.4";
  s.gpus = {FullGpu(0), FullGpu(1)};
  s.taken_at_unix_ms = 1700000000123;
  model::Topology t;
  t.nvlinks = {{0, 18}, {18, 0}};
  t.pcie = {{model::PcieLevel::kSelf, model::PcieLevel::kNumaNode}, {model::PcieLevel::kSystem, model::PcieLevel::kSelf}};
  s.topology = t;
  return s;
}

inline model::Lease FullLease() {
  model::Lease l;
  l.id = 9;
  l.gpu_uuids = {"GPU-aaaa"};
  l.uid = 1000;
  l.user = "alice";
  l.command = "python train.py";
  l.kind = "run";
  l.created_unix_ms = 1700000000000;
  l.processes = {{4242, 123456}, {4243, 123460}};
  l.host = "node1";
  return l;
}

// One request per op, in the order of Op.
inline std::vector<Request> OneRequestPerOp() {
  SubmitArgs submit;
  submit.name = "train";
  submit.argv = {"python", "train.py"};
  submit.env = {{"CUDA_DEVICE_ORDER", "PCI_BUS_ID"}, {"LANG", "C.UTF-8"}};
  submit.cwd = "/home/alice";
  submit.output = "/home/alice/out.log";
  submit.request = FullGpuRequest();
  submit.priority = 7;
  submit.time_limit_ms = 60000;
  submit.requeue = true;
  submit.after = {1, 2};
  submit.notify = model::JobNotify{false, {"/home/alice/bin/tell", "job %j", "%s"}};

  AcquireArgs acquire;
  acquire.request = FullGpuRequest();
  acquire.command = "python train.py";
  acquire.pid = 4242;
  acquire.start_time_ticks = 987654321;
  acquire.wait_ms = 5000;
  acquire.processes = {{4243, 987654400}};

  StatusArgs status;
  status.options = {{"processes", true}};

  return {
      Request{1, HelloArgs{"gpuman 0.1.0", 1}},
      Request{2, submit},
      Request{3, QueueArgs{true}},
      Request{4, ShowArgs{42}},
      Request{5, CancelArgs{{1, 2, 3}}},
      Request{6, HoldArgs{{4}}},
      Request{7, ResumeArgs{{4, 5}}},
      Request{8, WaitArgs{42}},
      Request{9, LogsArgs{42, 65536}},
      Request{10, DrainArgs{"GPU-aaaa", "fan noise"}},
      Request{11, UndrainArgs{"2", "fixed"}},
      Request{12, LeasesArgs{-3, 50}},  // a page after a lease taken without the daemon
      Request{13, acquire},
      Request{14, AddProcessesArgs{9, {{100, 5}, {101, 6}}}},
      Request{15, ReleaseArgs{9}},
      Request{int64_t{1} << 62, status},
      Request{16, HealthArgs{}},
      Request{17, DrainsArgs{}},
      Request{18, SnapshotArgs{false}},
      Request{19, PreviewArgs{FullGpuRequest(), 7}},
      Request{20, UpdateArgs{{model::JobRef{12, 7}, model::JobRef{13}}, 5, 3600000, "sweep-2"}},
  };
}

}  // namespace gpuman::protocol::testing_samples
